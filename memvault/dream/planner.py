"""What dream has left to do: pending days after the watermark, late facts, and batches.

A pending day is one after the watermark and before today that still holds a fact to consolidate.

Batches are sized by tokens: each holds at most as many facts as the model's window has room for
(and its answer can account for), and at most `max_days` days. Days stay whole when they fit a
batch; a day too big for one is split across batches. The watermark is worked out when a batch
is applied (`watermark_after`): the furthest day up to which every fact is accounted for, which
covers split days, facts left for later and days done out of order alike.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import date, datetime

from memvault.dream.budget import Budget, compact, planning_limits, text_tokens
from memvault.dream.prompt import base_tokens, fact_record
from memvault.formats.dreamlog import LATE_LABEL, Entry, kept_ids
from memvault.formats.layout import day_of_log
from memvault.storage.store import Storage
from memvault.storage.wiki import accounted_ids


@dataclass
class Batch:
    label: str
    days: list[date]       # pending days it covers, whole or in part
    facts: list            # the batch's live facts, late ones first
    late: list

    def head(self, n: int) -> Batch:
        """The batch cut to its first `n` facts (later days drop out)."""
        return self.only(f.id for f in self.facts[:n])

    def only(self, ids) -> Batch:
        """The batch with only these facts (a piece asked about again): its days are theirs."""
        wanted = set(ids)
        late_ids = {f.id for f in self.late}
        kept = [f for f in self.facts if f.id in wanted]
        started = {f.day for f in kept if f.id not in late_ids}
        days = [d for d in self.days if d in started]
        late = [f for f in kept if f.id in late_ids]
        return replace(self, label=_label(days), days=days, facts=kept, late=late)


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
    # lines of the first pending day with any that do not parse as facts: the watermark stops
    # before that day (a line nobody can read must not be passed as consolidated)
    unreadable: list = field(default_factory=list)
    # days after the watermark and before today (cut before a day with unreadable lines), in order,
    # with the facts each still has to account for (none: the watermark may pass it)
    days: list[date] = field(default_factory=list)
    todo: dict = field(default_factory=dict)

    @property
    def stopped_at(self) -> date | None:
        """The day the watermark cannot pass (None: every pending day reads cleanly)."""
        return day_of_log(self.unreadable[0].path) if self.unreadable else None

    def unreadable_message(self) -> str | None:
        if not self.unreadable:
            return None
        first, n = self.unreadable[0], len(self.unreadable)
        return (f"dream stops before {self.stopped_at}: {n} line(s) of its log do not parse as facts (first: "
                f"{first.path}:{first.line}); edit them back to `- text <!-- mv {{...}} -->` or delete them "
                "(`memvault doctor --full` lists them), then dream again")

    @property
    def pending_facts(self) -> int:
        return sum(len(b.facts) for b in self.batches)


@dataclass
class PlanMemo:
    """What planning again after each batch of a run need not redo: parsed logs, fact sizes."""

    logs: dict = field(default_factory=dict)    # path -> ((mtime_ns, size), (facts, lines that do not parse))
    costs: dict = field(default_factory=dict)   # fact id -> tokens of its prompt record

    def read_log(self, storage: Storage, path) -> tuple[list, list]:
        try:
            st = path.stat()
            key = (st.st_mtime_ns, st.st_size)
        except OSError:
            key = None
        known = self.logs.get(path)
        if key is None or known is None or known[0] != key:
            known = self.logs[path] = (key, storage.facts.read_log(path))
        return known[1]


def make_plan(storage: Storage, *, today: date | None = None, max_days: int | None = None,
              budget: Budget | None = None, memo: PlanMemo | None = None, exclude=frozenset()) -> Plan:
    """Batches sized by `budget` (default: the window memvault.toml states); late facts go first.

    `exclude`: facts no batch takes (a run's facts set aside after failing alone, or waiting to be
    asked again in a smaller piece); the days they are on still wait for them.

    A late fact was added (backdated) to a day the watermark has already passed, after that
    day was consolidated: no page cites it and log.md never settled it, so it would be stranded.
    `memo` carries what a run already read (a 10,000-fact backlog is planned again per batch).
    """
    config = storage.config
    today = today or datetime.now(storage.tz).date()
    max_days = max_days or config.dream.max_days
    budget = budget or Budget(planning_limits(config.llm))
    memo = memo or PlanMemo()
    watermark = storage.dreams.watermark
    entries = storage.dreams.dream_entries()
    tombstoned = set(storage.tombstone_log.tombstones())
    days, by_day, unreadable = _read_logs(storage, memo, tombstoned)
    facts_by_id = {f.id: f for day_facts in by_day.values() for f in day_facts}
    ahead, blocked = _days_ahead(days, watermark, today, unreadable)
    # facts a page already cites or log.md settled: late facts are the others on dreamed days,
    # and a day split across batches keeps only the facts not done yet
    accounted = accounted_ids(storage, entries) | kept_ids(entries)
    late = _late_facts(days, watermark, by_day, accounted)
    todo = {d: [f for f in by_day[d] if f.id not in accounted] for d in ahead}
    skip = set(exclude)
    asked = {d: [f for f in facts if f.id not in skip] for d, facts in todo.items()}
    # A day left with nothing to consolidate (its facts all purged, forgotten or accounted for) is
    # not pending: counting it showed "1 day(s), 0 fact(s)" waiting, and a batch of such days alone
    # asked for a model (exit 5 without one) to commit a watermark move. The watermark passes it
    # with the next batch of a later day; a fact backdated into it later makes it pending again.
    pending = [d for d in ahead if todo[d]]
    room = budget.fact_room(base_tokens(config.zones, config.dream.memory_max_lines, config.dream.mode))
    packer = _Packer(room=max(1, room), max_facts=budget.max_facts(), max_days=max_days, costs=memo.costs)
    batches = packer.pack([f for f in late if f.id not in skip], [d for d in pending if asked[d]], asked)
    return Plan(today, watermark, pending, late, batches, entries, facts_by_id, tombstoned, blocked,
                days=ahead, todo=todo)


def _read_logs(storage: Storage, memo: PlanMemo,
               tombstoned: set[str]) -> tuple[list[date], dict[date, list], dict[date, list]]:
    """Each day with a log, its live facts by day, and the problems of each day not wholly readable."""
    by_day: dict[date, list] = defaultdict(list)
    days: list[date] = []
    seen: set[str] = set()  # a repeated fact id counts once, its first copy (as FactLog.iter_facts)
    unreadable: dict[date, list] = {}
    for path in storage.facts.log_files():
        day = storage.facts.day_of(path)
        days.append(day)
        facts, problems = memo.read_log(storage, path)
        if problems:
            unreadable[day] = problems
        for fact in facts:
            if fact.id not in seen and fact.id not in tombstoned:
                by_day[day].append(fact)
            seen.add(fact.id)
    return days, by_day, unreadable


def _days_ahead(days: list[date], watermark: date | None, today: date,
                unreadable: dict[date, list]) -> tuple[list[date], list]:
    """The days after the watermark and before today, up to the first not wholly readable, and
    that day's problems (the dream stops there until it is mended)."""
    pending = [d for d in days if (watermark is None or d > watermark) and d < today]
    stop = next((i for i, d in enumerate(pending) if d in unreadable), None)
    blocked = unreadable[pending[stop]] if stop is not None else []
    return pending[:stop], blocked


def _late_facts(days: list[date], watermark: date | None, by_day: dict[date, list], accounted: set[str]) -> list:
    """Facts on days the watermark has passed that no page cites and log.md never settled."""
    if watermark is None:
        return []
    return [f for d in days if d <= watermark for f in by_day[d] if f.id not in accounted]


def watermark_after(plan: Plan, done) -> date | None:
    """The furthest day up to which every fact is accounted for once `done` (ids accounted for since
    the plan was made) is: the watermark a batch applied now leaves (the plan's when no day passes)."""
    accounted = set(done)
    mark = plan.watermark
    for day in plan.days:
        if any(f.id not in accounted for f in plan.todo.get(day, ())):
            break
        mark = day
    return mark


def fact_cost(fact, room: int, costs: dict | None = None) -> int:
    """Tokens a fact takes in a prompt (never more than `room`: a longer text is cut to fit)."""
    cost = None if costs is None else costs.get(fact.id)
    if cost is None:
        cost = text_tokens(compact(fact_record(fact, "f999", late=True))) + 1
        if costs is not None:
            costs[fact.id] = cost  # a fact's text never changes: an edit makes another fact
    return min(cost, room)


@dataclass
class _Packer:
    room: int
    max_facts: int
    max_days: int
    costs: dict = field(default_factory=dict)
    batches: list[Batch] = field(default_factory=list)

    def pack(self, late: list, pending: list[date], todo: dict[date, list]) -> list[Batch]:
        self.current = Batch("", [], [], [])
        self.tokens = 0
        for fact in late:
            cost = fact_cost(fact, self.room, self.costs)
            if not self._fits(1, cost):
                self._close()
            self._add(fact, cost, late=True)
        for day in pending:
            facts = todo[day]
            costs = [fact_cost(f, self.room, self.costs) for f in facts]
            if self.current.days and len(self.current.days) >= self.max_days:
                self._close()
            elif self.current.facts and not self._fits(len(facts), sum(costs)):
                self._close()  # the day fits a batch of its own: keep it whole
            self.current.days.append(day)
            for fact, cost in zip(facts, costs, strict=True):
                if not self._fits(1, cost):
                    self._close()
                    self.current.days.append(day)
                self._add(fact, cost)
        self._close()
        return self.batches

    def _fits(self, n: int, cost: int) -> bool:
        return not self.current.facts or (len(self.current.facts) + n <= self.max_facts
                                          and self.tokens + cost <= self.room)

    def _add(self, fact, cost: int, *, late: bool = False) -> None:
        self.current.facts.append(fact)
        if late:
            self.current.late.append(fact)
        self.tokens += cost

    def _close(self) -> None:
        if self.current.facts or self.current.days:
            self.current.label = _label(self.current.days)
            self.batches.append(self.current)
        self.current = Batch("", [], [], [])
        self.tokens = 0


def _label(days: list[date]) -> str:
    return f"{days[0]}..{days[-1]}" if days else LATE_LABEL
