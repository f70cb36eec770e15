"""Change notices for a warm process, so a search skips the stat of every file while nothing changed.

Before each search the index compares every indexed file's stat with its manifest: one system call
per daily log, ~4 ms for a year of logs on a virtual machine, whatever the vault's size. A process
that searches again (the MCP server, an agent holding a Vault) asks the kernel instead (inotify,
Linux): the folders the index reads from are watched, and each search drains the pending events
with one non-blocking read. An event is queued when the write happens, so a write that finished
before the search began (an add by another process, a hand edit, a dream, a pull) is always seen;
the search then stats every file as before. No inotify (another system, the limit of watches or
instances reached), an overflowed queue, or MEMVAULT_WATCH=0: every search stats every file.
"""

from __future__ import annotations

import os
from pathlib import Path

from memvault.formats.layout import LOGS_DIR, WIKI_DIR

# Not CLOSE_WRITE or ACCESS: every write that changes a file also raises MODIFY (or a rename).
_CHANGES = ("MODIFY", "ATTRIB", "CREATE", "DELETE", "MOVED_FROM", "MOVED_TO", "DELETE_SELF", "MOVE_SELF")
# Events after which the set of watched folders may be wrong: watch again before the next scan.
_REWATCH = ("ISDIR", "IGNORED", "Q_OVERFLOW", "DELETE_SELF", "MOVE_SELF")


def watching_allowed() -> bool:
    return os.environ.get("MEMVAULT_WATCH", "1").strip().lower() not in ("0", "false", "no", "off")


class FolderWatch:
    """inotify watches on the vault's root, logs/ and its year folders, wiki/ and its zones."""

    def __init__(self, root: Path):
        from inotify_simple import INotify, flags  # Linux only: ImportError/OSError elsewhere

        self._inotify = INotify()
        mask = 0
        for name in _CHANGES:
            mask |= flags[name]
        mask |= flags.DONT_FOLLOW | flags.ONLYDIR  # a symlinked folder is never read: never watched
        try:
            for folder in self._folders(root):
                self._inotify.add_watch(folder, mask)
        except BaseException:
            self._inotify.close()
            raise
        self._rewatch = 0
        for name in _REWATCH:
            self._rewatch |= flags[name]

    @staticmethod
    def _folders(root: Path) -> list[str]:
        found = [str(root)]
        for top in (root / LOGS_DIR, root / WIKI_DIR):
            if top.is_dir() and not top.is_symlink():
                # every folder the index reads pages from (os.walk does not follow symlinked ones)
                found += [folder for folder, _dirs, _files in os.walk(top)]
        return found

    def changed(self) -> tuple[bool, bool]:
        """(did anything change since the last call, must the folders be watched again); drains
        the pending events without waiting."""
        events = self._inotify.read(timeout=0)
        rewatch = any(event.mask & self._rewatch for event in events)
        return bool(events), rewatch

    def close(self) -> None:
        self._inotify.close()


def open_watch(root: Path) -> FolderWatch | None:
    """A watch on the vault's indexed folders, or None where there is none to be had."""
    if not watching_allowed():
        return None
    try:
        return FolderWatch(root)
    except (ImportError, OSError):
        return None
