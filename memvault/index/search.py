"""Search, reindex and status for a vault: what `Vault.search` and the CLI call."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TypeVar

from memvault.formats.layout import STATE_ASOF
from memvault.index import location
from memvault.index.corpus import Corpus
from memvault.index.current import current_first
from memvault.index.dense import cosines, dense_half, similarity
from memvault.index.embedder import ModelSpec
from memvault.index.generation import Generation, IndexDamaged
from memvault.index.hits import Hit
from memvault.index.indexer import SearchIndex
from memvault.index.intent import read_intent
from memvault.index.lexical import Filters
from memvault.index.query import SearchQuery
from memvault.index.ranking import (
    DEFAULT_WEIGHTS,
    MIN_SCORE,
    Ranked,
    Weights,
    for_model,
    fuse,
    judged,
    newest_first,
)
from memvault.index.refresh import Progress
from memvault.index.rerank import Reranker, RerankSpec, judgement
from memvault.index.scope import filters_of, unconsolidated, within
from memvault.storage.store import Storage

# Each list contributes this many candidates per requested hit (at least CANDIDATES_MIN) to fusion.
CANDIDATES_PER_HIT = 5
CANDIDATES_MIN = 50
# Tries of a search whose files vanished under it (a concurrent purge or checkout).
VANISHED_ATTEMPTS = 4

T = TypeVar("T")


def model_spec(storage: Storage) -> ModelSpec:
    config = storage.config
    return ModelSpec(name=config.embed_model, path=config.embed_model_path)


def rerank_spec(storage: Storage) -> RerankSpec:
    config = storage.config.rerank
    return RerankSpec(name=config.model, path=config.path)


def engine(storage: Storage) -> SearchIndex:
    """The vault's index, opened once per Storage and kept there for the next search."""
    if storage.search_index is None:
        state = location.state_dir(storage.root)
        if location.is_users_copy(state):
            location.note_copy(state, storage.root, lambda: _first_commits(storage))
        storage.search_index = SearchIndex(state, Corpus(storage), model_spec(storage), notify=storage.notify,
                                           cache_path=storage.embedding_cache)
    return storage.search_index


def _first_commits(storage: Storage) -> list[str]:
    """The vault's root commits: what names it whatever path it is reached by."""
    from git import GitCommandError

    try:
        return storage.git.run("rev-list", "--max-parents=0", "HEAD").split()
    except GitCommandError:
        return []  # no commit yet


@contextmanager
def _reporting(index: SearchIndex, progress: Progress | None) -> Iterator[None]:
    """Send the index's long work (first build, embedding) to `progress` for one call."""
    previous = index.progress
    if progress is not None:
        index.progress = progress
    try:
        yield
    finally:
        index.progress = previous


def search(storage: Storage, query: SearchQuery, *, weights: Weights = DEFAULT_WEIGHTS, dense_only: bool = False,
           progress: Progress | None = None) -> list[Hit]:
    """Hybrid search over the vault; the index is brought up to date with the files first.

    Hits scoring under the relevance floor (`query.min_score`, else ranking.MIN_SCORE) are left
    out, so a query nothing really matches returns []. `progress(phase, done, total)` hears about
    long index work this search triggers (the first build, embedding many new documents).

    Searches never wait for writers: when files or the index vanish under one (a purge deleting
    the index, a checkout replacing a log), it is asked again on what is there now.
    """
    return _asked_again(storage, lambda: _search(storage, query, weights=weights, dense_only=dense_only,
                                                 progress=progress))


def _asked_again(storage: Storage, work: Callable[[], T]) -> T:
    """`work()`, asked again (up to VANISHED_ATTEMPTS times) when files or the index vanish under it;
    in turn with the other index calls of this storage's threads."""
    for attempt in range(1, VANISHED_ATTEMPTS + 1):
        try:
            with storage.index_turn:
                return work()
        except Exception as e:
            if attempt == VANISHED_ATTEMPTS or not _vanished(e):
                raise
            storage.close()  # the generation that went away
            time.sleep(0.05 * 2 ** attempt)
    raise AssertionError("unreachable")


def _vanished(error: Exception) -> bool:
    """Did a file or folder the search was reading go away (Tantivy says it in its own words)? A
    generation this process was building or reading that a purge in another process deleted reads
    as damaged (sqlite's "disk I/O error" on a deleted file): the next try opens the new one."""
    if isinstance(error, (FileNotFoundError, NotADirectoryError, IndexDamaged)):
        return True
    text = str(error)
    # e.g. "Failed to open file for read: 'FileDoesNotExist(\"meta.json\")'", "...NotFound..."
    return isinstance(error, ValueError) and any(word in text for word in ("NotFound", "DoesNotExist", "No such file"))


def _search(storage: Storage, query: SearchQuery, *, weights: Weights, dense_only: bool,
            progress: Progress | None) -> list[Hit]:
    filters = filters_of(storage, query)
    index = engine(storage)
    reranking = query.rerank and not query.lexical_only and storage.config.rerank.enabled
    if reranking:
        _reranker(storage).load_ahead()
    with _reporting(index, progress):
        index.refresh(embed=not query.lexical_only)
    generation = index.open()
    if not query.lexical_only:
        generation.vectors.verify_ahead()  # (a first search: while it loads the model, searches the words)
    if filters.watermark is not None:
        filters = replace(filters, unconsolidated=unconsolidated(storage, generation, filters.watermark))
    lexical, ideal, dense, candidates = _candidates(index, generation, query, filters, weights, dense_only)
    if weights.noise is None:
        weights = for_model(weights, index.model.profile.noise)
    ranked, superseded = _ranked(storage, generation, query, lexical, ideal, dense, candidates, weights,
                                 reranking=reranking)
    return _hits(generation, query, ranked, superseded)


def _candidates(index: SearchIndex, generation: Generation, query: SearchQuery, filters: Filters, weights: Weights,
                dense_only: bool) -> tuple[list | None, float, list | None, dict]:
    """Both halves' best matches (lexical with its ideal score, dense) and the catalog's ranking
    rows of every document either found, within the query's exact time bounds."""
    wanted = max(CANDIDATES_MIN, query.limit * CANDIDATES_PER_HIT)
    # None = that half was not asked (or has no model); [] = asked, and nothing matched.
    lexical, ideal = (None, 0.0) if dense_only else generation.lexical.search(query.text, filters, wanted,
                                                                              context=weights.context)
    dense, vector = (None, None) if query.lexical_only else dense_half(index, generation, query.text, filters, wanted)
    candidates = generation.catalog.ranking_of({k for k, _ in lexical or ()} | {k for k, _ in dense or ()})
    if lexical and dense is not None:
        dense = dense + cosines(generation, candidates, vector, {k for k, _ in lexical} - {k for k, _ in dense})
    if query.since or query.until:
        # The index filters whole days; the exact bound (a time of day, `12h`) is checked here.
        candidates = {k: c for k, c in candidates.items() if within(c.at, query.since, query.until)}
    return lexical, ideal, dense, candidates


def _ranked(storage: Storage, generation: Generation, query: SearchQuery, lexical: list | None, ideal: float,
            dense: list | None, candidates: dict, weights: Weights, *,
            reranking: bool) -> tuple[list[Ranked], dict[str, str]]:
    """The candidates in their final order: fused, judged by the reranker, newest state first,
    current facts before the ones they supersede; and which fact supersedes each superseded one."""
    intent = read_intent(query.text)
    ranked = fuse(lexical, ideal, dense, candidates, intent, weights)
    if reranking:
        first = ranked[:storage.config.rerank.candidates]
        judged_by = judgement(_reranker(storage), generation.catalog, query.text, first, candidates, weights.replies)
        ranked = judged(ranked, judged_by, weights)
    ranked = newest_first(ranked, candidates, intent, lambda keys: similarity(generation, candidates, keys),
                          weights)
    return current_first(ranked, generation.catalog, intent, lambda at: within(at, query.since, query.until))


def _hits(generation: Generation, query: SearchQuery, ranked: list[Ranked], superseded: dict[str, str]) -> list[Hit]:
    """The hits over the relevance floor, as many as asked, with what the catalog holds of each."""
    floor = MIN_SCORE if query.min_score is None else float(query.min_score)
    best = [r for r in ranked if r.score >= floor][:query.limit]
    docs = generation.catalog.by_keys(item.key for item in best)
    hits = []
    for item in best:
        doc = docs.get(item.key)
        if doc is None:
            continue  # removed by another process a moment ago
        hits.append(
            Hit(
                id=doc.key,
                kind=doc.kind,
                text=doc.text,
                score=item.score,
                at=doc.at,
                category=doc.category,
                tags=list(doc.tags),
                source=doc.source,
                path=doc.file,
                heading=doc.heading,
                session=doc.session,
                secret=doc.secret,
                supersedes=doc.supersedes,
                superseded_by=superseded.get(doc.key),
                explain={**item.explain, "min_score": floor} if query.explain else None,
            )
        )
    return hits


def _reranker(storage: Storage) -> Reranker:
    """The vault's reranker, kept beside its index (the model itself loads once per process)."""
    index = engine(storage)
    spec = rerank_spec(storage)
    if index.reranker is None or index.reranker.spec != spec:
        index.reranker = Reranker(spec, notify=storage.notify)
    return index.reranker


def reindex(storage: Storage, clear: bool = False, progress: Progress | None = None) -> dict:
    """Bring the index up to date (or rebuild it from scratch, aside); returns what was done.

    A rebuild fills its new generation outside the index lock, so a purge in another process may
    delete it midway (with the whole index folder): it is then done again on what is there now."""
    started = time.perf_counter()
    return _asked_again(storage, lambda: _reindex(storage, clear, progress, started))


def _reindex(storage: Storage, clear: bool, progress: Progress | None, started: float) -> dict:
    index = engine(storage)
    with _reporting(index, progress):
        if clear or not index.exists():
            # An explicit rebuild (or the first build) needs no "index missing" notice.
            report = index.rebuild()
        else:
            report = index.refresh(embed=True)
            index.verified_vectors(index.open())  # damaged rows are recomputed, with a notice
        status = index.open().catalog
        counts = _kinds(status)
    return {
        "facts": counts.get("fact", 0),
        "sections": counts.get("page", 0),
        "embedded": report.embedded,
        "reused": report.reused,
        "removed": report.removed,
        "pending_embeddings": status.slots.pending_count(),
        "seconds": round(time.perf_counter() - started, 3),
    }


def purge_index(storage: Storage, texts: list[str], progress: Progress | None = None) -> dict:
    """Drop every trace of these texts from the index's folder: the whole index (Tantivy keeps deleted
    documents in its segments until a merge, so it is deleted, not edited) and their vectors in
    the embedding cache; then rebuild the index from the files if there was one."""
    import shutil

    from memvault.index.documents import Document
    from memvault.index.embedder import content_hash
    from memvault.index.embedding_cache import EmbeddingCache

    index = engine(storage)
    built = index.exists()
    removed = 0
    with storage.index_turn, index.lock():
        storage.close()  # the open generation, if any: its files are about to go
        shutil.rmtree(index.root, ignore_errors=True)
        shutil.rmtree(index.state / STATE_ASOF, ignore_errors=True)  # the vault as of past commits too
        # This user's copies of the vault made while it could not be written hold them too.
        location.delete_copies(storage.root, _first_commits(storage))
        cache_path = index.cache_path
        if cache_path.exists():
            cache = EmbeddingCache(cache_path, model_spec(storage).identity, notify=storage.notify)
            try:
                hashes = {content_hash(Document(key="", kind="fact", text=t, file="").search_text) for t in texts}
                hashes |= {content_hash(t) for t in texts}
                removed = cache.forget(hashes)
            finally:
                cache.close()
    report: dict = {"rebuilt": False, "vectors_removed": removed}
    if built:
        report.update(reindex(storage, clear=True, progress=progress), rebuilt=True)
    return report


def _kinds(catalog) -> dict[str, int]:
    return dict(catalog.db.execute("SELECT kind, count(*) FROM docs GROUP BY kind"))


def index_status(storage: Storage, verify: bool = False) -> dict:
    """Documents indexed, documents still without a vector, and files that differ from the index;
    with `verify`, every vector row and catalog page is read and checked (doctor)."""
    return _asked_again(storage, lambda: engine(storage).status(verify=verify))


def refill_embedding_cache(storage: Storage) -> int:
    """Put the index's verified vectors back into the (emptied) embedding cache; how many."""
    with storage.index_turn:
        return engine(storage).refill_cache()


def index_built(storage: Storage) -> bool:
    """Whether a search index exists (a cheap check: nothing is opened or built)."""
    return engine(storage).exists()
