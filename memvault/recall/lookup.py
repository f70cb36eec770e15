"""One fact looked up by id: `show` (the fact, its tombstone and supersedes chain) and `history`
(the commits that touched it). A purged fact is NotFound saying so; a fact asked of the past
that was added later is NotFound saying that."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from memvault.errors import FactForgotten, NotFound
from memvault.formats import dreamlog
from memvault.formats.facts import Fact, stored_id
from memvault.formats.tombstones import Tombstone
from memvault.storage.store import Storage

if TYPE_CHECKING:
    from memvault.recall.asof import Moment


class CommitRecord(TypedDict):
    """A commit as `history` lists it (docs/json.md HistoryEntry)."""

    commit: str
    at: str
    message: str


@dataclass(frozen=True)
class FactView:
    """A fact as `show` presents it: the fact, its tombstone if it was forgotten, the fact that
    replaces it if one does, and its chain of supersedes links (oldest first, itself included)."""

    fact: Fact
    forgotten: Tombstone | None
    superseded_by: str | None = None
    chain: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = self.fact.to_dict()
        data["forgotten"] = self.forgotten.to_dict() if self.forgotten else None
        data["superseded_by"] = self.superseded_by
        data["chain"] = list(self.chain or (self.fact.id,))
        return data

    def live(self) -> Fact:
        """The fact, unless it was forgotten: then FactForgotten (a NotFound) says when and why."""
        if self.forgotten:
            raise FactForgotten(self.forgotten.id, self.forgotten.at, self.forgotten.reason)
        return self.fact


def find(storage: Storage, fact_id: str, vault: Storage | None = None) -> Fact:
    """The fact in `storage` (the vault's, or the vault as of a moment: then `vault` is the vault's
    own, whose purge records say what the past cannot); a purged one is NotFound saying so."""
    try:
        return storage.facts.find_fact(fact_id)
    except NotFound:
        gone = purged(storage, fact_id) or (purged(vault, fact_id) if vault is not None else None)
        if gone is None:
            raise
        raise NotFound(f"fact {gone.id} was purged at {gone.at}: its text is gone from this vault") from None


def purged(storage: Storage, fact_id: str) -> Tombstone | None:
    """The purge record of a fact no log holds any more, if it was purged."""
    from memvault.remote.purge import purged_tombstone

    return purged_tombstone(storage.tombstone_log, fact_id)


def show(vault: Storage, fact_id: str, as_of: Any = None) -> FactView:
    """One fact of the vault (`vault`, its storage), or of the vault as it stood at `as_of` (a date,
    a time, a commit or a Moment)."""
    if as_of is None:
        return _show(vault, vault, fact_id, None)
    from memvault.recall.asof import moment, past

    found = moment(vault, as_of)
    with past(vault, found) as storage:
        return _show(vault, storage, fact_id, found)


def _show(vault: Storage, storage: Storage, fact_id: str, as_of: Moment | None) -> FactView:
    from memvault.recall.succession import links

    try:
        fact = find(storage, fact_id, None if storage is vault else vault)
    except NotFound:
        if as_of is None or purged(vault, fact_id) or not _exists(vault, fact_id):
            raise
        raise NotFound(f"fact {fact_id.strip()} was not in the vault yet as of {as_of.asked} (commit "
                       f"{as_of.commit.sha[:10]}): it was added later") from None
    known = links(storage)
    return FactView(fact, storage.tombstone_log.tombstones().get(fact.id), known.successor(fact.id),
                    tuple(known.chain(fact.id)))


def _exists(storage: Storage, fact_id: str) -> bool:
    try:
        storage.facts.find_fact(fact_id)
    except NotFound:
        return False
    return True


def history(storage: Storage, fact_id: str) -> list[CommitRecord]:
    """The commits that touched a fact, oldest first: added, edited, superseded, consolidated, forgotten.

    A commit counts when it adds or removes a line holding the fact's id where memvault writes
    it: its log item (`"id":"…"`, with any spacing, an edit too), a newer fact's item naming it
    (`"supersedes":"…"`), a forget record (`"id": "…"`), a wiki citation (`[^…]`) or dream's
    record in log.md (`  settled: …`, `kept`, `unconsolidated`). Another fact that merely
    mentions the id in its text does not.
    """
    fact = find(storage, fact_id)

    def literal(text: str) -> str:  # hand-written ids may hold any character
        return re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", text)

    found = literal(fact.id)
    where = (f'"(id|supersedes)"[[:space:]]*:[[:space:]]*{literal(stored_id(fact.id))}|\\[\\^{found}\\]'
             f"|^  ({'|'.join(dreamlog.ID_KEYS)}): (.* )?{found}( |$)")
    commits = storage.git.log("--reverse", "-E", f"-G{where}", "--", ".")
    return [{"commit": c.sha, "at": c.at, "message": c.message} for c in commits]
