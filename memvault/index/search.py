"""Search, reindex and status for a vault: what `Vault.search` and the CLI call."""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from typing import Any, Iterator

from memvault.errors import InvalidInput
from memvault.index.corpus import Corpus
from memvault.index.embedder import ModelSpec, ModelUnavailable
from memvault.index.hits import Hit
from memvault.index.indexer import Progress, SearchIndex, stderr_notice
from memvault.index.lexical import Filters
from memvault.index.ranking import DEFAULT_WEIGHTS, Weights, fuse

MAX_LIMIT = 1000
# Each list contributes this many candidates per requested hit (at least CANDIDATES_MIN) to fusion.
CANDIDATES_PER_HIT = 5
CANDIDATES_MIN = 50

# One index per (vault, model) per process: a warm process pays the model load and opening once.
_engines: dict[tuple[str, str, str | None], SearchIndex] = {}


def model_spec(vault: Any) -> ModelSpec:
    config = vault.config
    return ModelSpec(name=config.embed_model, path=config.embed_model_path)


def engine(vault: Any) -> SearchIndex:
    """The vault's index in this process (opened once, kept for the next search)."""
    spec = model_spec(vault)
    key = (str(vault.root), spec.name, spec.path)
    found = _engines.get(key)
    if found is None:
        found = SearchIndex(vault.state_dir, Corpus(vault), spec, notify=stderr_notice)
        _engines[key] = found
    return found


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


def forget_engines() -> None:
    """Close every cached index (tests, and long-lived processes switching vaults)."""
    for index in _engines.values():
        index.close()
    _engines.clear()


def _filters(vault: Any, category, tag, source, since, until, include_all) -> tuple[Filters, datetime | None, datetime | None]:
    if category is not None and category not in vault.config.categories:
        raise InvalidInput(f"unknown category {category!r}; use one of: {', '.join(vault.config.categories)}")
    for name, value in (("tag", tag), ("source", source)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise InvalidInput(f"--{name} must be a non-empty string")
    lower = _bound(vault, since, end=False, option="--since")
    upper = _bound(vault, until, end=True, option="--until")
    if lower and upper and lower > upper:
        raise InvalidInput("--since is after --until")
    watermark = None if include_all else vault.watermark
    return (
        Filters(
            category=category,
            tag=tag,
            source=source,
            since=_day(lower),
            until=_day(upper),
            watermark=_day(watermark),
        ),
        lower,
        upper,
    )


def _bound(vault: Any, value, *, end: bool, option: str) -> datetime | None:
    from memvault.dates import parse_bound

    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=vault.tz)
    if hasattr(value, "isoformat") and not isinstance(value, str):
        value = value.isoformat()
    if not isinstance(value, str):
        raise InvalidInput(f"{option} must be a date")
    return parse_bound(value, vault.tz, end=end, option=option)


def _day(value) -> int | None:
    if value is None:
        return None
    return value.year * 10000 + value.month * 100 + value.day


def search(
    vault: Any,
    query: str,
    *,
    limit: int = 10,
    category: str | None = None,
    tag: str | None = None,
    source: str | None = None,
    since=None,
    until=None,
    include_all: bool = False,
    lexical_only: bool = False,
    explain: bool = False,
    weights: Weights = DEFAULT_WEIGHTS,
    dense_only: bool = False,
    progress: Progress | None = None,
) -> list[Hit]:
    """Hybrid search over the vault; the index is brought up to date with the files first.

    `progress(phase, done, total)` hears about long index work this search triggers (the first
    build, embedding many new documents).
    """
    if not isinstance(query, str) or not query.strip():
        raise InvalidInput("search query is empty")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be a whole number from 1 to {MAX_LIMIT}")
    filters, lower, upper = _filters(vault, category, tag, source, since, until, include_all)

    index = engine(vault)
    with _reporting(index, progress):
        index.refresh(embed=not lexical_only)
    generation = index.open()
    catalog = generation.catalog
    if filters.watermark is not None:
        filters = replace(filters, unconsolidated=_unconsolidated(vault, generation, filters.watermark))
    wanted = max(CANDIDATES_MIN, limit * CANDIDATES_PER_HIT)

    # None = that half was not asked (or has no model); [] = asked, and nothing matched.
    lexical = None if dense_only else generation.lexical.search(query, filters, wanted)
    dense = None if lexical_only else _dense(index, generation, query, filters, wanted)

    candidates = catalog.ranking_of({k for k, _ in lexical or ()} | {k for k, _ in dense or ()})
    if lower or upper:
        # The index filters whole days; the exact bound (a time of day, `12h`) is checked here.
        candidates = {k: c for k, c in candidates.items() if _within(c.at, lower, upper)}
    best = fuse(lexical, dense, candidates, weights)[:limit]
    docs = catalog.by_keys(r.key for r in best)
    hits = []
    for ranked in best:
        doc = docs.get(ranked.key)
        if doc is None:
            continue  # removed by another process a moment ago
        hits.append(
            Hit(
                id=doc.key,
                kind=doc.kind,
                text=doc.text,
                score=ranked.score,
                at=doc.at,
                category=doc.category,
                tags=list(doc.tags),
                source=doc.source,
                path=doc.file,
                heading=doc.heading,
                explain=ranked.explain if explain else None,
            )
        )
    return hits


def _dense(index: SearchIndex, generation, query: str, filters: Filters, wanted: int) -> list[tuple[str, float]] | None:
    import numpy as np

    try:
        vector = index.query_embedder.embed_query(query)
    except ModelUnavailable as exc:
        index.model_unavailable(exc)
        return None
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
    return [(by_slot[s], score) for s, score in best if s in by_slot][:wanted]


def _unconsolidated(vault: Any, generation, watermark: int) -> frozenset[str]:
    """Facts up to the watermark that no page carries (skipped batches, late facts): still in scope.

    Dream's rule for accounted facts (memvault.dream.planner.accounted_ids: cited by a page, or
    settled in log.md), with the facts taken from the index rather than from parsing every log;
    the answer is kept until the index or log.md changes.
    """
    try:
        st = (vault.root / "log.md").stat()
        stamp = (st.st_mtime_ns, st.st_size)
    except FileNotFoundError:
        stamp = None
    memo = ("unconsolidated", generation.version, stamp, watermark)
    found = generation.memo.get(memo)
    if found is None:
        from memvault.dream.planner import accounted_ids, read_journal

        entries = read_journal(vault)
        accounted = accounted_ids(vault, [e for e in entries if e.outcome != "skipped"])
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


def reindex(vault: Any, clear: bool = False, progress: Progress | None = None) -> dict:
    """Bring the index up to date (or rebuild it from scratch, aside); returns what was done."""
    started = time.perf_counter()
    index = engine(vault)
    with _reporting(index, progress):
        if clear or not index.exists():
            # An explicit rebuild (or the first build) needs no "index missing" notice.
            report = index.rebuild()
        else:
            report = index.refresh(embed=True)
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


def _kinds(catalog) -> dict[str, int]:
    return dict(catalog.db.execute("SELECT kind, count(*) FROM docs GROUP BY kind"))


def index_status(vault: Any) -> dict:
    """Documents indexed, documents still without a vector, and files that differ from the index."""
    return engine(vault).status()
