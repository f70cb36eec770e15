"""Storage, the bottom layer: a vault's files on disk and in git, and how they are written safely.

`store.Storage` is the object every feature takes: the layout (`layout`), the write lock (`lock`),
the write journal and its recovery (`journal`), atomic writes (`files`), the daily logs, the
tombstones and the watermark. This package imports nothing at import time, so the format modules
(facts, pages) may use `layout` without a cycle.
"""
