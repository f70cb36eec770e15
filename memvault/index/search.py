"""Search, reindex and status for a vault: what `Vault.search` and the CLI call."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from typing import TypeVar

from memvault.base.dates import log_days
from memvault.formats.facts import validate_category
from memvault.formats.layout import DREAM_LOG, STATE_ASOF
from memvault.index import location
from memvault.index.corpus import Corpus
from memvault.index.current import current_first
from memvault.index.documents import model_text
from memvault.index.embedder import ModelSpec, ModelUnavailable
from memvault.index.hits import Hit
from memvault.index.indexer import IndexDamaged, Progress, SearchIndex
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
from memvault.index.rerank import Reranker, RerankSpec
from memvault.index.vectors import VectorsDamaged
from memvault.storage.store import Storage
from memvault.storage.wiki import accounted_ids, withheld_pages

# Each list contributes this many candidates per requested hit (at least CANDIDATES_MIN) to fusion.
CANDIDATES_PER_HIT = 5
CANDIDATES_MIN = 50
# What the reranker reads of the question a reply follows (its end: where the question is).
QUESTION_READ_CHARS = 500
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


def _filters(storage: Storage, query: SearchQuery) -> Filters:
    category = validate_category(query.category, storage.config.categories) if query.category is not None else None
    watermark = None if query.include_all else storage.dreams.watermark
    # Whole days, with a day's slack for facts written in another zone; _within checks the bounds.
    first, last = log_days(query.since, query.until)
    return Filters(category=category, tag=query.tag, source=query.source, session=query.session,
                   since=_day(first), until=_day(last), watermark=_day(watermark))


def _day(value) -> int | None:
    if value is None:
        return None
    return value.year * 10000 + value.month * 100 + value.day


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
    filters = _filters(storage, query)
    lower, upper = query.since, query.until

    index = engine(storage)
    reranking = query.rerank and not query.lexical_only and storage.config.rerank.enabled
    if reranking:
        _reranker(storage).load_ahead()
    with _reporting(index, progress):
        index.refresh(embed=not query.lexical_only)
    generation = index.open()
    catalog = generation.catalog
    if filters.watermark is not None:
        filters = replace(filters, unconsolidated=_unconsolidated(storage, generation, filters.watermark))
    wanted = max(CANDIDATES_MIN, query.limit * CANDIDATES_PER_HIT)

    # None = that half was not asked (or has no model); [] = asked, and nothing matched.
    lexical, ideal = (None, 0.0) if dense_only else generation.lexical.search(query.text, filters, wanted,
                                                                              context=weights.context)
    dense, vector = (None, None) if query.lexical_only else _dense(index, generation, query.text, filters, wanted)

    candidates = catalog.ranking_of({k for k, _ in lexical or ()} | {k for k, _ in dense or ()})
    if lexical and dense is not None:
        dense = dense + _cosines(generation, candidates, vector, {k for k, _ in lexical} - {k for k, _ in dense})
    if lower or upper:
        # The index filters whole days; the exact bound (a time of day, `12h`) is checked here.
        candidates = {k: c for k, c in candidates.items() if _within(c.at, lower, upper)}
    intent = read_intent(query.text)
    if weights.noise is None:
        weights = for_model(weights, index.model.profile.noise)
    ranked = fuse(lexical, ideal, dense, candidates, intent, weights)
    if reranking:
        ranked = judged(ranked, _judgement(storage, catalog, query.text, ranked, candidates, weights.replies), weights)
    ranked = newest_first(ranked, candidates, intent, lambda keys: _similarity(generation, candidates, keys),
                          weights)
    ranked, superseded = current_first(ranked, catalog, intent, lambda at: _within(at, lower, upper))
    floor = MIN_SCORE if query.min_score is None else float(query.min_score)
    best = [r for r in ranked if r.score >= floor][:query.limit]
    docs = catalog.by_keys(item.key for item in best)
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


def _judgement(storage: Storage, catalog, query: str, ranked: list[Ranked], candidates: dict,
               replies: bool = True) -> dict[str, tuple[float, float]]:
    """The reranker's (logit, relevance) for the first candidates; {} without its model."""
    first = ranked[:storage.config.rerank.candidates]
    reranker = _reranker(storage)
    if not first:
        reranker.settle()
        return {}
    if not reranker.available():
        return {}
    docs = catalog.by_keys([item.key for item in first] +
                           [candidates[item.key].prev for item in first if candidates[item.key].prev])
    keys = [item.key for item in first if item.key in docs]
    texts = [_as_read(docs[key], docs.get(candidates[key].prev or "") if replies else None) for key in keys]
    profile = reranker.spec.profile
    return {key: (logit, profile.relevance(logit)) for key, logit in zip(keys, reranker.logits(query, texts),
                                                                         strict=True)}


def _as_read(doc, prev) -> str:
    """What the reranker reads of a candidate: a reply to a question is read after the question,
    so "Yes, clarinet and violin" answers "What instruments does she play?" as the thread did."""
    text = model_text(doc.kind, doc.text, doc.title, doc.heading)
    if prev is not None and not prev.secret:
        asked = model_text(prev.kind, prev.text)
        if asked.rstrip().endswith("?"):
            return f"{asked[-QUESTION_READ_CHARS:]}\n{text}"
    return text


def _reranker(storage: Storage) -> Reranker:
    """The vault's reranker, kept beside its index (the model itself loads once per process)."""
    index = engine(storage)
    spec = rerank_spec(storage)
    if index.reranker is None or index.reranker.spec != spec:
        index.reranker = Reranker(spec, notify=storage.notify)
    return index.reranker


def _dense(index: SearchIndex, generation, query: str, filters: Filters, wanted: int):
    """(key, cosine) of the `wanted` nearest documents, best first, and the query's vector;
    (None, None) when there is no model or no usable vectors."""
    import numpy as np

    try:
        vector = index.query_embedder.embed_query(query)
    except ModelUnavailable as exc:
        index.model_unavailable(exc)
        return None, None
    if not index.verified_vectors(generation):
        return None, None
    catalog = generation.catalog
    if filters.any:
        where, params = _sql_filters(filters)
        # The default scope (after a dream) filters every search the same way: keep its slots
        # for as long as the index does not change, instead of scanning the catalog each time.
        memo = (generation.version, where, tuple(params), len(filters.unconsolidated))
        slots = generation.memo.get(memo)
        if slots is None:
            found = catalog.slots_where(where, params)
            if filters.unconsolidated:
                # Facts brought into scope by id: the same filters, without the watermark, on those ids.
                rest, rest_params = _sql_filters(replace(filters, watermark=None))
                found = sorted(set(found) | set(catalog.slots_where(rest, rest_params, filters.unconsolidated)))
            slots = np.asarray(found, dtype=np.int64)
            if len(generation.memo) > 16:
                generation.memo.clear()
            generation.memo[memo] = slots
        best = generation.vectors.top(vector, wanted, slots)
    else:
        # Rows of deleted documents are dead space in the vector file: ask for a margin and skip them.
        best = generation.vectors.top(vector, wanted + 16)
    by_slot = catalog.keys_of_slots(s for s, _ in best)
    return [(by_slot[s], score) for s, score in best if s in by_slot][:wanted], vector


def _cosines(generation, candidates, vector, keys: set[str]) -> list[tuple[str, float]]:
    """The cosines of lexical candidates the dense half did not list (below its cut), best first:
    every candidate's match is then the mean of both its parts, not of its words alone."""
    import numpy as np

    try:
        matrix = generation.vectors.matrix()
    except VectorsDamaged:
        return []
    found = [(k, candidates[k].slot) for k in sorted(keys)
             if k in candidates and candidates[k].slot is not None and candidates[k].slot < len(matrix)]
    if not found:
        return []
    scores = matrix[[slot for _k, slot in found]] @ np.asarray(vector, dtype=matrix.dtype)
    return sorted(((k, float(c)) for (k, _s), c in zip(found, scores, strict=True)), key=lambda kc: -kc[1])


def _similarity(generation, candidates, keys: list[str]):
    """Cosines between the stored vectors of `keys`, or None when any of them has none yet."""
    slots = [candidates[k].slot for k in keys]
    try:
        matrix = generation.vectors.matrix()
    except VectorsDamaged:
        return None  # a search by words only; the next search that scores vectors recomputes them
    if any(slot is None or slot >= len(matrix) for slot in slots):
        return None
    rows = matrix[slots]
    return rows @ rows.T


def _unconsolidated(storage: Storage, generation, watermark: int) -> frozenset[str]:
    """Facts up to the watermark that no page carries (skipped batches, late facts): still in scope.

    Dream's rule for accounted facts (memvault.storage.wiki.accounted_ids: cited by a page, or
    settled in log.md), with the facts taken from the index rather than from parsing every log;
    the answer is kept until the index or log.md changes.
    """
    try:
        st = storage.path(DREAM_LOG).stat()
        stamp = (st.st_mtime_ns, st.st_size)
    except FileNotFoundError:
        stamp = None
    memo = ("unconsolidated", generation.version, stamp, watermark)
    found = generation.memo.get(memo)
    if found is None:
        entries = storage.dreams.dream_entries()
        accounted = accounted_ids(storage, [e for e in entries if e.outcome != "skipped"],
                                  skipping=withheld_pages(storage))
        rows = generation.catalog.db.execute("SELECT key FROM docs WHERE kind = 'fact' AND day <= ?", (watermark,))
        found = frozenset(key for (key,) in rows if key not in accounted)
        generation.memo[memo] = found
    return found


def _sql_filters(filters: Filters) -> tuple[str, list]:
    """The dense half's filters; lexical.LexicalIndex._filter_queries says the same to Tantivy."""
    clauses, params = [], []
    if filters.category is not None:
        clauses.append("category = ?")
        params.append(filters.category)
    if filters.tag is not None:
        clauses.append("EXISTS (SELECT 1 FROM json_each(docs.tags) WHERE value = ?)")
        params.append(filters.tag)
    if filters.source is not None:
        clauses.append("source = ?")
        params.append(filters.source)
    if filters.session is not None:
        clauses.append("session = ?")
        params.append(filters.session)
    if filters.since is not None:
        clauses.append("day >= ?")
        params.append(filters.since)
    if filters.until is not None:
        clauses.append("day <= ?")
        params.append(filters.until)
    if filters.watermark is not None:
        clauses.append("(kind = 'page' OR day > ?)")
        params.append(filters.watermark)
    return " AND ".join(clauses) or "1", params


def _within(at: str | None, lower: datetime | None, upper: datetime | None) -> bool:
    if not at:
        return True
    try:
        moment = datetime.fromisoformat(at)
    except ValueError:
        return True
    if moment.tzinfo is None:
        # A page dated by day only: compare days, so its whole day counts as inside the bound.
        return (lower is None or moment.date() >= lower.date()) and (upper is None or moment.date() <= upper.date())
    return (lower is None or moment >= lower) and (upper is None or moment <= upper)


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
        "pending_embeddings": status.pending_count(),
        "seconds": round(time.perf_counter() - started, 3),
    }


def purge_index(storage: Storage, texts: list[str], progress: Progress | None = None) -> dict:
    """Drop every trace of these texts from the index's folder: the whole index (Tantivy keeps deleted
    documents in its segments until a merge, so it is deleted, not edited) and their vectors in
    the embedding cache; then rebuild the index from the files if there was one."""
    import shutil

    from memvault.index.documents import Document
    from memvault.index.embedder import EmbeddingCache, content_hash

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
