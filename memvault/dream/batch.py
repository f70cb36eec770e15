"""A day batch: pending days' facts (and late ones) consolidated into pages; moves the watermark."""

from __future__ import annotations

import json
import re

from memvault import dreamlog
from memvault.dream.memory_md import parse_memory, render_memory
from memvault.dream.planner import Batch, Plan
from memvault.dream.prompt import build_messages
from memvault.dream.results import BatchResult
from memvault.dream.runner import Change, Job, Runner, subject_label
from memvault.dream.schema import PAGE_MAX_BYTES, parse_answer
from memvault.dream.validate import Proposal, build_proposal
from memvault.errors import MemvaultError
from memvault.pages import INBOX_ZONE, Page, list_pages, read_page, render_index, render_page, zone_of
from memvault.storage.layout import INDEX_FILE, MEMORY_FILE
from memvault.storage.store import Storage

PROMPT_PAGES = 20            # relevant pages shown to the model per batch
PROMPT_PAGE_BYTES = 120_000  # and their total size
_WORD = re.compile(r"[^\W_]{4,}", re.UNICODE)


class DayBatch(Job):
    def __init__(self, runner: Runner, batch: Batch):
        self.runner = runner
        self.storage: Storage = runner.storage
        self.plan: Plan = runner.plan
        self.batch = batch
        self.label = batch.label
        self.zones = [z for z in self.storage.config.zones if z != INBOX_ZONE]
        self.facts = list(batch.facts)
        self.answer = None

    def new_result(self, outcome: str = "ok") -> BatchResult:
        return BatchResult(self.label, outcome, facts=len(self.facts), late=len(self.batch.late))

    def start(self, tombstoned: set[str]) -> BatchResult | None:
        self.facts = [f for f in self.batch.facts if f.id not in tombstoned]
        self.answer = None
        return None

    def messages(self) -> list[dict] | None:
        if not self.facts:  # every fact forgotten, or days with no facts: nothing to ask
            return None
        storage = self.storage
        return build_messages(
            label=self.label, facts=self.facts, late_ids=[f.id for f in self.batch.late],
            pages=self._relevant_pages(), index_md=storage.read_text(INDEX_FILE),
            memory_lines=memory_lines(storage), tombstoned=sorted(storage.tombstones())[-1000:],
            zones=self.zones, max_bytes=PAGE_MAX_BYTES, memory_max_lines=self.runner.dream.memory_max_lines,
        )

    def check(self, raw: str, tombstoned: set[str]) -> Proposal:
        self.answer = parse_answer(raw)
        return build_proposal(
            self.answer, root=self.storage.root, zones=self.zones, batch_ids={f.id for f in self.facts},
            known_ids=set(self.plan.facts_by_id) - tombstoned, tombstoned=tombstoned,
            day=self.runner.now().date().isoformat(), label=self.label,
        )

    def preview(self, result: BatchResult, proposal: Proposal | None, raw: str | None,
                reason: str | None) -> BatchResult:
        result.reason = reason
        if reason is not None:
            result.proposal = safe_json(raw or "")
        elif self.answer is not None and proposal is not None:
            result.proposal = self.answer.model_dump(exclude_none=True)
            count(result, proposal)
        return result

    def change(self, proposal: Proposal, fresh: set[str], result: BatchResult) -> Change:
        batch = self.batch
        watermark = batch.last_day.isoformat() if batch.last_day else iso(self.storage.watermark)
        count(result, proposal)
        result.watermark = watermark
        settled = [i for i in proposal.settled if i not in fresh]
        entry = dreamlog.format_entry(
            self.runner.now().isoformat(), "ok", self.label, watermark=watermark,
            detail=(f"{result.facts} facts ({result.late} late): {len(result.created)} created, "
                    f"{len(result.updated)} updated, {result.conflicts} conflict(s), "
                    f"{result.duplicates} duplicate(s), {result.noop} noop; model {self.runner.settings.model}"),
            ids_key="settled", ids=settled,
        )
        files = {path: render_page(page, self.plan.facts_by_id) for path, page in proposal.pages.items()}
        files.update(self._summary_files(proposal, watermark))
        conflicts = f"{result.conflicts} conflict" + ("" if result.conflicts == 1 else "s")
        message = (f"dream: {subject_label(self.label)} — {len(result.created)} created, "
                   f"{len(result.updated)} updated, {conflicts}, {result.noop} noop")
        return Change(files, entry, message, removed=[])

    def exhausted(self, runner: Runner, reason: str, attempt: int, failed_entry: str,
                  snapshot: dict[str, str] | None) -> BatchResult:
        """After max_retries the batch is skipped: its facts stay searchable and the run goes on."""
        batch = self.batch
        watermark = batch.last_day.isoformat() if batch.last_day else iso(self.storage.watermark)
        entry = failed_entry + dreamlog.format_entry(
            runner.now().isoformat(), "skipped", self.label, watermark=watermark,
            detail=f"after {attempt} failed attempts; its facts stay searchable as raw facts",
            ids_key="unconsolidated", ids=[f.id for f in batch.facts],
        )
        result = BatchResult(self.label, "skipped", facts=len(batch.facts), late=len(batch.late),
                             reason=reason, attempt=attempt, watermark=watermark)
        message = f"dream: {subject_label(self.label)} — skipped after {attempt} failed attempts"
        result.commit = runner.log_only(entry, message)
        return result

    # -- helpers ---------------------------------------------------------------------------
    def _relevant_pages(self) -> list[Page]:
        from memvault.index.query import SearchQuery
        from memvault.index.search import search

        root = self.storage.root
        paths: list[str] = []
        for fact in self.facts[:40]:
            try:
                hits = search(self.storage, SearchQuery(fact.text[:300], limit=5))
            except MemvaultError:  # e.g. a fact of punctuation only: no query to make
                continue
            for hit in hits:  # several sections of one page may match
                if hit.kind == "page" and hit.path not in paths:
                    paths.append(hit.path)
        if not paths:
            paths = pages_sharing_words(self.storage, self.facts)
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

    def _summary_files(self, proposal: Proposal, watermark: str | None) -> dict[str, str]:
        storage = self.storage
        pages = {p: read_page(storage.root, p) for p in list_pages(storage.root)}
        pages.update(proposal.pages)
        pages = {p: page for p, page in pages.items() if page is not None}
        if proposal.memory is not None:
            lines = proposal.memory
        else:  # keep the current summary, and give each new page a line so it is reachable
            lines = memory_pairs(storage) + [(proposal.pages[p].title, p) for p in proposal.created]
        dream = self.runner.dream
        memory = render_memory(lines, pages, watermark=watermark, max_lines=dream.memory_max_lines,
                               max_bytes=dream.memory_max_bytes)
        return {INDEX_FILE: render_index(pages.values(), storage.config.zones), MEMORY_FILE: memory}


def count(result: BatchResult, proposal: Proposal) -> None:
    result.created = list(proposal.created)
    result.updated = list(proposal.updated)
    result.conflicts = proposal.count("conflict")
    result.duplicates = proposal.count("duplicate")
    result.noop = proposal.count("noop")


def iso(day) -> str | None:
    return day.isoformat() if day else None


def memory_pairs(storage: Storage) -> list[tuple[str, str]]:
    """(text, page) of each line of the current MEMORY.md."""
    return parse_memory(storage.read_text(MEMORY_FILE))


def memory_lines(storage: Storage) -> list[str]:
    return [f"{text} ({path})" for text, path in memory_pairs(storage)]


def pages_sharing_words(storage: Storage, facts) -> list[str]:
    """Without the search index: pages ranked by words shared with the batch's facts."""
    words = {w.lower() for f in facts for w in _WORD.findall(f.text + " " + " ".join(f.tags))}
    scored = []
    for path in list_pages(storage.root):
        page = read_page(storage.root, path)
        if page is None:
            continue
        text = " ".join([page.title, *page.tags, page.body])
        score = len(words & {w.lower() for w in _WORD.findall(text)})
        if score:
            scored.append((-score, path))
    return [path for _, path in sorted(scored)]


def safe_json(raw: str):
    try:
        return json.loads(raw)
    except ValueError:
        return {"raw": raw[:2000]}
