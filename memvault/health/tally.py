"""The fact counts `status` shows, kept in .memvault/tally.bin so status does not read every log.

Each daily log's (mtime_ns, size) is stored with an 8-byte hash of each fact id it holds, in file
order, and the same hashes once more, sorted. A status stats every log (one system call each) and
reads again only the logs whose stat changed; the hashes those logs lost and gained are looked up
in the sorted copy (a binary search each), so the counts follow a change without going over the
million hashes of the others: total is the distinct ids (a repeated id counts once, as in
FactLog.iter_facts), forgotten the tombstoned ones among them. A log written within the last
seconds is re-read every time (a later write in the same clock tick could keep its stat), so the
record is never trusted blindly. `doctor --full` recounts from the logs and compares.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from array import array
from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from memvault.formats.layout import STATE_DIR, TOMBSTONES_FILE
from memvault.storage.files import atomic_write_bytes
from memvault.storage.store import Storage

TALLY_FILE = f"{STATE_DIR}/tally.bin"
# 4 counts each log's unreadable lines: a record of an earlier version is read again once, in full.
_VERSION = 4
# A log modified less than this before it was read may change again within the same mtime tick.
_SETTLE_NS = 2_000_000_000
# Up to this many hashes gained or lost are put into (taken from) the sorted copy one by one;
# more are merged in one sort (about 0.2 s at 1M facts).
_ONE_BY_ONE = 512


def id_hash(fact_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(fact_id.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


def fact_counts(storage: Storage) -> dict:
    """{"total", "live", "forgotten", "unreadable"} as a full count would say, reading only the logs
    that changed; unreadable = lines of the logs that are not facts memvault can read."""
    path = storage.root / TALLY_FILE
    with _opened(path) as kept_file:
        records, kept_counts = _header(kept_file)
        now = time.time_ns()
        tombstones = _stat(storage.root / TOMBSTONES_FILE, now)
        logs = _stats(storage, records, now)
        if not _moved(logs, records) and tombstones is not None and kept_counts.get("tombstones") == tombstones:
            return kept_counts["counts"]  # no log and no tombstone changed: nothing to count again
        hashes, ordered = _body(kept_file, records)
    kept, chunks, gained, lost = _logs(storage, logs, records, hashes)
    every = array("Q")
    for rel, chunk in zip(kept, chunks, strict=True):
        kept[rel][2] = len(every)
        every.extend(chunk)
    known_total = kept_counts.get("counts", {}).get("total") if records else None
    ordered, total = _follow(ordered, every, gained, lost, known_total)
    forgotten = sum(_holds(ordered, id_hash(fact_id)) for fact_id in storage.tombstone_log.tombstones())
    unreadable = sum(record[5] for record in kept.values())
    counts = {"total": total, "live": total - forgotten, "forgotten": forgotten, "unreadable": unreadable}
    _save(path, kept, every, ordered, {"tombstones": tombstones, "counts": counts})
    return counts


def _stats(storage: Storage, records: dict, now: int) -> dict[str, tuple[Path, int, int, bool]]:
    """Each daily log's path, mtime_ns, size and whether it has settled: one stat each."""
    logs = {}
    for path in storage.facts.log_files():
        st = path.stat()
        # stat taken before any read: a write racing it shows next time
        logs[storage.relpath(path)] = (path, st.st_mtime_ns, st.st_size, now - st.st_mtime_ns > _SETTLE_NS)
    return logs


def _moved(logs: dict, records: dict) -> bool:
    """Whether a log is new, gone, changed or not settled since the kept record."""
    if len(logs) != len(records):
        return True
    for rel, (_path, mtime, size, settled) in logs.items():
        known = records.get(rel)
        if known is None or not (known[0] == mtime and known[1] == size and known[4] and settled):
            return True
    return False


def _logs(storage: Storage, logs: dict, records: dict, hashes: array):
    """Each log's new record and hashes (read again only where its stat changed or had not
    settled), and the hashes gained and lost since the kept record."""
    kept: dict[str, list] = {}
    chunks: list[array] = []
    gained: Counter = Counter()
    lost: Counter = Counter()
    records = dict(records)
    for rel, (path, mtime, size, settled) in logs.items():
        known = records.pop(rel, None)
        old = hashes[known[2]:known[2] + known[3]] if known is not None else array("Q")
        if known is not None and known[0] == mtime and known[1] == size and known[4]:
            chunk, unreadable = old, known[5]
        else:
            facts, problems = storage.facts.read_log(path)
            chunk, unreadable = array("Q", (id_hash(fact.id) for fact in facts)), _unread(problems)
            if chunk != old:
                gained.update(chunk)
                lost.update(old)
        kept[rel] = [mtime, size, 0, len(chunk), settled, unreadable]
        chunks.append(chunk)
    for gone in records.values():  # logs deleted since
        lost.update(hashes[gone[2]:gone[2] + gone[3]])
    # what a log lost and gained back (written again with the same ids) changes no count
    return kept, chunks, gained - lost, lost - gained


def _follow(ordered: array, every: array, gained: Counter, lost: Counter, total: int | None) -> tuple[array, int]:
    """The sorted hashes and the distinct total after the logs' changes: followed from the kept ones
    change by change, or counted again (a first count, many changes, a kept copy that is damaged)."""
    if total is not None and gained.total() + lost.total() <= max(4096, len(every) // 8):
        touched = set(gained) | set(lost)
        before = sum(_holds(ordered, h) for h in touched)
        changed = _changed(ordered, gained, lost)
        if changed is not None:
            return changed, total + sum(_holds(changed, h) for h in touched) - before
    # the costly part at 1M facts (about 1 s with the sort, on a busy 2-core machine)
    return array("Q", sorted(every)), len(set(every))


def _holds(ordered: array, h: int) -> bool:
    i = bisect_left(ordered, h)
    return i < len(ordered) and ordered[i] == h


def _changed(ordered: array, gained: Counter, lost: Counter) -> array | None:
    """The sorted hashes with `lost` taken out and `gained` put in (each as often as counted); None
    when a lost hash is not there: the kept copy disagrees with the logs' record, so count again."""
    if lost.total() <= _ONE_BY_ONE:
        for h in lost.elements():
            if not _holds(ordered, h):
                return None
            del ordered[bisect_left(ordered, h)]
    else:
        left = Counter(lost)
        ordered = array("Q", (h for h in ordered if not _take(left, h)))
        if left.total():
            return None
    added = list(gained.elements())
    if len(added) <= _ONE_BY_ONE:
        for h in added:
            insort(ordered, h)
        return ordered
    merged = ordered.tolist()
    merged.extend(added)
    merged.sort()  # two sorted runs: one merge
    return array("Q", merged)


def _take(left: Counter, h: int) -> bool:
    if left[h] > 0:
        left[h] -= 1
        return True
    return False


def _stat(path: Path, now: int) -> list | None:
    """[mtime_ns, size] of a settled file ([0, 0] if missing); None if written in the last seconds."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return [0, 0]
    return [st.st_mtime_ns, st.st_size] if now - st.st_mtime_ns > _SETTLE_NS else None


def full_count(storage: Storage) -> dict:
    """The counts from every log read in full (doctor's recount); a repeated id counts once, as in
    FactLog.iter_facts."""
    tombstones = storage.tombstone_log.tombstones()
    seen: set[str] = set()
    forgotten = unreadable = 0
    for path in storage.facts.log_files():
        facts, problems = storage.facts.read_log(path)
        unreadable += _unread(problems)
        for fact in facts:
            if fact.id not in seen:
                seen.add(fact.id)
                forgotten += fact.id in tombstones
    total = len(seen)
    return {"total": total, "live": total - forgotten, "forgotten": forgotten, "unreadable": unreadable}


def _unread(problems: list) -> int:
    """The lines no fact was read from (a line of bytes that are not UTF-8 is still a fact, counted)."""
    return sum(1 for problem in problems if not problem.read)


def forget_tally(storage: Storage) -> None:
    """Drop the kept counts (doctor --fix, when they disagree with the recount)."""
    (storage.root / TALLY_FILE).unlink(missing_ok=True)


@contextmanager
def _opened(path: Path) -> Iterator[BinaryIO | None]:
    """The kept file, open (its header read first, its body only if a log changed), or None."""
    try:
        f = open(path, "rb")  # closed below; None when there is no file
    except OSError:
        yield None
        return
    with f:
        yield f


def _header(kept_file: BinaryIO | None) -> tuple[dict, dict]:
    """The stored records and counts; nothing (every log is read) if missing, unreadable or of an
    earlier version."""
    if kept_file is None:
        return {}, {}
    try:
        header = json.loads(kept_file.readline())
        records, counts = header["logs"], header["counts"]
        if not (header.get("version") == _VERSION and isinstance(records, dict)
                and all(_sound(r) for r in records.values()) and isinstance(counts, dict)
                and isinstance(counts.get("counts"), dict)
                and all(type(counts["counts"].get(k)) is int for k in ("total", "live", "forgotten", "unreadable"))):
            return {}, {}
        return records, counts
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}, {}


def _body(kept_file: BinaryIO | None, records: dict) -> tuple[array, array]:
    """The stored hashes, in file order and sorted; none if they do not fit the records (which are
    then dropped, so every log is read)."""
    hashes, ordered = array("Q"), array("Q")
    if kept_file is None or not records:
        return hashes, ordered
    try:
        size = os.fstat(kept_file.fileno()).st_size - kept_file.tell()
        if size % 16 == 0:
            hashes.fromfile(kept_file, size // 16)  # read straight into the arrays: 16 MB at 1M facts
            ordered.fromfile(kept_file, size // 16)
    except (OSError, EOFError):
        hashes, ordered = array("Q"), array("Q")
    if not all(r[2] + r[3] <= len(hashes) for r in records.values()):
        records.clear()
        return array("Q"), array("Q")
    return hashes, ordered


def _sound(record) -> bool:
    """A record of [mtime_ns, size, first hash, hashes, settled, unreadable lines] (_body checks that it fits)."""
    return isinstance(record, list) and len(record) == 6 and all(type(n) is int and n >= 0
                                                                 for n in record[:4] + record[5:])


def _save(path: Path, records: dict, hashes: array, ordered: array, counts: dict) -> None:
    """Best effort: a vault this user cannot write is counted in full each time instead."""
    head = json.dumps({"version": _VERSION, "logs": records, "counts": counts}, separators=(",", ":")).encode()
    try:
        os.makedirs(path.parent, exist_ok=True)
        atomic_write_bytes(path, b"".join((head, b"\n", memoryview(hashes), memoryview(ordered))))
    except OSError:
        pass
