"""Recall by time: the newest facts, one source's or session's facts as a thread, and the sessions."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date, datetime, tzinfo
from pathlib import Path
from typing import Any

from memvault.base.dates import Bound, check_range, log_days, parse_range
from memvault.errors import check_count
from memvault.formats.drafts import validate_category
from memvault.formats.facts import Fact
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
    limit, oldest_first = query.limit, query.oldest_first
    if oldest_first is None:
        oldest_first = query.source is not None or query.session is not None
    category = None if query.category is None else validate_category(query.category, storage.config.categories)
    forgotten = set(storage.tombstone_log.tombstones())
    found: list[Fact] = []
    for path in _logs_newest_first(storage, *log_days(query.since, query.until)):
        if limit is not None and len(found) >= limit:
            break
        found.extend(_day_facts(storage, path, query, category, forgotten))
    found = found[:limit] if limit is not None else found
    # A thread reads in order: the same newest window, told oldest first.
    return found[::-1] if oldest_first else found


def _logs_newest_first(storage: Storage, first: date | None, last: date | None) -> Iterator[Path]:
    """The daily logs of the days from `first` to `last` (either may be open), newest first."""
    for path in reversed(storage.facts.log_files()):
        day = storage.facts.day_of(path)
        if last is not None and day > last:
            continue
        if first is not None and day < first:
            break
        yield path


def _day_facts(storage: Storage, path: Path, query: RecentQuery, category: str | None,
               forgotten: set[str]) -> list[Fact]:
    """One day's facts that the query wants, newest first."""
    # a day's log lists a repeated id once, its first copy (a copy in another day's log is
    # listed there too: recent reads the newest days only; doctor reports both)
    day_facts = [f for f in {f.id: f for f in reversed(storage.facts.read_log(path)[0])}.values()
                 if f.id not in forgotten and _matches(f, query, category)]
    return sorted(day_facts, key=lambda f: (f.at, f.id), reverse=True)


def _matches(fact: Fact, query: RecentQuery, category: str | None) -> bool:
    """Is the fact within the query's dates, of its category (as the vault spells it), tag, source
    and session?"""
    return ((query.since is None or fact.at >= query.since)
            and (query.until is None or fact.at <= query.until)
            and (category is None or fact.category == category)
            and (query.tag is None or query.tag in fact.tags)
            and (query.source is None or fact.source == query.source)
            and (query.session is None or fact.session == query.session))


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
