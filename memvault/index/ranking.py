"""Fusing the lexical and dense rankings, then the small recency and importance terms.

Each list's scores are divided by the list's best score (BM25 is unbounded, cosine lives in a
narrow band) and blended, so the fused score keeps how far apart two matches are: a fact that
matches a question about an old event strongly is not overtaken by newer facts that match it
weakly. (Reciprocal rank fusion was measured too and dropped: it gives rank 2 nearly the score of
rank 1 however weak the match, and then recency buries old facts.) The fused score is 1.0 for a
document first in every list. Recency and importance add at most a few hundredths: enough to
order documents that match about equally well (the newer of two conflicting facts wins).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class Weights:
    method: str = "blend"  # or "rrf" (kept for the benchmark's comparison)
    rrf_k: float = 60.0
    lexical: float = 1.0
    dense: float = 1.0
    recency: float = 0.05
    importance: float = 0.02


DEFAULT_WEIGHTS = Weights()


@dataclass
class Ranked:
    key: str
    score: float
    explain: dict[str, Any]


def _timestamp(at: str | None) -> float | None:
    if not at:
        return None
    try:
        return datetime.fromisoformat(at).timestamp()
    except ValueError:
        return None


def fuse(
    lexical: Sequence[tuple[str, float]] | None,
    dense: Sequence[tuple[str, float]] | None,
    docs: Mapping[str, Any],
    weights: Weights = DEFAULT_WEIGHTS,
) -> list[Ranked]:
    """Rank the union of both candidate lists; `docs` maps key -> stored document (at, importance)."""
    # A half that was asked and found nothing still counts in the scale, so a match by one half
    # alone scores at most its share: scores stay comparable across queries (a threshold works).
    # A half that was not asked (None: --lexical, or no model) does not count.
    lists = [("lexical", lexical, weights.lexical), ("dense", dense, weights.dense)]
    asked = [(name, hits, w) for name, hits, w in lists if hits is not None]
    used = [(name, hits, w) for name, hits, w in asked if hits]
    if weights.method == "rrf":
        best_possible = sum(w for _n, _h, w in asked) / (weights.rrf_k + 1) or 1.0
    else:
        best_possible = sum(w for _n, _h, w in asked) or 1.0

    signals: dict[str, dict[str, Any]] = {}
    for name, hits, weight in used:
        top = max((float(raw) for _k, raw in hits), default=0.0)
        rank, previous = 0, None
        for position, (key, raw) in enumerate(hits, 1):
            # Equal scores share a rank (identical texts, say), so the small terms decide between them.
            if previous is None or abs(raw - previous) > 1e-6 * max(1.0, abs(raw)):
                rank, previous = position, raw
            if key not in docs:
                continue
            entry = signals.setdefault(key, {})
            if weights.method == "rrf":
                part = weight / (weights.rrf_k + rank)
            else:
                part = weight * max(float(raw), 0.0) / top if top > 0 else 0.0
            entry[name] = {"rank": rank, "score": round(float(raw), 6), "contribution": part / best_possible}

    # Recency is relative to the candidates: the newest gets the full term, the oldest none.
    times = {key: _timestamp(docs[key].at) for key in signals}
    known = [t for t in times.values() if t is not None]
    oldest, newest = (min(known), max(known)) if known else (0.0, 0.0)
    span = newest - oldest

    ranked: list[Ranked] = []
    for key, entry in signals.items():
        fused = sum(entry[name]["contribution"] for name in ("lexical", "dense") if name in entry)
        stamp = times[key]
        newness = (stamp - oldest) / span if (stamp is not None and span > 0) else 0.5
        importance = docs[key].importance
        importance = 0.5 if importance is None else float(importance)
        entry["recency"] = {"at": docs[key].at, "contribution": weights.recency * newness}
        entry["importance"] = {"value": docs[key].importance, "contribution": weights.importance * importance}
        total = fused + entry["recency"]["contribution"] + entry["importance"]["contribution"]
        for signal in entry.values():
            signal["contribution"] = round(signal["contribution"], 6)
        entry["total"] = round(total, 6)
        ranked.append(Ranked(key, total, entry))
    ranked.sort(key=lambda r: (-r.score, r.key))
    return ranked
