"""doctor's full checks: those that read every daily log (a minute each at a million facts), or
every byte of the search index and the embedding cache (gigabytes at a million facts, and tens of
seconds where they are not in the page cache).

Before they run, doctor says how long they will take on this vault: the bytes of its daily logs
times a rate measured on the spot (a few logs read, spread over the vault, for about a tenth of a
second), times how often the checks read them, plus the bytes of the index files they read whole
times a rate measured the same way (a few megabytes of the largest one read). While they run,
each log read is counted, so a progress callback hears how far they are. The default run includes
them only while the estimate is a few seconds (FULL_IN_DEFAULT_SECONDS); `doctor --full` runs them
on a vault of any size.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from memvault.errors import UnsafePath
from memvault.storage.store import Storage

# The full checks run by default while the estimate says they take at most this long: a vault
# of some ten thousand facts; above, the default run stays quick and says what --full would take.
FULL_IN_DEFAULT_SECONDS = 5.0
# Below this the estimate is not worth a line on stderr.
TELL_SECONDS = 2.0
_SAMPLE_SECONDS = 0.1
_SAMPLE_BYTES = 8 << 20
PHASE = "full checks: reading every daily log"

Progress = Callable[[str, int, int], None]  # (phase, done, total), as search and import report


@dataclass(frozen=True)
class Full:
    """What marks a probe as a full check: `name` is what doctor calls it when it is skipped,
    `reads` its cost relative to parsing every daily log once (the credential scan is dearer), and
    `files` the derived files it reads whole instead (the search index's)."""

    name: str
    reads: float = 1.0
    files: Callable[[Storage], list[Path]] | None = None


@dataclass(frozen=True)
class Estimate:
    seconds: float
    logs: int
    log_bytes: int
    data_bytes: int = 0

    def to_dict(self) -> dict:
        return {"seconds": round(self.seconds, 1), "logs": self.logs, "log_bytes": self.log_bytes,
                "data_bytes": self.data_bytes}

    def describe(self) -> str:
        data = f" and {_megabytes(self.data_bytes)} of search index" if self.data_bytes else ""
        return f"{self.logs:,} daily log(s), {_megabytes(self.log_bytes)}{data}: about {duration(self.seconds)} here"


def estimate(storage: Storage, fulls: list[Full]) -> Estimate:
    """How long the full checks `fulls` take on this vault, on this machine as loaded now."""
    sizes = _log_sizes(storage)
    total = sum(sizes.values())
    reads = sum(full.reads for full in fulls if full.files is None)
    data = _data_sizes(storage, fulls)
    seconds = total * reads * _seconds_per_byte(storage, list(sizes.items())) if sizes and reads else 0.0
    if data:
        seconds += sum(data.values()) * _read_seconds_per_byte(max(data, key=data.__getitem__))
    return Estimate(seconds, len(sizes), total, sum(data.values()))


def _data_sizes(storage: Storage, fulls: list[Full]) -> dict[Path, int]:
    sizes: dict[Path, int] = {}
    for full in fulls:
        for path in full.files(storage) if full.files else ():
            try:
                sizes[path] = path.stat().st_size
            except OSError:
                continue  # none yet, or gone: the check says what it finds
    return sizes


def _read_seconds_per_byte(path: Path) -> float:
    """Read (and checksum, as the checks do) up to _SAMPLE_BYTES of `path`: cold or cached, as it is now."""
    import zlib

    started, read = time.perf_counter(), 0
    try:
        with open(path, "rb") as f:
            while read < _SAMPLE_BYTES and (chunk := f.read(1 << 20)):
                zlib.crc32(chunk)
                read += len(chunk)
    except OSError:
        return 0.0
    return (time.perf_counter() - started) / read if read else 0.0


def _log_sizes(storage: Storage) -> dict[Path, int]:
    sizes: dict[Path, int] = {}
    try:
        paths = storage.facts.log_files()
    except UnsafePath:  # a symlinked log: nothing to estimate; the checks run and the symlinks check names it
        return sizes
    for path in paths:
        try:
            sizes[path] = path.stat().st_size
        except OSError:
            continue  # gone since listed: the checks say what they find
    return sizes


def _seconds_per_byte(storage: Storage, logs: list[tuple[Path, int]]) -> float:
    """Parse logs spread evenly over the vault (every log of a small one) for about _SAMPLE_SECONDS."""
    stride = max(1, len(logs) // 16)
    sample = logs[::stride] + [log for i, log in enumerate(logs) if i % stride]
    spent, read = 0.0, 0
    for path, size in sample:
        started = time.perf_counter()
        try:
            storage.facts.read_log(path)
        except (OSError, ValueError, UnsafePath):
            continue
        spent += time.perf_counter() - started
        read += size
        if spent >= _SAMPLE_SECONDS:
            break
    return spent / read if read else 0.0


@contextmanager
def counting_reads(storage: Storage, progress: Progress | None, passes: int) -> Iterator[None]:
    """Report to `progress` each daily log the full checks read (`passes` reads of every log in all).

    The checks read the logs through FactLog.read_log, so counting those calls on this instance
    (for the time the checks run) tells how far they are without each check taking a callback."""
    if progress is None or not passes:
        yield
        return
    sizes = _log_sizes(storage)
    total, done = sum(sizes.values()) * passes, 0
    real = storage.facts.read_log

    def read_log(path: Path):
        nonlocal done
        found = real(path)
        done = min(total, done + sizes.get(path, 0))
        progress(PHASE, done, total)
        return found

    storage.facts.read_log = read_log  # type: ignore[method-assign]
    progress(PHASE, 0, total)
    try:
        yield
    finally:
        del storage.facts.read_log


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 5400:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def _megabytes(size: int) -> str:
    return f"{size / 1e6:,.0f} MB" if size >= 1e6 else f"{size / 1e3:,.0f} kB"
