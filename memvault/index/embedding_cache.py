"""The embedding cache: vectors by (model identity, content hash) in sqlite, so a rebuild never
embeds unchanged text again; a damaged or unknown cache file is started again empty.

Vectors are kept as float16: a cosine read back from one moves by about 1e-4, and the cache is
the second copy of every vector (the index holds the float32 one it scores), so halving it is
what keeps the derived data near twice the raw vectors at a million facts (docs/scale.md)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from memvault.errors import VaultBusy
from memvault.index.embedder import DIMENSIONS, one_line

if TYPE_CHECKING:
    import numpy as np

# sqlite's primary result codes for a file that is not (or no longer) a sound database. Anything
# else (locked, read-only, disk full) is not damage and is raised as it is.
_DAMAGE_CODES = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
BUSY_TIMEOUT = 30  # seconds another process may hold the cache's write lock (a layout move: ~20 s at 1M)


def is_damage(exc: sqlite3.Error) -> bool:
    """Does this sqlite error say the file is damaged (garbage, truncated, malformed pages)?"""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in _DAMAGE_CODES
    text = str(exc)
    return "not a database" in text or "malformed" in text


class EmbeddingCache:
    """Vectors by (model identity, content hash), in sqlite under .memvault/cache/.

    A rebuild looks texts up here first, so `reindex --clear` never re-embeds unchanged text.
    It is only a cache: a damaged file (garbage, truncated, malformed pages) is deleted and started
    again empty, with one notice, and its vectors are recomputed when next needed; a vector read
    back with the wrong length is treated as missing.
    """

    def __init__(self, path: Path, model_identity: str, notify: Callable[[str], None] | None = None):
        self.path = path
        self.model = model_identity
        self.notify = notify
        self._db = self._open()

    def _open(self) -> sqlite3.Connection:
        parent = self.path.parent
        if parent.is_symlink() or (parent.exists() and not parent.is_dir()):
            self._discard(f"{parent.name} is not a directory")
        if self.path.is_dir() and not self.path.is_symlink():
            self._discard(f"{self.path.name} is a directory")
        parent.mkdir(parents=True, exist_ok=True)
        try:
            return self._connect()
        except sqlite3.DatabaseError as exc:
            if _is_locked(exc):  # (before the database errors that are damage)
                raise VaultBusy("the embedding cache stayed busy for 30 s (another memvault moving it to its "
                                "new layout, once after an upgrade, or rebuilding); nothing was changed: try again"
                                ) from None
            if not is_damage(exc):
                raise
            self._discard(one_line(exc))
            return self._connect()
        except UnknownLayout as exc:
            self._discard(str(exc), "could not be kept" if isinstance(exc, NoRoomToMove) else "was damaged")
            return self._connect()

    def _connect(self) -> sqlite3.Connection:
        # Not tied to the opening thread (as the catalog's is not): a Vault kept open is called
        # from whichever thread its program has free (asyncio.to_thread), one call at a time.
        db = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            if _table_sql(db) != VECTORS_TABLE:
                _create_vectors_table(db, self.notify)
            elif not _has_models_table(db):
                # Lost by a hand: the numbers its vectors are filed under name no model any more (a new
                # one could get a number an old model had), so they go, as a damaged cache would.
                db.execute("DELETE FROM vectors")
                db.execute(MODELS_TABLE)
        except BaseException:
            db.close()
            raise
        return db

    def _discard(self, problem: str, what: str = "was damaged") -> None:
        """Delete the damaged cache (and its sqlite side files) and say so once."""
        delete_cache(self.path)
        if self.notify is not None:
            self.notify(f"embedding cache {what} ({problem}); started it again empty "
                        "(vectors it held are recomputed when next needed)")

    def _reset(self, exc: sqlite3.DatabaseError) -> None:
        """A query found damage the open did not (a malformed page): start the cache again."""
        with contextlib.suppress(sqlite3.Error):
            self._db.close()
        self._discard(one_line(exc))
        self._db = self._connect()

    def get_many(self, hashes: Iterable[bytes]) -> dict[bytes, bytes]:
        """The float32 bytes of the vectors cached for these hashes (the others are missing)."""
        found, matrix = self.get_matrix(hashes)
        return {h: matrix[i].tobytes() for i, h in enumerate(found)}

    def get_matrix(self, hashes: Iterable[bytes]) -> tuple[list[bytes], np.ndarray]:
        """The hashes among these whose vectors are cached, and those vectors as float32 rows."""
        import numpy as np

        found: dict[bytes, bytes] = {}
        hashes = list(hashes)
        try:
            model = self._model_id(create=False)
            for start in range(0, len(hashes) if model is not None else 0, 500):
                chunk = hashes[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT hash, vector FROM vectors WHERE model = ? AND hash IN ({marks})",
                    [model, *chunk],
                )
                found.update(rows)
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                raise
            self._reset(exc)
            found = {}
        # A vector of the wrong length is not one this model made: recompute it.
        sound = [h for h, v in found.items() if isinstance(v, bytes) and len(v) == STORED_BYTES]
        stored = np.frombuffer(b"".join(found[h] for h in sound), dtype=np.float16)
        return sound, stored.astype(np.float32).reshape(len(sound), DIMENSIONS)

    def put_many(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        """Cache these (hash, float32 vector bytes) pairs."""
        items = list(items)
        try:
            self._put(items)
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                raise
            self._reset(exc)
            self._put(items)

    def _put(self, items: list[tuple[bytes, bytes]]) -> None:
        # IMMEDIATE: the model's number is read before the rows are written, and a read that turned
        # into a write would fail at once (not wait) if another process wrote in between.
        self._db.execute("BEGIN IMMEDIATE")
        try:
            model = self._model_id(create=True)
            self._db.executemany(
                "INSERT OR REPLACE INTO vectors (model, hash, vector) VALUES (?, ?, ?)",
                ((model, h, narrowed(v)) for h, v in items),
            )
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise
        # A big batch leaves a WAL as large as the data; fold it back so the cache is stored once.
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def forget(self, hashes: Iterable[bytes]) -> int:
        """Delete the vectors of these texts, for every model, and leave no trace of them in the file
        (VACUUM rewrites it without the freed pages, and the WAL is folded back and emptied)."""
        hashes = list(hashes)
        removed = 0
        for start in range(0, len(hashes), 500):
            chunk = hashes[start : start + 500]
            marks = ",".join("?" * len(chunk))
            removed += self._db.execute(f"DELETE FROM vectors WHERE hash IN ({marks})", chunk).rowcount
        self._db.execute("VACUUM")
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return removed

    def _model_id(self, create: bool) -> int | None:
        """The number this cache files the model's vectors under (made on the first write)."""
        row = self._db.execute("SELECT id FROM models WHERE name = ?", (self.model,)).fetchone()
        if row is None and create:
            return self._db.execute("INSERT INTO models (name) VALUES (?)", (self.model,)).lastrowid
        return row[0] if row else None

    def close(self) -> None:
        self._db.close()


STORED_BYTES = DIMENSIONS * 2  # float16


def as_cached(matrix: np.ndarray) -> np.ndarray:
    """Float32 rows as the cache gives them back: rounded to float16, then unit length again (a
    cosine moves by about 1e-4). The index stores them so, fresh from the model or from the cache."""
    import numpy as np

    rounded = np.asarray(matrix, dtype=np.float16).astype(np.float32)
    with np.errstate(all="ignore"):
        norms = np.sqrt(np.einsum("ij,ij->i", rounded, rounded, dtype=np.float64))
    # (A text with nothing to embed keeps the zero vector; a damaged row is left as it is.)
    usable = np.isfinite(norms) & (norms > 0)
    rounded[usable] /= norms[usable, None].astype(np.float32)
    return rounded


def narrowed(vector: bytes) -> bytes:
    """float32 bytes as the float16 bytes stored."""
    import numpy as np

    with np.errstate(over="ignore"):  # a damaged row (values past float16's range) is kept as it is, quietly
        return np.frombuffer(vector, dtype=np.float32).astype(np.float16).tobytes()




# Rows stay in rowid order and only the small (model, hash) key is indexed. The first layout kept
# each 1.5 KB vector inside a WITHOUT ROWID key tree, where rows land at random hashes: storing
# 100k vectors took 8.8 s instead of 3.5 s and the file grew to 469 MB instead of 215 MB. The
# second kept float32 vectors and each row's model name: two 1.6 KB rows filled a 4 KB page, 2 KB
# a vector. A row of this one (a model number, the hash, 768 bytes) is 0.8 KB, five to a page.
VECTORS_TABLE = "CREATE TABLE vectors (id INTEGER PRIMARY KEY, model INTEGER NOT NULL, hash BLOB NOT NULL, vector BLOB)"
VECTORS_KEY = "CREATE UNIQUE INDEX IF NOT EXISTS vectors_key ON vectors (model, hash)"
MODELS_TABLE = "CREATE TABLE IF NOT EXISTS models (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)"

# Both earlier layouts: the model's name in each row, float32 vectors.
EARLIER_LAYOUT_COLUMNS = (["model", "hash", "vector"], ["id", "model", "hash", "vector"])
EARLIER_VECTOR_BYTES = DIMENSIONS * 4


class UnknownLayout(Exception):
    """The cache file is sound sqlite, but its `vectors` table is not one memvault wrote."""


class NoRoomToMove(UnknownLayout):
    """A cache of the first layout, and no room on the disk to copy it into the current one."""


def _table_sql(db: sqlite3.Connection) -> str | None:
    row = db.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'vectors'").fetchone()
    return row[0] if row else None


def _has_models_table(db: sqlite3.Connection) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'models'").fetchone() is not None


def _unknown_layout(db: sqlite3.Connection, table_sql: str) -> str | None:
    """What is wrong with a `vectors` table that is neither the current layout nor the first."""
    if table_sql == VECTORS_TABLE:
        return None
    columns = [row[1] for row in db.execute("PRAGMA table_info(vectors)")]
    if columns in EARLIER_LAYOUT_COLUMNS:
        return None
    return f"its vectors table has columns {', '.join(columns) or 'none'}"


def _is_locked(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return (code & 0xFF) == sqlite3.SQLITE_BUSY if code is not None else "locked" in str(exc)


def _create_vectors_table(db: sqlite3.Connection, notify: Callable[[str], None] | None = None) -> None:
    """Create the tables, or move a cache of an earlier layout into them (once; its vectors are kept)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        existing = _table_sql(db)  # again, now that no other process can be doing the same
        if existing == VECTORS_TABLE:
            db.execute("COMMIT")
            return
        if existing is not None:
            unknown = _unknown_layout(db, existing)
            if unknown:
                raise UnknownLayout(unknown)
            if notify is not None:  # (about 2 s per 100k vectors)
                notify("moving the embedding cache to its new layout (once): float16 vectors, half the room")
            db.execute("ALTER TABLE vectors RENAME TO vectors_before")
        db.execute(MODELS_TABLE)
        db.execute(VECTORS_TABLE)
        db.execute(VECTORS_KEY)
        if existing is not None:
            _move_earlier_rows(db)
            db.execute("DROP TABLE vectors_before")
        db.execute("COMMIT")
    except BaseException as exc:
        if db.in_transaction:
            db.execute("ROLLBACK")
        if existing is not None and getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
            # It is only a cache: dropping it frees the room, rather than every search failing here.
            raise NoRoomToMove("no room on the disk to move it to the current layout") from None
        raise
    if existing is not None:
        with contextlib.suppress(sqlite3.OperationalError):  # no room to compact: the file stays larger
            db.execute("VACUUM")  # give back the old layout's pages
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _move_earlier_rows(db: sqlite3.Connection) -> None:
    """Copy vectors_before's rows into the current tables, as float16 under model numbers. (Rows
    without a model or hash cannot be looked up, nor a vector of another length used: left behind.)"""
    db.execute("INSERT OR IGNORE INTO models (name) SELECT DISTINCT model FROM vectors_before WHERE model IS NOT NULL")
    rows = db.execute("SELECT m.id, b.hash, b.vector FROM vectors_before b JOIN models m ON m.name = b.model"
                      " WHERE b.hash IS NOT NULL AND length(b.vector) = ?", (EARLIER_VECTOR_BYTES,))
    while chunk := rows.fetchmany(10_000):
        db.executemany("INSERT OR REPLACE INTO vectors (model, hash, vector) VALUES (?, ?, ?)",
                       ((model, h, narrowed(v)) for model, h, v in chunk))


def delete_cache(path: Path) -> None:
    """Remove the embedding cache file and its sqlite side files (or whatever is in their way)."""
    import shutil

    parent = path.parent
    if parent.is_symlink() or (parent.exists() and not parent.is_dir()):
        parent.unlink()
    elif path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


def cache_problem(path: Path, whole: bool = True) -> str | None:
    """What is wrong with the embedding cache file, or None (also when there is none yet).

    With `whole`, reads all of it (sqlite's quick_check, then every vector's length), else only its
    layout; changes nothing: `doctor` reports with it. An error that does not mean damage (locked,
    no access) is no answer, and reported as None.
    """
    if not path.exists() and not path.is_symlink():
        parent = path.parent
        return f"{parent.name} is not a directory" if parent.exists() and not parent.is_dir() else None
    if path.is_dir():
        return f"{path.name} is a directory"
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    except sqlite3.Error as exc:
        return one_line(exc) if is_damage(exc) else None
    try:
        said = [row[0] for row in db.execute("PRAGMA quick_check")] if whole else ["ok"]
        if said != ["ok"]:
            return f"sqlite quick_check: {said[0]}"
        existing = _table_sql(db)
        if existing is not None:
            unknown = _unknown_layout(db, existing)
            if unknown:
                return unknown
            if existing == VECTORS_TABLE and not _has_models_table(db):
                return "its models table is missing"
            if not whole:
                return None
            wrong = db.execute("SELECT count(*) FROM vectors WHERE length(vector) != ?",
                               (STORED_BYTES if existing == VECTORS_TABLE else EARLIER_VECTOR_BYTES,)).fetchone()[0]
            if wrong:
                return f"{wrong} cached vector(s) have the wrong length"
    except sqlite3.DatabaseError as exc:
        # Locked, or unreadable here (a read-only vault without sqlite's side files): not damage.
        return one_line(exc) if is_damage(exc) else None
    finally:
        db.close()
    return None
