"""`TombstoneLog`: tombstones.jsonl, the forget records (append-only, committed)."""

from __future__ import annotations

from datetime import datetime

from memvault.formats.facts import Fact
from memvault.formats.layout import TOMBSTONES_FILE
from memvault.formats.tombstones import Tombstone, parse_tombstones, text_hash
from memvault.storage.files import ends_mid_line, fsync_append, writing
from memvault.storage.journal import APPEND
from memvault.storage.paths import inside
from memvault.storage.work import UnitOfWork


class TombstoneLog:
    """The forget records of a vault, appended through its unit of work."""

    def __init__(self, work: UnitOfWork):
        self.work = work
        self.root = work.root

    def tombstones(self) -> dict[str, Tombstone]:
        return parse_tombstones(self.work.read_text(TOMBSTONES_FILE))

    def add_tombstone(self, fact: Fact, reason: str | None) -> tuple[Tombstone, bool]:
        """Tombstone a fact (one commit); returns the tombstone and whether it already existed."""
        with self.work.write_lock():
            self.work.recovery.recover_locked()
            existing = self.tombstones().get(fact.id)
            if existing is not None:
                return existing, True
            self.work.refuse_during_merge()
            self.work.hand_edits.commit_hand_edits([TOMBSTONES_FILE], f"before forget: {fact.id}")
            tombstone = Tombstone(id=fact.id, at=datetime.now(self.work.tz).replace(microsecond=0).isoformat(),
                                  reason=reason, hash=text_hash(fact.text))
            message = f"forget: {fact.id}" + (f" ({reason})" if reason else "")
            with self.work.transaction(APPEND, [TOMBSTONES_FILE], message, outcome="nothing was forgotten"):
                path = inside(self.root, TOMBSTONES_FILE)
                with writing(TOMBSTONES_FILE, "nothing was forgotten"):
                    fsync_append(path, ("\n" if ends_mid_line(path) else "") + tombstone.to_line())
                with writing(".git", "nothing was forgotten"):
                    self.work.git.commit([TOMBSTONES_FILE], message)
        return tombstone, False

