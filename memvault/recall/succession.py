"""Which fact replaces which: a fact added with `supersedes` (a correction, a change of state).

Both facts stay in the log; the link rides in the newer fact's metadata. A forgotten fact neither
supersedes nor is superseded: forgetting the correction brings the older fact back as the current
one. Of two facts superseding one (two clones, then a sync) the later-made one is the successor.
The links are read from the daily logs; only a log holding the word `"supersedes"` is parsed.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, replace

from memvault.errors import InvalidItem, NotFound
from memvault.formats.facts import Fact
from memvault.storage.files import read_bytes
from memvault.storage.store import Storage

MARK = b'"supersedes"'
MAX_CHAIN = 100  # links followed from one fact: a hand-edited loop must end somewhere


@dataclass(frozen=True)
class Links:
    """The supersedes links between live facts."""

    older: dict[str, str]          # newer fact id -> the id it supersedes
    newer: dict[str, list[str]]    # older fact id -> the facts superseding it, oldest first

    def successor(self, fact_id: str) -> str | None:
        """The fact that replaces this one (the later-made of several)."""
        found = self.newer.get(fact_id)
        return found[-1] if found else None

    def chain(self, fact_id: str) -> list[str]:
        """The fact's chain, oldest first: what it supersedes, back to the first, then what
        supersedes it, up to the current one. A loop a hand edit made is cut where it closes."""
        back = [fact_id]
        while (older := self.older.get(back[-1])) is not None and older not in back and len(back) < MAX_CHAIN:
            back.append(older)
        chain = back[::-1]
        while (newer := self.successor(chain[-1])) is not None and newer not in chain and len(chain) < MAX_CHAIN:
            chain.append(newer)
        return chain

    def loop(self, fact_id: str) -> list[str] | None:
        """The ids of a loop reached by following what this fact supersedes, or None."""
        seen = [fact_id]
        while (older := self.older.get(seen[-1])) is not None and len(seen) <= MAX_CHAIN:
            if older in seen:
                return seen[seen.index(older):] + [older]
            seen.append(older)
        return None


def links(storage: Storage) -> Links:
    """Every supersedes link between live facts of the vault."""
    forgotten = set(storage.tombstone_log.tombstones())
    older: dict[str, str] = {}
    for fact_id, old in _written(storage):
        if fact_id not in forgotten and fact_id not in older:
            older[fact_id] = old
    newer: dict[str, list[str]] = {}
    for new, old in sorted(older.items()):  # ids sort by creation
        if old not in forgotten:
            newer.setdefault(old, []).append(new)
    return Links({new: old for new, old in older.items() if old not in forgotten}, newer)


def _written(storage: Storage) -> list[tuple[str, str]]:
    """(fact id, the id it supersedes) of every item saying so, oldest log first. Each log's answer
    is kept while its size and time stay (`Storage.links_memo`): a long-lived process asking
    before every context bundle reads only the logs that changed."""
    memo = storage.links_memo
    found: list[tuple[str, str]] = []
    seen = set()
    for path in storage.facts.log_files():
        try:
            st = path.stat()
        except FileNotFoundError:
            continue
        key, name = (st.st_mtime_ns, st.st_size), str(path)
        seen.add(name)
        if name not in memo or memo[name][0] != key:
            pairs = [(f.id, f.supersedes) for f in storage.facts.read_log(path)[0] if f.supersedes] \
                if MARK in read_bytes(path) else []
            memo[name] = (key, pairs)
        found.extend(memo[name][1])
    for name in set(memo) - seen:
        del memo[name]
    return found


def successors_of(storage: Storage, ids: Iterable[str]) -> dict[str, str]:
    """fact id -> the live fact that replaces it, for those of `ids` something replaces."""
    known = links(storage)
    return {fact_id: found for fact_id in ids if (found := known.successor(fact_id)) is not None}


def checked(storage: Storage, facts: list[Fact], skip: Collection[int] = ()) -> list[Fact]:
    """New facts whose `supersedes` names a live fact nothing replaces yet, written as its id
    (InvalidItem, numbered from 1, for the first that does not). The facts at the indexes in `skip`
    will not be written (their key is stored: a retry) and are passed through unchecked."""
    if not any(fact.supersedes for fact in facts):
        return facts
    known = links(storage)
    tombstones = storage.tombstone_log.tombstones()
    claimed: dict[str, int] = {}
    out = []
    for number, fact in enumerate(facts, start=1):
        if fact.supersedes is None or number - 1 in skip:
            out.append(fact)
            continue
        target = _target(storage, number, fact.supersedes)
        gone = tombstones.get(target.id)
        if gone is not None:
            raise InvalidItem(number, f"supersedes {target.id}: that fact was forgotten at {gone.at}; a forgotten "
                                      "fact is no current truth to replace: add the new fact without --supersedes")
        loop = known.loop(target.id)
        if loop is not None:
            raise InvalidItem(number, f"supersedes {target.id}: the facts it supersedes form a loop "
                                      f"({' -> '.join(loop)}), which a hand edit made; correct the logs first")
        current = known.successor(target.id)
        if current is not None:
            raise InvalidItem(number, f"supersedes {target.id}: that fact is already superseded by {current}; "
                                      f"supersede {known.chain(target.id)[-1]} instead, the current one")
        if target.id in claimed:
            raise InvalidItem(number, f"supersedes {target.id}, as fact {claimed[target.id]} of this batch does; "
                                      "one fact is replaced by one")
        claimed[target.id] = number
        out.append(replace(fact, supersedes=target.id))
    return out


def _target(storage: Storage, number: int, typed: str) -> Fact:
    from memvault.remote.purge import purged_tombstone

    try:
        return storage.facts.find_fact(typed)
    except NotFound:
        gone = purged_tombstone(storage.tombstone_log, typed)
        if gone is not None:
            raise InvalidItem(number, f"supersedes {gone.id}: that fact was purged at {gone.at}") from None
        raise InvalidItem(number, f"supersedes {typed!r}: no fact with that id") from None
