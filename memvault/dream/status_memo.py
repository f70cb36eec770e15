"""The last dream status, kept in .memvault/dream-status.json with what it was worked out from.

Planning reads every daily log (and sizes every pending fact in tokens): tens of seconds at a
million facts, paid by each `status`. What the plan depends on is the logs of the days before
today, tombstones, log.md, the wiki pages, memvault.toml and the settings in force, and today's
date: their stats (one system call a file, no reads) and the settings make the key. Adds go to
today's log, which no plan of today reads, so the kept answer stands until a dream, a forget, a
backdated add, a sync or a hand edit changes one of those files. A file modified in the last
seconds could change again within its mtime tick: the answer is then not kept.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator
from datetime import date

from memvault.base import tokens
from memvault.formats.layout import CONFIG_FILE, DREAM_LOG, STATE_DIR, TOMBSTONES_FILE, WIKI_DIR
from memvault.storage.files import atomic_write
from memvault.storage.store import Storage

MEMO_FILE = f"{STATE_DIR}/dream-status.json"
_SETTLE_NS = 2_000_000_000


def kept_status(storage: Storage, today: date, work_out: Callable[[], dict]) -> dict:
    """The status `work_out` gives, or the kept one when none of its inputs changed since."""
    key, settled = _key(storage, today)
    path = storage.root / MEMO_FILE
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
        if kept.get("key") == key and isinstance(kept["status"], dict):
            return kept["status"]
    except (OSError, ValueError, AttributeError, KeyError):
        pass
    status = work_out()
    if settled:
        try:
            os.makedirs(path.parent, exist_ok=True)
            atomic_write(path, json.dumps({"key": key, "status": status}, ensure_ascii=False))
        except (OSError, TypeError, ValueError):
            pass  # a vault this user cannot write is planned in full each time
    return status


def _key(storage: Storage, today: date) -> tuple[str, bool]:
    """A digest of every input's stat, and whether all of them were last written long enough ago."""
    config = storage.config  # the settings the plan reads: others (the embedding model's) do not count
    # (and how facts are sized in tokens: the encoding file counting would load, or none)
    sizing = tokens.encoding_file()
    digest = hashlib.sha256(f"{today.isoformat()}\n{(config.timezone, config.llm, config.dream)!r}\n"
                            f"{sizing}\n".encode())
    newest = 0
    for rel, mtime_ns, size, inode in _inputs(storage, today):
        digest.update(f"{rel}\0{mtime_ns}\0{size}\0{inode}\n".encode())
        newest = max(newest, mtime_ns)
    return digest.hexdigest(), time.time_ns() - newest > _SETTLE_NS


def _inputs(storage: Storage, today: date) -> Iterator[tuple[str, int, int, int]]:
    """(path, mtime_ns, size, inode) of each file the plan reads; zeros for one that is missing."""
    root = str(storage.root)
    paths = [os.path.join(root, rel) for rel in (CONFIG_FILE, DREAM_LOG, TOMBSTONES_FILE)]
    paths += [str(path) for path in storage.facts.log_files() if storage.facts.day_of(path) < today]
    for folder, dirs, names in os.walk(os.path.join(root, WIKI_DIR)):
        dirs.sort()
        paths += [os.path.join(folder, name) for name in sorted(names)]
    for path in paths:
        try:
            st = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            yield path, 0, 0, 0
            continue
        yield path, st.st_mtime_ns, st.st_size, st.st_ino
