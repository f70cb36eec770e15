"""`doctor`: run the probes it is given, repair what is safe with `fix`, and report.

Every check only reads; a repair is one commit or a local-only change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field

from memvault.errors import MemvaultError, VaultUnwritable
from memvault.health.full import FULL_IN_DEFAULT_SECONDS, TELL_SECONDS, Full, Progress, counting_reads, estimate
from memvault.storage.store import Storage

OK, WARN, FAIL, FIXED = "ok", "warn", "fail", "fixed"
SHOWN_DETAILS = 20


@dataclass
class Check:
    name: str
    status: str                     # ok | warn | fail | fixed
    message: str
    details: list[str] = field(default_factory=list)
    fix: str | None = None          # what `doctor --fix` would do; None when nothing is safe to do

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class DoctorReport:
    path: str
    checks: list[Check]
    fixed: list[str]
    skipped: list[str] = field(default_factory=list)  # the full checks this run left out
    full: dict | None = None                            # their estimate, and whether they ran

    @property
    def ok(self) -> bool:
        return not any(c.status == FAIL for c in self.checks)

    def to_dict(self) -> dict:
        return {"path": self.path, "ok": self.ok, "checks": [c.to_dict() for c in self.checks],
                "fixed": self.fixed, "skipped": self.skipped, "full": self.full}


@dataclass(frozen=True)
class Probe:
    """One check of `doctor`: `check` looks and never writes; `repair`, if any, does what the Check's
    `fix` says; `contacting`, if any, is the check `doctor --llm` runs instead (it may send a request)."""

    check: Callable[[Storage], Check]
    repair: Callable[[Storage], list[str]] | None = None
    contacting: Callable[[Storage], Check] | None = None
    full: Full | None = None  # a full check (it reads every daily log): see memvault.health.full


def doctor(storage: Storage, probes: Iterable[Probe], fix: bool = False, llm: bool = False,
           full: bool | None = None, progress: Progress | None = None) -> DoctorReport:
    """Run every probe, in order; with `fix`, repair what is safe, then check again; with `llm`, a
    probe that can contact the model sends it one tiny request. The full checks run with `full`,
    are left out with full=False, and by default run only where they take a few seconds;
    `progress` hears how far they are."""
    probes = list(probes)
    fulls = [each.full for each in probes if each.full]
    guess = estimate(storage, fulls)
    run_full = full if full is not None else guess.seconds <= FULL_IN_DEFAULT_SECONDS
    reads = "every daily log" + (" and the whole search index" if guess.data_bytes else "")
    if run_full and guess.seconds >= TELL_SECONDS:
        storage.notify(f"the full checks read {reads} ({guess.describe()})")
    counting = counting_reads(storage, progress, len(fulls)) if run_full else nullcontext()
    with counting:
        report = _checked(storage, [each for each in probes if run_full or not each.full], fix, llm)
    report.skipped = [] if run_full else [each.name for each in fulls]
    report.full = ({"ran": run_full, "estimate": guess.to_dict(), "message": guess.describe(), "reads": reads}
                   if fulls else None)
    return report


def _checked(storage: Storage, probes: list[Probe], fix: bool, llm: bool) -> DoctorReport:
    fixed: list[str] = []
    checks: list[Check] = []
    for each in probes:
        probe, repair = (each.contacting if llm and each.contacting else each.check), each.repair
        check = _run(probe, storage)
        if fix and repair and check.status in (WARN, FAIL) and check.fix:
            try:
                done = repair(storage)
            except VaultUnwritable:
                raise  # a full or read-only disk stops every repair alike: exit 9, in one line
            except MemvaultError as e:
                checks.append(Check(check.name, FAIL, f"{check.message}; the repair failed: {e}", check.details))
                continue
            fixed.extend(done)
            after = _run(probe, storage)
            if after.status == OK and done:
                after = Check(check.name, FIXED, "; ".join(done), check.details)
            check = after
        checks.append(check)
    return DoctorReport(str(storage.root), checks, fixed)


def _run(probe: Callable[[Storage], Check], storage: Storage) -> Check:
    try:
        return probe(storage)
    except MemvaultError as e:  # e.g. a symlinked log the check would read: the other checks still run
        return Check(probe.__name__.removeprefix("check_").replace("_", " "), FAIL, str(e))


def process_of(who: dict) -> str:
    """What to say of a lock holder: " (pid N: command)", or "" when it left no record."""
    return f" (pid {who['pid']}: {who['command']})" if who.get("pid") else ""


def shown_details(items: list[str]) -> list[str]:
    if len(items) <= SHOWN_DETAILS:
        return items
    return items[:SHOWN_DETAILS] + [f"… and {len(items) - SHOWN_DETAILS} more"]
