"""The dream runner: one job at a time through ask, validate, apply, with its log.md line and commit.

A job is a day batch (memvault.dream.batch) or the scrub (memvault.dream.scrub). The runner owns
what they share: the model call (no write lock held), provider errors, counting failed attempts
in log.md, asking again when the vault changed under the model, and the one commit per outcome.
A job says what to ask, how to check the answer, and what the answer writes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from memvault import dreamlog
from memvault.dream.llm import LLMSettings, complete_json
from memvault.dream.results import BatchResult
from memvault.dream.schema import AnswerRejected, answer_schema
from memvault.dream.validate import Proposal
from memvault.errors import LLMError
from memvault.pages import Page, cited_ids, list_pages
from memvault.storage.layout import DREAM_LOG
from memvault.storage.store import Storage

STALE_REDO = 2  # re-asks when a fact is forgotten or a page edited mid-dream

Progress = Callable[[str], None]


class Stale(Exception):
    """The vault changed under the model (a fact forgotten, a page edited): ask again."""


@dataclass
class Change:
    """What an accepted answer writes, as one commit: files, removals, log.md lines, subject."""

    files: dict[str, str]
    entry: str
    message: str
    removed: list[str]


class Job:
    """One unit of dream work. Subclasses fill in the steps; the runner calls them in order."""

    label: str

    def start(self, tombstoned: set[str]) -> BatchResult | None:
        """Prepare an attempt (called again after a stale answer); a result ends the job at once."""
        return None

    def messages(self) -> list[dict] | None:
        """The request for the model, or None when this attempt needs no model."""
        raise NotImplementedError

    def check(self, raw: str, tombstoned: set[str]) -> Proposal:
        """The validated proposal of an answer; AnswerRejected with the reason otherwise."""
        raise NotImplementedError

    def writes(self, proposal: Proposal) -> tuple[dict[str, Page], list[str]]:
        """The pages the proposal writes and the pages it removes."""
        return dict(proposal.pages), []

    def change(self, proposal: Proposal, fresh: set[str], result: BatchResult) -> Change:
        """The commit (computed under the write lock; `fresh`: ids forgotten since the attempt began)."""
        raise NotImplementedError

    def preview(self, result: BatchResult, proposal: Proposal | None, raw: str | None,
                reason: str | None) -> BatchResult:
        """A dry run's result: what the answer would do, or why it would be rejected."""
        result.reason = reason
        return result

    def exhausted(self, runner: Runner, reason: str, attempt: int, failed_entry: str,
                  snapshot: dict[str, str] | None) -> BatchResult:
        """The last allowed attempt failed (`snapshot` is None when the vault kept changing)."""
        raise NotImplementedError

    def new_result(self, outcome: str = "ok") -> BatchResult:
        return BatchResult(self.label, outcome)


class Runner:
    def __init__(self, storage: Storage, settings: LLMSettings, say: Progress, plan):
        self.storage = storage
        self.settings = settings
        self.say = say
        self.plan = plan
        self.dream = storage.config.dream

    def now(self) -> datetime:
        return datetime.now(self.storage.tz).replace(microsecond=0)

    def run(self, job: Job, *, dry_run: bool) -> BatchResult:
        stale = ""
        for _ in range(STALE_REDO + 1):
            try:
                return self._attempt(job, dry_run)
            except Stale as e:
                self.say(f"  {job.label}: {e}; asking again")
                stale = str(e)
        return self.failed(job, f"vault kept changing during the dream ({stale})", snapshot=None)

    def _attempt(self, job: Job, dry_run: bool) -> BatchResult:
        tombstoned = set(self.storage.tombstones())
        done = job.start(tombstoned)
        if done is not None:
            if dry_run:
                done.outcome = "proposed"
            return done
        snapshot = page_hashes(self.storage)
        messages = job.messages()
        proposal, raw = Proposal(), None
        if messages is not None:
            self.say(f"  asking {self.settings.model} …")
            try:
                raw = complete_json(self.settings, messages, answer_schema())
            except LLMError as e:
                if dry_run:
                    raise
                return self.record_error(job, str(e))
            try:
                proposal = job.check(raw, tombstoned)
            except AnswerRejected as e:
                if dry_run:
                    return job.preview(job.new_result("proposed"), None, raw, str(e))
                return self.failed(job, str(e), snapshot)
        if dry_run:
            return job.preview(job.new_result("proposed"), proposal, raw, None)
        return self.apply(job, proposal, tombstoned, snapshot)

    # -- writing ---------------------------------------------------------------------------
    def apply(self, job: Job, proposal: Proposal, tombstoned: set[str], snapshot: dict[str, str],
              *, before: str = "", result: BatchResult | None = None) -> BatchResult:
        """Write what the proposal changes as one commit, unless the vault changed meanwhile."""
        storage = self.storage
        result = result or job.new_result()
        pages, removed = job.writes(proposal)
        with storage.write_lock():
            fresh = set(storage.tombstones()) - tombstoned
            cited = {fid for page in pages.values() for fid in cited_ids(page.body)}
            if fresh & cited:
                raise Stale(f"fact(s) {', '.join(sorted(fresh & cited))} forgotten meanwhile")
            now_hashes = page_hashes(storage)
            changed = [p for p in [*pages, *removed] if now_hashes.get(p) != snapshot.get(p)]
            if changed:
                raise Stale(f"page(s) {', '.join(changed)} edited meanwhile")
            change = job.change(proposal, fresh, result)
            files = dict(change.files)
            files[DREAM_LOG] = dreamlog.append_entry(storage.read_text(DREAM_LOG), before + change.entry)
            result.commit = storage.write_files(files, change.message, removed=change.removed)
        return result

    def log_only(self, entry: str, message: str) -> str | None:
        """A commit of log.md lines alone (a failed attempt, a provider error, a skip)."""
        with self.storage.write_lock():
            files = {DREAM_LOG: dreamlog.append_entry(self.storage.read_text(DREAM_LOG), entry)}
            return self.storage.write_files(files, message)

    # -- failures --------------------------------------------------------------------------
    def record_error(self, job: Job, reason: str) -> BatchResult:
        """Provider trouble (auth, 429, timeout, 5xx): logged, not counted towards a skip."""
        entry = dreamlog.format_entry(self.now().isoformat(), "error", job.label, detail=f"LLM unavailable: {reason}")
        result = job.new_result("error")
        result.reason = reason
        result.commit = self.log_only(entry, f"dream: {subject_label(job.label)} — LLM unavailable")
        return result

    def failed(self, job: Job, reason: str, snapshot: dict[str, str] | None) -> BatchResult:
        """A rejected answer: logged and counted; the job decides what its last allowed failure does."""
        attempt = dreamlog.failed_attempts(self.storage.dream_entries(), job.label) + 1
        limit = self.dream.max_retries
        entry = dreamlog.format_entry(self.now().isoformat(), "failed", job.label,
                                      detail=f"attempt {attempt}/{limit}: {reason}")
        if attempt >= limit:
            return job.exhausted(self, reason, attempt, entry, snapshot)
        result = job.new_result("failed")
        result.reason, result.attempt = reason, attempt
        result.commit = self.log_only(entry, f"dream: {subject_label(job.label)} — attempt {attempt}/{limit} failed")
        return result


def subject_label(label: str) -> str:
    """How a commit subject names a job."""
    return "late facts" if label == dreamlog.LATE_LABEL else label


def page_hashes(storage: Storage) -> dict[str, str]:
    root = storage.root
    return {p: hashlib.sha256((root / p).read_bytes()).hexdigest() for p in list_pages(root)}
