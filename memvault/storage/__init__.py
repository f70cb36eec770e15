"""Storage: a vault's files on disk and in git, and how they are written safely.

`store.Storage` is the object every feature takes: a unit of work (`work`: the write lock `lock`,
the write journal `journal` and its `recovery`, `hand_edits`, atomic writes `files`, git
`gitstore`) and its repositories: the daily logs and the queue of adds (`factlog`, `queue`), the
tombstones (`tombstone_log`) and log.md with the watermark (`dream_log`). Beside it: `paths` (the
gate every vault path passes), `wiki` (reading pages, and which cite which facts) and
`repository` (a broken .git and the way back). The file names and formats are memvault.formats, below.
"""
