"""What dream has left to do: pending days after the watermark, late facts, and batches."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime

from memvault.citations import accounted_ids
from memvault.dreamlog import LATE_LABEL, SCRUB_LABEL, Entry
from memvault.storage.store import Storage


@dataclass
class Batch:
    label: str
    days: list[date]
    facts: list            # the batch's live facts, late ones included
    late: list

    @property
    def last_day(self) -> date | None:
        return self.days[-1] if self.days else None


@dataclass
class Plan:
    today: date
    watermark: date | None
    pending_days: list[date]
    late: list
    batches: list[Batch]
    entries: list[Entry]
    facts_by_id: dict = field(default_factory=dict)   # every live fact of the vault
    tombstoned: set[str] = field(default_factory=set)

    @property
    def pending_facts(self) -> int:
        return sum(len(b.facts) for b in self.batches)


def make_plan(storage: Storage, *, today: date | None = None, max_days: int | None = None) -> Plan:
    """Batches of at most max_days pending days; late facts ride with the first batch.

    A late fact was added (backdated) to a day the watermark has already passed, after that
    day was consolidated: no page cites it and log.md never settled it, so it would be stranded.
    """
    today = today or datetime.now(storage.tz).date()
    max_days = max_days or storage.config.dream.max_days
    watermark = storage.watermark
    entries = storage.dream_entries()
    tombstoned = set(storage.tombstones())
    by_day: dict[date, list] = defaultdict(list)
    days: list[date] = []
    for path in storage.log_files():
        day = storage.day_of(path)
        days.append(day)
        by_day[day].extend(f for f in storage.read_log(path)[0] if f.id not in tombstoned)
    facts_by_id = {f.id: f for day_facts in by_day.values() for f in day_facts}
    pending = [d for d in days if (watermark is None or d > watermark) and d < today]
    late: list = []
    if watermark is not None:
        accounted = accounted_ids(storage, entries)
        late = [f for d in days if d <= watermark for f in by_day[d] if f.id not in accounted]
    batches: list[Batch] = []
    rest = list(pending)
    retry_end = _failed_batch_end(entries, pending)
    while rest:
        size = max_days
        if not batches and retry_end is not None:
            # retry exactly the days that failed, so attempts on "the same batch" add up
            # even when new days became pending since
            size = min(max_days, sum(1 for d in rest if d <= retry_end)) or max_days
        chunk, rest = rest[:size], rest[size:]
        facts = [f for d in chunk for f in by_day[d]]
        batches.append(Batch(f"{chunk[0]}..{chunk[-1]}", chunk, facts, []))
    if late:
        if batches:
            batches[0].facts = late + batches[0].facts
            batches[0].late = late
        else:
            batches.append(Batch(LATE_LABEL, [], list(late), list(late)))
    return Plan(today, watermark, pending, late, batches, entries, facts_by_id, tombstoned)


def _failed_batch_end(entries: list[Entry], pending: list[date]) -> date | None:
    """Last day of the batch whose latest attempt failed, if it starts at the first pending day."""
    for entry in reversed(entries):
        if entry.label == SCRUB_LABEL:
            continue  # a scrub in between does not end the retries of a day batch
        if entry.outcome in ("ok", "skipped"):
            return None
        if entry.outcome in ("failed", "error") and ".." in entry.label and pending:
            first, _, last = entry.label.partition("..")
            try:
                if date.fromisoformat(first) == pending[0]:
                    return date.fromisoformat(last)
            except ValueError:
                return None
            return None
    return None
