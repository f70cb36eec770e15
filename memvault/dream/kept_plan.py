"""What planning keeps between `status` calls: each daily log's fact ids, days and prompt sizes.

When one of the plan's inputs changes (a dream, a forget, a backdated add, a sync), `status`
plans again, and planning read and parsed every daily log: about a minute at a million facts.
Most logs did not change. Kept in .memvault/plan-logs.json, by each log's stat (as the status
memo's key), a log that did not change is not read again: its facts come back as `KeptFact`s,
which hold what planning asks of a fact (its id, its day, its size in a prompt) and read the
fact's log only if asked anything more. No fact's text is kept (a purge leaves nothing here).
The sizes depend on the tokenizer and on how a fact is put in a prompt: the file names both (the
tokenizer, and _VERSION, to be raised with any change to a fact's prompt record or to what is
kept), and is not used under others.
"""

from __future__ import annotations

import json
import os
import time
from datetime import date
from pathlib import Path

from memvault.base import tokens
from memvault.dream.planner import Plan, PlanMemo, make_plan
from memvault.formats.facts import ParseProblem
from memvault.formats.layout import STATE_DIR
from memvault.storage.files import atomic_write, stat_key
from memvault.storage.store import Storage

KEPT_FILE = f"{STATE_DIR}/plan-logs.json"
_VERSION = 2  # raise it when dream.prompt.fact_record or this file's entries change
_MAX_ORDINAL = date.max.toordinal()
_ID_LENGTH = 16  # (memvault.formats.facts.ID_PATTERN; a log holding another length is not kept)
_SETTLE_NS = 2_000_000_000  # a log written this recently may change again within its mtime tick


def plan_from_kept(storage: Storage, today: date) -> Plan:
    """make_plan, reading only the logs that changed since the last `status` kept what it read."""
    memo = KeptPlanMemo(storage)
    try:
        plan = make_plan(storage, today=today, memo=memo)
    except LogChanged:  # while it planned: plan from the logs as they are now, and keep that
        memo = KeptPlanMemo(storage, start_over=True)
        plan = make_plan(storage, today=today, memo=memo)
    memo.save()
    return plan


class LogChanged(Exception):
    """A log changed while planning read it: a fact kept for it is no longer there."""


class KeptFact:
    """A fact of a log that did not change: its id, day and size in a prompt, as kept."""

    __slots__ = ("id", "_day", "_path", "_memo")

    def __init__(self, fact_id: str, day: date, path: Path, memo: KeptPlanMemo):
        self.id = fact_id
        self._day = day
        self._path = path
        self._memo = memo

    @property
    def day(self) -> date:
        return self._day

    def __getattr__(self, name: str):
        # Anything else (its text, to size it when no size was kept): the fact itself, from its log.
        if name.startswith("_"):  # (copy and pickle ask for hooks before any slot is set)
            raise AttributeError(name)
        return getattr(self._memo.full_fact(self._path, self.id), name)


class KeptPlanMemo(PlanMemo):
    """A PlanMemo that starts from what the last `status` kept, and keeps what this one read."""

    def __init__(self, storage: Storage, *, start_over: bool = False):
        super().__init__()
        self.storage = storage
        self.kept: dict[str, list] = {}
        self.fresh: dict[str, tuple] = {}  # logs read this time: rel -> (key, facts, problems)
        self.sized: set[str] = set()  # kept logs read again only to size a fact in a prompt
        self.used: dict[str, list] = {}  # kept entries this planning took (the others' logs are gone)
        self._full: dict[Path, dict] = {}
        self.made_by = [_VERSION, tokens.tokenizer_name()]
        if start_over:
            return
        try:
            data = json.loads((storage.root / KEPT_FILE).read_text(encoding="utf-8"))
            if data.get("made_by") == self.made_by and isinstance(data.get("logs"), dict):
                self.kept = data["logs"]
        except (OSError, ValueError, AttributeError):
            pass  # none yet, damaged, or made by another memvault or tokenizer: every log is read

    def read_log(self, storage: Storage, path) -> tuple[list, list]:
        rel = storage.facts.work.relpath(path)
        key = stat_key(path)
        entry = self.kept.get(rel)
        if key is not None and isinstance(entry, list) and len(entry) == 5 and entry[0] == key:
            found = self._from_kept(path, rel, entry)
            if found is not None:
                self.used[rel] = entry
                return found
        facts, problems = storage.facts.read_log(path)
        if key is not None:
            self.fresh[rel] = (key, facts, problems)
        return facts, problems

    def _from_kept(self, path: Path, rel: str, entry: list) -> tuple[list, list] | None:
        """The entry's facts and problems; None for an entry that is not sound (read the log)."""
        _key, joined, days, costs, problems = entry
        if not isinstance(joined, str) or len(joined) % _ID_LENGTH:
            return None
        ids = [joined[i : i + _ID_LENGTH] for i in range(0, len(joined), _ID_LENGTH)]
        if isinstance(days, int):
            days = [days] * len(ids)
        if not _sound(len(ids), days, costs, problems):
            return None
        facts = [KeptFact(fact_id, date.fromordinal(n), path, self) for fact_id, n in zip(ids, days, strict=True)]
        self.costs.update((fact_id, cost) for fact_id, cost in zip(ids, costs, strict=True) if cost)
        return facts, [ParseProblem(rel, line, message) for line, message in problems]

    def full_fact(self, path: Path, fact_id: str):
        if path not in self._full:
            try:
                self._full[path] = {f.id: f for f in self.storage.facts.read_log(path)[0]}
            except OSError:  # gone meanwhile (a purge, a sync)
                raise LogChanged(path) from None
            self.sized.add(self.storage.facts.work.relpath(path))
        try:
            return self._full[path][fact_id]
        except KeyError:
            raise LogChanged(path) from None

    def save(self) -> None:
        """Keep every log's entry (those read now, with the sizes worked out for their facts)."""
        if not self.fresh and not self.sized:
            return
        now = time.time_ns()
        logs = {}
        for rel, entry in self.used.items():
            if rel in self.sized:
                ids = entry[1]
                entry[3] = [self.costs.get(ids[i : i + _ID_LENGTH], 0) for i in range(0, len(ids), _ID_LENGTH)]
            logs[rel] = entry
        for rel, (key, facts, problems) in self.fresh.items():
            if now - key[0] < _SETTLE_NS or any(len(f.id) != _ID_LENGTH for f in facts):
                continue
            days = sorted({f.day for f in facts})
            logs[rel] = [key, "".join(f.id for f in facts),
                         days[0].toordinal() if len(days) == 1 else [f.day.toordinal() for f in facts],
                         [self.costs.get(f.id, 0) for f in facts], [[p.line, p.message] for p in problems]]
        try:
            os.makedirs(self.storage.root / STATE_DIR, exist_ok=True)
            atomic_write(self.storage.root / KEPT_FILE,
                         json.dumps({"made_by": self.made_by, "logs": logs}, separators=(",", ":")))
        except OSError:
            pass  # a vault this user cannot write reads every log each time


def _sound(count: int, days, costs, problems) -> bool:
    """Whether a kept entry's lists are what save() writes for `count` facts (no damage to trust)."""
    if not (isinstance(days, list) and isinstance(costs, list) and len(days) == len(costs) == count):
        return False
    if not all(type(n) is int and 0 < n <= _MAX_ORDINAL for n in days):
        return False
    if not all(type(c) is int and c >= 0 for c in costs):
        return False
    return isinstance(problems, list) and all(
        isinstance(p, list) and len(p) == 2 and type(p[0]) is int and isinstance(p[1], str) for p in problems)

