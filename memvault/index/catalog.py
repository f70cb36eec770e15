"""The index's own bookkeeping in sqlite: documents with their vector slot, and the file manifest.

The manifest (path, mtime, size, content hash) is how a search notices files edited, added or
deleted behind memvault's back: only files whose stat changed are re-read, and only those whose
hash changed are re-parsed.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from memvault.index.documents import Document
from memvault.index.embedder import content_hash

# 2: facts carry their session and the previous fact of their thread; lexical stop words and context.
# 3: facts say whether they hold a credential stored on purpose (`secret`).
# 4: the vector file's rows and their CRC-32 are recorded (meta vector_rows, vector_crc).
# 5: purges a generation was built knowing (meta clean_of), learnt of since (purge_todo); `dropped`.
# 6: the lexical half indexes text folded (NFKC, no format characters): older segments hold NFD
#    words cut in two, which folded queries never match.
# 7: facts say which older fact they supersede (`supersedes`), so search can put the newer first.
SCHEMA_VERSION = "7"
SCHEMA_CHANGED = "made by another memvault version"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS docs (
    key TEXT PRIMARY KEY, kind TEXT NOT NULL, file TEXT NOT NULL, text TEXT NOT NULL,
    at TEXT, day INTEGER, category TEXT, tags TEXT NOT NULL, source TEXT, heading TEXT,
    title TEXT, importance REAL, doc_hash BLOB NOT NULL, embed_hash BLOB NOT NULL, slot INTEGER,
    session TEXT, prev TEXT, secret INTEGER NOT NULL DEFAULT 0, supersedes TEXT
);
CREATE INDEX IF NOT EXISTS docs_file ON docs(file);
CREATE INDEX IF NOT EXISTS docs_slot ON docs(slot);
CREATE INDEX IF NOT EXISTS docs_day ON docs(day);
CREATE INDEX IF NOT EXISTS docs_session ON docs(session);
CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, mtime_ns INTEGER, size INTEGER, hash BLOB);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS dropped (key TEXT PRIMARY KEY, embed_hash BLOB NOT NULL);
"""

_COLUMNS = ("key, kind, file, text, at, day, category, tags, source, heading, title, importance, slot, session, secret,"
            " supersedes")


@dataclass(frozen=True)
class FileState:
    mtime_ns: int
    size: int
    hash: bytes | None


@dataclass(frozen=True)
class StoredDoc:
    """A document row as search reads it back."""

    key: str
    kind: str
    file: str
    text: str
    at: str | None
    day: int | None
    category: str | None
    tags: tuple[str, ...]
    source: str | None
    heading: str | None
    title: str | None
    importance: float | None
    slot: int | None
    session: str | None
    secret: bool = False
    supersedes: str | None = None


class Ranking(NamedTuple):
    """A candidate's fields that fusion and the exact date bounds look at."""

    at: str | None
    importance: float | None
    category: str | None = None
    prev: str | None = None  # the fact before it in its thread
    slot: int | None = None


def doc_hash(doc: Document) -> bytes:
    """Changes when anything shown or filtered on changes, so metadata edits re-index too."""
    payload = [doc.kind, doc.text, doc.file, doc.at, doc.category, list(doc.tags), doc.source,
               doc.heading, doc.title, doc.importance, doc.session, doc.prev, doc.context, doc.secret,
               doc.supersedes]
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode()).digest()


class Catalog:
    """One generation's sqlite catalog: meta, documents and transactions; the manifest, the vector
    slots and the purge record are its parts (`manifest`, `slots`, `purges`), over the same connection."""

    def __init__(self, path: Path):
        self.path = path
        self.db = sqlite3.connect(str(path), timeout=60, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(_SCHEMA)
        if self.get_meta("schema") is None:
            self.set_meta("schema", SCHEMA_VERSION)
        elif self.get_meta("schema") != SCHEMA_VERSION:
            raise sqlite3.DatabaseError(f"{SCHEMA_CHANGED} (format {self.get_meta('schema')}, now {SCHEMA_VERSION})")
        # (after the check: an older catalog has no such column, and is rebuilt as made by another version)
        self.db.execute("CREATE INDEX IF NOT EXISTS docs_supersedes ON docs(supersedes)")
        self.manifest = Manifest(self.db)
        self.slots = VectorSlots(self)
        self.purges = PurgeRecord(self)

    def close(self) -> None:
        self.db.close()

    # -- meta ---------------------------------------------------------------------------------
    def get_meta(self, name: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return row[0] if row else None

    def set_meta(self, name: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)", (name, value))

    @property
    def version(self) -> int:
        """Bumped by every write, so a long-lived reader knows when to reload."""
        return int(self.get_meta("version") or 0)

    # -- writes (callers wrap them in one transaction) -----------------------------------------
    def begin(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        self.set_meta("version", str(self.version + 1))
        self.db.execute("COMMIT")

    def compact(self) -> None:
        """After a rebuild: fold the write-ahead log (as large as the data) back into the file."""
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def rollback(self) -> None:
        if self.db.in_transaction:
            self.db.execute("ROLLBACK")

    def doc_hashes(self, file: str) -> dict[str, bytes]:
        return dict(self.db.execute("SELECT key, doc_hash FROM docs WHERE file = ?", (file,)))

    def remove_docs(self, keys: Iterable[str]) -> None:
        self.db.executemany("DELETE FROM docs WHERE key = ?", ((k,) for k in keys))

    def put_docs(self, docs: Iterable[Document]) -> None:
        self.db.executemany(
            "INSERT OR REPLACE INTO docs (key, kind, file, text, at, day, category, tags, source,"
            " heading, title, importance, doc_hash, embed_hash, slot, session, prev, secret, supersedes)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?)",
            (
                (d.key, d.kind, d.file, d.text, d.at, d.day, d.category, json.dumps(list(d.tags)),
                 d.source, d.heading, d.title, d.importance, doc_hash(d), content_hash(d.search_text),
                 d.session, d.prev, int(d.secret), d.supersedes)
                for d in docs
            ),
        )

    # -- reads --------------------------------------------------------------------------------
    def count(self) -> int:
        return self.db.execute("SELECT count(*) FROM docs").fetchone()[0]

    def tombstoned_present(self, ids: set[str]) -> list[str]:
        keys = list(ids)
        found: list[str] = []
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            found += [r[0] for r in self.db.execute(f"SELECT key FROM docs WHERE key IN ({marks})", chunk)]
        return found

    def successors(self, keys: Iterable[str]) -> dict[str, list[str]]:
        """key -> the facts that say they supersede it (the index holds no forgotten fact)."""
        found: dict[str, list[str]] = {}
        for key, old in _rows(self.db, "key, supersedes", "supersedes", list(keys)):
            found.setdefault(old, []).append(key)
        return found

    def files_of(self, keys: Iterable[str]) -> dict[str, str]:
        """key -> the file its document was read from, for the keys in the catalog."""
        return dict(_rows(self.db, "key, file", "key", list(keys)))

    def by_keys(self, keys: Iterable[str]) -> dict[str, StoredDoc]:
        return {row[0]: _row(row) for row in _rows(self.db, _COLUMNS, "key", list(keys))}

    def ranking_of(self, keys: Iterable[str]) -> dict[str, Ranking]:
        """What fusion needs of each candidate (no text, no tags): decoding whole rows of every
        candidate was a tenth of a warm search, and only the top few are shown."""
        rows = _rows(self.db, "key, at, importance, category, prev, slot", "key", list(keys))
        return {row[0]: Ranking(*row[1:]) for row in rows}


def _row(row: tuple) -> StoredDoc:
    key, kind, file, text, at, day, category, tags, source, heading, title, importance, slot, session, secret, \
        supersedes = row
    return StoredDoc(key, kind, file, text, at, day, category, tuple(json.loads(tags)), source,
                     heading, title, importance, slot, session, bool(secret), supersedes)


def _rows(db: sqlite3.Connection, columns: str, column: str, values: list, table: str = "docs") -> Iterator[tuple]:
    """`columns` of the rows whose `column` is among `values`, 500 values to a query."""
    for start in range(0, len(values), 500):
        chunk = values[start : start + 500]
        marks = ",".join("?" * len(chunk))
        yield from db.execute(f"SELECT {columns} FROM {table} WHERE {column} IN ({marks})", chunk)


class Manifest:
    """The files the generation was filled from, with the stat and hash each had when read."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def files(self) -> dict[str, FileState]:
        rows = self.db.execute("SELECT path, mtime_ns, size, hash FROM files")
        return {p: FileState(m, s, h) for p, m, s, h in rows}

    def set_file(self, path: str, state: FileState) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO files (path, mtime_ns, size, hash) VALUES (?, ?, ?, ?)",
            (path, state.mtime_ns, state.size, state.hash),
        )

    def drop_file(self, path: str) -> None:
        self.db.execute("DELETE FROM files WHERE path = ?", (path,))


class VectorSlots:
    """Which row of the vector file holds each document's vector, and what the file holds."""

    def __init__(self, catalog: Catalog):
        self.catalog = catalog
        self.db = catalog.db

    def record(self) -> tuple[str, int, int]:
        """The vector file's name, how many rows it holds, and their CRC-32 (see index/vectors.py)."""
        meta = self.catalog.get_meta
        return (meta("vectors") or "vectors-0.f32", int(meta("vector_rows") or 0), int(meta("vector_crc") or 0))

    def set_record(self, rows: int, crc: int, name: str | None = None) -> None:
        """Record rows appended (in the transaction giving out their slots), or a new, empty file."""
        if name is not None:
            self.catalog.set_meta("vectors", name)
        self.catalog.set_meta("vector_rows", str(rows))
        self.catalog.set_meta("vector_crc", str(crc))

    def assign(self, assignments: Iterable[tuple[int, str, bytes]]) -> None:
        """(slot, key, embed_hash): only rows whose text is still the one embedded get the slot."""
        self.db.executemany(
            "UPDATE docs SET slot = ? WHERE key = ? AND embed_hash = ?", assignments
        )

    def clear(self) -> None:
        self.db.execute("UPDATE docs SET slot = NULL")

    def pending(self) -> list[tuple[str, bytes, str]]:
        """(key, embed_hash, text to embed) of documents that have no vector yet."""
        rows = self.db.execute(
            "SELECT key, embed_hash, kind, text, heading, title FROM docs WHERE slot IS NULL ORDER BY key"
        )
        out = []
        for key, ehash, kind, text, heading, title in rows:
            doc = Document(key=key, kind=kind, text=text, file="", heading=heading, title=title)
            out.append((key, ehash, doc.search_text))
        return out

    def pending_keys(self) -> list[tuple[str, bytes]]:
        """(key, embed_hash) of documents that have no vector yet (`pending` without the texts)."""
        return self.db.execute("SELECT key, embed_hash FROM docs WHERE slot IS NULL ORDER BY key").fetchall()

    def pending_count(self) -> int:
        return self.db.execute("SELECT count(*) FROM docs WHERE slot IS NULL").fetchone()[0]

    def keys_of(self, slots: Iterable[int]) -> dict[int, str]:
        return {slot: key for slot, key in _rows(self.db, "slot, key", "slot", list(slots))}

    def where(self, sql: str, params: list, keys: Iterable[str] | None = None) -> list[int]:
        """Vector slots of documents matching `sql` (and, if given, whose key is among `keys`)."""
        query = f"SELECT slot FROM docs WHERE slot IS NOT NULL AND {sql}"
        if keys is None:
            return [r[0] for r in self.db.execute(query, params)]
        keys = list(keys)
        found: list[int] = []
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            rows = self.db.execute(f"{query} AND key IN ({','.join('?' * len(chunk))})", [*params, *chunk])
            found += [r[0] for r in rows]
        return found


class PurgeRecord:
    """The purges a generation knows of: those it was built knowing (it never held their texts) and
    those it learnt of later, whose texts it may still hold until it is replaced."""

    def __init__(self, catalog: Catalog):
        self.catalog = catalog
        self.db = catalog.db

    def clean_of(self) -> set[str]:
        """The purged fact ids this generation was built knowing: it never held their texts."""
        return set(json.loads(self.catalog.get_meta("clean_of") or "[]"))

    def set_clean_of(self, ids: set[str]) -> None:
        self.catalog.set_meta("clean_of", json.dumps(sorted(ids)))

    def keep_dropped(self, keys: Iterable[str]) -> None:
        """Remember documents about to be removed for a tombstone: Tantivy keeps a deleted
        document's words in its segments, so a purge of one later must still rebuild."""
        for key, embed_hash in list(_rows(self.db, "key, embed_hash", "key", list(keys))):
            self.db.execute("INSERT OR REPLACE INTO dropped (key, embed_hash) VALUES (?, ?)", (key, embed_hash))

    def note(self, ids: set[str]) -> None:
        """Purges this generation learnt of after it was built. Those it held (as a document, or
        as one dropped when it was forgotten) leave their texts in it until it is replaced: their
        embedding cache keys are noted for that (`to_clear`)."""
        held = [bytes(h) for _key, h in _rows(self.db, "key, embed_hash", "key", sorted(ids))]
        held += [bytes(h) for (h,) in _rows(self.db, "embed_hash", "key", sorted(ids), table="dropped")]
        if held:
            todo = set(json.loads(self.catalog.get_meta("purge_todo") or "[]")) | {h.hex() for h in held}
            self.catalog.set_meta("purge_todo", json.dumps(sorted(todo)))
        self.set_clean_of(self.clean_of() | ids)

    def to_clear(self) -> list[bytes] | None:
        """None when this generation holds no purged text; else the embedding cache keys of the
        purged texts it held."""
        raw = self.catalog.get_meta("purge_todo")
        return None if raw is None else [bytes.fromhex(h) for h in json.loads(raw)]
