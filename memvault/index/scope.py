"""What a search is scoped to: its filters (category, tag, days, the dream watermark), the facts up
to the watermark that no page carries yet, and the exact time bounds of a hit."""

from __future__ import annotations

from datetime import datetime

from memvault.base.dates import log_days
from memvault.formats.drafts import validate_category
from memvault.formats.layout import DREAM_LOG
from memvault.index.generation import Generation
from memvault.index.lexical import Filters
from memvault.index.query import SearchQuery
from memvault.storage.store import Storage
from memvault.storage.wiki import accounted_ids, withheld_pages


def filters_of(storage: Storage, query: SearchQuery) -> Filters:
    category = validate_category(query.category, storage.config.categories) if query.category is not None else None
    watermark = None if query.include_all else storage.dreams.watermark
    # Whole days, with a day's slack for facts written in another zone; within() checks the bounds.
    first, last = log_days(query.since, query.until)
    return Filters(category=category, tag=query.tag, source=query.source, session=query.session,
                   since=_day(first), until=_day(last), watermark=_day(watermark))


def _day(value) -> int | None:
    if value is None:
        return None
    return value.year * 10000 + value.month * 100 + value.day


def unconsolidated(storage: Storage, generation: Generation, watermark: int) -> frozenset[str]:
    """Facts up to the watermark that no page carries (skipped batches, late facts): still in scope.

    Dream's rule for accounted facts (memvault.storage.wiki.accounted_ids: cited by a page, or
    settled in log.md), with the facts taken from the index rather than from parsing every log;
    the answer is kept until the index or log.md changes.
    """
    try:
        st = storage.path(DREAM_LOG).stat()
        stamp = (st.st_mtime_ns, st.st_size)
    except FileNotFoundError:
        stamp = None
    memo = ("unconsolidated", generation.version, stamp, watermark)
    found = generation.memo.get(memo)
    if found is None:
        entries = storage.dreams.dream_entries()
        accounted = accounted_ids(storage, [e for e in entries if e.outcome != "skipped"],
                                  skipping=withheld_pages(storage))
        rows = generation.catalog.db.execute("SELECT key FROM docs WHERE kind = 'fact' AND day <= ?", (watermark,))
        found = frozenset(key for (key,) in rows if key not in accounted)
        generation.memo[memo] = found
    return found


def within(at: str | None, lower: datetime | None, upper: datetime | None) -> bool:
    if not at:
        return True
    try:
        moment = datetime.fromisoformat(at)
    except ValueError:
        return True
    if moment.tzinfo is None:
        # A page dated by day only: compare days, so its whole day counts as inside the bound.
        return (lower is None or moment.date() >= lower.date()) and (upper is None or moment.date() <= upper.date())
    return (lower is None or moment >= lower) and (upper is None or moment <= upper)
