"""Hand edits: uncommitted changes a person made to the vault's files, kept apart from memvault's own.

An edit of a file a write appends to gets its own commit before that write; one that would drop
a committed fact or forget record is refused instead.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from memvault.errors import InvalidInput
from memvault.formats.facts import parse_log
from memvault.formats.layout import LOGS_DIR, TOMBSTONES_FILE, is_temp_file, is_vault_file
from memvault.formats.tombstones import parse_tombstones
from memvault.storage.files import read_text
from memvault.storage.paths import inside

if TYPE_CHECKING:
    from memvault.storage.gitstore import GitStore


class HandEdits:
    """The uncommitted edits of the vault at `root`."""

    def __init__(self, root: Path, git: GitStore):
        self.root = root
        self.git = git

    def commit_hand_edits(self, paths: list[str], when: str) -> None:
        """Uncommitted hand edits of the files a write appends to get their own commit, rather than
        a silent ride in memvault's; one that drops a committed fact is refused (refuse_lost_facts)."""
        for rel in paths:
            inside(self.root, rel)  # a log turned into a symlink is refused, never committed as one
        dirty = [line[3:] for line in self.git.status(*paths)]
        if dirty:
            self.refuse_lost_facts(dirty)
            self.git.commit(dirty, f"edit: {', '.join(dirty)} (uncommitted hand edits, committed {when})")

    def refuse_lost_facts(self, dirty: list[str]) -> None:
        """A hand edit may reword or add facts, never make one disappear or a forgotten one
        come back: the logs and the forget records are append-only (a fact goes by `memvault
        forget`), and every other clone's sync refuses a history that drops one. So such an edit
        is not committed with the next write (an `rm` of today's log took the day's facts out of
        HEAD, silently), and the write is refused until the file is restored or the fact forgotten."""
        lost: list[str] = []
        for rel in dirty:
            if rel == TOMBSTONES_FILE:
                before = set(parse_tombstones(self._at_head(rel)))
                lost += sorted(before - set(parse_tombstones(read_text(inside(self.root, rel)))))
            elif rel.startswith(LOGS_DIR + "/"):
                before = {f.id for f in parse_log(self._at_head(rel), rel)[0]}
                lost += sorted(before - {f.id for f in parse_log(read_text(inside(self.root, rel)), rel)[0]})
        if lost:
            shown = ", ".join(lost[:3]) + (" …" if len(lost) > 3 else "")
            raise InvalidInput(f"uncommitted edits to {', '.join(dirty[:3])} remove {len(lost)} committed "
                               f"fact(s) or forget record(s) ({shown}); nothing was written: restore the file "
                               f"(`git -C {self.root} checkout -- {' '.join(dirty[:3])}`), and use "
                               "`memvault forget` to drop a fact")

    def _at_head(self, rel: str) -> str:
        """The file as HEAD holds it, "" when HEAD does not."""
        from git import GitCommandError

        try:
            return self.git.run("show", f"HEAD:{rel}")
        except GitCommandError:
            return ""

    def uncommitted(self) -> tuple[list[str], list[str], list[str]]:
        """Uncommitted paths, sorted into the vault's own files (never a symlink: memvault does not
        commit one), temp files a killed process left (safe to delete), and anything else (not
        memvault's to commit: a note, an editor's backup)."""
        ours, temp, foreign = [], [], []
        for rel in self.git.changed_paths():
            if is_temp_file(rel):
                temp.append(rel)
            elif is_vault_file(rel) and not os.path.islink(self.root / rel):
                ours.append(rel)
            else:
                foreign.append(rel)
        return ours, temp, foreign

