"""The git processes at work in a vault, read from /proc (Linux): a lock file is stale only when
none is, and a killed writer's write is settled only once its git children have finished.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

# Marks the git processes a memvault process starts, so that the git children of a killed writer
# (they outlive it) can be waited for before its write is settled.
WRITER_ENV = "MEMVAULT_WRITER_PID"


def _processes() -> Iterator[tuple[Path, bytes]]:
    """Each process in /proc with its command line (raw; empty until its exec is done)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # ended meanwhile, or not ours to read
        yield entry, cmdline


def git_running_in(root: Path) -> bool:
    """Is any git process working in this vault? Unknown (no /proc) counts as yes."""
    if not Path("/proc").is_dir():
        return True
    return any(True for _environ in _git_processes(root))


# git's housekeeping, which `git commit` may start in the background (gc --auto, maintenance).
_MAINTENANCE = {b"gc", b"maintenance", b"repack", b"pack-objects", b"prune", b"prune-packed", b"pack-refs",
                b"reflog", b"multi-pack-index", b"commit-graph", b"worktree"}


def git_of_writer(root: Path, mark: bytes, parent: int) -> bool:
    """Is a git process marked `mark` working in the vault, or is a child of `parent` still being
    loaded by the kernel? One pass over /proc, each process looked at once.

    A child's command line and environment read empty until its exec is done, which is most often
    still so when Popen has just returned (vfork resumes the parent before the program is loaded):
    a memvault interrupted just after starting `git commit` took it for no git, undid its write,
    and the commit then landed part of the batch. So a child of `parent` not yet loaded counts.
    """
    target = str(root.resolve())
    for entry, cmdline in _processes():
        if not cmdline:
            if _live_child_of(entry, parent):
                return True
            continue
        environ = _git_environ(entry, cmdline, target, maintenance=False)
        if environ is not None and mark in environ:
            return True
        # The kernel writes a new program's command line before its environment: a git child of
        # `parent` caught in between reads with no environment yet (seen once in a full test run).
        if os.path.basename(cmdline.split(b"\0")[0]).startswith(b"git") and _live_child_of(entry, parent):
            return True
    return False


def _live_child_of(entry: Path, parent: int) -> bool:
    """Is process `entry` a child of `parent` that is not a zombie?"""
    try:
        fields = (entry / "stat").read_bytes().rpartition(b")")[2].split()
        return int(fields[1]) == parent and fields[0] not in (b"Z", b"X")
    except (OSError, ValueError, IndexError):
        return False


def _git_processes(root: Path, maintenance: bool = True) -> Iterator[bytes]:
    """The environment (raw bytes) of each live git process working in the vault at `root`
    (without git's housekeeping when `maintenance` is False)."""
    target = str(root.resolve())
    for entry, cmdline in _processes():
        environ = _git_environ(entry, cmdline, target, maintenance)
        if environ is not None:
            yield environ


def _git_environ(entry: Path, cmdline: bytes, target: str, maintenance: bool) -> bytes | None:
    """The environment of process `entry` (its command line `cmdline`, raw) if it is a git working
    in the vault at `target` (not git's housekeeping unless `maintenance`), else None."""
    args = cmdline.split(b"\0")
    if not os.path.basename(args[0]).startswith(b"git"):
        return None
    if not maintenance and len(args) > 1 and args[1] in _MAINTENANCE:
        return None
    try:
        cwd = os.readlink(entry / "cwd")
        environ = (entry / "environ").read_bytes()
    except OSError:
        return None
    needle = target.encode()
    if (cwd == target or cwd.startswith(target + os.sep) or b"GIT_DIR=" + needle in environ
            or any(needle in arg for arg in args[1:])):
        return environ
    return None
