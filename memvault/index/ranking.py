"""Ranking: how well each candidate matches, on a fixed scale, then its thread, the dates and time.

A candidate's match is the mean of two parts that mean the same thing for every query:

- words: its BM25 score over the query's ideal score (`LexicalIndex.ideal_score`), at most 1:
  about the share of the query's words it holds, rare words weighing more;
- meaning: how far the cosine of its embedding to the query's rises above `Weights.noise` (the
  cosine that all-MiniLM-L6-v2 gives unrelated sentences) on the way to 1.

So an off-topic query scores near 0 everywhere, and the relevance floor (`MIN_SCORE`) can drop
what does not really match. (Dividing each list by its best score, the previous blend, gave every
query a 1.0, and a document barely in the dense list half a score for free: on LoCoMo turns the
blend lost to its own halves. Reciprocal rank fusion was dropped before that: it scores rank 2
nearly as high as rank 1 however weak the match, and then recency buried old facts.)

Then: a fact is lifted halfway to a neighbour in its thread that matches better, a day or month
the query names lifts its facts, and recency and importance scale the result by a few percent:
enough to order documents that match about equally well, never enough to lift a weak match over
a strong one or over the floor. For a question about now, the newer of two facts about the same thing takes the
older one's place (`newest_first`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from memvault.index.intent import NO_INTENT, TimeIntent

# The default relevance floor: hits scoring below it are not returned (`min_score` overrides it).
# Measured on LoCoMo (bench/retrieval.py): it keeps >= 97% of the evidence hits, while off-topic
# and nonsense queries return nothing.
MIN_SCORE = 0.05
# For a question about now, the facts (among the first NEWEST_WINDOW) that may replace each other.
NEWEST_WINDOW = 20


@dataclass(frozen=True)
class Weights:
    lexical: float = 1.0
    dense: float = 1.0
    noise: float | None = None  # cosine below which the embedding says nothing; None: the model's (index/models.py)
    sure: float = 1.0         # cosine from which the embedding says "same meaning"
    topic_span: float = 0.15  # best cosine above noise at which the query is surely about the vault
    whole: float = 0.75       # share of the query's words that counts as holding all of it
    context: float = 0.5      # weight of the previous fact's words (a reply is found by its question)
    thread: float = 0.5       # share of the gap to a better-matching thread neighbour
    day: float = 0.15         # the query names the fact's day
    month: float = 0.05       # the query names the fact's month
    recency: float = 0.05
    importance: float = 0.02
    # Cosine between two facts' embeddings above which the newer one is taken as the newer state
    # of the same thing: for a question that says "now" (or "currently", "latest"), for one in the
    # present tense only (near-restatements), and when the newer fact is a correction.
    same_subject: float = 0.45
    restated: float = 0.85
    correction_subject: float = 0.3
    state_share: float = 0.25  # the newer fact matches the question at least this share as well
    newest: bool = True
    rerank: float = 0.5        # share of the reranker's relevance in the score of what it read
    replies: bool = True       # the reranker reads a reply after the question it follows

    @property
    def noise_level(self) -> float:
        """`noise`, which `for_model` sets before anything is fused (search does it first)."""
        assert self.noise is not None, "Weights.noise is unset: call for_model first"
        return self.noise


DEFAULT_WEIGHTS = Weights()
# The noise level the cosine thresholds above were measured at (all-MiniLM-L6-v2's).
REFERENCE_NOISE = 0.35


def for_model(weights: Weights, noise: float) -> Weights:
    """The weights for an embedding model whose cosines say nothing below `noise`: the noise level,
    and the cosines measured with all-MiniLM-L6-v2 (topic span, same-subject thresholds) moved to
    the same place between the model's noise level and 1."""
    def moved(cosine: float) -> float:
        return noise + (cosine - REFERENCE_NOISE) * (1 - noise) / (1 - REFERENCE_NOISE)

    return replace(weights, noise=noise, topic_span=weights.topic_span * (1 - noise) / (1 - REFERENCE_NOISE),
                   same_subject=moved(weights.same_subject), restated=moved(weights.restated),
                   correction_subject=moved(weights.correction_subject))


@dataclass
class Ranked:
    key: str
    score: float
    explain: dict[str, Any]
    match: float = 0.0
    at: float | None = field(default=None, repr=False)


def _timestamp(at: str | None) -> float | None:
    if not at:
        return None
    try:
        return datetime.fromisoformat(at).timestamp()
    except ValueError:
        return None


def _ranks(hits: Sequence[tuple[str, float]]) -> dict[str, int]:
    """Position of each key; equal raw scores (identical texts, say) share a rank."""
    ranks: dict[str, int] = {}
    rank, previous = 0, None
    for position, (key, raw) in enumerate(hits, 1):
        if previous is None or abs(raw - previous) > 1e-6 * max(1.0, abs(raw)):
            rank, previous = position, raw
        ranks.setdefault(key, rank)
    return ranks


def _topic(dense: Sequence[tuple[str, float]] | None, weights: Weights) -> float:
    """How near the query's meaning comes to anything searched: 0 when the best cosine is at the
    noise level, 1 from `topic_span` above it (every LoCoMo question; no off-topic query). 1 when
    the dense half did not run: then nothing is known."""
    if dense is None:
        return 1.0
    best = max((float(raw) for _k, raw in dense), default=0.0)
    return min(1.0, max(0.0, (best - weights.noise_level) / weights.topic_span))


def fuse(
    lexical: Sequence[tuple[str, float]] | None,
    ideal: float,
    dense: Sequence[tuple[str, float]] | None,
    docs: Mapping[str, Any],
    intent: TimeIntent = NO_INTENT,
    weights: Weights = DEFAULT_WEIGHTS,
) -> list[Ranked]:
    """Rank the union of both candidate lists; `docs` maps key -> catalog.Ranking of each candidate.

    `lexical` holds BM25 scores (with `ideal`, the query's ideal score), `dense` cosines; None is
    a half that was not asked (--lexical, or no model), and does not count in the mean.
    """
    signals = _matches(lexical, ideal, dense, docs, weights)
    match = {key: sum(s["contribution"] for s in entry.values()) for key, entry in signals.items()}
    neighbours = _thread_neighbours(signals, docs)
    clock = _Clock({key: _timestamp(docs[key].at) for key in signals})
    days = {d.isoformat() for d in intent.days}
    months = {f"{y:04d}-{m:02d}" for y, m in intent.months}

    ranked: list[Ranked] = []
    for key, entry in signals.items():
        better = max(neighbours[key], key=lambda k: match[k], default=None)
        if better is not None and match[better] > match[key]:
            entry["thread"] = {"neighbour": better, "contribution": weights.thread * (match[better] - match[key])}
        named = _named_date(docs[key].at or "", days, months, weights)
        if named is not None:
            entry["date"] = named
        _scale_by_time_and_importance(entry, docs[key], clock.newness(key), weights)
        total = sum(signal["contribution"] for signal in entry.values())
        for signal in entry.values():
            signal["contribution"] = round(signal["contribution"], 6)
        entry["total"] = round(total, 6)
        ranked.append(Ranked(key, total, entry, match=match[key], at=clock.times[key]))
    ranked.sort(key=lambda r: (-r.score, r.key))
    return ranked


def _matches(lexical: Sequence[tuple[str, float]] | None, ideal: float, dense: Sequence[tuple[str, float]] | None,
             docs: Mapping[str, Any], weights: Weights) -> dict[str, dict[str, Any]]:
    """Each candidate's words and meaning parts (rank, raw score, contribution to the match)."""
    asked = [(name, hits, w) for name, hits, w in (("lexical", lexical, weights.lexical),
                                                    ("dense", dense, weights.dense)) if hits is not None]
    scale = sum(w for _n, _h, w in asked) or 1.0
    topic = _topic(dense, weights)
    signals: dict[str, dict[str, Any]] = {}
    for name, hits, weight in asked:
        ranks = _ranks(hits)
        for key, raw in hits:
            if key not in docs or name in signals.get(key, {}):
                continue
            entry: dict[str, Any] = {"rank": ranks[key], "score": round(float(raw), 6)}
            if name == "lexical":
                part = _words_part(float(raw), ideal, topic, entry, weights)
            else:
                part = min(1.0, max(0.0, (float(raw) - weights.noise_level) / (weights.sure - weights.noise_level)))
                if part <= 0:
                    continue  # below the noise level: the embedding says nothing
            entry["contribution"] = weight * part / scale
            signals.setdefault(key, {})[name] = entry
    return signals


def _words_part(raw: float, ideal: float, topic: float, entry: dict[str, Any], weights: Weights) -> float:
    part = min(1.0, raw / ideal) if ideal > 0 else 0.0
    # When nothing searched is near the query's meaning, a fact holding only part of its words
    # shares a word by chance ("nothing", "join"), not the topic: it counts as much as the query
    # is on topic. A fact holding (nearly) all of them still counts.
    if topic < 1.0 and part < weights.whole:
        entry["topic"] = round(topic, 6)
        part *= topic
    return part


def _thread_neighbours(signals: Mapping[str, Any], docs: Mapping[str, Any]) -> dict[str, list[str]]:
    """The previous and next fact of the same session, when they are candidates too."""
    neighbours: dict[str, list[str]] = {key: [] for key in signals}
    for key in signals:
        prev = docs[key].prev
        if prev in neighbours:
            neighbours[key].append(prev)
            neighbours[prev].append(key)
    return neighbours


class _Clock:
    """Where each candidate's time falls between the oldest (0) and the newest (1) candidate."""

    def __init__(self, times: dict[str, float | None]):
        self.times = times
        known = [t for t in times.values() if t is not None]
        self.oldest, newest = (min(known), max(known)) if known else (0.0, 0.0)
        self.span = newest - self.oldest

    def newness(self, key: str) -> float:
        stamp = self.times[key]
        return (stamp - self.oldest) / self.span if (stamp is not None and self.span > 0) else 0.5


def _named_date(at: str, days: set[str], months: set[str], weights: Weights) -> dict[str, Any] | None:
    if at[:10] in days:
        return {"named": at[:10], "contribution": weights.day}
    if at[:7] in months:
        return {"named": at[:7], "contribution": weights.month}
    return None


def _scale_by_time_and_importance(entry: dict[str, Any], doc: Any, newness: float, weights: Weights) -> None:
    """Recency and importance scale the match by a few percent: they order equal matches (the
    newer of two conflicting facts wins) and never lift a weak match over the floor."""
    base = sum(signal["contribution"] for signal in entry.values())
    importance = doc.importance
    entry["recency"] = {"at": doc.at, "contribution": base * weights.recency * newness}
    entry["importance"] = {"value": importance, "contribution": base * weights.importance * (
        0.5 if importance is None else float(importance))}


def newest_first(ranked: list[Ranked], docs: Mapping[str, Any], intent: TimeIntent,
                 similarity: Callable[[list[str]], Any], weights: Weights = DEFAULT_WEIGHTS) -> list[Ranked]:
    """Put the newest state of a thing first when the question is about now.

    Among the first NEWEST_WINDOW hits, a newer fact about the same subject as an older, better
    ranked one, that matches the question at least `state_share` as well, takes the older fact's
    score plus a hair, so it is listed just above it. "The same subject" is a cosine between the two facts'
    embeddings of at least `same_subject` when the question says "now", `restated` when it is
    only in the present tense, `correction_subject` when the newer fact is a `correction` (any
    question not about the past). Questions about the past keep the plain order.
    `similarity(keys)` is the matrix of the facts' cosines, or None (no vectors: no change).
    """
    if not weights.newest or intent.tense == "past" or len(ranked) < 2:
        return ranked
    window = ranked[:NEWEST_WINDOW]
    by_tense = {"now": weights.same_subject, "present": weights.restated}.get(intent.tense)
    if by_tense is None and not any(docs[r.key].category == "correction" for r in window):
        return ranked
    matrix = similarity([r.key for r in window])
    if matrix is None:
        return ranked
    position = {r.key: i for i, r in enumerate(window)}

    def cosine(newer: Ranked, older: Ranked) -> float:
        return matrix[position[newer.key]][position[older.key]]

    dated = sorted(((r.at, r) for r in window if r.at is not None), key=lambda pair: pair[0])
    for at, newer in dated:
        threshold = _same_subject(docs[newer.key].category, by_tense, weights)
        if threshold is None:
            continue
        over = _older_state(newer, at, window, cosine, threshold, weights)
        if over is not None:
            lift = over.score - newer.score + 0.001
            newer.explain["newer_state"] = {"over": over.key, "contribution": round(lift, 6)}
            newer.score += lift
            newer.explain["total"] = round(newer.score, 6)
    ranked.sort(key=lambda r: (-r.score, r.key))
    return ranked


def _same_subject(category: str | None, by_tense: float | None, weights: Weights) -> float | None:
    """The cosine from which an older fact is about the same subject as a newer one of this category
    (the lower of the tense's threshold and a correction's); None when neither applies."""
    thresholds = [by_tense] if by_tense is not None else []
    if category == "correction":
        thresholds.append(weights.correction_subject)
    return min(thresholds) if thresholds else None


def _older_state(newer: Ranked, at: float, window: list[Ranked], cosine: Callable[[Ranked, Ranked], float],
                 threshold: float, weights: Weights) -> Ranked | None:
    """The best-scored older, better-ranked fact that `newer` (dated `at`) is a newer state of."""
    over: Ranked | None = None
    for older in window:
        if older.at is None or older.at >= at or older.score < newer.score:
            continue
        if newer.match < weights.state_share * older.match:
            continue  # the newer fact hardly answers the question
        if cosine(newer, older) >= threshold and (over is None or older.score > over.score):
            over = older
    return over


def judged(ranked: list[Ranked], judgement: Mapping[str, tuple[float, float]], weights: Weights = DEFAULT_WEIGHTS,
           ) -> list[Ranked]:
    """Blend the reranker's judgement (key -> (logit, relevance 0..1)) into the scores.

    A candidate it read scores (1 - share) x its fused score + share x its relevance; one it did
    not read (past the first few) counts as judged irrelevant, so it stays below every candidate
    that was read and scored at least as well before. Each fused signal's contribution is scaled
    the same way, so the explanation still adds up to the score.
    """
    if not judgement:
        return ranked
    share = weights.rerank
    order = sorted(judgement, key=lambda key: (-judgement[key][0], key))
    rank = {key: position for position, key in enumerate(order, 1)}
    for item in ranked:
        for signal in item.explain.values():
            if isinstance(signal, dict) and "contribution" in signal:
                signal["contribution"] = round(signal["contribution"] * (1 - share), 6)
        item.score *= 1 - share
        if item.key in judgement:
            logit, relevance = judgement[item.key]
            item.explain["rerank"] = {"rank": rank[item.key], "score": round(logit, 6),
                                      "relevance": round(relevance, 6), "contribution": round(share * relevance, 6)}
            item.score += share * relevance
        item.explain["total"] = round(item.score, 6)
    ranked.sort(key=lambda r: (-r.score, r.key))
    return ranked
