"""Forgetting: a fact tombstoned (committed), its reason checked as anything committed is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memvault.errors import InvalidInput, NotFound
from memvault.formats.drafts import check_one_line
from memvault.formats.tombstones import Tombstone
from memvault.storage.store import Storage


@dataclass(frozen=True)
class Forgotten:
    """What `forget` did: the tombstone, whether it already existed, and the pages citing the fact.

    Those pages keep the statement until the next dream rewrites them; search, context and the
    dream prompts withhold them meanwhile (memvault.storage.wiki).
    """

    tombstone: Tombstone
    already_forgotten: bool
    cited_by: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.tombstone.id, "already_forgotten": self.already_forgotten,
                "tombstone": self.tombstone.to_dict(), "cited_by": self.cited_by}


def forget(storage: Storage, fact_id: str, reason: str | None) -> Forgotten:
    """Tombstone a fact (committed); forgetting a forgotten (or purged) fact changes nothing."""
    from memvault.recall.lookup import purged
    from memvault.storage.wiki import pages_citing

    reason = _checked_reason(reason)
    try:
        fact = storage.facts.find_fact(fact_id)
    except NotFound:
        gone = purged(storage, fact_id)
        if gone is None:
            raise
        return Forgotten(gone, True, [])  # purged: forgotten already, and its text gone too
    tombstone, already = storage.tombstone_log.add_tombstone(fact, reason)
    return Forgotten(tombstone, already, sorted(pages_citing(storage, [fact.id])))


def _checked_reason(reason: str | None) -> str | None:
    """The reason as stored (blank: none); it goes into tombstones.jsonl and the commit subject, as
    a source does, so it is one line, short, and holds no credential."""
    if reason is None:
        return None
    reason = reason.strip() or None
    if not reason:
        return None
    if len(reason) > 500:
        raise InvalidInput("reason must be one line of at most 500 characters")
    check_one_line(reason, "reason")
    from memvault.base.credentials import find_credentials

    found = find_credentials([reason])
    if found:
        kinds = ", ".join(f.kind for f in found[0])
        raise InvalidInput(f"the reason holds a credential ({kinds}); it would be committed and synced "
                           "as it is; nothing was forgotten: leave it out")
    return reason
