"""`Storage`: one vault's files and git repository, read and written the safe way.

Every mutation runs under one vault-wide file lock, is journaled before the files change, and ends
as exactly one commit, or not at all: a write that fails (disk full, Ctrl-C) is undone at once,
and one whose process was killed is undone by the next command (`recovery`). That is the unit of
work (storage/work.py); the logs are read and written by its repositories: `facts` (the daily
logs, and the adds queued behind the lock, storage/factlog.py), `tombstone_log` (forget records)
and `dreams` (log.md and its watermark).
"""

from __future__ import annotations

from functools import cached_property

from memvault.storage.dream_log import DreamLog
from memvault.storage.factlog import FactLog
from memvault.storage.tombstone_log import TombstoneLog
from memvault.storage.work import UnitOfWork


class Storage(UnitOfWork):
    """The vault directory at `root` (it must already be a vault; see memvault.vault for finding one):
    its unit of work, and the repositories a feature takes from it."""

    @cached_property
    def facts(self) -> FactLog:
        return FactLog(self, self.tombstone_log)

    @cached_property
    def tombstone_log(self) -> TombstoneLog:
        return TombstoneLog(self)

    @cached_property
    def dreams(self) -> DreamLog:
        return DreamLog(self)
