"""The dream runner: plan, ask the model (no write lock held), validate, apply one commit per batch."""

from __future__ import annotations

import hashlib
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, Iterator

from filelock import FileLock, Timeout

from memvault.dream import journal
from memvault.dream.journal import LATE_LABEL, append_entry, failed_attempts, format_entry
from memvault.dream.llm import LLMSettings, complete_json
from memvault.dream.memory_md import parse_memory, render_memory
from memvault.dream.pages import (
    INBOX_ZONE, Page, cited_ids, list_pages, read_page, render_index, render_page, zone_of,
)
from memvault.dream.planner import LOG_FILE, Batch, Plan, make_plan
from memvault.dream.prompt import build_messages
from memvault.dream.schema import PAGE_MAX_BYTES, AnswerRejected, answer_schema, parse_answer
from memvault.dream.validate import Proposal, build_proposal
from memvault.errors import DreamRunning, LLMError, MemvaultError

INDEX_FILE = "index.md"
MEMORY_FILE = "MEMORY.md"
PROMPT_PAGES = 20           # relevant pages shown to the model per batch
PROMPT_PAGE_BYTES = 120_000  # and their total size
STALE_REDO = 2              # re-asks when a fact is forgotten or a page edited mid-dream

Progress = Callable[[str], None]


@dataclass
class BatchResult:
    label: str
    outcome: str                      # ok | failed | skipped | error | planned | proposed
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

    def to_dict(self) -> dict:
        data = {k: v for k, v in self.__dict__.items() if v is not None}
        return data


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
        }


class _Stale(Exception):
    """The vault changed under the model (a fact forgotten, a page edited): ask again."""


@contextmanager
def dream_lock(vault) -> Iterator[None]:
    """One dream at a time per vault; a second one fails at once instead of queueing."""
    locks = vault.state_dir / "locks"
    locks.mkdir(exist_ok=True)
    lock = FileLock(locks / "dream.lock")
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise DreamRunning(f"dream already running on {vault.root}; try again when it has finished") from None
    try:
        yield
    finally:
        lock.release()


def llm_settings(vault, model: str | None = None) -> LLMSettings:
    """--model > MEMVAULT_MODEL > memvault.toml [llm] model (the last two resolved by Config)."""
    model = model or vault.config.llm_model
    if not model:
        raise LLMError(
            "no LLM model configured for dream: pass --model, set MEMVAULT_MODEL, or set "
            "[llm] model in memvault.toml (a litellm model string such as openai/gpt-4o-mini)"
        )
    llm = vault.config.llm
    return LLMSettings(model=model, api_base=llm.api_base, timeout=llm.timeout, attempts=llm.attempts,
                       backoff=llm.backoff)


def run_dream(
    vault,
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
    from memvault.dream.scrub import SCRUB_BATCH, ScrubRunner, scrub_due

    say = progress or (lambda _msg: None)
    vault.recover()
    with dream_lock(vault):
        vault.refuse_during_merge()
        plan = make_plan(vault, today=today)
        report = DreamReport(
            watermark_before=_iso(plan.watermark), watermark_after=_iso(plan.watermark),
            pending_days=len(plan.pending_days), pending_facts=plan.pending_facts,
            dry_run=dry_run, model=llm.model if llm else (model or vault.config.llm_model),
        )
        batches = list(plan.batches)
        # pages citing forgotten facts are rewritten first: forgetting is a promise
        if scrub_due(vault):
            batches.insert(0, SCRUB_BATCH)
        if min_facts is not None and plan.pending_facts < min_facts:
            # A quiet night is cheap: the day batches wait. A due scrub does not: pages (and the
            # MEMORY.md built from them) must not keep what a forgotten fact said night after night.
            report.gated = True
            report.deferred = [b.label for b in batches if b is not SCRUB_BATCH]
            batches = [b for b in batches if b is SCRUB_BATCH]
            say(f"quiet night: {plan.pending_facts} pending fact(s) < --min-facts {min_facts}"
                + ("; rewriting the pages that cite forgotten facts" if batches else "; nothing to do"))
            if not batches:
                return report
        if not batches:
            report.caught_up = True
            say("nothing to consolidate: caught up")
            return report
        try:
            settings = llm or llm_settings(vault, model)  # only now: there is work for the model
        except LLMError:
            if not dry_run:
                raise
            # A plan is still worth seeing before a model is set up.
            say("no model configured: the plan only, without the model's proposal")
            limit = len(batches) if max_batches is None else max(0, max_batches)
            report.deferred = [b.label for b in batches[limit:]]
            report.batches = [BatchResult(b.label, "planned", facts=len(b.facts), late=len(b.late))
                              for b in batches[:limit]]
            return report
        report.model = settings.model
        limit = len(batches) if max_batches is None else max(0, max_batches)
        report.deferred = [b.label for b in batches[limit:]]
        runner = ScrubRunner(vault, settings, say, plan)
        for number, batch in enumerate(batches[:limit], start=1):
            if batch is SCRUB_BATCH:
                say(f"batch {number}/{len(batches)} scrub: pages citing forgotten facts")
            else:
                say(f"batch {number}/{len(batches)} {batch.label}: {len(batch.facts)} fact(s)"
                    + (f", {len(batch.late)} late" if batch.late else ""))
            if dry_run and number > 1:
                report.batches.append(BatchResult(batch.label, "planned", facts=len(batch.facts),
                                                  late=len(batch.late)))
                continue
            result = runner.scrub(dry_run=dry_run) if batch is SCRUB_BATCH else runner.run(batch, dry_run=dry_run)
            report.batches.append(result)
            say(_describe(result))
            if result.outcome in ("failed", "error"):
                report.error = report.error or f"batch {batch.label}: {result.reason}"
                # a rejected scrub does not hold up the day batches (their answers may not cite
                # forgotten facts either); provider trouble would fail them all the same
                if not (batch is SCRUB_BATCH and result.outcome == "failed"):
                    break
        report.watermark_after = _iso(vault.watermark)
        done = [b for b in report.batches if b.outcome in ("ok", "skipped") and b.label != SCRUB_BATCH.label]
        report.caught_up = not dry_run and report.error is None and len(done) == len(plan.batches) \
            and not report.gated
    if not dry_run and any(b.outcome == "ok" for b in report.batches):
        _refresh_index(vault, say)
    return report


def _iso(day) -> str | None:
    return day.isoformat() if day else None


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


def _refresh_index(vault, say: Progress) -> None:
    """Let consolidated facts leave, and new page sections enter, the default search scope."""
    reindex = getattr(vault, "reindex", None)
    if reindex is None:
        return
    try:
        reindex()
    except MemvaultError as e:  # the index is derived: the next search catches up by itself
        say(f"index not refreshed ({e}); the next search will update it")


class _Runner:
    def __init__(self, vault, settings: LLMSettings, say: Progress, plan: Plan):
        self.vault = vault
        self.settings = settings
        self.say = say
        self.plan = plan
        self.dream = vault.config.dream
        self.zones = [z for z in vault.config.zones if z != INBOX_ZONE]

    def now(self) -> datetime:
        return datetime.now(self.vault.tz).replace(microsecond=0)

    # -- one batch -------------------------------------------------------------------------
    def run(self, batch: Batch, *, dry_run: bool) -> BatchResult:
        for _ in range(STALE_REDO + 1):
            try:
                return self._attempt(batch, dry_run)
            except _Stale as e:
                self.say(f"  {batch.label}: {e}; asking again")
                stale = str(e)
        return self._fail(batch, f"vault kept changing during the dream ({stale})")

    def _attempt(self, batch: Batch, dry_run: bool) -> BatchResult:
        vault = self.vault
        tombstoned = set(vault.tombstones())
        facts = [f for f in batch.facts if f.id not in tombstoned]
        result = BatchResult(batch.label, "ok", facts=len(facts), late=len(batch.late))
        if not facts:  # every fact forgotten, or days with no facts: nothing to ask
            if dry_run:
                result.outcome = "proposed"
                return result
            return self._apply(batch, result, Proposal(), tombstoned, {})
        pages = self._relevant_pages(facts)
        snapshot = _page_hashes(vault.root)
        messages = build_messages(
            label=batch.label, facts=facts, late_ids=[f.id for f in batch.late], pages=pages,
            index_md=_read(vault.root / INDEX_FILE), memory_lines=_memory_lines(vault.root),
            tombstoned=sorted(tombstoned)[-1000:], zones=self.zones, max_bytes=PAGE_MAX_BYTES,
            memory_max_lines=self.dream.memory_max_lines,
        )
        self.say(f"  asking {self.settings.model} …")
        try:
            raw = complete_json(self.settings, messages, answer_schema())
        except LLMError as e:
            if dry_run:
                raise
            return self._record_error(batch, str(e))
        try:
            answer = parse_answer(raw)
            proposal = build_proposal(
                answer, root=vault.root, zones=self.zones, batch_ids={f.id for f in facts},
                known_ids=set(self.plan.facts_by_id) - tombstoned, tombstoned=tombstoned,
                day=self.now().date().isoformat(), label=batch.label,
            )
        except AnswerRejected as e:
            if dry_run:
                result.outcome, result.reason = "proposed", str(e)
                result.proposal = _safe_json(raw)
                return result
            return self._fail(batch, str(e))
        if dry_run:
            result.outcome = "proposed"
            result.proposal = answer.model_dump(exclude_none=True)
            _count(result, proposal)
            return result
        return self._apply(batch, result, proposal, tombstoned, snapshot)

    def _relevant_pages(self, facts) -> list[Page]:
        root = self.vault.root
        paths: list[str] = []
        search = getattr(self.vault, "search", None)
        if search is not None:
            for fact in facts[:40]:
                try:
                    hits = search(fact.text[:300], limit=5)
                except MemvaultError:  # e.g. a fact of punctuation only: no query to make
                    continue
                for hit in hits:  # several sections of one page may match
                    if hit.kind == "page" and hit.path not in paths:
                        paths.append(hit.path)
        if not paths:
            paths = _pages_sharing_words(root, facts)
        chosen, size = [], 0
        for path in paths:
            if path.count("/") != 2 or zone_of(path) == INBOX_ZONE:
                continue
            page = read_page(root, path)
            if page is None:
                continue
            size += len(page.body.encode())
            if len(chosen) >= PROMPT_PAGES or size > PROMPT_PAGE_BYTES:
                break
            chosen.append(page)
        return chosen

    # -- writing ---------------------------------------------------------------------------
    def _apply(self, batch: Batch, result: BatchResult, proposal: Proposal, tombstoned: set[str],
               snapshot: dict[str, str]) -> BatchResult:
        vault = self.vault
        with vault.write_lock():
            fresh = set(vault.tombstones()) - tombstoned
            cited = {fid for page in proposal.pages.values() for fid in cited_ids(page.body)}
            if fresh & cited:
                raise _Stale(f"fact(s) {', '.join(sorted(fresh & cited))} forgotten meanwhile")
            now_hashes = _page_hashes(vault.root)
            changed = [p for p in proposal.pages if now_hashes.get(p) != snapshot.get(p)]
            if changed:
                raise _Stale(f"page(s) {', '.join(changed)} edited meanwhile")
            watermark = batch.last_day.isoformat() if batch.last_day else _iso(vault.watermark)
            _count(result, proposal)
            result.watermark = watermark
            settled = [i for i in proposal.settled if i not in fresh]
            entry = format_entry(
                self.now().isoformat(), "ok", batch.label, watermark=watermark,
                detail=(f"{result.facts} facts ({result.late} late): {len(result.created)} created, "
                        f"{len(result.updated)} updated, {result.conflicts} conflict(s), "
                        f"{result.duplicates} duplicate(s), {result.noop} noop; model {self.settings.model}"),
                ids_key="settled", ids=settled,
            )
            files = self._page_files(proposal)
            files.update(self._summary_files(proposal, watermark))
            files[LOG_FILE] = append_entry(_read(vault.root / LOG_FILE), entry)
            conflicts = f"{result.conflicts} conflict" + ("" if result.conflicts == 1 else "s")
            message = (f"dream: {_label(batch)} — {len(result.created)} created, "
                       f"{len(result.updated)} updated, {conflicts}, {result.noop} noop")
            result.commit = self._commit(files, message)
        return result

    def _page_files(self, proposal: Proposal) -> dict[str, str]:
        return {path: render_page(page, self.plan.facts_by_id) for path, page in proposal.pages.items()}

    def _summary_files(self, proposal: Proposal, watermark: str | None) -> dict[str, str]:
        root = self.vault.root
        pages = {p: read_page(root, p) for p in list_pages(root)}
        pages.update(proposal.pages)
        pages = {p: page for p, page in pages.items() if page is not None}
        if proposal.memory is not None:
            lines = proposal.memory
        else:  # keep the current summary, and give each new page a line so it is reachable
            lines = _memory_pairs(root) + [(proposal.pages[p].title, p) for p in proposal.created]
        memory = render_memory(
            lines, pages, watermark=watermark,
            max_lines=self.dream.memory_max_lines, max_bytes=self.dream.memory_max_bytes,
        )
        return {INDEX_FILE: render_index(pages.values(), self.vault.config.zones), MEMORY_FILE: memory}

    def _commit(self, files: dict[str, str], message: str, removed=()) -> str | None:
        """All files of a batch land in one commit, or (after a crash) not at all."""
        from memvault.vault import atomic_write

        vault = self.vault
        paths = sorted({*files, *removed})
        with vault.transaction("replace", paths, message):
            for rel in removed:
                (vault.root / rel).unlink(missing_ok=True)
            for rel, content in files.items():
                target = vault.root / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(target, content)
            return vault.git.commit(paths, message)

    def _log_only(self, entry: str, message: str) -> str | None:
        with self.vault.write_lock():
            files = {LOG_FILE: append_entry(_read(self.vault.root / LOG_FILE), entry)}
            return self._commit(files, message)

    def _record_error(self, batch: Batch, reason: str) -> BatchResult:
        """Provider trouble (auth, 429, timeout, 5xx): logged, not counted towards a skip."""
        entry = format_entry(self.now().isoformat(), "error", batch.label, detail=f"LLM unavailable: {reason}")
        commit = self._log_only(entry, f"dream: {_label(batch)} — LLM unavailable")
        return BatchResult(batch.label, "error", facts=len(batch.facts), late=len(batch.late),
                           reason=reason, commit=commit)

    def _fail(self, batch: Batch, reason: str) -> BatchResult:
        """A rejected answer: logged; after max_retries the batch is skipped and the run goes on."""
        attempt = failed_attempts(journal.parse_journal(_read(self.vault.root / LOG_FILE)), batch.label) + 1
        limit = self.dream.max_retries
        now = self.now().isoformat()
        entry = format_entry(now, "failed", batch.label, detail=f"attempt {attempt}/{limit}: {reason}")
        result = BatchResult(batch.label, "failed", facts=len(batch.facts), late=len(batch.late),
                             reason=reason, attempt=attempt)
        if attempt < limit:
            result.commit = self._log_only(entry, f"dream: {_label(batch)} — attempt {attempt}/{limit} failed")
            return result
        watermark = batch.last_day.isoformat() if batch.last_day else _iso(self.vault.watermark)
        entry += format_entry(
            now, "skipped", batch.label, watermark=watermark,
            detail=f"after {attempt} failed attempts; its facts stay searchable as raw facts",
            ids_key="unconsolidated", ids=[f.id for f in batch.facts],
        )
        result.outcome, result.watermark = "skipped", watermark
        result.commit = self._log_only(entry, f"dream: {_label(batch)} — skipped after {attempt} failed attempts")
        return result


def _label(batch: Batch) -> str:
    return "late facts" if batch.label == LATE_LABEL else batch.label


def _count(result: BatchResult, proposal: Proposal) -> None:
    result.created = list(proposal.created)
    result.updated = list(proposal.updated)
    result.conflicts = proposal.count("conflict")
    result.duplicates = proposal.count("duplicate")
    result.noop = proposal.count("noop")


def _read(path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


def _memory_pairs(root) -> list[tuple[str, str]]:
    return parse_memory(_read(root / MEMORY_FILE))


def _memory_lines(root) -> list[str]:
    return [f"{text} ({path})" for text, path in _memory_pairs(root)]


def _page_hashes(root) -> dict[str, str]:
    return {p: hashlib.sha256((root / p).read_bytes()).hexdigest() for p in list_pages(root)}


_WORD = re.compile(r"[^\W_]{4,}", re.UNICODE)


def _pages_sharing_words(root, facts) -> list[str]:
    """Without the search index: pages ranked by words shared with the batch's facts."""
    words = {w.lower() for f in facts for w in _WORD.findall(f.text + " " + " ".join(f.tags))}
    scored = []
    for path in list_pages(root):
        page = read_page(root, path)
        if page is None:
            continue
        text = " ".join([page.title, *page.tags, page.body])
        score = len(words & {w.lower() for w in _WORD.findall(text)})
        if score:
            scored.append((-score, path))
    return [path for _, path in sorted(scored)]


def _safe_json(raw: str):
    import json

    try:
        return json.loads(raw)
    except ValueError:
        return {"raw": raw[:2000]}
