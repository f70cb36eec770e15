"""The dense half of a search: the query's nearest documents by the cosine of their vectors, within
the query's filters, and the cosines search needs beyond them."""

from __future__ import annotations

from dataclasses import replace

from memvault.index.embedder import ModelUnavailable
from memvault.index.generation import Generation
from memvault.index.indexer import SearchIndex
from memvault.index.lexical import Filters
from memvault.index.vectors import VectorsDamaged


def dense_half(index: SearchIndex, generation: Generation, query: str, filters: Filters, wanted: int):
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
        where, params = sql_filters(filters)
        # The default scope (after a dream) filters every search the same way: keep its slots
        # for as long as the index does not change, instead of scanning the catalog each time.
        memo = (generation.version, where, tuple(params), len(filters.unconsolidated))
        slots = generation.memo.get(memo)
        if slots is None:
            found = catalog.slots.where(where, params)
            if filters.unconsolidated:
                # Facts brought into scope by id: the same filters, without the watermark, on those ids.
                rest, rest_params = sql_filters(replace(filters, watermark=None))
                found = sorted(set(found) | set(catalog.slots.where(rest, rest_params, filters.unconsolidated)))
            slots = np.asarray(found, dtype=np.int64)
            if len(generation.memo) > 16:
                generation.memo.clear()
            generation.memo[memo] = slots
        best = generation.vectors.top(vector, wanted, slots)
    else:
        # Rows of deleted documents are dead space in the vector file: ask for a margin and skip them.
        best = generation.vectors.top(vector, wanted + 16)
    by_slot = catalog.slots.keys_of(s for s, _ in best)
    return [(by_slot[s], score) for s, score in best if s in by_slot][:wanted], vector


def cosines(generation: Generation, candidates, vector, keys: set[str]) -> list[tuple[str, float]]:
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


def similarity(generation: Generation, candidates, keys: list[str]):
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


def sql_filters(filters: Filters) -> tuple[str, list[str | int]]:
    """The dense half's filters; lexical.LexicalIndex._filter_queries says the same to Tantivy."""
    clauses: list[str] = []
    params: list[str | int] = []
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
