"""A day batch: pending days' facts (and late ones) consolidated into pages; moves the watermark.

Its prompt holds the batch's facts, then as much as fits of: index.md (cut at a line), the related
pages (most relevant first) and MEMORY.md (whole or not at all: the model may only rewrite lines
it was shown).
"""

from __future__ import annotations

import json
import re

from memvault.base.credentials import find_credentials, kept_from_prompts
from memvault.dream.budget import Budget, Part, fit
from memvault.dream.llm import ContextTooLong
from memvault.dream.memory_md import parse_memory, render_memory
from memvault.dream.planner import Batch, Plan
from memvault.dream.prompt import Handles, base_tokens, build_messages, fact_record, page_record
from memvault.dream.results import BatchResult
from memvault.dream.runner import Change, Job, Runner, subject_label
from memvault.dream.schema import PAGE_MAX_BYTES, parse_answer
from memvault.dream.validate import Proposal, build_proposal
from memvault.errors import MemvaultError
from memvault.formats import dreamlog
from memvault.formats.citations import without_lines_linking
from memvault.formats.layout import INDEX_FILE, MEMORY_FILE
from memvault.formats.pages import INBOX_ZONE, Page, render_index, render_page, zone_of
from memvault.storage.store import Storage
from memvault.storage.wiki import list_pages, pages_holding_credentials, read_page, withheld_pages

PROMPT_PAGES = 20  # related pages offered per batch, most relevant first; as many as fit are sent
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
        self.secret: list[str] = []
        self.tombstoned: set[str] = set()
        self.answer = None
        self.memory_shown = True
        self.closed: set[str] = set()  # pages holding a credential: neither shown nor rewritten

    def new_result(self, outcome: str = "ok") -> BatchResult:
        return BatchResult(self.label, outcome, facts=len(self.facts), late=len(self.batch.late))

    def start(self, tombstoned: set[str]) -> BatchResult | None:
        self.tombstoned = tombstoned
        live = [f for f in self.batch.facts if f.id not in tombstoned]
        # a fact holding a credential (stored with --allow-secret, or unmarked by a hand edit) is
        # never sent to a model: it is accounted for as kept, and stays in the default search
        held = kept_from_prompts(live)
        self.secret = [f.id for f in live if f.id in held]
        self.facts = [f for f in live if f.id not in held]
        self.answer = None
        return None

    def shrink(self) -> int:
        """Keep the first half of the facts; the others wait for the next batch."""
        if len(self.batch.facts) <= 1:
            return 0
        self.batch = self.batch.head(len(self.batch.facts) // 2)
        self.label = self.batch.label
        self.start(self.tombstoned)
        return len(self.batch.facts)

    def messages(self, budget: Budget) -> list[dict] | None:
        if not self.facts:  # every fact forgotten since planning, or each holds a credential: nothing to ask
            return None
        storage = self.storage
        config = storage.config
        handles = self.handles = Handles(f.id for f in self.facts)
        late = {f.id for f in self.batch.late}
        room = budget.fact_room(base_tokens(config.zones, config.dream.memory_max_lines))
        data: dict = {"batch": self.label, "facts": [
            fact_record(f, handles.short[f.id], late=f.id in late, max_tokens=max(64, room)) for f in self.facts]}
        # pages citing a forgotten fact are withheld (memvault.storage.wiki): never shown to a model,
        # nor the MEMORY.md and index.md lines written from them; the scrub rewrites them first
        # and so are pages holding a credential (a hand edit put it there), which dream leaves alone
        self.closed = pages_holding_credentials(storage, self.runner.credential_pages)
        withheld = withheld_pages(storage) | self.closed
        records = [page_record(p, handles) for p in self._relevant_pages(withheld)]
        pairs = memory_pairs(storage)
        memory = [f"{text} ({path})" for text, path in pairs if path not in withheld]
        # MEMORY.md is shown whole or not at all (the model may only rewrite lines it was shown):
        # with a line about a closed page, or holding a credential, the runner keeps it as it is
        hidden = any(path in self.closed for _text, path in pairs) or bool(find_credentials(memory))
        if not memory and not hidden:
            data["memory_md"] = []  # nothing to keep: the model may write the first lines
        # the table of contents first (capped): a model that cannot see a page must still know it
        # exists, or it creates a near-duplicate; then the related pages; MEMORY.md last, since
        # without it the runner keeps the current lines and links new pages itself
        index_md = without_credentials(without_lines_linking(storage.read_text(INDEX_FILE), withheld))
        parts = [Part("index_md", index_md, cap=budget.prompt_limit // 6), Part("pages", records)]
        if not hidden:
            parts.append(Part("memory_md", memory, whole=True, cap=budget.max_output // 4))

        def render(d: dict) -> list[dict]:
            return build_messages(label=self.label, data=d, zones=self.zones, max_bytes=PAGE_MAX_BYTES,
                                  memory_max_lines=self.runner.dream.memory_max_lines, late=len(late),
                                  answer_tokens=budget.max_output)

        messages = fit(render, data, parts, budget.prompt_limit)
        if messages is None:
            raise ContextTooLong(f"{len(self.facts)} fact(s) do not fit a prompt of {budget.prompt_limit} tokens")
        self.memory_shown = "memory_md" in data
        return messages

    def check(self, raw: str, tombstoned: set[str]) -> Proposal:
        parsed = parse_answer(raw, self.handles)
        self.answer = parsed.answer
        return build_proposal(
            parsed.answer, root=self.storage.root, zones=self.zones, batch_ids={f.id for f in self.facts},
            known_ids=set(self.plan.facts_by_id) - tombstoned, tombstoned=tombstoned, closed=self.closed,
            day=self.runner.now().date().isoformat(), label=self.label,
            problems=parsed.problems, notes=parsed.notes, memory_shown=self.memory_shown,
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

    def watermark(self) -> str | None:
        """The day the watermark moves to: the batch's last day none of whose facts is left for later."""
        return iso(self.batch.last_day)

    def change(self, proposal: Proposal, fresh: set[str], result: BatchResult) -> Change:
        watermark = self.watermark()
        count(result, proposal)
        result.watermark = watermark or iso(self.storage.watermark)
        result.notes = list(proposal.notes) or None
        repaired = f"; after {result.repairs} repair turn(s)" if result.repairs else ""
        entry = dreamlog.format_entry(
            self.runner.now().isoformat(), "ok", self.label, watermark=watermark,
            detail=(f"{result.facts} facts ({result.late} late): {len(result.created)} created, "
                    f"{len(result.updated)} updated, {result.conflicts} conflict(s), "
                    f"{result.duplicates} duplicate(s), {result.noop} noop; model {self.runner.settings.model}"
                    f"{repaired}"),
            ids={"settled": [i for i in proposal.settled if i not in fresh],
                 "kept": [i for i in [*proposal.kept, *self.secret] if i not in fresh]},
            notes=proposal.notes,
        )
        files = {path: render_page(page, self.plan.facts_by_id) for path, page in proposal.pages.items()}
        files.update(self._summary_files(proposal, result.watermark))
        conflicts = f"{result.conflicts} conflict" + ("" if result.conflicts == 1 else "s")
        message = (f"dream: {subject_label(self.label)} — {len(result.created)} created, "
                   f"{len(result.updated)} updated, {conflicts}, {result.noop} noop")
        return Change(files, entry, message, removed=[])

    def exhausted(self, runner: Runner, reason: str, attempt: int, failed_entry: str,
                  snapshot: dict[str, str] | None) -> BatchResult:
        """After max_retries the batch is skipped: its facts stay searchable and the run goes on."""
        batch = self.batch
        watermark = self.watermark()
        entry = failed_entry + dreamlog.format_entry(
            runner.now().isoformat(), "skipped", self.label, watermark=watermark,
            detail=f"after {attempt} failed attempts; its facts stay searchable as raw facts",
            ids={"unconsolidated": [f.id for f in batch.facts]},
        )
        result = BatchResult(self.label, "skipped", facts=len(batch.facts), late=len(batch.late),
                             reason=reason, attempt=attempt, watermark=watermark or iso(self.storage.watermark))
        message = f"dream: {subject_label(self.label)} — skipped after {attempt} failed attempts"
        result.commit = runner.log_only(entry, message)
        return result

    # -- helpers ---------------------------------------------------------------------------
    def _relevant_pages(self, withheld: set[str]) -> list[Page]:
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
        chosen = []
        for path in paths:
            if path.count("/") != 2 or zone_of(path) == INBOX_ZONE or path in withheld:
                continue
            page = read_page(root, path)
            if page is None:
                continue
            if len(chosen) >= PROMPT_PAGES:
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


def without_credentials(text: str) -> str:
    """`text` (index.md) without its lines that hold a credential."""
    lines = text.splitlines(keepends=True)
    found = find_credentials(lines)
    return "".join(line for i, line in enumerate(lines) if i not in found) if found else text


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
