"""The fact counts `status` shows, kept in .memvault/tally.bin so status does not read every log.

Each daily log's (mtime_ns, size) is stored with an 8-byte hash of each fact id it holds, in file
order. A status stats every log (one system call each) and reads again only the logs whose stat
changed; the counts are then worked out from the hashes: total is the distinct ids (a repeated id
counts once, as in FactLog.iter_facts), forgotten the tombstoned ones among them. A log written
within the last seconds is re-read every time (a later write in the same clock tick could keep its
stat), so the record is never trusted blindly. `doctor` recounts from the logs and compares.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from array import array
from pathlib import Path

from memvault.formats.layout import STATE_DIR, TOMBSTONES_FILE
from memvault.storage.files import atomic_write_bytes
from memvault.storage.store import Storage

TALLY_FILE = f"{STATE_DIR}/tally.bin"
_VERSION = 2
# A log modified less than this before it was read may change again within the same mtime tick.
_SETTLE_NS = 2_000_000_000


def id_hash(fact_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(fact_id.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


def fact_counts(storage: Storage) -> dict:
    """{"total", "live", "forgotten"} as a full count would say, reading only the logs that changed."""
    records, hashes, kept_counts = _load(storage.root / TALLY_FILE)
    now = time.time_ns()
    tombstones = _stat(storage.root / TOMBSTONES_FILE, now)
    kept: dict[str, list] = {}
    chunks: list[array] = []
    changed = False
    for path in storage.facts.log_files():
        rel = storage.relpath(path)
        st = path.stat()
        known = records.get(rel)
        if known is not None and known[0] == st.st_mtime_ns and known[1] == st.st_size and known[4]:
            chunk = hashes[known[2]:known[2] + known[3]]
        else:
            changed = True
            chunk = array("Q", (id_hash(fact.id) for fact in storage.facts.read_log(path)[0]))
        settled = now - st.st_mtime_ns > _SETTLE_NS  # stat taken before the read: a racing write shows next time
        kept[rel] = [st.st_mtime_ns, st.st_size, 0, len(chunk), settled]
        chunks.append(chunk)
    changed = changed or set(records) != set(kept)
    every = array("Q")
    for rel, chunk in zip(kept, chunks, strict=True):
        kept[rel][2] = len(every)
        every.extend(chunk)
    if not changed and tombstones is not None and kept_counts.get("tombstones") == tombstones:
        return kept_counts["counts"]  # no log and no tombstone changed: no id needs hashing again
    distinct = set(every)  # the costly part at 1M facts (0.45 s on a busy 2-core machine)
    forgotten = len(distinct.intersection(id_hash(fact_id) for fact_id in storage.tombstone_log.tombstones()))
    counts = {"total": len(distinct), "live": len(distinct) - forgotten, "forgotten": forgotten}
    _save(storage.root / TALLY_FILE, kept, every, {"tombstones": tombstones, "counts": counts})
    return counts


def _stat(path: Path, now: int) -> list | None:
    """[mtime_ns, size] of a settled file ([0, 0] if missing); None if written in the last seconds."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return [0, 0]
    return [st.st_mtime_ns, st.st_size] if now - st.st_mtime_ns > _SETTLE_NS else None


def full_count(storage: Storage) -> dict:
    """The counts from every log read in full (doctor's recount)."""
    tombstones = storage.tombstone_log.tombstones()
    total = forgotten = 0
    for fact in storage.facts.iter_facts(include_forgotten=True):
        total += 1
        forgotten += fact.id in tombstones
    return {"total": total, "live": total - forgotten, "forgotten": forgotten}


def forget_tally(storage: Storage) -> None:
    """Drop the kept counts (doctor --fix, when they disagree with the recount)."""
    (storage.root / TALLY_FILE).unlink(missing_ok=True)


def _load(path: Path) -> tuple[dict, array, dict]:
    """The stored records, hashes and counts; nothing (every log is read) if missing or unreadable."""
    try:
        raw = path.read_bytes()
        head, _, body = raw.partition(b"\n")
        header = json.loads(head)
        if header.get("version") != _VERSION or len(body) % 8:
            return {}, array("Q"), {}
        hashes = array("Q")
        hashes.frombytes(body)
        records, counts = header["logs"], header["counts"]
        if not (all(_sound(r, len(hashes)) for r in records.values()) and isinstance(counts, dict)
                and isinstance(counts.get("counts"), dict)
                and all(type(counts["counts"].get(k)) is int for k in ("total", "live", "forgotten"))):
            return {}, array("Q"), {}
        return records, hashes, counts
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}, array("Q"), {}


def _sound(record, hashes: int) -> bool:
    """A record of [mtime_ns, size, first hash, hashes, settled] that fits in the hashes read."""
    return (isinstance(record, list) and len(record) == 5 and all(type(n) is int and n >= 0 for n in record[:4])
            and record[2] + record[3] <= hashes)


def _save(path: Path, records: dict, hashes: array, counts: dict) -> None:
    """Best effort: a vault this user cannot write is counted in full each time instead."""
    head = json.dumps({"version": _VERSION, "logs": records, "counts": counts}, separators=(",", ":")).encode()
    try:
        os.makedirs(path.parent, exist_ok=True)
        atomic_write_bytes(path, head + b"\n" + hashes.tobytes())
    except OSError:
        pass
