"""The vault-wide write lock: an OS file lock (it dies with its process), plus who holds it."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from filelock import FileLock, Timeout

from memvault.errors import VaultBusy

HOLDER_SUFFIX = ".holder"


@contextmanager
def hold(path: Path, timeout: float, what: str) -> Iterator[None]:
    """Hold the lock file at `path`, waiting at most `timeout` seconds; VaultBusy after that."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(path)
    try:
        lock.acquire(timeout=timeout)
    except Timeout:
        raise VaultBusy(
            f"vault busy: another memvault process held the write lock of {what} for over {timeout:g} s"
        ) from None
    # Who holds it, for `status` and `doctor` (the lock file itself says nothing).
    holder = path.with_name(path.name + HOLDER_SUFFIX)
    holder.write_text(json.dumps({"pid": os.getpid(), "command": " ".join(sys.argv)[:300],
                                  "since": datetime.now().astimezone().isoformat(timespec="seconds")}))
    try:
        yield
    finally:
        holder.unlink(missing_ok=True)
        lock.release()


@contextmanager
def exclusive(path: Path, busy: Exception) -> Iterator[None]:
    """Hold the lock at `path` or raise `busy` at once (for work that must not queue up)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(path)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise busy from None
    try:
        yield
    finally:
        lock.release()


def holder(path: Path) -> dict | None:
    """Who holds the lock at `path` right now (None when nobody does)."""
    if not path.exists():
        return None
    lock = FileLock(path)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return _read_holder(path.with_name(path.name + HOLDER_SUFFIX)) or {"pid": None, "command": None, "since": None}
    lock.release()
    return None


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
