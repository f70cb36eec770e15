"""What a dream run reports: one BatchResult per batch (or scrub), and the DreamReport around them."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class BatchResult:
    label: str
    outcome: str                      # ok | split | failed | skipped | error | planned | proposed | rejected
    facts: int = 0
    late: int = 0
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] | None = None  # scrub only: pages that cited nothing but forgotten facts
    conflicts: int = 0
    duplicates: int = 0
    noop: int = 0
    watermark: str | None = None
    commit: str | None = None
    reason: str | None = None
    attempt: int | None = None
    proposal: dict | None = None
    repairs: int | None = None        # repair turns the accepted answer needed
    problems: list[str] | None = None  # every problem of a rejected final answer
    notes: list[str] | None = None    # what the runner dropped from an accepted answer
    left: list[str] | None = None     # facts still open after the answer: asked again in smaller batches
    dropped: list[str] | None = None  # why each was left, and each statement the check refused
    requests: int | None = None       # model calls the batch took (repair turns included)
    seconds: float | None = None      # time spent asking the model

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class DreamReport:
    watermark_before: str | None
    watermark_after: str | None = None
    pending_days: int = 0
    pending_facts: int = 0
    batches: list[BatchResult] = field(default_factory=list)
    gated: bool = False
    dry_run: bool = False
    caught_up: bool = False
    error: str | None = None
    model: str | None = None
    deferred: list[str] = field(default_factory=list)  # batches not started: gated, or past --max-batches
    stopped: str | None = None  # why the watermark stops before a day (lines that do not parse)
    stopped_early: str | None = None  # why the run ended before its work did (the time budget)

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict:
        return {
            "batches": [b.to_dict() for b in self.batches],
            "pages_created": sum(len(b.created) for b in self.batches if b.outcome == "ok"),
            "pages_updated": sum(len(b.updated) for b in self.batches if b.outcome == "ok"),
            "conflicts": sum(b.conflicts for b in self.batches if b.outcome == "ok"),
            "skipped": [b.label for b in self.batches if b.outcome == "skipped"],
            "watermark_before": self.watermark_before,
            "watermark_after": self.watermark_after,
            "pending_days": self.pending_days,
            "pending_facts": self.pending_facts,
            "caught_up": self.caught_up,
            "gated": self.gated,
            "deferred": list(self.deferred),
            "dry_run": self.dry_run,
            "model": self.model,
            "error": self.error,
            "stopped": self.stopped,
            "stopped_early": self.stopped_early,
        }
