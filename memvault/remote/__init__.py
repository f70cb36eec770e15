"""A vault shared between machines: sync (fetch, merge, push), what a remote may not bring
(sync_checks), the item-aware union merge driver git runs (union_merge), and purge, which rewrites
history and has every clone adopt it (purge, and purge_filter, run by git-filter-repo).
"""
