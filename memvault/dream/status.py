"""Dream state for `memvault status`, derived from log.md and the daily logs only."""

from __future__ import annotations

from memvault.dream.planner import make_plan
from memvault.formats.dreamlog import failed_attempts, failing
from memvault.storage.store import Storage
from memvault.storage.wiki import pages_citing


def dream_status(storage: Storage, *, today=None) -> dict:
    plan = make_plan(storage, today=today)
    entries = plan.entries
    last = entries[-1] if entries else None
    last_ok = next((e for e in reversed(entries) if e.outcome == "ok"), None)
    nxt = plan.batches[0].label if plan.batches else None
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
        "failed_attempts": failed_attempts(entries, nxt) if nxt else 0,
        # the batch whose latest attempts failed: which, since when, how often, why (None: none)
        "failing": failing(entries),
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
