"""Sessions: the sources and conversations facts came from, with counts and first/last times."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memvault.vault import Vault


@dataclass
class SessionSummary:
    """Facts sharing one (source, session) pair; either may be None, never both."""

    source: str | None
    session: str | None
    facts: int
    first: datetime
    last: datetime

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "session": self.session, "facts": self.facts,
                "first": self.first.isoformat(), "last": self.last.isoformat()}


def list_sessions(vault: "Vault", *, since: datetime | None = None, until: datetime | None = None,
                  source: str | None = None) -> list[SessionSummary]:
    """Most recently active first. Facts with neither a source nor a session are not listed."""
    found: dict[tuple[str | None, str | None], SessionSummary] = {}
    for fact in vault.recent(None, since=since, until=until, source=source):
        if fact.source is None and fact.session is None:
            continue
        key = (fact.source, fact.session)
        summary = found.get(key)
        if summary is None:
            found[key] = SessionSummary(fact.source, fact.session, 1, fact.at, fact.at)
        else:
            summary.facts += 1
            summary.first = min(summary.first, fact.at)
            summary.last = max(summary.last, fact.at)
    return sorted(found.values(), key=lambda s: (s.last, s.source or "", s.session or ""), reverse=True)
