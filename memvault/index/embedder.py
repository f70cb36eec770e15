"""The embedding model (fastembed, loaded lazily and only from local files) and its vector cache."""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from memvault.base.config import DEFAULT_EMBED_MODEL
from memvault.index.models import EmbeddingModel, embedding_model, model_file

if TYPE_CHECKING:
    import numpy as np

DIMENSIONS = 384
BATCH_SIZE = 256
# The model reads a text's first 256 tokens, and a token spans at most about a hundred characters
# (a longer word is one unknown token), so nothing past this many characters changes a vector. The
# tokenizer, though, would split all of it first: a 60 MB fact (a log hand-edited or pulled from
# a remote; `add` takes 1 MiB) cost 4.7 GB of memory before it was cut here.
MODEL_READS_CHARS = 32_768


class ModelUnavailable(Exception):
    """The embedding model could not be loaded from local files; search falls back to lexical."""


@dataclass(frozen=True)
class ModelSpec:
    """Which model embeds the vault: its fastembed name and, for offline use, a local directory."""

    name: str = DEFAULT_EMBED_MODEL
    path: str | None = None

    @property
    def profile(self) -> EmbeddingModel:
        return embedding_model(self.name)

    @property
    def onnx_file(self) -> Path | None:
        """The ONNX file of the local copy, when the model is read from a path."""
        return model_file(self.path, self.profile.file) if self.path else None

    @property
    def identity(self) -> str:
        """A key that changes when the vectors would change (name, and which ONNX file at the path).

        Two builds of one model (fp32 and int8) share a name but not their vectors, so the
        size of the local model file is part of the key; reading it costs one stat.
        """
        if not self.path:
            return self.name
        try:
            size = self.onnx_file.stat().st_size  # type: ignore[union-attr]
        except OSError:
            size = 0
        return f"{self.name}@{size}"


def model_cache_dir() -> Path:
    """Where downloaded models live: FASTEMBED_CACHE_PATH, else memvault's user cache directory."""
    configured = os.environ.get("FASTEMBED_CACHE_PATH")
    if configured:
        return Path(configured)
    from platformdirs import user_cache_path

    return user_cache_path("memvault", appauthor=False) / "models"


def download_model(spec: ModelSpec) -> str:
    """Fetch the model from the hub into the model cache, once; returns where it is.

    Searches never download (offline they would hang on retries); this is the one explicit step.
    """
    if spec.path:
        return spec.path

    def make(target: str) -> None:
        from fastembed import TextEmbedding

        TextEmbedding(spec.name, cache_dir=target)

    return fetch_into_cache(make, f"embedding model {spec.name}", "MEMVAULT_EMBED_MODEL_PATH")


def fetch_into_cache(make: Callable[[str], None], what: str, variable: str) -> str:
    """Run `make(cache folder)`, a fastembed constructor that downloads, with the hub allowed."""
    target = model_cache_dir()
    target.mkdir(parents=True, exist_ok=True)
    os.environ.pop("HF_HUB_OFFLINE", None)
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")  # (see offline_environment)
    try:
        from loguru import logger

        logger.disable("fastembed")  # its retry chatter; the caller reports the outcome
        make(str(target))
    except Exception as exc:
        raise ModelUnavailable(f"could not download {what}: {_one_line(exc)}; without the hub, set {variable} "
                               "to a local copy (an ONNX model directory)") from exc
    finally:
        os.environ["HF_HUB_OFFLINE"] = "1"
    return str(target)


def offline_environment() -> None:
    """Settings for loading a model: local files only, and no telemetry (unless the user set them)."""
    # The hub would retry for tens of seconds with no network; memvault only uses local files.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    # onnxruntime's import keeps a telemetry device id under ~/.cache/Microsoft, and where it
    # cannot (a read-only home) prints a coloured warning on stderr in every process.
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")


def one_line(exc: BaseException) -> str:
    """An exception's first line, without a closing stop (callers go on with "; ..." or ": ...")."""
    return _one_line(exc)


def content_hash(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


# Loaded models by (name, path, threads): a process searching several vaults loads each model once.
_loaded: dict[tuple[str, str | None, int | None], object] = {}


class Embedder:
    """Turns texts into unit-length float32 vectors; the model loads on first use, never from the hub."""

    def __init__(self, spec: ModelSpec, threads: int | None = None):
        self.spec = spec
        self.threads = threads
        self._model = None
        self._error: str | None = None

    @property
    def loaded(self) -> bool:
        """Whether `load` returns at once (this model is in memory already)."""
        return self._model is not None or (self.spec.name, self.spec.path, self.threads) in _loaded

    def load(self):
        if self._model is not None:
            return self._model
        if self._error is not None:
            raise ModelUnavailable(self._error)
        shared = _loaded.get((self.spec.name, self.spec.path, self.threads))
        if shared is not None:
            self._model = shared
            return shared
        offline_environment()
        try:
            from fastembed import TextEmbedding
            from loguru import logger

            # fastembed logs its own failures on stderr; memvault prints one notice instead.
            logger.disable("fastembed")
            kwargs: dict = {"local_files_only": True}
            onnx = self.spec.onnx_file  # set exactly when the model is read from a path
            if onnx is not None:
                if not onnx.is_file():
                    raise ModelUnavailable(
                        f"cannot load embedding model {self.spec.name}: no {onnx.name} in {self.spec.path}")
                kwargs["specific_model_path"] = self.spec.path
            else:
                kwargs["cache_dir"] = str(model_cache_dir())
            model = TextEmbedding(self.spec.name, threads=self.threads, **kwargs)
            width = _dimensions(model)
            if width != DIMENSIONS:
                raise ModelUnavailable(f"cannot use embedding model {self.spec.name}: it makes {width}-dimension "
                                       f"vectors and the index stores {DIMENSIONS}")
            self._model = model
            _loaded[(self.spec.name, self.spec.path, self.threads)] = self._model
        except ModelUnavailable as exc:
            self._error = str(exc)
            raise
        except Exception as exc:  # fastembed raises ValueError/OSError/onnx errors alike
            hint = "" if self.spec.path else (
                " (run `memvault reindex --download-model` once, or set MEMVAULT_EMBED_MODEL_PATH to a local"
                " ONNX model)"
            )
            detail = _one_line(exc)
            if not self.spec.path and "from any source" in detail:  # fastembed's words for "not downloaded"
                detail = f"it is not in the model cache ({model_cache_dir()})"
            self._error = f"cannot load embedding model {self.spec.name}{hint}: {detail}"
            raise ModelUnavailable(self._error) from exc
        return self._model

    def embed(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Embed texts in batches; `progress(n)` is called after each batch with its size."""
        import numpy as np

        model = self.load()
        out = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
        for start in range(0, len(texts), BATCH_SIZE):
            chunk = [text[:MODEL_READS_CHARS] for text in texts[start : start + BATCH_SIZE]]
            vectors = list(model.embed(chunk, batch_size=BATCH_SIZE))
            out[start : start + len(chunk)] = np.asarray(vectors, dtype=np.float32)
            if progress:
                progress(len(chunk))
        return _normalize(out)

    def embed_ahead(self, batches: Sequence[Sequence[str]],
                    progress: Callable[[int], None] | None = None) -> Generator[np.ndarray, None, None]:
        """Each batch's vectors in turn, the next batch embedding on a worker thread meanwhile.

        The model's run releases the GIL, so what the caller does with a batch (writing it to the
        cache) overlaps the model instead of leaving the cores idle. An interrupted caller gets
        control back at once; the batch in flight finishes in the background before the process ends.
        """
        if len(batches) <= 1:
            yield from (self.embed(batch, progress) for batch in batches)
            return
        import threading
        from concurrent.futures import ThreadPoolExecutor

        given_up = threading.Event()

        def report(count: int) -> None:
            # Not once the caller has stopped: a notice after its error line would read as the last word.
            if progress is not None and not given_up.is_set():
                progress(count)

        pool = ThreadPoolExecutor(1, thread_name_prefix="memvault-embed")
        try:
            future = pool.submit(self.embed, batches[0], report)
            for following in [*batches[1:], None]:
                vectors = future.result()
                if following is not None:
                    future = pool.submit(self.embed, following, report)
                yield vectors
        finally:
            given_up.set()
            pool.shutdown(wait=False, cancel_futures=True)

    def embed_query(self, text: str) -> np.ndarray:
        import numpy as np

        # A model trained with an instruction before queries (bge) needs it to place them well.
        query = self.spec.profile.query_prefix + text[:MODEL_READS_CHARS]
        vector = next(iter(self.load().query_embed([query])))
        return _normalize(np.asarray(vector, dtype=np.float32)[None, :])[0]


def _dimensions(model) -> int:
    """The width of the model's vectors, from fastembed's description of it (0 when unknown)."""
    try:
        return int(model.embedding_size)
    except (ValueError, AttributeError, KeyError):  # a custom model fastembed describes without a size
        return DIMENSIONS


def _normalize(matrix: np.ndarray) -> np.ndarray:
    import numpy as np

    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    # The caller goes on with its own "; ..." or ": ...": a trailing stop would read ".;".
    return text[0].rstrip(".") if text else type(exc).__name__


# sqlite's primary result codes for a file that is not (or no longer) a sound database. Anything
# else (locked, read-only, disk full) is not damage and is raised as it is.
_DAMAGE_CODES = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


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
            if not is_damage(exc):
                raise
            self._discard(_one_line(exc))
            return self._connect()
        except UnknownLayout as exc:
            self._discard(str(exc), "could not be kept" if isinstance(exc, NoRoomToMove) else "was damaged")
            return self._connect()

    def _connect(self) -> sqlite3.Connection:
        # Not tied to the opening thread (as the catalog's is not): a Vault kept open is called
        # from whichever thread its program has free (asyncio.to_thread), one call at a time.
        db = sqlite3.connect(str(self.path), timeout=30, isolation_level=None, check_same_thread=False)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            if _table_sql(db) != VECTORS_TABLE:
                _create_vectors_table(db)
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
        self._discard(_one_line(exc))
        self._db = self._connect()

    def get_many(self, hashes: Iterable[bytes]) -> dict[bytes, bytes]:
        found: dict[bytes, bytes] = {}
        hashes = list(hashes)
        try:
            for start in range(0, len(hashes), 500):
                chunk = hashes[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT hash, vector FROM vectors WHERE model = ? AND hash IN ({marks})",
                    [self.model, *chunk],
                )
                found.update(rows)
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                raise
            self._reset(exc)
            return {}
        # A vector of the wrong length is not one this model made: recompute it.
        return {h: v for h, v in found.items() if isinstance(v, bytes) and len(v) == DIMENSIONS * 4}

    def put_many(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        items = list(items)
        try:
            self._put(items)
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                raise
            self._reset(exc)
            self._put(items)

    def _put(self, items: list[tuple[bytes, bytes]]) -> None:
        self._db.execute("BEGIN")
        try:
            self._db.executemany(
                "INSERT OR REPLACE INTO vectors (model, hash, vector) VALUES (?, ?, ?)",
                ((self.model, h, v) for h, v in items),
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

    def close(self) -> None:
        self._db.close()


# Rows stay in rowid order and only the small (model, hash) key is indexed. The first layout kept
# each 1.5 KB vector inside a WITHOUT ROWID key tree, where rows land at random hashes: storing
# 100k vectors took 8.8 s instead of 3.5 s and the file grew to 469 MB instead of 215 MB.
VECTORS_TABLE = "CREATE TABLE vectors (id INTEGER PRIMARY KEY, model TEXT NOT NULL, hash BLOB NOT NULL, vector BLOB)"
VECTORS_KEY = "CREATE UNIQUE INDEX IF NOT EXISTS vectors_key ON vectors (model, hash)"


FIRST_LAYOUT_COLUMNS = ["model", "hash", "vector"]


class UnknownLayout(Exception):
    """The cache file is sound sqlite, but its `vectors` table is not one memvault wrote."""


class NoRoomToMove(UnknownLayout):
    """A cache of the first layout, and no room on the disk to copy it into the current one."""


def _table_sql(db: sqlite3.Connection) -> str | None:
    row = db.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'vectors'").fetchone()
    return row[0] if row else None


def _unknown_layout(db: sqlite3.Connection, table_sql: str) -> str | None:
    """What is wrong with a `vectors` table that is neither the current layout nor the first."""
    if table_sql == VECTORS_TABLE:
        return None
    columns = [row[1] for row in db.execute("PRAGMA table_info(vectors)")]
    return None if columns == FIRST_LAYOUT_COLUMNS else f"its vectors table has columns {', '.join(columns) or 'none'}"


def _create_vectors_table(db: sqlite3.Connection) -> None:
    """Create the table, or move a cache of the first layout into it (once; its vectors are kept)."""
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
            db.execute("ALTER TABLE vectors RENAME TO vectors_before")
        db.execute(VECTORS_TABLE)
        db.execute(VECTORS_KEY)
        if existing is not None:
            # (Rows without a model or hash cannot be looked up: they are left behind.)
            db.execute("INSERT OR REPLACE INTO vectors (model, hash, vector) SELECT model, hash, vector"
                       " FROM vectors_before WHERE model IS NOT NULL AND hash IS NOT NULL")
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


def cache_problem(path: Path) -> str | None:
    """What is wrong with the embedding cache file, or None (also when there is none yet).

    Reads the whole file (sqlite's quick_check) and changes nothing: `doctor` reports with it. An
    error that does not mean damage (locked, no access) is no answer, and reported as None.
    """
    if not path.exists() and not path.is_symlink():
        parent = path.parent
        return f"{parent.name} is not a directory" if parent.exists() and not parent.is_dir() else None
    if path.is_dir():
        return f"{path.name} is a directory"
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    except sqlite3.Error as exc:
        return _one_line(exc) if is_damage(exc) else None
    try:
        said = [row[0] for row in db.execute("PRAGMA quick_check")]
        if said != ["ok"]:
            return f"sqlite quick_check: {said[0]}"
        existing = _table_sql(db)
        if existing is not None:
            unknown = _unknown_layout(db, existing)
            if unknown:
                return unknown
            wrong = db.execute("SELECT count(*) FROM vectors WHERE length(vector) != ?",
                               (DIMENSIONS * 4,)).fetchone()[0]
            if wrong:
                return f"{wrong} cached vector(s) have the wrong length"
    except sqlite3.DatabaseError as exc:
        # Locked, or unreadable here (a read-only vault without sqlite's side files): not damage.
        return _one_line(exc) if is_damage(exc) else None
    finally:
        db.close()
    return None
