"""`DreamLog`: log.md, dream's journal of runs, failures and skips, and its watermark."""

from __future__ import annotations

from datetime import date

from memvault.formats import dreamlog
from memvault.formats.layout import DREAM_LOG
from memvault.storage.work import UnitOfWork


class DreamLog:
    """The dream journal of a vault (written by dream itself through the unit of work's `write_files`)."""

    def __init__(self, work: UnitOfWork):
        self.work = work

    def dream_entries(self) -> list[dreamlog.Entry]:
        return dreamlog.parse_journal(self.work.read_text(DREAM_LOG))

    @property
    def watermark(self) -> date | None:
        """The last day consolidated by dream: the latest `watermark=YYYY-MM-DD` token in log.md."""
        return dreamlog.latest_watermark(self.work.read_text(DREAM_LOG))


