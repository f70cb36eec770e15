"""What `memvault status` and doctor see of the index: counts and drift, never a build or a repair."""

from __future__ import annotations

import hashlib
import sqlite3
from typing import Protocol

from memvault.errors import VaultUnwritable
from memvault.index.corpus import Corpus
from memvault.index.embedder import ModelSpec
from memvault.index.generation import Generation
from memvault.index.refresh import Scan
from memvault.index.vectors import VectorsDamaged


class CountedIndex(Protocol):
    """What the counts need of memvault.index.indexer.SearchIndex (a protocol: that module imports this one)."""

    model: ModelSpec
    corpus: Corpus
    generation: Generation | None

    def open_live(self) -> str | None: ...
    def scan(self, generation: Generation) -> Scan: ...


def index_counts(index: CountedIndex, verify: bool = False) -> dict:
    """Counts and drift; never builds or repairs (a missing or damaged index is reported as such).

    With `verify` (doctor) every vector row is checked against its checksum and the catalog by
    sqlite's quick_check, which reads them all (a fraction of a second at 100k documents).
    """
    try:
        problem = index.open_live()
    except VaultUnwritable as exc:  # a full or read-only disk: not damage, and nothing to count
        return {"documents": None, "pending_embeddings": None, "drift": None, "model": index.model.identity,
                "built_with": None, "missing": False, "damaged": None, "unavailable": str(exc)}
    if problem is None:
        assert index.generation is not None  # open_live() opened it
        # A missing or short vector file is one stat away; reading every row is doctor's `verify`.
        problem = _verify(index.generation) if verify else _vectors_present(index.generation)
    if problem is not None:
        missing = problem == "missing"
        # A missing index shows as every file drifting; a damaged one has no counts to trust.
        return {"documents": 0 if missing else None, "pending_embeddings": 0 if missing else None,
                "drift": len(index.corpus.files()) if missing else None, "model": index.model.identity,
                "built_with": None, "missing": missing, "damaged": None if missing else problem,
                "unavailable": None}
    generation = index.generation
    assert generation is not None
    generation.load_state()
    scan = index.scan(generation)
    drift = 0
    for rel, _mtime, _size in scan.stale:
        known = generation.manifest.get(rel)
        content = index.corpus.read(rel)
        if content is None:
            continue
        digest = hashlib.sha256(content.encode("utf-8", "surrogatepass")).digest()
        if known is None or known.hash != digest:
            drift += 1
    drift += len(scan.gone)
    return {
        "documents": generation.catalog.count(),
        "pending_embeddings": generation.catalog.slots.pending_count(),
        "drift": drift,
        "model": index.model.identity,
        "built_with": generation.catalog.get_meta("model"),
        "missing": False,
        "damaged": None,
        "unavailable": None,
    }


def _vectors_present(generation: Generation) -> str | None:
    generation.load_state()
    return generation.vectors.problem()


def _verify(generation: Generation) -> str | None:
    """What doctor finds wrong when it reads the whole catalog and every vector row; None if nothing."""
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
