"""Room kept aside for undoing a write: a file of spare bytes in .memvault/.

Undoing a write that failed for want of space needs space itself (git rewrites its whole index
to unstage). Each write starts with this reserve in place, or is refused before it changes
anything; a write that runs out of space gives the reserve up, and its undo fits in what that
frees (docs/faults.md, "Room for the undo").
"""

from __future__ import annotations

import os
from contextlib import suppress
from pathlib import Path

from memvault.storage.files import size_of

MINIMUM = 256 * 1024
SLACK = 64 * 1024


def needed(git_index: Path) -> int:
    """Bytes to keep: two copies of git's index (it is rewritten whole) and some slack."""
    return max(MINIMUM, 2 * (size_of(git_index) or 0) + SLACK)


def ensure(path: Path, git_index: Path) -> None:
    """Make or grow the reserve; an OSError (the disk is full) means the write must not start."""
    size = needed(git_index)
    if (size_of(path) or 0) >= size:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            # Random bytes: a compressing file system (btrfs, ZFS) would store zeros in no space at all.
            f.write(os.urandom(size))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


def release(path: Path) -> bool:
    """Give the reserve up (the disk is full and an undo needs the room); True if there was one."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True
