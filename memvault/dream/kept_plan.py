"""What planning keeps between `status` calls: each daily log's fact ids, days and prompt sizes.

When one of the plan's inputs changes (a dream, a forget, a backdated add, a sync), `status`
plans again, and planning read and parsed every daily log: about a minute at a million facts.
Most logs did not change. Kept in .memvault/plan-logs.json, by each log's stat (as the status
memo's key), a log that did not change is not read again: its facts come back as `KeptFact`s,
which hold what planning asks of a fact (its id, its day, its size in a prompt) and read the
fact's log only if asked anything more. No fact's text is kept (a purge leaves nothing here).
"""

from __future__ import annotations

import json
import os
import time
from datetime import date
from pathlib import Path

from memvault.dream.planner import Plan, PlanMemo, make_plan
from memvault.formats.facts import ParseProblem
from memvault.formats.layout import STATE_DIR
from memvault.storage.files import atomic_write
from memvault.storage.store import Storage

KEPT_FILE = f"{STATE_DIR}/plan-logs.json"
_VERSION = 1
_ID_LENGTH = 16  # (memvault.formats.facts.ID_PATTERN; a log holding another length is not kept)
_SETTLE_NS = 2_000_000_000  # a log written this recently may change again within its mtime tick


def plan_from_kept(storage: Storage, today: date) -> Plan:
    """make_plan, reading only the logs that changed since the last `status` kept what it read."""
    memo = KeptPlanMemo(storage)
    try:
        plan = make_plan(storage, today=today, memo=memo)
    except LogChanged:  # while it planned: plan from the logs as they are now
        return make_plan(storage, today=today)
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
        return getattr(self._memo.full_fact(self._path, self.id), name)


class KeptPlanMemo(PlanMemo):
    """A PlanMemo that starts from what the last `status` kept, and keeps what this one read."""

    def __init__(self, storage: Storage):
        super().__init__()
        self.storage = storage
        self.kept: dict[str, list] = {}
        self.fresh: dict[str, tuple] = {}  # logs read this time: rel -> (key, facts, problems)
        self.sized: set[str] = set()  # kept logs read again only to size a fact in a prompt
        self.used: dict[str, list] = {}  # kept entries this planning took (the others' logs are gone)
        self._full: dict[Path, dict] = {}
        try:
            data = json.loads((storage.root / KEPT_FILE).read_text(encoding="utf-8"))
            if data.get("version") == _VERSION and isinstance(data.get("logs"), dict):
                self.kept = data["logs"]
        except (OSError, ValueError, AttributeError):
            pass  # none yet, or damaged: every log is read

    def read_log(self, storage: Storage, path) -> tuple[list, list]:
        rel = os.path.relpath(path, storage.root)
        key = _stat_key(path)
        entry = self.kept.get(rel)
        try:
            if key is not None and isinstance(entry, list) and entry[0] == key:
                found = self._from_kept(path, rel, entry)
                self.used[rel] = entry
                return found
        except (TypeError, ValueError, IndexError, KeyError):
            pass  # a damaged entry: read the log
        facts, problems = storage.facts.read_log(path)
        self._full[path] = {f.id: f for f in facts}
        if key is not None:
            self.fresh[rel] = (key, facts, problems)
        return facts, problems

    def _from_kept(self, path: Path, rel: str, entry: list) -> tuple[list, list]:
        _key, joined, days, costs, problems = entry
        ids = [joined[i : i + _ID_LENGTH] for i in range(0, len(joined), _ID_LENGTH)]
        if isinstance(days, int):
            day = date.fromordinal(days)
            facts = [KeptFact(fact_id, day, path, self) for fact_id in ids]
        else:
            facts = [KeptFact(fact_id, date.fromordinal(n), path, self) for fact_id, n in zip(ids, days, strict=True)]
        self.costs.update((fact_id, cost) for fact_id, cost in zip(ids, costs, strict=True) if cost)
        return facts, [ParseProblem(rel, int(line), str(message)) for line, message in problems]

    def full_fact(self, path: Path, fact_id: str):
        if path not in self._full:
            self._full[path] = {f.id: f for f in self.storage.facts.read_log(path)[0]}
            self.sized.add(os.path.relpath(path, self.storage.root))
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
                         json.dumps({"version": _VERSION, "logs": logs}, separators=(",", ":")))
        except OSError:
            pass  # a vault this user cannot write reads every log each time


def _stat_key(path) -> list[int] | None:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size, st.st_ino]
