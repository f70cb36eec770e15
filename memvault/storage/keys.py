"""Fact keys: which fact a caller's key names, looked up in a lookup derived from the daily logs.

A key is stored in its fact's metadata (`"key":"…"` in the log item), so the files stay the truth
and a key travels with sync like any other field. `.memvault/keys.sqlite` only makes finding one
fast: every log's keyed facts, with the stat of the log they were read from. Each lookup first
stats the logs and re-reads those that changed (an add, a sync, a hand edit, a purge), so it never
answers from a stale copy; a missing or damaged file is rebuilt from the logs. Only an add with a
key looks here: a plain add never opens it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from memvault.formats.facts import parse_log
from memvault.storage.files import read_text
from memvault.storage.queue import QueuedFact

if TYPE_CHECKING:
    import sqlite3

SCHEMA = """
CREATE TABLE IF NOT EXISTS logs (rel TEXT PRIMARY KEY, stamp TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS keys (key TEXT NOT NULL, rel TEXT NOT NULL, line INTEGER NOT NULL, id TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS keys_by_key ON keys (key);
CREATE INDEX IF NOT EXISTS keys_by_rel ON keys (rel);
"""
# SQLite takes at most 32,766 parameters a statement; a lookup asks in chunks well below that.
CHUNK = 5_000
APPENDED_LINE = 1 << 40


@dataclass(frozen=True)
class Keyed:
    """Where the fact stored under a key is: its id, its daily log and the line of its item."""

    id: str
    path: str
    line: int


def stamp(path: str) -> str | None:
    """What tells a changed log from an unchanged one: size, modification time and inode."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return f"{info.st_size}:{info.st_mtime_ns}:{info.st_ino}"


class KeyIndex:
    """The lookup of one vault: `log_paths()` lists its daily logs (absolute paths, oldest day first)."""

    def __init__(self, root: Path, db_path: Path, log_paths: Callable[[], list[str]]):
        self.root = root
        self.db_path = db_path
        self.log_paths = log_paths

    def lookup(self, keys: Iterable[str]) -> dict[str, Keyed]:
        """The first fact stored under each of `keys` (oldest day, then file order), for those that
        name one. Forgotten facts count: forgetting a fact does not free its key."""
        wanted = sorted(set(keys))
        if not wanted:
            return {}
        import sqlite3  # (here: a plain add, which never looks a key up, does not load it)

        try:
            with closing(_connect(self.db_path)) as db:
                return self._lookup(db, wanted)
        except (sqlite3.Error, OSError) as e:
            if isinstance(e, sqlite3.DatabaseError) and _damaged(e):
                self._delete()  # rebuilt by the next lookup
            # A vault whose .memvault cannot be written, a damaged or locked file: the same answer
            # from the logs alone, in memory.
            with closing(_connect(None)) as db:
                return self._lookup(db, wanted)

    def note_appended(self, before: dict[str, str | None], facts: list[QueuedFact]) -> None:
        """Record keyed facts just appended (under the write lock) without reading their logs again:
        only where the lookup held the log as it was just before the append (`before`: its stamp
        then), so a hand edit made meanwhile is still read by the next lookup."""
        by_path: dict[str, list[QueuedFact]] = {}
        for fact in facts:
            if fact.key is not None:
                by_path.setdefault(fact.path, []).append(fact)
        if not by_path:
            return
        import sqlite3

        with suppress(sqlite3.Error, OSError), closing(_connect(self.db_path)) as db, _transaction(db):
            known = dict(db.execute("SELECT rel, stamp FROM logs"))
            current = {rel: stamp(str(self.root / rel)) for rel in by_path}
            # An appended item comes after every line read before: its line only has to sort last.
            kept = [rel for rel in by_path if known.get(rel) == before.get(rel) and current[rel] is not None]
            db.executemany("INSERT INTO keys VALUES (?, ?, ?, ?)",
                           [(fact.key, rel, APPENDED_LINE, fact.id) for rel in kept for fact in by_path[rel]])
            db.executemany("INSERT OR REPLACE INTO logs VALUES (?, ?)", [(rel, current[rel]) for rel in kept])

    def _lookup(self, db: sqlite3.Connection, wanted: list[str]) -> dict[str, Keyed]:
        self._refresh(db)
        found: dict[str, Keyed] = {}
        for start in range(0, len(wanted), CHUNK):
            chunk = wanted[start:start + CHUNK]
            rows = db.execute(f"SELECT key, rel, line, id FROM keys WHERE key IN ({','.join('?' * len(chunk))}) "
                              "ORDER BY rel, line", chunk)
            for key, rel, line, fact_id in rows:
                found.setdefault(key, Keyed(fact_id, rel, line))
        return found

    def _refresh(self, db: sqlite3.Connection) -> None:
        """Bring the rows in step with the logs: read again each log whose stamp changed."""
        stamps = {os.path.relpath(path, self.root).replace(os.sep, "/"): (path, stamp(path))
                  for path in self.log_paths()}
        if dict(db.execute("SELECT rel, stamp FROM logs")) == {rel: now for rel, (_p, now) in stamps.items()}:
            return
        with _transaction(db):  # a lookup killed midway leaves the old rows, never half of a log's
            known = dict(db.execute("SELECT rel, stamp FROM logs"))  # (another process may have done it)
            for rel in [rel for rel in known if rel not in stamps or known[rel] != stamps[rel][1]]:
                db.execute("DELETE FROM keys WHERE rel = ?", (rel,))
                db.execute("DELETE FROM logs WHERE rel = ?", (rel,))
            for rel, (path, now) in stamps.items():
                if now is None or known.get(rel) == now:
                    continue
                text = read_text(Path(path))
                if '"key"' in text:  # (most logs hold no key: not parsed at all)
                    keyed = [(f.key, rel, f.line, f.id) for f in parse_log(text, rel)[0] if f.key is not None]
                    db.executemany("INSERT INTO keys VALUES (?, ?, ?, ?)", keyed)
                db.execute("INSERT INTO logs VALUES (?, ?)", (rel, now))

    def _delete(self) -> None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            with suppress(OSError):
                os.unlink(f"{self.db_path}{suffix}")


@contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _damaged(error) -> bool:
    import sqlite3

    text = str(error)
    return not isinstance(error, sqlite3.OperationalError) or "malformed" in text or "not a database" in text


def _connect(path: Path | None) -> sqlite3.Connection:
    import sqlite3

    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(":memory:" if path is None else str(path), timeout=30, isolation_level=None,
                         check_same_thread=False)
    try:
        db.executescript(SCHEMA)
    except BaseException:
        db.close()
        raise
    return db
