"""Who owns a queued request or a half-built index: a process id plus its start time.

The start time keeps a reused pid from passing for its long-dead predecessor. Without /proc (not
Linux) only the pid is checked.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Owner:
    pid: int
    start: str | None = None   # /proc/<pid>/stat field 22, in clock ticks since boot

    @classmethod
    def me(cls) -> Owner:
        return cls(os.getpid(), _start_time(os.getpid()))

    @classmethod
    def from_json(cls, data: object) -> Owner | None:
        """An owner as `to_json` wrote it; None for anything else."""
        if isinstance(data, list) and len(data) == 2 and isinstance(data[0], int):
            return cls(data[0], data[1] if isinstance(data[1], str) else None)
        return None

    def to_json(self) -> list:
        return [self.pid, self.start]

    def alive(self) -> bool:
        """Is this very process still running (a zombie counts as dead)?"""
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # someone else's process: it exists
        stat = _stat(self.pid)
        if stat is None:
            return not os.path.isdir("/proc/self")  # no /proc here: the pid exists, trust it
        state, start = stat
        return state != "Z" and (self.start is None or start == self.start)


def _stat(pid: int) -> tuple[str, str] | None:
    """(state, start time) from /proc/<pid>/stat; None without /proc or once the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode("ascii", "replace")
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: fields resume after the last ")".
    fields = raw[raw.rfind(")") + 2:].split()
    return (fields[0], fields[19]) if len(fields) > 19 else None


def _start_time(pid: int) -> str | None:
    stat = _stat(pid)
    return stat[1] if stat else None
