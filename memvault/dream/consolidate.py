"""`memvault dream`: plan the pending work, then run the scrub and the day batches one by one."""

from __future__ import annotations

import sys

from memvault.dream.batch import DayBatch, iso
from memvault.dream.budget import Budget
from memvault.dream.llm import LLMSettings, model_limits, provider_of
from memvault.dream.planner import Plan, PlanMemo, make_plan
from memvault.dream.progress import RunState
from memvault.dream.prompt import base_tokens
from memvault.dream.results import BatchResult, DreamReport
from memvault.dream.runner import Job, Progress, Runner
from memvault.dream.scrub import SCRUB_LABEL, Scrub, scrub_due
from memvault.errors import InvalidInput, LLMError, MemvaultError, VaultUnwritable, check_count, unwritable_in
from memvault.storage.store import Storage


def llm_settings(storage: Storage, model: str | None = None) -> LLMSettings:
    """--model > MEMVAULT_MODEL > memvault.toml [llm] model (the last two resolved by Config)."""
    model = model or storage.config.llm_model
    if not model:
        raise LLMError(
            "no LLM model configured for dream: pass --model, set MEMVAULT_MODEL, or set "
            "[llm] model in memvault.toml (a litellm model string such as openai/gpt-4o-mini)"
        )
    llm = storage.config.llm
    _check_api_base(llm.api_base)
    return LLMSettings(model=model, api_base=llm.api_base, timeout=llm.timeout, attempts=llm.attempts,
                       backoff=llm.backoff, context_window=llm.context_window,
                       max_output_tokens=llm.max_output_tokens)


def _check_api_base(api_base: str | None) -> None:
    """An address no server can have ("not a url", ftp://, port 99999) is a setting to correct,
    said before anything is asked: tried as an outage, it was retried and logged every night."""
    if api_base is None:
        return
    from urllib.parse import urlsplit

    parts = urlsplit(api_base.strip())
    try:
        parts.port  # noqa: B018  (raises ValueError for a port out of range)
        sound = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        sound = False
    if not sound:
        raise InvalidInput("the LLM's address (MEMVAULT_API_BASE, else [llm] api_base in memvault.toml) must be an "
                           f"http:// or https:// URL such as http://127.0.0.1:8080/v1, got {api_base!r}")


def run_dream(
    storage: Storage,
    *,
    dry_run: bool = False,
    max_batches: int | None = None,
    min_facts: int | None = None,
    model: str | None = None,
    llm: LLMSettings | None = None,
    today=None,
    progress: Progress | None = None,
) -> DreamReport:
    """Consolidate pending days batch after batch; see docs/dream.md for the guarantees."""
    say = progress or (lambda _msg: None)
    for name, value in (("max_batches", max_batches), ("min_facts", min_facts)):
        if value is not None:
            check_count(name, value, 0)
    storage.recovery.recover()
    with storage.dream_lock():
        storage.refuse_during_merge()
        plan = make_plan(storage, today=today)
        report = _new_report(storage, plan, dry_run=dry_run, llm=llm, model=model)
        if report.stopped:
            say(report.stopped)
        # pages citing forgotten facts are rewritten first: forgetting is a promise
        scrub = scrub_due(storage)
        labels = ([SCRUB_LABEL] if scrub else []) + [b.label for b in plan.batches]
        if _nothing_to_ask(report, plan, labels, scrub=scrub, min_facts=min_facts, say=say):
            return report
        # without --max-batches a run goes on until caught up (a batch that shrinks leaves more)
        limit = sys.maxsize if max_batches is None else max_batches
        settings = _settings_or_plan_only(storage, report, plan, labels[:limit], llm=llm, model=model,
                                          dry_run=dry_run, say=say)
        if settings is None:
            report.deferred = labels[limit:]
            return report
        report.model = settings.model
        budget = _model_budget(storage, settings, say)
        try:
            _run_night(storage, settings, say, report, budget, plan=plan, labels=labels, scrub=scrub,
                       limit=limit, today=today, dry_run=dry_run)
        except Exception as e:
            failure = _full_before_applying(storage, e)
            if failure is None:
                raise
            applied = sum(b.outcome == "ok" for b in report.batches)
            raise failure.saying(f"{applied} batch(es) committed before it, the rest waits for the next dream"
                           if applied else "nothing was changed") from e
        report.watermark_after = iso(storage.dreams.watermark)
    if not dry_run and any(b.outcome == "ok" for b in report.batches):
        _refresh_index(storage, say)
    return report


def _new_report(storage: Storage, plan: Plan, *, dry_run: bool, llm: LLMSettings | None,
                model: str | None) -> DreamReport:
    """The report of a run as planned, before any job (the watermark where it is)."""
    return DreamReport(
        watermark_before=iso(plan.watermark), watermark_after=iso(plan.watermark),
        pending_days=len(plan.pending_days), pending_facts=plan.pending_facts,
        dry_run=dry_run, model=llm.model if llm else (model or storage.config.llm_model),
        stopped=plan.unreadable_message(),
    )


def _nothing_to_ask(report: DreamReport, plan: Plan, labels: list[str], *, scrub: bool,
                    min_facts: int | None, say: Progress) -> bool:
    """True when the run ends before a model is needed: a quiet night without a scrub due, or no work."""
    if min_facts is not None and plan.pending_facts < min_facts:
        # A quiet night is cheap: the day batches wait. A due scrub does not: pages (and the
        # MEMORY.md built from them) must not keep what a forgotten fact said night after night.
        report.gated = True
        say(f"quiet night: {plan.pending_facts} pending fact(s) < --min-facts {min_facts}"
            + ("; rewriting the pages that cite forgotten facts" if scrub else "; nothing to do"))
        if not scrub:
            report.deferred = labels
            return True
    if not labels:
        report.caught_up = report.stopped is None
        if report.caught_up:
            say("nothing to consolidate: caught up")
        return True
    return False


def _settings_or_plan_only(storage: Storage, report: DreamReport, plan: Plan, first: list[str], *,
                           llm: LLMSettings | None, model: str | None, dry_run: bool,
                           say: Progress) -> LLMSettings | None:
    """The model's settings (only now: there is work for it); a dry run without a model shows the
    `first` jobs as planned and gets None."""
    try:
        return llm or llm_settings(storage, model)
    except LLMError:
        if not dry_run:
            raise
        # A plan is still worth seeing before a model is set up.
        say("no model configured: the plan only, without the model's proposal")
        report.batches = [_planned(label, plan) for label in first]
        return None


def _model_budget(storage: Storage, settings: LLMSettings, say: Progress) -> Budget:
    """The token budget of the model's window, once its base prompt is known to fit."""
    provider_of(settings.model)  # a model string litellm cannot place is a typo: no attempt is made
    budget = Budget(model_limits(settings))
    config = storage.config
    budget.check(base_tokens(config.zones, config.dream.memory_max_lines))
    say(f"model {settings.model}: a window of {budget.window} tokens ({budget.limits.source}), "
        f"answers of up to {budget.max_output}")
    return budget


def _full_before_applying(storage: Storage, e: Exception) -> VaultUnwritable | None:
    """The disk filled before a batch was applied (the statement check's embeddings, the index)
    and nothing is left half-written: the error to say what became of the vault, as every write does."""
    failure = e if isinstance(e, VaultUnwritable) else unwritable_in(e)
    if failure is None or failure.outcome or storage.git.status():
        return None
    return failure


def _run_night(storage, settings, say, report: DreamReport, budget: Budget, *, plan, labels: list[str],
               scrub: bool, limit: int, today, dry_run: bool) -> None:
    # planned again for this model's window (the first plan knew only memvault.toml's)
    memo = PlanMemo()
    runner = Runner(storage, settings, say, make_plan(storage, today=today, budget=budget, memo=memo), budget)
    if not dry_run:
        runner.progress = RunState(storage, pending_facts=plan.pending_facts, batches=len(labels))
    try:
        _run_jobs(runner, report, scrub=scrub, limit=limit, today=today, dry_run=dry_run, memo=memo)
    finally:
        if runner.progress is not None:
            runner.progress.close()


def _run_jobs(runner: Runner, report: DreamReport, *, scrub: bool, limit: int, today, dry_run: bool,
              memo: PlanMemo) -> None:
    """The scrub while one is due, then the day batches, planned afresh after each job.

    Planning again lets a batch that had to shrink (the model's window took less than counted)
    leave the rest of its facts to head the next batch, sized by what the model took so far. The
    facts an answer left open are asked about again at once, in halves, down to one fact; a fact
    that fails alone is set aside for the night (its attempt counted) and the run goes on.
    """
    storage, say = runner.storage, runner.say
    work = _Work(runner, report, today=today, memo=memo)
    scrub_blocked = not scrub
    job: Job | None = None
    while len(report.batches) < limit:
        done = len(report.batches)
        scrubbing = not scrub_blocked and scrub_due(storage)
        if not scrubbing and (report.gated or not work.remaining):
            break
        if done and runner.out_of_time() and not dry_run:  # (one job a run at least: a run always gets on)
            report.stopped_early = (f"the run's time budget ([dream] time_budget = "
                                    f"{runner.dream.time_budget:g} s) is spent; the rest waits for the next run")
            say(report.stopped_early)
            break
        job = _next_job(runner, work, scrubbing=scrubbing, done=done)
        runner.step("starting a batch", batch=job.label)
        result = runner.run(job, dry_run=dry_run)
        report.batches.append(result)
        say(_describe(result))
        if dry_run:
            if result.outcome == "rejected":  # what a real run would refuse: said as its failure
                report.error = f"batch {result.label}: {result.reason}"
            break
        if isinstance(job, Scrub) and result.outcome != "ok":
            scrub_blocked = True
        if not _goes_on(runner, report, work, job, result):
            break
        work.replan(result)
    work.finish(dry_run=dry_run, job=job, limit=limit, scrub_blocked=scrub_blocked)


def _next_job(runner: Runner, work: _Work, *, scrubbing: bool, done: int) -> Job:
    """The scrub when it is due, else the next day batch; told as "batch N/total"."""
    total = done + work.remaining
    if scrubbing:
        runner.say(f"batch {done + 1}/{total + 1} scrub: pages citing forgotten facts")
        return Scrub(runner)
    batch = work.next_batch()
    runner.say(f"batch {done + 1}/{total} {batch.label}: {len(batch.facts)} fact(s)"
               + (f", {len(batch.late)} late" if batch.late else "") + (" (asked again)" if work.retrying else ""))
    return DayBatch(runner, batch)


def _goes_on(runner: Runner, report: DreamReport, work: _Work, job: Job, result: BatchResult) -> bool:
    """Record a job's outcome in the run's work and report; False when the run stops there."""
    if result.outcome == "error":  # provider trouble would fail every batch the same way
        report.error = report.error or f"batch {result.label}: {result.reason}"
        return False
    if result.outcome == "failed":
        report.error = report.error or f"batch {result.label}: {result.reason}"
        if runner.request_refused:
            return False  # the request itself was refused (content policy, a window too small): not the facts
        if isinstance(job, DayBatch):
            work.aside.update(job.fact_ids)
        # a rejected scrub does not hold up the day batches (their answers may not cite forgotten
        # facts either); a fact that failed alone waits for the next run, the others go on
    elif isinstance(job, DayBatch):
        work.after(job, result)
    return True


class _Work:
    """What a run still has to ask about: pieces of batches to ask again at once, then the plan."""

    def __init__(self, runner: Runner, report: DreamReport, *, today, memo: PlanMemo):
        self.runner, self.report, self.today, self.memo = runner, report, today, memo
        self.pieces: list = []         # smaller batches of facts an answer left open
        self.aside: set[str] = set()   # facts that failed alone: tried again next run
        self.retrying = False

    @property
    def plan(self):
        return self.runner.plan

    @property
    def remaining(self) -> int:
        return len(self.pieces) + len(self.plan.batches)

    def next_batch(self):
        self.retrying = bool(self.pieces)
        if self.pieces:
            return self.pieces.pop(0)
        return self.plan.batches[0] if self.plan.batches else None

    def after(self, job: DayBatch, result) -> None:
        """Facts an answer left open go again at once, halved (one alone is asked alone)."""
        left = result.left or []
        if len(left) > 1 or (left and len(job.fact_ids) > 1):
            half = (len(left) + 1) // 2
            self.pieces[:0] = [job.batch.only(part) for part in (left[:half], left[half:]) if part]
        elif left:
            self.pieces.insert(0, job.batch.only(left))

    def replan(self, result: BatchResult) -> None:
        waiting = {f.id for piece in self.pieces for f in piece.facts}
        self.runner.plan = make_plan(self.runner.storage, today=self.today, budget=self.runner.budget,
                                     memo=self.memo, exclude=self.aside | waiting)
        if self.runner.progress is not None:
            # accounted for: an applied batch's facts but those left open, a skipped batch's (as raw facts)
            done = {"ok": result.facts - len(result.left or []), "skipped": result.facts}.get(result.outcome, 0)
            aside = result.facts if result.outcome == "failed" and result.label != SCRUB_LABEL else 0
            self.runner.progress.batch_done(facts_done=done, facts_left=aside)

    def finish(self, *, dry_run: bool, job, limit: int, scrub_blocked: bool) -> None:
        report, plan, storage = self.report, self.plan, self.runner.storage
        days = [p.label for p in self.pieces] + [b.label for b in plan.batches]
        if dry_run:
            # the first job was asked; what would follow is shown as planned
            rest = [] if report.gated else days[1:] if isinstance(job, DayBatch) else days
            room = max(0, limit - len(report.batches))
            report.batches += [_planned(label, plan) for label in rest[:room]]
            report.deferred = days if report.gated else rest[room:]
            return
        if report.gated:
            report.deferred = days
        elif len(report.batches) >= limit or report.stopped_early:
            report.deferred = ([SCRUB_LABEL] if not scrub_blocked and scrub_due(storage) else []) + days
        report.caught_up = (report.error is None and not report.gated and not days and not plan.unreadable
                            and not report.stopped_early and not self.aside)


def _planned(label: str, plan) -> BatchResult:
    batch = next((b for b in plan.batches if b.label == label), None)
    if batch is None:
        return BatchResult(label, "planned")
    return BatchResult(label, "planned", facts=len(batch.facts), late=len(batch.late))


def _describe(r: BatchResult) -> str:
    if r.outcome == "ok" and r.removed is not None:
        return f"  {r.label}: {len(r.updated)} page(s) rewritten, {len(r.removed)} removed without forgotten facts"
    if r.outcome == "ok":
        return (f"  {r.label}: {len(r.created)} created, {len(r.updated)} updated, "
                f"{r.conflicts} conflict(s), {r.duplicates} duplicate(s), {r.noop} noop "
                f"→ watermark {r.watermark}" + (f" (notes: {'; '.join(r.notes)})" if r.notes else "")
                + (f"; {len(r.left)} fact(s) left for a smaller batch" if r.left else ""))
    if r.outcome == "proposed":
        return f"  {r.label}: proposal valid" + (f" (left open: {r.reason})" if r.reason else "")
    if r.outcome in ("failed", "error", "rejected"):  # the reason is the run's error, told once by the caller
        return f"  {r.label}: {r.outcome}" + (f" (attempt {r.attempt})" if r.attempt else "")
    if r.outcome == "split":
        return f"  {r.label}: no fact resolved ({r.reason}); asking again in smaller batches"
    return f"  {r.label}: {r.outcome}" + (f": {r.reason}" if r.reason else "")


def _refresh_index(storage: Storage, say: Progress) -> None:
    """Let consolidated facts leave, and new page sections enter, the default search scope."""
    from memvault.index.search import reindex

    try:
        reindex(storage)
    except MemvaultError as e:  # the index is derived: the next search catches up by itself
        say(f"index not refreshed ({e}); the next search will update it")
