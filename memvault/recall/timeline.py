"""Recall by time: the newest facts, one source's or session's facts as a thread, and the sessions."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memvault.base.dates import check_range, log_days
from memvault.errors import check_count
from memvault.formats.facts import Fact, validate_category
from memvault.storage.store import Storage


def recent(storage: Storage, limit: int | None = 20, *, since: datetime | None = None,
           until: datetime | None = None, category: str | None = None, tag: str | None = None,
           source: str | None = None, session: str | None = None,
           oldest_first: bool | None = None) -> list[Fact]:
    """The newest `limit` facts, forgotten ones left out.

    Newest first, except that one source's or session's facts read as a thread, oldest first
    (`oldest_first` overrides either way).
    """
    if oldest_first is None:
        oldest_first = source is not None or session is not None
    if limit is not None:
        check_count("limit", limit, 1)
    check_range(since, until)
    if category is not None:
        category = validate_category(category, storage.config.categories)
    forgotten = set(storage.tombstones())
    first, last = log_days(since, until)
    found: list[Fact] = []
    for path in reversed(storage.log_files()):
        day = storage.day_of(path)
        if last is not None and day > last:
            continue
        if first is not None and day < first:
            break
        if limit is not None and len(found) >= limit:
            break
        # a day's log lists a repeated id once, its first copy (a copy in another day's log is
        # listed there too: recent reads the newest days only; doctor reports both)
        day_facts = [
            f for f in {f.id: f for f in reversed(storage.read_log(path)[0])}.values()
            if f.id not in forgotten
            and (since is None or f.at >= since)
            and (until is None or f.at <= until)
            and (category is None or f.category == category)
            and (tag is None or tag in f.tags)
            and (source is None or f.source == source)
            and (session is None or f.session == session)
        ]
        found.extend(sorted(day_facts, key=lambda f: (f.at, f.id), reverse=True))
    found = found[:limit] if limit is not None else found
    # A thread reads in order: the same newest window, told oldest first.
    return found[::-1] if oldest_first else found


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


def list_sessions(storage: Storage, *, since: datetime | None = None, until: datetime | None = None,
                  source: str | None = None) -> list[SessionSummary]:
    """Most recently active first. Facts with neither a source nor a session are not listed."""
    found: dict[tuple[str | None, str | None], SessionSummary] = {}
    for fact in recent(storage, None, since=since, until=until, source=source):
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
