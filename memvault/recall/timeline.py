"""Recall by time: the newest facts, one source's or session's facts as a thread, and the sessions."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Any

from memvault.base.dates import Bound, check_range, log_days, parse_range
from memvault.errors import check_count
from memvault.formats.facts import Fact, validate_category
from memvault.storage.store import Storage


@dataclass(frozen=True)
class RecentQuery:
    """Which facts `recent` lists (and `sessions` counts). Dates are aware datetimes (see `parse`)."""

    limit: int | None = 20         # None: every matching fact
    since: datetime | None = None
    until: datetime | None = None
    category: str | None = None
    tag: str | None = None
    source: str | None = None
    session: str | None = None
    oldest_first: bool | None = None  # None: oldest first for one source's or session's thread

    def __post_init__(self) -> None:
        if self.limit is not None:
            check_count("limit", self.limit, 1)
        check_range(self.since, self.until)

    @classmethod
    def parse(cls, limit: int | None = 20, *, tz: tzinfo, categories: Iterable[str] | None = None,
              since: Bound = None, until: Bound = None, **options) -> RecentQuery:
        """Build a query from what a person or agent typed, as SearchQuery.parse does: dates as text
        ("7d", "2026-11-01") or datetimes, read in the vault's time zone; the category checked
        against the vault's."""
        lower, upper = parse_range(since, until, tz)
        query = cls(limit, since=lower, until=upper, **options)
        if query.category is not None and categories is not None:
            validate_category(query.category, categories)
        return query


def recent(storage: Storage, query: RecentQuery) -> list[Fact]:
    """The newest `query.limit` facts, forgotten ones left out.

    Newest first, except that one source's or session's facts read as a thread, oldest first
    (`oldest_first` overrides either way).
    """
    limit, since, until = query.limit, query.since, query.until
    category, tag, source, session = query.category, query.tag, query.source, query.session
    oldest_first = query.oldest_first
    if oldest_first is None:
        oldest_first = source is not None or session is not None
    if category is not None:
        category = validate_category(category, storage.config.categories)
    forgotten = set(storage.tombstone_log.tombstones())
    first, last = log_days(since, until)
    found: list[Fact] = []
    for path in reversed(storage.facts.log_files()):
        day = storage.facts.day_of(path)
        if last is not None and day > last:
            continue
        if first is not None and day < first:
            break
        if limit is not None and len(found) >= limit:
            break
        # a day's log lists a repeated id once, its first copy (a copy in another day's log is
        # listed there too: recent reads the newest days only; doctor reports both)
        day_facts = [
            f for f in {f.id: f for f in reversed(storage.facts.read_log(path)[0])}.values()
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


def list_sessions(storage: Storage, query: RecentQuery) -> list[SessionSummary]:
    """The sessions of the facts `query` finds (its since, until and source), most recently active
    first. Facts with neither a source nor a session are not listed."""
    found: dict[tuple[str | None, str | None], SessionSummary] = {}
    window = RecentQuery(None, since=query.since, until=query.until, source=query.source)
    for fact in recent(storage, window):
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
