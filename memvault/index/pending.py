"""Giving every document of a generation its vector: from the embedding cache when its text was seen,
else from the model; a new vector file when the model changes or the rows are damaged."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from contextlib import AbstractContextManager, suppress
from typing import Any, Protocol

from memvault.index.embedder import Embedder, ModelSpec
from memvault.index.embedding_cache import EmbeddingCache, as_cached
from memvault.index.generation import Generation
from memvault.index.refresh import Notify, Progress, RefreshReport
from memvault.index.vectors import VectorsDamaged

# Up to this many new texts (a search catching up after a few adds) use the one-thread model.
SMALL_BATCH = 64
# Fresh vectors go to the embedding cache every this many texts, so an interrupted rebuild keeps
# the work it finished and its rerun does not start from zero.
CACHE_EVERY = 1024
# Vectors read from the embedding cache at a time (25 MB as float32).
CACHE_READ_BLOCK = 16_384
# Rows written to the vector file at a time (3 MB).
STORE_BLOCK = 2048
# Vectors held before they go to the vector file (200 MB as float32): a rebuild of a million facts
# held every one (1.5 GB, and more in the small arrays around them) until it had them all.
FLUSH_EVERY = 131_072
# A stored vector is unit length; one further off than this is damaged (float32 rounding is ~1e-6).
UNIT_TOLERANCE = 1e-3


class EmbeddingHost(Protocol):
    """What embedding needs of memvault.index.indexer.SearchIndex (a protocol: that module imports this one)."""

    model: ModelSpec
    embedder: Embedder
    query_embedder: Embedder
    generation: Generation | None
    notify: Notify
    progress: Progress | None

    @property
    def cache(self) -> EmbeddingCache: ...
    def lock(self) -> AbstractContextManager[None]: ...
    def is_live(self, generation: Generation) -> bool: ...
    def open_live(self) -> str | None: ...
    def model_usable(self) -> bool: ...
    def load_model(self, embedder: Embedder) -> None: ...


def embed_pending(index: EmbeddingHost, generation: Generation) -> RefreshReport:
    """Give every document a vector: from the cache when its text was seen, else from the model."""
    report = RefreshReport()
    catalog = generation.catalog
    if catalog.get_meta("model") != index.model.identity:
        # Without the new model nothing could be re-embedded: keep the old vectors until it loads.
        if not index.model_usable():
            return report
        _switch_model(index, generation)
    pending = catalog.slots.pending()
    if not pending:
        return report
    by_hash: dict[bytes, str] = {}
    for _key, ehash, text in pending:
        by_hash.setdefault(ehash, text)
    del pending  # (its keys and tuples: 0.3 GB at 1M)
    held = _Held(index, generation)
    report.reused = _cached_vectors(index, by_hash, held)
    if by_hash and index.model_usable():
        report.embedded = _embed_missing(index, by_hash, held)
    held.flush()
    return report


class _Held:
    """Vectors on their way to the vector file, stored every FLUSH_EVERY and at the end."""

    def __init__(self, index: EmbeddingHost, generation: Generation):
        self.index = index
        self.generation = generation
        self.vectors: dict[bytes, Any] = {}

    def update(self, pairs: Iterable[tuple[bytes, Any]]) -> None:
        self.vectors.update(pairs)
        if len(self.vectors) >= FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        if self.vectors:
            _store_vectors(self.index, self.generation, self.vectors)
            self.vectors = {}


def _embed_missing(index: EmbeddingHost, by_hash: dict[bytes, str], held: _Held) -> int:
    """Run the model on the texts the cache lacks (`by_hash`), caching each chunk as it comes and
    handing it to `held`; returns how many were embedded."""
    # Similar lengths batch together: fastembed pads each batch to its longest text.
    missing = sorted(by_hash, key=lambda h: len(by_hash[h]))
    done = 0

    def tick(n: int) -> None:
        nonlocal done
        done += n
        if index.progress:
            index.progress("embedding", done, len(missing))

    embedder = index.embedder if len(missing) > SMALL_BATCH else index.query_embedder
    index.load_model(embedder)
    chunks = [missing[start : start + CACHE_EVERY] for start in range(0, len(missing), CACHE_EVERY)]
    batches = embedder.embed_ahead([[by_hash[h] for h in chunk] for chunk in chunks], progress=tick)
    embedded = 0
    # closing: a failed cache write stops the worker after the batch in flight, not later
    with contextlib.closing(batches):
        for chunk, embedded_now in zip(chunks, batches, strict=True):
            index.cache.put_many((h, embedded_now[i].tobytes()) for i, h in enumerate(chunk))
            # As the cache gives them back: a rebuild from the cache scores exactly the same.
            fresh = as_cached(embedded_now)
            held.update((h, fresh[i]) for i, h in enumerate(chunk))
            embedded += len(chunk)
    return embedded


def _store_vectors(index: EmbeddingHost, generation: Generation, vectors: dict[bytes, Any]) -> None:
    """Append the vectors of the documents still pending to the vector file and give them slots."""
    import numpy as np

    catalog = generation.catalog
    with index.lock():
        if generation is index.generation and not index.is_live(generation):
            return  # swapped out meanwhile; the vectors are cached for the next search
        generation.load_state()
        if catalog.get_meta("model") != index.model.identity:
            return  # another process switched models meanwhile; the next search redoes this
        rows = [(key, ehash) for key, ehash in catalog.slots.pending_keys() if ehash in vectors]
        if rows:
            blocks = (np.stack([vectors[h] for _k, h in rows[at : at + STORE_BLOCK]])
                      for at in range(0, len(rows), STORE_BLOCK))
            start, total, crc = generation.vectors.append(blocks)
            catalog.begin()
            try:
                catalog.slots.assign((start + i, key, h) for i, (key, h) in enumerate(rows))
                catalog.slots.set_record(total, crc)
                catalog.commit()
            except BaseException:
                catalog.rollback()
                raise
        generation.load_state()


def _cached_vectors(index: EmbeddingHost, by_hash: dict[bytes, str], held: _Held) -> int:
    """Hand `held` the cache's vectors for these hashes and take their hashes out of `by_hash`;
    returns how many. One that is not a unit (or zero) vector (garbage that still reads as a sound
    database) stays in `by_hash`, so it is recomputed and overwritten in the cache.
    Read a block at a time: a 1M rebuild from the cache held each vector four times over (7 GB)."""
    import numpy as np

    reused = bad = 0
    wanted = list(by_hash)
    for at in range(0, len(wanted), CACHE_READ_BLOCK):
        hashes, matrix = index.cache.get_matrix(wanted[at : at + CACHE_READ_BLOCK])
        if not hashes:
            continue
        with np.errstate(all="ignore"):
            norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix, dtype=np.float64))
        # (A text with nothing to embed gets the zero vector.)
        sound = (np.abs(norms - 1.0) < UNIT_TOLERANCE) | (norms == 0.0)
        bad += len(hashes) - int(sound.sum())
        matrix = as_cached(matrix)
        found = [(h, matrix[i]) for i, h in enumerate(hashes) if sound[i]]
        for h, _vector in found:
            del by_hash[h]
        reused += len(found)
        held.update(found)
    if bad:
        index.notify(f"embedding cache held {bad} damaged vector(s); recomputing them")
    return reused


def _switch_model(index: EmbeddingHost, generation: Generation) -> None:
    catalog = generation.catalog
    with index.lock():
        previous = catalog.get_meta("model")
        if previous == index.model.identity:
            return
        count = catalog.count()
        if previous is not None and count:
            index.notify(f"embedding model changed ({previous} -> {index.model.identity}); "
                         f"re-embedding {count} documents")
        _new_vector_file(generation, index.model.identity, fresh=previous is None)


def _new_vector_file(generation: Generation, model: str | None, fresh: bool = False) -> None:
    """Give every document up for a new vector, in a new, empty vector file (caller holds the lock).

    A new file rather than truncating the old one: readers may still have it mapped.
    """
    catalog = generation.catalog
    old = catalog.get_meta("vectors") or "vectors-0.f32"
    number = int(old.removeprefix("vectors-").removesuffix(".f32")) + (0 if fresh else 1)
    catalog.begin()
    try:
        catalog.slots.clear()
        if model is not None:
            catalog.set_meta("model", model)
        catalog.slots.set_record(0, 0, name=f"vectors-{number}.f32")
        catalog.commit()
    except BaseException:
        catalog.rollback()
        raise
    generation.load_state()


def verified_vectors(index: EmbeddingHost, generation: Generation) -> bool:
    """Verify the rows not yet checked in this process against their checksum before they are
    scored; damaged rows are recomputed (from the embedding cache, else by the model) with a
    notice. False when no sound vectors could be had (the caller scores by words only)."""
    try:
        generation.vectors.verify()
        return True
    except VectorsDamaged as exc:
        _recompute_vectors(index, generation, str(exc))
    try:
        generation.vectors.verify()
    except VectorsDamaged as exc:
        index.notify(f"search index vectors are still damaged after recomputing them ({exc}); "
                     "search works by words only until they are rebuilt (`memvault reindex --clear`)")
        return False
    return True


def _recompute_vectors(index: EmbeddingHost, generation: Generation, problem: str) -> None:
    with index.lock():
        generation.load_state()
        try:
            generation.vectors.verify(full=True)
            return  # another process recomputed them while we waited for the lock
        except VectorsDamaged as exc:
            problem = str(exc)
        index.notify(f"search index is damaged ({problem}); recomputing its vectors "
                     "(from the embedding cache where it has them)")
        damaged = generation.vectors.path
        _new_vector_file(generation, generation.catalog.get_meta("model"))
        with suppress(OSError):
            damaged.unlink()  # a reader that still maps it keeps its pages until it moves on
    embed_pending(index, generation)


def refill_cache(index: EmbeddingHost) -> int:
    """Put the index's vectors (verified first) back into an emptied embedding cache, so a later
    rebuild reuses them instead of running the model; returns how many were stored."""
    if index.open_live() is not None or index.generation is None:
        return 0
    generation = index.generation
    generation.load_state()
    if generation.catalog.get_meta("model") != index.model.identity:
        return 0
    try:
        matrix = generation.vectors.matrix()
    except VectorsDamaged:
        return 0
    rows = generation.catalog.db.execute("SELECT embed_hash, slot FROM docs WHERE slot IS NOT NULL").fetchall()
    items = [(ehash, matrix[slot].tobytes()) for ehash, slot in rows if slot < len(matrix)]
    for start in range(0, len(items), CACHE_EVERY * 16):
        index.cache.put_many(items[start : start + CACHE_EVERY * 16])
    return len(items)
