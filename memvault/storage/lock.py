"""The vault's locks: OS file locks (they die with their process), plus who holds them.

`fcntl.flock` directly rather than the filelock package: importing filelock costs ~70 ms (it
pulls in asyncio), a third of a whole `memvault add`. The locks are compatible: both flock.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from contextlib import suppress
from datetime import datetime
from pathlib import Path

HOLDER_SUFFIX = ".holder"
POLL_SECONDS = 0.02


class OsLock:
    """One exclusive flock on `path`; `acquire` never blocks, callers poll."""

    def __init__(self, path: Path, record: bool = True):
        self.path = path
        self.record = record
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Take the lock if it is free; True when this object holds it now."""
        if self._fd is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        if not self.record:
            return True
        # Who holds it, for `status`, `doctor` and waiting writers (the lock file itself says nothing).
        with suppress(OSError):  # informative only: a full disk must not stop the write it guards
            self.holder_path.write_text(json.dumps({
                "pid": os.getpid(), "command": " ".join(sys.argv)[:300],
                "since": datetime.now().astimezone().isoformat(timespec="seconds")}))
        return True

    def wait(self, timeout: float) -> bool:
        """Take the lock, waiting at most `timeout` seconds; False if it stayed taken."""
        deadline = time.monotonic() + timeout
        while not self.acquire():
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL_SECONDS)
        return True

    def release(self) -> None:
        if self._fd is None:
            return
        with suppress(OSError):
            self.holder_path.unlink(missing_ok=True)
        fd, self._fd = self._fd, None
        os.close(fd)  # closing the descriptor releases the flock

    @property
    def holder_path(self) -> Path:
        return self.path.with_name(self.path.name + HOLDER_SUFFIX)


def busy_message(path: Path, timeout: float, what: str) -> str:
    who = holder(path)
    by = f" (pid {who['pid']}: {who['command']})" if who and who.get("pid") else ""
    return f"vault busy: another memvault process{by} held the write lock of {what} for over {timeout:g} s"


def waiting_notice(who: dict | None, root: Path, then: str) -> str:
    """What a writer waiting for the write lock of the vault at `root` says, naming its holder."""
    who = who or {}
    by = f" (pid {who['pid']}: {who.get('command')})" if who.get("pid") else ""
    return f"waiting for the write lock of {root}{by}{then}"


def holder(path: Path) -> dict | None:
    """Who holds the lock at `path` right now (None when nobody does)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _read_holder(path.with_name(path.name + HOLDER_SUFFIX)) or {"pid": None, "command": None, "since": None}
    finally:
        os.close(fd)
    return None


def held_by(who: dict) -> str:
    """`holder`'s answer in words. A holder that left no record (its disk was full, or it is not
    memvault: a `flock` of the file) is said to be unknown, never "pid None (None) since None"."""
    if not who.get("pid"):
        return "held by a process that left no record of itself (not a memvault write, or its disk was full)"
    return f"held by pid {who['pid']} ({who.get('command')}) since {who.get('since')}"


def orphaned_holder(path: Path) -> Path | None:
    """The holder record of a lock nobody holds (its process was killed), if one was left."""
    record = path.with_name(path.name + HOLDER_SUFFIX)
    return record if record.exists() and holder(path) is None else None


def _read_holder(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
