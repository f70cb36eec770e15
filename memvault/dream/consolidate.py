"""`memvault dream`: plan the pending work, then run the scrub and the day batches one by one."""

from __future__ import annotations

from memvault.dream.batch import DayBatch, iso
from memvault.dream.llm import LLMSettings
from memvault.dream.planner import make_plan
from memvault.dream.results import BatchResult, DreamReport
from memvault.dream.runner import Progress, Runner
from memvault.dream.scrub import SCRUB_LABEL, Scrub, scrub_due
from memvault.errors import LLMError, MemvaultError
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
    return LLMSettings(model=model, api_base=llm.api_base, timeout=llm.timeout, attempts=llm.attempts,
                       backoff=llm.backoff)


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
    storage.recover()
    with storage.dream_lock():
        storage.refuse_during_merge()
        plan = make_plan(storage, today=today)
        report = DreamReport(
            watermark_before=iso(plan.watermark), watermark_after=iso(plan.watermark),
            pending_days=len(plan.pending_days), pending_facts=plan.pending_facts,
            dry_run=dry_run, model=llm.model if llm else (model or storage.config.llm_model),
        )
        # pages citing forgotten facts are rewritten first: forgetting is a promise
        labels = ([SCRUB_LABEL] if scrub_due(storage) else []) + [b.label for b in plan.batches]
        batches = {b.label: b for b in plan.batches}
        if min_facts is not None and plan.pending_facts < min_facts:
            # A quiet night is cheap: the day batches wait. A due scrub does not: pages (and the
            # MEMORY.md built from them) must not keep what a forgotten fact said night after night.
            report.gated = True
            report.deferred = [label for label in labels if label != SCRUB_LABEL]
            labels = [label for label in labels if label == SCRUB_LABEL]
            say(f"quiet night: {plan.pending_facts} pending fact(s) < --min-facts {min_facts}"
                + ("; rewriting the pages that cite forgotten facts" if labels else "; nothing to do"))
            if not labels:
                return report
        if not labels:
            report.caught_up = True
            say("nothing to consolidate: caught up")
            return report
        limit = len(labels) if max_batches is None else max(0, max_batches)
        report.deferred = [label for label in labels[limit:]]
        try:
            settings = llm or llm_settings(storage, model)  # only now: there is work for the model
        except LLMError:
            if not dry_run:
                raise
            # A plan is still worth seeing before a model is set up.
            say("no model configured: the plan only, without the model's proposal")
            report.batches = [_planned(label, batches) for label in labels[:limit]]
            return report
        report.model = settings.model
        runner = Runner(storage, settings, say, plan)
        for number, label in enumerate(labels[:limit], start=1):
            batch = batches.get(label)
            if batch is None:
                say(f"batch {number}/{len(labels)} scrub: pages citing forgotten facts")
            else:
                say(f"batch {number}/{len(labels)} {label}: {len(batch.facts)} fact(s)"
                    + (f", {len(batch.late)} late" if batch.late else ""))
            if dry_run and number > 1:
                report.batches.append(_planned(label, batches))
                continue
            job = Scrub(runner) if batch is None else DayBatch(runner, batch)
            result = runner.run(job, dry_run=dry_run)
            report.batches.append(result)
            say(_describe(result))
            if result.outcome in ("failed", "error"):
                report.error = report.error or f"batch {label}: {result.reason}"
                # a rejected scrub does not hold up the day batches (their answers may not cite
                # forgotten facts either); provider trouble would fail them all the same
                if not (batch is None and result.outcome == "failed"):
                    break
        report.watermark_after = iso(storage.watermark)
        done = [b for b in report.batches if b.outcome in ("ok", "skipped") and b.label != SCRUB_LABEL]
        report.caught_up = not dry_run and report.error is None and len(done) == len(plan.batches) \
            and not report.gated
    if not dry_run and any(b.outcome == "ok" for b in report.batches):
        _refresh_index(storage, say)
    return report


def _planned(label: str, batches: dict) -> BatchResult:
    batch = batches.get(label)
    if batch is None:
        return BatchResult(label, "planned")
    return BatchResult(label, "planned", facts=len(batch.facts), late=len(batch.late))


def _describe(r: BatchResult) -> str:
    if r.outcome == "ok" and r.removed is not None:
        return f"  {r.label}: {len(r.updated)} page(s) rewritten, {len(r.removed)} removed without forgotten facts"
    if r.outcome == "ok":
        return (f"  {r.label}: {len(r.created)} created, {len(r.updated)} updated, "
                f"{r.conflicts} conflict(s), {r.duplicates} duplicate(s), {r.noop} noop "
                f"→ watermark {r.watermark}")
    if r.outcome == "proposed":
        return f"  {r.label}: proposal {'valid' if not r.reason else 'rejected: ' + r.reason}"
    return f"  {r.label}: {r.outcome}" + (f": {r.reason}" if r.reason else "")


def _refresh_index(storage: Storage, say: Progress) -> None:
    """Let consolidated facts leave, and new page sections enter, the default search scope."""
    from memvault.index.search import reindex

    try:
        reindex(storage)
    except MemvaultError as e:  # the index is derived: the next search catches up by itself
        say(f"index not refreshed ({e}); the next search will update it")
