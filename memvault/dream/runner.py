"""The dream runner: one job at a time through ask, validate, apply, with its log.md line and commit.

A job is a day batch (memvault.dream.batch) or the scrub (memvault.dream.scrub). The runner owns
what they share: the token budget of each request, the model call (no write lock held), the
repair turns, provider errors, counting failed attempts in log.md, asking again when the vault
changed under the model, and the one commit per outcome. A job says what to ask, how to check
the answer, how to ask for less, and what the answer writes.

How each way of failing ends:
- the request does not fit (our count, or the provider's "context length exceeded", or an answer
  cut at max_tokens): ask again at once with less (job.shrink), never an outage;
- an answer that fails validation: the same conversation goes on with what is still wrong, at
  most REPAIR_TURNS times (or until an answer repeats the one before); a day batch then applies
  what passed and leaves its other facts to smaller batches (memvault.dream.consolidate), and a
  fact that fails alone is a failed attempt (counted per fact; skipped after max_retries);
- a deterministic provider refusal of the request (bad request, content policy): a failed attempt;
- a setup the provider refuses (no key, a wrong key, an unknown model): logged as `error` and
  never counted, as every batch would fail alike: three nights without the key in cron's
  environment must not skip three batches;
- no answer after the retries (timeouts, 429, 5xx, no connection): an outage, logged as `error`
  and never counted, so an outage cannot skip batches. `memvault status` names both all the same.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from memvault.dream.budget import Budget, prompt_tokens
from memvault.dream.llm import (
    AnswerTruncated,
    ContextTooLong,
    LLMSettings,
    ProviderNotSetUp,
    ProviderRefused,
    ProviderUnavailable,
    complete_json,
)
from memvault.dream.progress import RunState
from memvault.dream.prompt import Handles, repair_messages
from memvault.dream.response_formats import ResponseFormats
from memvault.dream.results import BatchResult
from memvault.dream.schema import AnswerRejected, answer_schema
from memvault.dream.validate import Proposal
from memvault.formats import dreamlog
from memvault.formats.layout import DREAM_LLM, DREAM_LOG
from memvault.formats.pages import Page, cited_ids
from memvault.storage.store import Storage
from memvault.storage.wiki import list_pages

STALE_REDO = 2    # re-asks when a fact is forgotten or a page edited mid-dream
REPAIR_TURNS = 2  # corrections asked for in the same conversation before the attempt fails

Progress = Callable[[str], None]


class Stale(Exception):
    """The vault changed under the model (a fact forgotten, a page edited): ask again."""


class Rejected(AnswerRejected):
    """The final answer of a conversation still fails validation."""

    def __init__(self, rejected: AnswerRejected, raw: str, turns: int):
        super().__init__(rejected.problems)
        self.raw, self.turns = raw, turns


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
    handles: Handles | None = None  # the short ids of the latest request
    partial = False  # True: what passes is applied and the facts left are asked about again

    @property
    def fact_ids(self) -> list[str]:
        """The facts a failed attempt counts against (none: counted by label)."""
        return []

    def start(self, tombstoned: set[str]) -> BatchResult | None:
        """Prepare an attempt (called again after a stale answer); a result ends the job at once."""
        return None

    def messages(self, budget: Budget) -> list[dict] | None:
        """The request within budget.prompt_limit, None when no model is needed; ContextTooLong
        when even the job's required data does not fit."""
        raise NotImplementedError

    def shrink(self) -> int:
        """Ask for less next time: how many items (facts, pages) are left; 0 when nothing can go."""
        return 0

    def schema(self) -> dict:
        """The JSON schema of the answer (sent as response_format where the provider takes one)."""
        return answer_schema()

    def check(self, raw: str, tombstoned: set[str]) -> Proposal:
        """The validated proposal of an answer; AnswerRejected with every problem otherwise (a
        partial job returns what passed, the rest in `unresolved`)."""
        raise NotImplementedError

    def repair(self, messages: list[dict], raw: str, proposal: Proposal) -> list[dict] | None:
        """The next turn of a partial job's conversation (None: nothing to ask)."""
        return None

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

    def as_told(self, problem: str) -> str:
        """A problem as the model is told it in a repair turn: fact ids as the handles it was given."""
        handles = getattr(self, "handles", None)
        return handles.shorten_ids(problem) if handles else problem

    def new_result(self, outcome: str = "ok") -> BatchResult:
        return BatchResult(self.label, outcome)


class Runner:
    def __init__(self, storage: Storage, settings: LLMSettings, say: Progress, plan, budget: Budget):
        self.storage = storage
        self.settings = settings
        self.say = say
        self.plan = plan
        self.budget = budget
        self.dream = storage.config.dream
        # page -> ((mtime_ns, size), holds a credential): each batch of a run asks about every page
        self.credential_pages: dict = {}
        self.formats = ResponseFormats.load(storage.root / DREAM_LLM)
        self.deadline = time.monotonic() + self.dream.time_budget
        self.progress: RunState | None = None  # the run's progress file, if it keeps one
        self.request_refused = False  # the last failed attempt was the provider refusing the request
        self._meaning = None
        self._words: tuple[frozenset[str], frozenset[str]] | None = None

    def meaning(self):
        """The meaning check of this run (its embedding model loaded once, vectors kept)."""
        if self._meaning is None:
            from memvault.dream.check import Meaning
            from memvault.index.embedder import Embedder
            from memvault.index.search import model_spec

            spec = model_spec(self.storage)
            self._meaning = Meaning(Embedder(spec, threads=1), spec.name)
        return self._meaning

    def vault_words(self) -> tuple[frozenset[str], frozenset[str]]:
        """(common words, names) of this vault, for memvault.dream.check.specifics: once a run."""
        if self._words is None:
            from memvault.dream.check import vault_words

            common, names = vault_words(self.plan.facts_by_id.values())
            self._words = (common | self.meaning().vocabulary(), names)
        return self._words

    def out_of_time(self) -> bool:
        return time.monotonic() >= self.deadline

    def step(self, step: str, **fields) -> None:
        if self.progress is not None:
            self.progress.step(step, **fields)

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
        tombstoned = set(self.storage.tombstone_log.tombstones())
        done = job.start(tombstoned)
        if done is not None:
            if dry_run:
                done.outcome = "proposed"
            return done
        snapshot = page_hashes(self.storage)
        self.requests, self.seconds, self.request_refused = 0, 0.0, False
        try:
            proposal, raw, turns = self._ask(job, tombstoned)
        except Rejected as e:
            if dry_run:
                return job.preview(job.new_result("rejected"), None, e.raw, _after(e.turns) + str(e))
            return self.failed(job, _after(e.turns) + str(e), snapshot, problems=e.problems)
        except ProviderUnavailable as e:
            if dry_run:
                raise
            return self.record_error(job, str(e), "LLM unavailable")
        except ProviderNotSetUp as e:
            if dry_run:
                raise
            return self.record_error(job, str(e), "LLM not set up")
        except (ProviderRefused, ContextTooLong) as e:
            if dry_run:
                raise
            self.request_refused = True
            return self.failed(job, str(e), snapshot)
        nothing_passed = job.partial and not (set(proposal.dispositions) - set(proposal.unresolved)) \
            and bool(proposal.unresolved)
        if dry_run:
            return self._preview(job, proposal, raw, turns, nothing_passed)
        if nothing_passed:
            return self._nothing_passed(job, proposal, raw, turns, snapshot)
        result = job.new_result()
        result.repairs = turns or None
        result.requests, result.seconds = self.requests or None, round(self.seconds, 1) if self.requests else None
        self.step("applying", batch=job.label)
        return self.apply(job, proposal, tombstoned, snapshot, result=result)

    @staticmethod
    def _preview(job: Job, proposal: Proposal, raw: str | None, turns: int, nothing_passed: bool) -> BatchResult:
        """A dry run's answer: what it would do, with the facts it leaves open; rejected when a real
        run would take nothing of it."""
        open_ = "; ".join(f"{job.as_told(i)}: {job.as_told(r)}" for i, r in proposal.unresolved.items())
        if nothing_passed:
            return job.preview(job.new_result("rejected"), None, raw, _after(turns) + f"no fact passed ({open_})")
        return job.preview(job.new_result("proposed"), proposal, raw, open_ or None)

    def _nothing_passed(self, job: Job, proposal: Proposal, raw: str | None, turns: int,
                        snapshot: dict[str, str]) -> BatchResult:
        """No fact of a partial job was resolved: smaller pieces are asked at once, unless the job
        was one fact already, which is then a failed attempt of that fact."""
        reasons = [f"fact {i}: {r}" if i not in r else r for i, r in proposal.unresolved.items()]
        problems = list(proposal.problems) or reasons
        if len(job.fact_ids) > 1:
            result = job.new_result("split")
            result.left = [i for i in job.fact_ids if i in proposal.unresolved]
            result.reason = _after(turns) + (problems[0] if problems else "no fact resolved")
            result.problems, result.repairs = problems, turns or None
            result.requests, result.seconds = self.requests or None, round(self.seconds, 1)
            return result
        result = self.failed(job, _after(turns) + (reasons[0] if reasons else "no fact resolved"), snapshot,
                             problems=problems)
        result.requests, result.seconds = self.requests or None, round(self.seconds, 1)
        return result

    # -- asking ----------------------------------------------------------------------------
    def _ask(self, job: Job, tombstoned: set[str]) -> tuple[Proposal, str | None, int]:
        """Ask until the request fits the model's window; then converse (answer, repair turns)."""
        while True:
            try:
                messages = job.messages(self.budget)
            except ContextTooLong as e:
                if job.shrink():
                    continue  # our own count said so: the budget itself was right
                raise ContextTooLong(f"{e}; {_TOO_SMALL}") from None
            if messages is None:
                return Proposal(), None, 0
            try:
                return self._converse(job, messages, tombstoned)
            except AnswerTruncated as e:
                # more facts than one answer can account for: fewer, this batch and the next ones
                left = job.shrink()
                if not left:
                    raise AnswerTruncated(f"{e} even for the smallest batch; if the model can answer at "
                                          "more length, raise [llm] max_output_tokens") from None
                self.budget.cap_facts(left)
                self.say(f"  {job.label}: {e}; asking again about {left}")
            except ContextTooLong as e:
                # the provider counts differently (another tokenizer, a smaller window than stated):
                # ask for less from now on, this batch and the next ones
                if not self.budget.shrink():
                    raise ContextTooLong(f"{e}; {_TOO_SMALL}") from None
                job.shrink()
                self.say(f"  {job.label}: {e}; asking again with less")

    def _converse(self, job: Job, messages: list[dict], tombstoned: set[str]) -> tuple[Proposal, str, int]:
        """Ask, check, and repair what is wrong while turns are left and the model says something new."""
        said: set[str] = set()
        outcome: Proposal | Rejected = Proposal()
        for turn in range(REPAIR_TURNS + 1):
            self.say(f"  asking {self.settings.model} …" if turn == 0 else
                     f"  {job.label}: repair turn {turn}/{REPAIR_TURNS}")
            self.step("asking the model" if turn == 0 else f"repair turn {turn}/{REPAIR_TURNS}", batch=job.label)
            started = time.monotonic()
            raw = complete_json(self.settings, messages, job.schema(), limits=self.budget.limits,
                                formats=self.formats)
            self.requests += 1
            self.seconds += time.monotonic() - started
            self.step("checking the answer", batch=job.label)
            try:
                outcome = job.check(raw, tombstoned)
            except AnswerRejected as e:
                outcome = Rejected(e, raw, turn)
            if isinstance(outcome, Proposal) and not outcome.unresolved:
                return outcome, raw, turn
            if turn == REPAIR_TURNS or " ".join(raw.split()) in said:
                break  # no turn left, or the model gives the answer it gave before: asking again won't help
            said.add(" ".join(raw.split()))
            if isinstance(outcome, Proposal):
                repair = job.repair(messages, raw, outcome)
            else:
                repair = repair_messages(messages, raw, [job.as_told(p) for p in outcome.problems])
            if repair is None or prompt_tokens(repair) > self.budget.conversation_limit:
                break  # an answer this long leaves no room to discuss it: the attempt ends as it is
            messages = repair
        if isinstance(outcome, Rejected):
            raise outcome
        return outcome, raw, turn

    # -- writing ---------------------------------------------------------------------------
    def apply(self, job: Job, proposal: Proposal, tombstoned: set[str], snapshot: dict[str, str],
              *, before: str = "", result: BatchResult | None = None) -> BatchResult:
        """Write what the proposal changes as one commit, unless the vault changed meanwhile."""
        storage = self.storage
        result = result or job.new_result()
        pages, removed = job.writes(proposal)
        with storage.write_lock():
            fresh = set(storage.tombstone_log.tombstones()) - tombstoned
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
    def record_error(self, job: Job, reason: str, what: str) -> BatchResult:
        """No answer after the retries (timeouts, 429, 5xx, connection), or a setup the provider
        refuses (the key, the model): logged as `what`, never counted."""
        entry = dreamlog.format_entry(self.now().isoformat(), "error", job.label, detail=f"{what}: {reason}")
        result = job.new_result("error")
        result.reason = reason
        result.commit = self.log_only(entry, f"dream: {subject_label(job.label)} — {what}")
        return result

    def failed(self, job: Job, reason: str, snapshot: dict[str, str] | None,
               problems: list[str] | None = None) -> BatchResult:
        """A failed attempt, logged with every problem and counted (per fact for a day batch: its
        `tried:` ids); the job decides what its last allowed failure does."""
        entries = self.storage.dreams.dream_entries()
        tried = list(job.fact_ids)
        if tried:
            facts = self.plan.facts_by_id
            attempt = 1 + max(dreamlog.fact_attempts(entries, i, facts[i].day if i in facts else None)
                              for i in tried)
        else:
            attempt = dreamlog.failed_attempts(entries, job.label) + 1
        limit = self.dream.max_retries
        entry = dreamlog.format_entry(self.now().isoformat(), "failed", job.label,
                                      detail=f"attempt {attempt}/{limit}: {reason}",
                                      ids={"tried": tried}, problems=problems or ())
        if attempt >= limit:
            result = job.exhausted(self, reason, attempt, entry, snapshot)
        else:
            result = job.new_result("failed")
            result.reason, result.attempt = reason, attempt
            message = f"dream: {subject_label(job.label)} — attempt {attempt}/{limit} failed"
            result.commit = self.log_only(entry, message)
        result.problems = problems or None
        return result


_TOO_SMALL = ("even the smallest request does not fit: if the model's window is larger, say so in "
              "[llm] context_window (memvault.toml); else lower [llm] max_output_tokens or choose a larger model")


def _after(turns: int) -> str:
    return f"answer rejected after {turns} repair turn(s): " if turns else ""


def subject_label(label: str) -> str:
    """How a commit subject names a job."""
    return "late facts" if label == dreamlog.LATE_LABEL else label


def page_hashes(storage: Storage) -> dict[str, str]:
    root = storage.root
    return {p: hashlib.sha256((root / p).read_bytes()).hexdigest() for p in list_pages(root)}
