"""An index started from a copy of another: the vault's index seeds the index of a past commit.

The copy is taken under the source's index lock (waited for a second at most: a long rebuild
there means building from the files instead), then the usual refresh brings it to the folder's
own files: a file whose text is the same is not parsed again, and a vector comes from the
embedding cache. Only what a refresh cannot see is said here: the daily logs holding facts the
source had forgotten and the folder has not (the source dropped them; their log may be the
same), which are read again.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path

from memvault.formats.layout import INDEX_LOCK
from memvault.index.generation import BUILDING, POINTER
from memvault.index.indexer import SearchIndex
from memvault.storage.owner import Owner

WAIT_SECONDS = 1.0


def copy_index(source: SearchIndex, folder: Path, reread: Iterable[str]) -> bool:
    """Make `folder` (an index folder with no index yet) a copy of `source`'s live generation, with
    `reread` (vault-relative files) left for its first refresh to read again. False when there is
    nothing to copy or its lock stays taken."""
    from filelock import FileLock, Timeout

    if not source.exists():
        return False
    source.locks.mkdir(parents=True, exist_ok=True)
    held = FileLock(str(source.locks / INDEX_LOCK))
    try:
        held.acquire(timeout=WAIT_SECONDS)
    except Timeout:
        return False
    try:
        origin = _live(source.root)
        if origin is None:
            return False
        name = f"gen-{time.time_ns()}-{os.getpid()}"
        target = folder / name
        target.mkdir(parents=True)
        (target / BUILDING).write_text(json.dumps(Owner.me().to_json()), encoding="utf-8")
        with contextlib.closing(sqlite3.connect(f"file:{origin / 'catalog.sqlite'}?mode=ro", uri=True)) as db, \
                contextlib.closing(sqlite3.connect(target / "catalog.sqlite")) as copy:
            db.backup(copy)
            row = db.execute("SELECT value FROM meta WHERE name = 'vectors'").fetchone()
        vectors = row[0] if row else "vectors-0.f32"
        if (origin / vectors).exists():
            shutil.copyfile(origin / vectors, target / vectors)
        shutil.copytree(origin / "lexical", target / "lexical",
                        ignore=shutil.ignore_patterns(".tantivy-*.lock"))
    except (OSError, sqlite3.Error):
        shutil.rmtree(folder, ignore_errors=True)
        return False
    finally:
        held.release()
    with contextlib.closing(sqlite3.connect(target / "catalog.sqlite", isolation_level=None)) as copy:
        copy.executemany("DELETE FROM files WHERE path = ?", ((rel,) for rel in reread))
    (target / BUILDING).unlink()
    (folder / POINTER).write_text(name, encoding="utf-8")
    return True


def _live(root: Path) -> Path | None:
    """The generation the index's pointer names, if it is whole."""
    try:
        name = (root / POINTER).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    origin = root / name
    if not name.startswith("gen-") or not (origin / "catalog.sqlite").is_file() or (origin / BUILDING).exists():
        return None
    return origin
