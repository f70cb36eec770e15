"""Keeping the index a faithful projection of the vault files.

Layout under `.memvault/index/`: a `current` file names the live generation directory, which holds
`catalog.sqlite` (documents, manifest, meta), `lexical/` (Tantivy) and `vectors-N.f32`. Searches
and `reindex` first bring the live generation up to date with the files (`refresh`): `add` never
touches the index, yet its fact is searchable by the next search. A full rebuild fills a new
generation aside and swaps the `current` pointer, so searches keep answering meanwhile.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING

from memvault.errors import VaultBusy
from memvault.formats.layout import INDEX_DIR, INDEX_LOCK, STATE_EMBEDDING_CACHE, STATE_INDEX, STATE_LOCKS
from memvault.index import location, pending
from memvault.index.catalog import SCHEMA_CHANGED
from memvault.index.corpus import Corpus
from memvault.index.embedder import Embedder, ModelSpec, ModelUnavailable
from memvault.index.embedding_cache import EmbeddingCache
from memvault.index.generation import (
    BUILDING,
    POINTER,
    Generation,
    IndexDamaged,
    builder_alive,
    clean_of_generation,
    lexical_damage,
    pid_of,
)
from memvault.index.refresh import Notify, Progress, RefreshReport, Scan, apply, scan_files
from memvault.index.status import index_counts
from memvault.index.watch import FolderWatch, open_watch
from memvault.storage.owner import Owner

if TYPE_CHECKING:
    from filelock import FileLock

    from memvault.index.rerank import Reranker

NOT_A_DIRECTORY = f"{INDEX_DIR} is not a directory"
# Long enough for another process's incremental refresh, short enough that nobody hangs forever.
LOCK_TIMEOUT = 120.0
LOADING_MODEL = "loading the embedding model"  # a stage `progress` hears of, between reading and embedding


class SearchIndex:
    """The vault's index: open, refresh from files, embed pending documents, rebuild, status."""

    def __init__(self, state: Path, corpus: Corpus, model: ModelSpec, *,
                 notify: Notify, progress: Progress | None = None, cache_path: Path | None = None):
        """`state`: the folder of the index, its cache and its lock (see memvault.index.location);
        `cache_path`: another index's embedding cache to share (an as-of index borrows its vault's)."""
        self.state = state
        self.root = state / STATE_INDEX
        self.locks = state / STATE_LOCKS
        self.cache_path = cache_path or state / STATE_EMBEDDING_CACHE
        self.corpus = corpus
        self.model = model
        self.notify = notify
        self.progress = progress
        self.embedder = Embedder(model)
        # Queries and small catch-ups embed on one thread: onnxruntime's idle pool threads keep
        # spinning after a run and slowed the vector scan that follows from 7 to 13 ms at 100k rows.
        self.query_embedder = Embedder(model, threads=1)
        self._cache: EmbeddingCache | None = None
        self.generation: Generation | None = None
        # From the second refresh on, folder watches tell whether a file may have changed; the
        # generation whose manifest matched the files at the last scan, with nothing changed since.
        self._refreshes = 0
        self._watch: FolderWatch | None = None
        self._matched: str | None = None
        self._model_notice_given = False
        self._lock: FileLock | None = None
        self.reranker: Reranker | None = None  # search's rerank stage (memvault.index.rerank), made on first use

    # -- locking ------------------------------------------------------------------------------
    @contextmanager
    def lock(self) -> Iterator[None]:
        """Tantivy allows one writer: every index write, from any process, holds this lock."""
        from filelock import FileLock, Timeout

        if self._lock is None:
            self.locks.mkdir(parents=True, exist_ok=True)
            # One instance per index: FileLock counts nested acquisitions, so holders may nest.
            self._lock = FileLock(str(self.locks / INDEX_LOCK))
        lock = self._lock
        try:
            lock.acquire(timeout=LOCK_TIMEOUT)
        except Timeout:
            raise VaultBusy(f"search index busy: another process held its lock for over {LOCK_TIMEOUT:g} s") from None
        try:
            yield
        finally:
            lock.release()

    @property
    def cache(self) -> EmbeddingCache:
        if self._cache is None:
            self._cache = EmbeddingCache(self.cache_path, self.model.identity, notify=self.notify)
        return self._cache

    # -- opening ------------------------------------------------------------------------------
    def exists(self) -> bool:
        return (self.root / POINTER).exists()

    def open(self, embed: bool = True) -> Generation:
        """The live generation, rebuilt (with a notice) when it is missing or damaged.

        `current` is re-read on every call (one small read): another process's `reindex --clear`
        swaps it, and two swaps later the generation this process had open is deleted.
        """
        problem = self.open_live()
        if problem is None:
            return self.generation  # type: ignore[return-value]
        with self.lock():
            # One process rebuilds; the others wait here and then find its work.
            problem = self.open_live()
            if problem is None:
                return self.generation  # type: ignore[return-value]
            if problem == NOT_A_DIRECTORY:
                pass  # rebuild() says so when it clears the path
            elif problem.startswith(SCHEMA_CHANGED):
                # An upgrade, not damage: the index is rebuilt in the new format once.
                self.notify(f"search index {problem}; rebuilding it from the vault files")
            elif problem != "missing":
                self.notify(f"search index is damaged ({problem}); rebuilding it from the vault files")
            elif self.corpus.files():
                copy = location.is_users_copy(self.state)
                where = f" in {self.state} (this user cannot write the vault)" if copy else ""
                self.notify(f"building the search index from the vault files{where} (once: later searches "
                            "keep it up to date)")
            self.rebuild(embed=embed)
        assert self.generation is not None
        return self.generation

    def _live_name(self) -> str | None:
        try:
            return (self.root / POINTER).read_text(encoding="utf-8").strip()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except (UnicodeDecodeError, IsADirectoryError):
            return "?"  # garbage or a directory where the pointer should be: names no generation

    def _not_a_directory(self) -> bool:
        """Is something other than a directory where the index should be (a file, a dangling link)?"""
        return not self.root.is_dir() and (self.root.exists() or self.root.is_symlink())

    def open_live(self) -> str | None:
        """Open the generation `current` names (kept when already open); None when that worked, else what is wrong."""
        if self._not_a_directory():
            return NOT_A_DIRECTORY
        name = self._live_name()
        if name is None:
            return "missing"
        if not name.startswith("gen-"):
            return f"{POINTER} names no generation ({name[:40]!r})"
        if self.generation is not None and self.generation.path.name == name:
            return None
        try:
            generation = Generation(self.root / name)
            generation.check()
        except IndexDamaged as exc:
            return str(exc)
        old, self.generation = self.generation, generation
        if old is not None:
            old.close()
        return None

    def is_live(self, generation: Generation) -> bool:
        """False once another process swapped in a newer generation (this one may soon be deleted)."""
        return self._live_name() == generation.path.name

    # -- refreshing ---------------------------------------------------------------------------
    def scan(self, generation: Generation) -> Scan:
        """Files whose stat differs from the manifest; costs one stat per file, no reads."""
        return scan_files(self.corpus, generation)

    def refresh(self, embed: bool = True) -> RefreshReport:
        """Bring the index up to date with the files; then embed what has no vector yet."""
        self.clean_leftovers()
        generation = self.open(embed=embed)
        try:
            generation.load_state()
        except IndexDamaged as exc:
            # Damaged while this process had it open (an MCP server): what open() does for a new one.
            generation = self._rebuild_damaged(str(exc), embed)
        report = RefreshReport()
        if not self._unchanged(generation) and self.scan(generation):
            with self.lock():
                # Another process may have done the work, or swapped in a new generation, while
                # we waited for the lock.
                generation = self.open(embed=embed)
                generation.load_state()
                if self.scan(generation):
                    try:
                        report.merge(self._apply(generation, self.scan(generation)))
                        generation.load_state()
                    except (ValueError, IndexDamaged) as exc:
                        if not isinstance(lexical_damage(exc), IndexDamaged):
                            raise
                        generation = self._rebuild_damaged(str(exc), embed)
        if generation.purge_todo is not None:
            generation = self._rebuild_after_purge(generation, embed)
        # Reached only when the manifest now matches the files (an error above leaves it unknown).
        self._matched = generation.path.name if self._watch is not None else None
        if embed:
            report.merge(self.embed_pending(generation))
        return report

    def _rebuild_damaged(self, problem: str, embed: bool) -> Generation:
        with self.lock():
            self.notify(f"search index is damaged ({problem}); rebuilding it from the vault files")
            self.rebuild(embed=embed)
        assert self.generation is not None
        return self.generation

    def _rebuild_after_purge(self, generation: Generation, embed: bool) -> Generation:
        """A purge made elsewhere reached the files (another clone's, taken with plain git; the
        writer's, for a vault this user only reads): the index may still hold the purged texts, in
        the catalog or as a deleted document's words in Tantivy's segments. Their vectors leave the
        embedding cache, a new generation is built aside and swapped in, and every other generation
        is deleted."""
        hashes = generation.purge_todo or []
        self.notify("facts were purged from the vault since the search index was built; rebuilding it without them")
        if hashes and self.cache_path.exists():
            self.cache.forget(hashes)
        self.rebuild(embed=embed, keep_replaced=False)
        assert self.generation is not None
        return self.generation

    def _unchanged(self, generation: Generation) -> bool:
        """True when no indexed file can have changed since the last scan matched this generation
        (the folder watches report nothing); False means: scan. See memvault.index.watch."""
        self._refreshes += 1
        if self._watch is None:
            if self._refreshes >= 2:  # a one-shot command never pays for the watches
                self._watch = open_watch(self.corpus.root)
                self._matched = None
            return False
        try:
            changed, rewatch = self._watch.changed()
        except OSError:
            changed, rewatch = True, True
        if rewatch:
            self._watch.close()
            self._watch = open_watch(self.corpus.root)  # before the scan, so nothing falls between
        if changed or rewatch:
            self._matched = None
            return False
        return self._matched == generation.path.name

    def _apply(self, generation: Generation, scan: Scan) -> RefreshReport:
        """Re-read changed files and write their documents (caller holds the lock)."""
        return apply(self.corpus, generation, scan, progress=self.progress, notify=self.notify)

    # -- embeddings ---------------------------------------------------------------------------
    def embed_pending(self, generation: Generation) -> RefreshReport:
        """Give every document a vector: from the cache when its text was seen, else from the model."""
        return pending.embed_pending(self, generation)

    def verified_vectors(self, generation: Generation) -> bool:
        """Verify the rows not yet checked in this process before they are scored (see index/pending.py);
        False when no sound vectors could be had (the caller scores by words only)."""
        return pending.verified_vectors(self, generation)

    def model_usable(self) -> bool:
        """Load the model if needed; the first failure is told once, then search uses words only."""
        try:
            self.load_model(self.query_embedder)
        except ModelUnavailable as exc:
            self.model_unavailable(exc)
            return False
        return True

    def load_model(self, embedder: Embedder) -> None:
        """Load a model, a stage of its own for `progress`: it takes seconds, with nothing else moving."""
        if self.progress and not embedder.loaded:
            self.progress(LOADING_MODEL, 0, 1)
            embedder.load()
            self.progress(LOADING_MODEL, 1, 1)
        embedder.load()

    def model_unavailable(self, exc: Exception) -> None:
        if not self._model_notice_given:
            both = self.reranker.missing_with(self.model.name, exc) if self.reranker is not None else None
            self.notify(both or f"{str(exc).rstrip('.')}; search works by words only until it loads")
            self._model_notice_given = True

    # -- full rebuild -------------------------------------------------------------------------
    def rebuild(self, embed: bool = True, keep_replaced: bool = True) -> RefreshReport:
        """Build a new generation from the files, aside, then swap it in atomically. The one it
        replaces is kept for readers that may hold it, unless `keep_replaced` is False (after a
        purge) or it knows of fewer purges."""
        if self._not_a_directory():
            with self.lock():
                if self._not_a_directory():
                    self.notify(f"search index is damaged ({NOT_A_DIRECTORY}); rebuilding it from the vault files")
                    self.root.unlink()
        self.root.mkdir(parents=True, exist_ok=True)
        self.clean_leftovers()
        name = f"gen-{time.time_ns()}-{os.getpid()}"
        generation: Generation | None = None
        live = False
        try:
            generation = Generation(self.root / name, create=True)
            report = self._build(generation, name, embed, keep_replaced)
            live = True
        finally:
            with suppress(OSError):  # (swapped in, then failed: it is the index now)
                live = live or (self.root / POINTER).read_text(encoding="utf-8").strip() == name
            if not live:
                # A failed build (a full disk, say) leaves no half-built generation to fill it more.
                if generation is not None:
                    with suppress(Exception):
                        generation.close()
                shutil.rmtree(self.root / name, ignore_errors=True)
        old, self.generation = self.generation, generation
        if old is not None:
            old.close()
        if embed:
            # Documents added by the catch-up still need vectors.
            report.merge(self.embed_pending(generation))
        generation.catalog.compact()
        return report

    def _build(self, generation: Generation, name: str, embed: bool, keep_replaced: bool) -> RefreshReport:
        """Fill a new generation aside and swap it in: the part of `rebuild` that may fail midway."""
        # Marks a generation still being filled, and by whom, so another process's prune leaves
        # it alone while its builder lives.
        (generation.path / BUILDING).write_text(json.dumps(Owner.me().to_json()), encoding="utf-8")
        report = RefreshReport()
        # The new generation is private until the swap, so the long part needs no lock.
        generation.load_state()
        report.merge(self._apply(generation, self.scan(generation)))
        generation.load_state()
        if embed:
            report.merge(self.embed_pending(generation))
        with self.lock():
            generation.load_state()
            catch_up = self.scan(generation)
            if catch_up:
                report.merge(self._apply(generation, catch_up))
                generation.load_state()
            pointer = self.root / POINTER
            try:
                replaced = pointer.read_text(encoding="utf-8").strip()
            except FileNotFoundError:
                replaced = ""
            tmp = self.root / f".{POINTER}.{os.getpid()}"
            tmp.write_text(name, encoding="utf-8")
            (generation.path / BUILDING).unlink()
            os.replace(tmp, pointer)
            if keep_replaced and not clean_of_generation(self.root / replaced) >= generation.catalog.purges.clean_of():
                keep_replaced = False  # it may hold the text of a purge the new one was built knowing
            self._prune(keep={name, replaced} if keep_replaced else {name})
        return report

    def _prune(self, keep: set[str]) -> None:
        """Delete generations other than the live one and the one just replaced (a reader may hold it)."""
        for child in self.root.iterdir():
            if not (child.is_dir() and child.name.startswith("gen-")) or child.name in keep:
                continue
            if (child / BUILDING).exists() and builder_alive(child):
                continue  # another process is still building it
            shutil.rmtree(child, ignore_errors=True)

    def clean_leftovers(self) -> None:
        """Remove what killed rebuilds left: generations whose builder is dead, pointer temp files."""
        try:
            children = list(self.root.iterdir())
        except (FileNotFoundError, NotADirectoryError):
            return  # nothing built yet, or a file in the way (open() rebuilds)
        for child in children:
            if child.name.startswith("gen-") and (child / BUILDING).exists() and not builder_alive(child):
                shutil.rmtree(child, ignore_errors=True)
            elif child.name.startswith(f".{POINTER}.") and not Owner(pid_of(child.name)).alive():
                with suppress(OSError):
                    child.unlink(missing_ok=True)

    # -- status -------------------------------------------------------------------------------
    def status(self, verify: bool = False) -> dict:
        """Counts and drift; never builds or repairs (see memvault.index.status)."""
        return index_counts(self, verify)

    def refill_cache(self) -> int:
        """Put the index's vectors back into an emptied embedding cache (see memvault.index.pending)."""
        return pending.refill_cache(self)

    def close(self) -> None:
        if self._watch is not None:
            self._watch.close()
            self._watch, self._matched = None, None
        if self.generation is not None:
            self.generation.close()
            self.generation = None
        if self._cache is not None:
            self._cache.close()
            self._cache = None
