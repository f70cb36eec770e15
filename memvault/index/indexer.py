"""Keeping the index a faithful projection of the vault files.

Layout under `.memvault/index/`: a `current` file names the live generation directory, which holds
`catalog.sqlite` (documents, manifest, meta), `lexical/` (Tantivy) and `vectors-N.f32`. Searches
and `reindex` first bring the live generation up to date with the files (`refresh`): `add` never
touches the index, yet its fact is searchable by the next search. A full rebuild fills a new
generation aside and swaps the `current` pointer, so searches keep answering meanwhile.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from memvault.errors import INDEX_FILES, VaultBusy, VaultUnwritable, no_room, unwritable
from memvault.formats.facts import stored_id
from memvault.formats.layout import (
    INDEX_DIR,
    INDEX_LOCK,
    LOGS_DIR,
    STATE_EMBEDDING_CACHE,
    STATE_INDEX,
    STATE_LOCKS,
    TOMBSTONES_FILE,
    WIKI_DIR,
)
from memvault.index import location
from memvault.index.catalog import SCHEMA_CHANGED, Catalog, FileState, doc_hash
from memvault.index.corpus import Corpus
from memvault.index.embedder import Embedder, EmbeddingCache, ModelSpec, ModelUnavailable, is_damage
from memvault.index.lexical import LexicalIndex
from memvault.index.vectors import VectorFile, VectorsDamaged
from memvault.index.watch import FolderWatch, open_watch
from memvault.storage.owner import Owner
from memvault.storage.paths import inside

Progress = Callable[[str, int, int], None]
Notify = Callable[[str], None]

POINTER = "current"
NOT_A_DIRECTORY = f"{INDEX_DIR} is not a directory"
BUILDING = "building"
# Long enough for another process's incremental refresh, short enough that nobody hangs forever.
LOCK_TIMEOUT = 120.0
LOADING_MODEL = "loading the embedding model"  # a stage `progress` hears of, between reading and embedding


def _pid_of(name: str) -> int:
    """The pid at the end of a generation or temp file name (gen-<ns>-<pid>, .current.<pid>)."""
    tail = name.rsplit("-" if name.startswith("gen-") else ".", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def _builder_alive(generation: Path) -> bool:
    """Is the process building this generation still running? (Its marker names it.)"""
    try:
        owner = Owner.from_json(json.loads((generation / BUILDING).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        owner = None  # a marker from an older memvault: the pid in the name is all there is
    return (owner or Owner(_pid_of(generation.name))).alive()


def _clean_of(generation: Path) -> set[str]:
    """The purged ids a generation was built knowing (see Catalog.clean_of); none if unreadable."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{generation / 'catalog.sqlite'}?mode=ro", uri=True)) as db:
            row = db.execute("SELECT value FROM meta WHERE name = 'clean_of'").fetchone()
        return set(json.loads(row[0])) if row else set()
    except (sqlite3.Error, ValueError, TypeError):
        return set()


# A key `stored_id` writes as "key" itself, and each such quoted word of a text (overlapping ones too).
_PLAIN_KEY = re.compile(r"[0-9A-Za-z_.:+-]+")
_QUOTED_KEY = re.compile(r'"(?=([0-9A-Za-z_.:+-]+)")')


class IndexDamaged(Exception):
    """The index on disk cannot be trusted; the caller rebuilds it from the files."""


def _lexical_damage(exc: Exception) -> Exception:
    """IndexDamaged for Tantivy's "Data corrupted" (a file of it damaged while this process had it
    open: an MCP server, a `search --stdin`), the error itself for anything else."""
    if isinstance(exc, ValueError) and str(exc).startswith("Data corrupted"):
        return IndexDamaged(str(exc))
    return exc


def _damage_or_no_room(exc: Exception, path: Path) -> Exception:
    """IndexDamaged, unless the index could not be opened for want of room or write access: sqlite
    must write its shared-memory file even to read, and says only "disk I/O error" when the disk is
    full. Rebuilding would fail the same way and leave a half-built generation behind, so that is
    VaultUnwritable (exit 9), the index left as it is."""
    if not (isinstance(exc, sqlite3.Error) and is_damage(exc)):
        number = no_room(path)
        if number is not None:
            return unwritable(OSError(number, str(exc)), INDEX_FILES) or IndexDamaged(str(exc))
    return IndexDamaged(str(exc))


# Documents read before they are written (one Tantivy commit, one catalog transaction each): about
# 100 MB of Python objects; a first build of 1M facts makes about 50 such commits.
DOCS_PER_BATCH = 20_000


@dataclass
class _Batch:
    """Files read and not yet written: their documents and the stat to record for each."""

    contents: dict[str, list] = field(default_factory=dict)
    states: dict[str, FileState] = field(default_factory=dict)
    documents: int = 0


@dataclass
class RefreshReport:
    added: int = 0
    removed: int = 0
    files: int = 0
    embedded: int = 0
    reused: int = 0

    def merge(self, other: RefreshReport) -> None:
        for name in ("added", "removed", "files", "embedded", "reused"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


class Generation:
    """One complete index directory."""

    def __init__(self, path: Path, create: bool = False):
        self.path = path
        if create:
            path.mkdir(parents=True)
        elif not path.is_dir():
            raise IndexDamaged(f"{path.name} is missing")
        try:
            self.catalog = Catalog(path / "catalog.sqlite")
            self.lexical = LexicalIndex(path / "lexical")
            name, rows, crc = self.catalog.vector_record()
            self.vectors = VectorFile(path / name, rows, crc)
        except (sqlite3.Error, ValueError, OSError) as exc:
            raise _damage_or_no_room(exc, path) from exc
        self.version = -1
        self.fresh = create  # filled by no refresh yet: the purges it knows of are recorded by the first
        self.manifest: dict[str, FileState] = {}
        self.purge_todo: list[bytes] | None = None  # see Catalog.purges_to_clear
        self.memo: dict = {}  # per-version results a warm process may reuse (see search._dense)

    def check(self) -> None:
        """Cheap consistency checks run when a generation is opened (the vector rows are verified
        against their checksum when first scored, see index/vectors.py)."""
        try:
            docs = self.catalog.count()
            if self.lexical.count() != docs:
                raise IndexDamaged(f"lexical index holds {self.lexical.count()} documents, catalog {docs}")
            top = self.catalog.db.execute("SELECT max(slot) FROM docs").fetchone()[0]
            if top is not None and top >= self.vectors.rows:
                raise IndexDamaged("the catalog gives out vector slots past the recorded rows")
        except sqlite3.Error as exc:
            raise _damage_or_no_room(exc, self.path) from exc

    def load_state(self) -> bool:
        """Re-read manifest and reopen readers if another process wrote; True when something changed."""
        version = self.catalog.version
        if version == self.version:
            return False
        self.manifest = self.catalog.files()
        name, rows, crc = self.catalog.vector_record()
        if self.vectors.path.name != name:
            self.vectors = VectorFile(self.path / name, rows, crc)
        else:
            self.vectors.expect(rows, crc)
        try:
            self.lexical.reload()
        except ValueError as exc:
            raise _lexical_damage(exc) from exc
        self.purge_todo = self.catalog.purges_to_clear()
        self.version = version
        return True

    def close(self) -> None:
        self.catalog.close()


@dataclass
class Scan:
    stale: list[tuple[str, int, int]] = field(default_factory=list)  # (path, mtime_ns, size)
    gone: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.stale or self.gone)


# Up to this many new texts (a search catching up after a few adds) use the one-thread model.
SMALL_BATCH = 64
# Fresh vectors go to the embedding cache every this many texts, so an interrupted rebuild keeps
# the work it finished and its rerun does not start from zero.
CACHE_EVERY = 1024
# A stored vector is unit length; one further off than this is damaged (float32 rounding is ~1e-6).
UNIT_TOLERANCE = 1e-3

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
        self._lock = None
        self.reranker = None  # search's rerank stage (memvault.index.rerank), made on first use

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
        problem = self._open_live()
        if problem is None:
            return self.generation  # type: ignore[return-value]
        with self.lock():
            # One process rebuilds; the others wait here and then find its work.
            problem = self._open_live()
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

    def _open_live(self) -> str | None:
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

    def _is_live(self, generation: Generation) -> bool:
        """False once another process swapped in a newer generation (this one may soon be deleted)."""
        return self._live_name() == generation.path.name

    # -- refreshing ---------------------------------------------------------------------------
    def scan(self, generation: Generation) -> Scan:
        """Files whose stat differs from the manifest; costs one stat per file, no reads."""
        scan = Scan()
        current = self.corpus.stat_files()
        manifest = generation.manifest
        for rel, (mtime_ns, size) in current.items():
            known = manifest.get(rel)
            if known is None or known.mtime_ns != mtime_ns or known.size != size:
                scan.stale.append((rel, mtime_ns, size))
        scan.gone = [rel for rel in manifest if rel not in current]
        return scan

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
                        if not isinstance(_lexical_damage(exc), IndexDamaged):
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
        catalog = generation.catalog
        report = RefreshReport()
        tombstones = self.corpus.tombstones()
        tombstoned = set(tombstones)
        purged = {fact_id for fact_id, tombstone in tombstones.items() if tombstone.purged}
        if generation.fresh:
            catalog.begin()
            catalog.set_clean_of(purged)  # read before any file: a purge arriving later is new to it
            catalog.commit()
            generation.fresh = False
        elif news := purged - catalog.clean_of():
            catalog.begin()
            catalog.note_purges(news)  # before their documents are removed below
            catalog.commit()
        self.corpus.problems = []  # only what this pass reads (a failed pass must not be told twice)
        # New tombstones change what unchanged pages may show: read every page again.
        reread: set[str] = set()
        if any(rel == TOMBSTONES_FILE for rel, _, _ in scan.stale):
            stale = {rel for rel, _, _ in scan.stale}
            for rel, (mtime_ns, size) in self.corpus.stat_files().items():
                if rel.startswith(WIKI_DIR + "/"):
                    reread.add(rel)
                    if rel not in stale:
                        scan.stale.append((rel, mtime_ns, size))
        # Files are written in batches of about DOCS_PER_BATCH documents, oldest log first, so a
        # first build holds one batch in memory rather than the vault (2.2 GB at 1M facts). The
        # earliest copy of a repeated id is met first, in the same batch or one already committed.
        scan.stale.sort()
        total = len(scan.stale)
        batch = _Batch()
        for done, (rel, mtime_ns, size) in enumerate(scan.stale, 1):
            if self.progress:
                self.progress("reading files", done, total)
            content = self._read(rel)
            if content is None:
                scan.gone.append(rel)
                continue
            digest = hashlib.sha256(content.encode("utf-8", "surrogatepass")).digest()
            # The stat from before the read is stored: a write racing this read shows up as stale next time.
            batch.states[rel] = FileState(mtime_ns, size, digest)
            known = generation.manifest.get(rel)
            if rel == TOMBSTONES_FILE or (known is not None and known.hash == digest and rel not in reread):
                continue
            report.files += 1
            docs = [d for d in self.corpus.documents(rel, content, tombstoned) if d.key not in tombstoned]
            batch.contents[rel] = docs
            batch.documents += len(docs)
            if batch.documents >= DOCS_PER_BATCH:
                report.merge(self._write_batch(generation, batch, tombstoned, scan.gone, last=False))
                batch = _Batch()
        report.merge(self._write_batch(generation, batch, tombstoned, scan.gone, last=True))
        problems, self.corpus.problems = self.corpus.problems, []
        if problems:
            self.notify(f"{len(problems)} line(s) in the daily logs are not facts memvault can read "
                        f"(first: {problems[0].path}:{problems[0].line}); they are not searchable; "
                        "see `memvault doctor`")
        return report

    def _write_batch(self, generation: Generation, batch: _Batch, tombstoned: set[str], gone: list[str], *,
                     last: bool) -> RefreshReport:
        """Write one batch of re-read files to Tantivy and the catalog; the files that are gone
        leave with the last batch."""
        catalog = generation.catalog
        removed: set[str] = set()
        added: dict[str, object] = {}
        leaving = list(gone) if last else []
        for rel, docs in self._one_copy_per_id(batch.contents, catalog, tombstoned, set(gone)).items():
            old = catalog.doc_hashes(rel)
            for key, digest_old in old.items():
                if key not in docs or digest_old != doc_hash(docs[key]):
                    removed.add(key)
            for key, doc in docs.items():
                if key not in old or old[key] != doc_hash(doc):
                    added[key] = doc
        for rel in leaving:
            removed.update(catalog.doc_hashes(rel))
        # Forgotten ids leave the index whatever file they were in, and never come back.
        forgotten = catalog.tombstoned_present(tombstoned)
        removed.update(forgotten)
        for key in tombstoned:
            added.pop(key, None)
        # A changed document is deleted and re-added in Tantivy; in the catalog it is replaced.
        generation.lexical.write(removed | set(added), added.values())  # type: ignore[arg-type]
        removed -= set(added)
        catalog.begin()
        try:
            catalog.keep_dropped(forgotten)
            catalog.remove_docs(removed)
            catalog.put_docs(added.values())  # type: ignore[arg-type]
            for rel in leaving:
                catalog.drop_file(rel)
            for rel, state in batch.states.items():
                catalog.set_file(rel, state)
            catalog.commit()
        except BaseException:
            catalog.rollback()
            raise
        return RefreshReport(added=len(added), removed=len(removed))

    def _read(self, rel: str) -> str | None:
        try:
            with open(inside(self.corpus.root, rel), encoding="utf-8", newline="", errors="replace") as handle:
                return handle.read()
        except FileNotFoundError:
            return None

    def _one_copy_per_id(self, contents: dict[str, list], catalog: Catalog, tombstoned: set[str],
                         gone: set[str]) -> dict[str, dict]:
        """The documents each re-read file keeps: one per id, however often a hand edit or a bad merge
        repeated a fact id. The first copy in the earliest daily log wins (log paths sort by day),
        as in FactLog.iter_facts; a duplicate is left out here and reported by doctor."""
        while True:
            keys = {doc.key for docs in contents.values() for doc in docs}
            holders = catalog.files_of(keys)
            claimed: dict[str, str] = {}
            for rel in sorted(contents):
                for doc in contents[rel]:
                    claimed.setdefault(doc.key, rel)
            kept: dict[str, dict] = {}
            for rel, docs in contents.items():
                mine = kept[rel] = {}
                for doc in docs:
                    holder = holders.get(doc.key)
                    earlier_unchanged = holder is not None and holder < rel and holder not in contents \
                        and holder not in gone
                    if claimed[doc.key] == rel and not earlier_unchanged:
                        mine.setdefault(doc.key, doc)
            # An id a re-read log lost (a hand edit removed a copy) may still be in another log whose
            # copy was left out as a duplicate: read that log again too. Rare, and once per pass.
            lost = {key for rel in [*contents, *gone] for key in catalog.doc_hashes(rel)
                    if key not in claimed and key not in tombstoned}
            more = self._logs_holding(lost, skip=set(contents) | gone) if lost else {}
            if not more:
                return kept
            for rel, content in more.items():
                contents[rel] = [d for d in self.corpus.documents(rel, content, tombstoned) if d.key not in tombstoned]

    def _logs_holding(self, keys: set[str], skip: set[str]) -> dict[str, str]:
        """Daily logs (not in `skip`) whose text mentions one of `keys` as a fact id."""
        # Ids as memvault makes them are found by one pass over each log (every quoted word of that
        # shape), not one pass per id: thousands of ids are lost at once when whole logs go (an
        # index seeded from a later state of the vault, memvault.index.seed).
        plain = {key for key in keys if _PLAIN_KEY.fullmatch(key)}
        needles = [stored_id(key) for key in keys - plain]
        found = {}
        for rel in self.corpus.stat_files():
            if rel in skip or not rel.startswith(LOGS_DIR + "/"):
                continue
            content = self._read(rel)
            if content is not None and (any(needle in content for needle in needles)
                                        or not plain.isdisjoint(_QUOTED_KEY.findall(content))):
                found[rel] = content
        return found

    # -- embeddings ---------------------------------------------------------------------------
    def embed_pending(self, generation: Generation) -> RefreshReport:
        """Give every document a vector: from the cache when its text was seen, else from the model."""
        import numpy as np

        report = RefreshReport()
        catalog = generation.catalog
        if catalog.get_meta("model") != self.model.identity:
            # Without the new model nothing could be re-embedded: keep the old vectors until it loads.
            if not self._model_usable():
                return report
            self._switch_model(generation)
        pending = catalog.pending()
        if not pending:
            return report
        by_hash: dict[bytes, str] = {}
        for _key, ehash, text in pending:
            by_hash.setdefault(ehash, text)
        vectors = self._cached_vectors(by_hash)
        report.reused = len(vectors)
        missing = [h for h in by_hash if h not in vectors]
        if missing:
            if not self._model_usable():
                missing = []
            # Similar lengths batch together: fastembed pads each batch to its longest text.
            missing.sort(key=lambda h: len(by_hash[h]))
            done = 0

            def tick(n: int) -> None:
                nonlocal done
                done += n
                if self.progress:
                    self.progress("embedding", done, len(missing))

            embedder = self.embedder if len(missing) > SMALL_BATCH else self.query_embedder
            self._load(embedder)
            chunks = [missing[start : start + CACHE_EVERY] for start in range(0, len(missing), CACHE_EVERY)]
            batches = embedder.embed_ahead([[by_hash[h] for h in chunk] for chunk in chunks], progress=tick)
            # closing: a failed cache write stops the worker after the batch in flight, not later
            with contextlib.closing(batches):
                for chunk, fresh in zip(chunks, batches, strict=True):
                    self.cache.put_many((h, fresh[i].tobytes()) for i, h in enumerate(chunk))
                    for i, h in enumerate(chunk):
                        vectors[h] = fresh[i]
                    report.embedded += len(chunk)
        if not vectors:
            return report
        with self.lock():
            if generation is self.generation and not self._is_live(generation):
                return report  # swapped out meanwhile; the vectors are cached for the next search
            generation.load_state()
            if catalog.get_meta("model") != self.model.identity:
                return report  # another process switched models meanwhile; the next search redoes this
            rows = [(key, ehash) for key, ehash, _text in catalog.pending() if ehash in vectors]
            if rows:
                matrix = np.stack([vectors[h] for _k, h in rows])
                start, total, crc = generation.vectors.append(matrix)
                catalog.begin()
                try:
                    catalog.set_slots((start + i, key, h) for i, (key, h) in enumerate(rows))
                    catalog.set_vector_record(total, crc)
                    catalog.commit()
                except BaseException:
                    catalog.rollback()
                    raise
            generation.load_state()
        return report

    def _cached_vectors(self, by_hash: dict[bytes, str]) -> dict:
        """The cache's vectors for these hashes; any that is not a unit (or zero) vector (garbage
        that still reads as a sound database) is left out, so it is recomputed and overwritten in the cache."""
        import numpy as np

        found = self.cache.get_many(by_hash)
        if not found:
            return {}
        hashes = list(found)
        matrix = np.frombuffer(b"".join(found[h] for h in hashes), dtype=np.float32).reshape(len(hashes), -1)
        with np.errstate(all="ignore"):
            norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix, dtype=np.float64))
        # (A text with nothing to embed gets the zero vector.)
        sound = (np.abs(norms - 1.0) < UNIT_TOLERANCE) | (norms == 0.0)
        bad = len(hashes) - int(sound.sum())
        if bad:
            self.notify(f"embedding cache held {bad} damaged vector(s); recomputing them")
        return {h: matrix[i] for i, h in enumerate(hashes) if sound[i]}

    def _model_usable(self) -> bool:
        """Load the model if needed; the first failure is told once, then search uses words only."""
        try:
            self._load(self.query_embedder)
        except ModelUnavailable as exc:
            self.model_unavailable(exc)
            return False
        return True

    def _load(self, embedder) -> None:
        """Load a model, a stage of its own for `progress`: it takes seconds, with nothing else moving."""
        if self.progress and not embedder.loaded:
            self.progress(LOADING_MODEL, 0, 1)
            embedder.load()
            self.progress(LOADING_MODEL, 1, 1)
        embedder.load()

    def model_unavailable(self, exc: Exception) -> None:
        if not self._model_notice_given:
            self.notify(f"{str(exc).rstrip('.')}; search works by words only until it loads")
            self._model_notice_given = True

    def _switch_model(self, generation: Generation) -> None:
        catalog = generation.catalog
        with self.lock():
            previous = catalog.get_meta("model")
            if previous == self.model.identity:
                return
            count = catalog.count()
            if previous is not None and count:
                self.notify(f"embedding model changed ({previous} -> {self.model.identity}); "
                            f"re-embedding {count} documents")
            self._new_vector_file(generation, self.model.identity, fresh=previous is None)

    def _new_vector_file(self, generation: Generation, model: str | None, fresh: bool = False) -> None:
        """Give every document up for a new vector, in a new, empty vector file (caller holds the lock).

        A new file rather than truncating the old one: readers may still have it mapped.
        """
        catalog = generation.catalog
        old = catalog.get_meta("vectors") or "vectors-0.f32"
        number = int(old.removeprefix("vectors-").removesuffix(".f32")) + (0 if fresh else 1)
        catalog.begin()
        try:
            catalog.clear_slots()
            if model is not None:
                catalog.set_meta("model", model)
            catalog.set_vector_record(0, 0, name=f"vectors-{number}.f32")
            catalog.commit()
        except BaseException:
            catalog.rollback()
            raise
        generation.load_state()

    def verified_vectors(self, generation: Generation) -> bool:
        """Verify the rows not yet checked in this process against their checksum before they are
        scored; damaged rows are recomputed (from the embedding cache, else by the model) with a
        notice. False when no sound vectors could be had (the caller scores by words only)."""
        try:
            generation.vectors.verify()
            return True
        except VectorsDamaged as exc:
            self._recompute_vectors(generation, str(exc))
        try:
            generation.vectors.verify()
        except VectorsDamaged as exc:
            self.notify(f"search index vectors are still damaged after recomputing them ({exc}); "
                        "search works by words only until they are rebuilt (`memvault reindex --clear`)")
            return False
        return True

    def _recompute_vectors(self, generation: Generation, problem: str) -> None:
        with self.lock():
            generation.load_state()
            try:
                generation.vectors.verify(full=True)
                return  # another process recomputed them while we waited for the lock
            except VectorsDamaged as exc:
                problem = str(exc)
            self.notify(f"search index is damaged ({problem}); recomputing its vectors "
                        "(from the embedding cache where it has them)")
            damaged = generation.vectors.path
            self._new_vector_file(generation, generation.catalog.get_meta("model"))
            with suppress(OSError):
                damaged.unlink()  # a reader that still maps it keeps its pages until it moves on
        self.embed_pending(generation)

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
            if keep_replaced and not _clean_of(self.root / replaced) >= generation.catalog.clean_of():
                keep_replaced = False  # it may hold the text of a purge the new one was built knowing
            self._prune(keep={name, replaced} if keep_replaced else {name})
        return report

    def _prune(self, keep: set[str]) -> None:
        """Delete generations other than the live one and the one just replaced (a reader may hold it)."""
        for child in self.root.iterdir():
            if not (child.is_dir() and child.name.startswith("gen-")) or child.name in keep:
                continue
            if (child / BUILDING).exists() and _builder_alive(child):
                continue  # another process is still building it
            shutil.rmtree(child, ignore_errors=True)

    def clean_leftovers(self) -> None:
        """Remove what killed rebuilds left: generations whose builder is dead, pointer temp files."""
        try:
            children = list(self.root.iterdir())
        except (FileNotFoundError, NotADirectoryError):
            return  # nothing built yet, or a file in the way (open() rebuilds)
        for child in children:
            if child.name.startswith("gen-") and (child / BUILDING).exists() and not _builder_alive(child):
                shutil.rmtree(child, ignore_errors=True)
            elif child.name.startswith(f".{POINTER}.") and not Owner(_pid_of(child.name)).alive():
                with suppress(OSError):
                    child.unlink(missing_ok=True)

    # -- status -------------------------------------------------------------------------------
    def status(self, verify: bool = False) -> dict:
        """Counts and drift; never builds or repairs (a missing or damaged index is reported as such).

        With `verify` (doctor) every vector row is checked against its checksum and the catalog by
        sqlite's quick_check, which reads them all (a fraction of a second at 100k documents).
        """
        try:
            problem = self._open_live()
        except VaultUnwritable as exc:  # a full or read-only disk: not damage, and nothing to count
            return {"documents": None, "pending_embeddings": None, "drift": None, "model": self.model.identity,
                    "built_with": None, "missing": False, "damaged": None, "unavailable": str(exc)}
        if problem is None and verify:
            problem = self._verify(self.generation)  # type: ignore[arg-type]
        if problem is not None:
            missing = problem == "missing"
            # A missing index shows as every file drifting; a damaged one has no counts to trust.
            return {"documents": 0 if missing else None, "pending_embeddings": 0 if missing else None,
                    "drift": len(self.corpus.files()) if missing else None, "model": self.model.identity,
                    "built_with": None, "missing": missing, "damaged": None if missing else problem,
                    "unavailable": None}
        generation = self.generation
        assert generation is not None
        generation.load_state()
        scan = self.scan(generation)
        drift = 0
        for rel, _mtime, _size in scan.stale:
            known = generation.manifest.get(rel)
            try:
                with open(inside(self.corpus.root, rel), encoding="utf-8", newline="", errors="replace") as handle:
                    digest = hashlib.sha256(handle.read().encode("utf-8", "surrogatepass")).digest()
            except FileNotFoundError:
                continue
            if known is None or known.hash != digest:
                drift += 1
        drift += len(scan.gone)
        return {
            "documents": generation.catalog.count(),
            "pending_embeddings": generation.catalog.pending_count(),
            "drift": drift,
            "model": self.model.identity,
            "built_with": generation.catalog.get_meta("model"),
            "missing": False,
            "damaged": None,
            "unavailable": None,
        }

    def _verify(self, generation: Generation) -> str | None:
        try:
            said = [row[0] for row in generation.catalog.db.execute("PRAGMA quick_check")]
        except sqlite3.DatabaseError as exc:
            said = [str(exc)]
        if said != ["ok"]:
            return f"catalog: {said[0]}"
        generation.load_state()
        try:
            generation.vectors.verify(full=True)
        except VectorsDamaged as exc:
            return str(exc)
        return None

    def refill_cache(self) -> int:
        """Put the index's vectors (verified first) back into an emptied embedding cache, so a later
        rebuild reuses them instead of running the model; returns how many were stored."""
        if self._open_live() is not None or self.generation is None:
            return 0
        generation = self.generation
        generation.load_state()
        if generation.catalog.get_meta("model") != self.model.identity:
            return 0
        try:
            matrix = generation.vectors.matrix()
        except VectorsDamaged:
            return 0
        rows = generation.catalog.db.execute("SELECT embed_hash, slot FROM docs WHERE slot IS NOT NULL").fetchall()
        items = [(ehash, matrix[slot].tobytes()) for ehash, slot in rows if slot < len(matrix)]
        for start in range(0, len(items), CACHE_EVERY * 16):
            self.cache.put_many(items[start : start + CACHE_EVERY * 16])
        return len(items)

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
