"""Dream state for `memvault status`, derived from log.md and the daily logs only."""

from __future__ import annotations

from datetime import datetime

from memvault.dream.kept_plan import plan_from_kept
from memvault.dream.planner import make_plan
from memvault.dream.progress import running
from memvault.dream.status_memo import kept_status
from memvault.formats.dreamlog import fact_attempts, failing
from memvault.storage.store import Storage
from memvault.storage.wiki import pages_citing


def dream_status(storage: Storage, *, today=None) -> dict:
    """What dream has left and how its last runs went; kept between calls (see status_memo)."""
    today = today or datetime.now(storage.tz).date()
    status = dict(kept_status(storage, today, lambda: _work_out(storage, today)))
    # a dream running now: its batch, its step, what it has done (None: none runs); never kept
    status["running"] = running(storage)
    return status


def _work_out(storage: Storage, today, *, every_log: bool = False) -> dict:
    # (the logs that did not change since the last status are not read again, unless `every_log`)
    plan = make_plan(storage, today=today) if every_log else plan_from_kept(storage, today)
    entries = plan.entries
    last = entries[-1] if entries else None
    last_ok = next((e for e in reversed(entries) if e.outcome == "ok"), None)
    nxt = plan.batches[0].label if plan.batches else None
    waiting = {f.id for b in plan.batches for f in b.facts}
    attempts = max((fact_attempts(entries, f.id, f.day) for f in plan.batches[0].facts), default=0) if nxt else 0
    return {
        "watermark": plan.watermark.isoformat() if plan.watermark else None,
        "pending_days": len(plan.pending_days),
        "pending_facts": plan.pending_facts,
        "late_facts": len(plan.late),
        # lines that do not parse on the first pending day that has any: the watermark waits there
        "stopped": plan.unreadable_message(),
        # pages citing forgotten facts, rewritten by the next dream (even a gated one)
        "scrub_pages": sorted(pages_citing(storage)),
        "next_batch": nxt,
        # the most failed attempts of a fact of the next batch (a fact is skipped at max_retries)
        "failed_attempts": attempts,
        # the batch whose latest attempts failed, or the facts set aside after failing alone:
        # which, since when, how often, why (None: none)
        "failing": failing(entries, waiting),
        "max_retries": storage.config.dream.max_retries,
        "last_dream": _entry(last),
        "last_success": _entry(last_ok),
        "model": storage.config.llm_model,
    }


def _entry(entry) -> dict | None:
    if entry is None:
        return None
    return {"at": entry.at, "outcome": entry.outcome, "batch": entry.label,
            "watermark": entry.watermark, "detail": entry.detail}
