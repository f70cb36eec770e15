"""Storage: a vault's files on disk and in git, and how they are written safely.

`store.Storage` is the object every feature takes: the write lock (`lock`), the write journal and
its recovery (`journal`), the queue of adds (`queue`), atomic writes (`files`), git (`gitstore`),
the daily logs, the tombstones and the watermark. Beside it: `paths` (the gate every vault path
passes), `wiki` (reading pages, and which cite which facts) and `repository` (a broken .git and
the way back). The file names and formats are memvault.formats, below.
"""
