"""A search request: one validated, immutable object built once by the caller and passed down."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, tzinfo

from memvault.base.dates import Bound, check_range, parse_range
from memvault.errors import InvalidInput, check_count
from memvault.formats.drafts import check_encodable, validate_category

MAX_LIMIT = 1000
# A query is words to look for, not a document: past this, one query cost seconds and gigabytes
# (an 8 MB one, 16 s and 3 GB), and held up every other call of a shared MCP server.
MAX_QUERY_CHARS = 10_000


@dataclass(frozen=True)
class SearchQuery:
    """What to look for and where. Dates are aware datetimes (see `parse` for text dates)."""

    text: str
    limit: int = 10
    category: str | None = None
    tag: str | None = None
    source: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    include_all: bool = False      # also the facts already consolidated into the wiki
    lexical_only: bool = False     # words only: never loads the embedding model
    explain: bool = False          # each hit carries its ranking signals
    session: str | None = None      # only the facts of this session (one thread)
    min_score: float | None = None  # the relevance floor; None = the default (ranking.MIN_SCORE), 0 = none
    rerank: bool = True             # the reranker re-orders the best candidates (when on in the config)

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise InvalidInput("search query is empty")
        check_encodable(self.text, "search query")
        if len(self.text) > MAX_QUERY_CHARS:
            raise InvalidInput(f"search query is too long ({len(self.text)} characters, at most {MAX_QUERY_CHARS}): "
                               "search for its key words")
        check_count("limit", self.limit, 1, MAX_LIMIT)
        for name in ("category", "tag", "source", "session"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise InvalidInput(f"{name} must be a non-empty string")
            if value is not None:
                check_encodable(value, name)
        for name in ("include_all", "lexical_only", "explain", "rerank"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidInput(f"{name} must be true or false")
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, datetime) or value.tzinfo is None):
                raise InvalidInput(f"{name} must be a timezone-aware datetime (see SearchQuery.parse)")
        if self.min_score is not None:
            value = self.min_score
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise InvalidInput("min_score must be a number of 0 or more (0 keeps every match)")
        check_range(self.since, self.until)

    @classmethod
    def parse(cls, text: str, *, tz: tzinfo, categories: Iterable[str] | None = None, since: Bound = None,
              until: Bound = None, **options) -> SearchQuery:
        """Build a query from what a person or agent typed: dates as text ("7d", "2026-11-01")
        read in the vault's time zone, the category checked against the vault's."""
        lower, upper = parse_range(since, until, tz)
        unknown = set(options) - {"limit", "category", "tag", "source", "session", "include_all", "lexical_only",
                                  "explain", "min_score", "rerank"}
        if unknown:
            raise InvalidInput(f"unknown search option(s): {', '.join(sorted(unknown))}")
        query = cls(text, since=lower, until=upper, **options)
        if query.category is not None and categories is not None:
            validate_category(query.category, categories)
        return query
