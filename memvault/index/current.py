"""Current truth in search: a fact that another fact says it supersedes (`add --supersedes`).

Both facts stay in the vault and in the index. A hit whose fact was superseded is marked with its
successor's id; unless the question is about the past, the newest fact of its chain is listed
just above it, found by the words of the older one if not by its own, so the current state comes
first. A successor outside the query's since/until is not brought in: a question about March
still gets March's fact. The explicit link is certain where `ranking.newest_first` guesses from
meaning, so it runs after it and wins.
"""

from __future__ import annotations

from collections.abc import Callable

from memvault.index.catalog import Catalog
from memvault.index.intent import TimeIntent
from memvault.index.ranking import Ranked

LIFT = 0.001
MAX_CHAIN = 100  # links followed from one fact: a hand-edited cycle must end somewhere


def successor_links(catalog: Catalog, keys: list[str]) -> dict[str, str]:
    """old key -> its newest direct successor, for the keys and the successors of their successors.
    Ids sort by creation: of two facts superseding one (two clones, then a sync) the later counts."""
    direct: dict[str, str] = {}
    frontier = list(keys)
    for _ in range(MAX_CHAIN):
        found = catalog.successors(frontier)
        frontier = []
        for old, news in found.items():
            if old not in direct:
                direct[old] = max(news)
                frontier.append(direct[old])
        if not frontier:
            break
    return direct


def newest_of(key: str, direct: dict[str, str]) -> str:
    """The end of a fact's chain of successors (itself when nothing supersedes it)."""
    seen = {key}
    while key in direct and direct[key] not in seen:
        key = direct[key]
        seen.add(key)
    return key


def current_first(ranked: list[Ranked], catalog: Catalog, intent: TimeIntent,
                  inside: Callable[[str | None], bool]) -> tuple[list[Ranked], dict[str, str]]:
    """`ranked` with each superseded fact's newest successor just above it (unless the question is
    about the past, or the successor lies outside the query's dates: `inside(at)`), and the map of
    superseded key -> direct successor for marking the hits."""
    direct = successor_links(catalog, [r.key for r in ranked])
    if not direct or intent.tense == "past":
        return ranked, direct
    by_key = {r.key: r for r in ranked}
    heads = {key: newest_of(key, direct) for key in by_key if key in direct}
    known = catalog.ranking_of(set(heads.values()) - set(by_key))
    for r in sorted(ranked, key=lambda r: -r.score):
        head = heads.get(r.key)
        if head is None or head == r.key:
            continue
        newer = by_key.get(head)
        if newer is None:
            if head not in known or not inside(known[head].at):
                continue  # forgotten since, or outside the dates asked about
            newer = by_key[head] = Ranked(head, 0.0, {}, at=None)
            ranked.append(newer)
        if newer.score <= r.score:
            lift = r.score - newer.score + LIFT
            newer.explain["current_state"] = {"over": r.key, "contribution": round(lift, 6)}
            newer.score += lift
            newer.explain["total"] = round(newer.score, 6)
    ranked.sort(key=lambda r: (-r.score, r.key))
    return ranked, direct
