"""A vault shared between machines: sync (fetch, merge, push) and clone, what a remote's tree and
changes may not bring (tree_checks, sync_checks), the item-aware union merge driver git runs
(union_merge) and its config (merge_driver), and purge, which rewrites history and has every clone
adopt it (purge, purge_history, purge_adoption, purge_filter run by git-filter-repo).
"""
