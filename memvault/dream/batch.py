"""A day batch: pending days' facts (and late ones) consolidated into pages; moves the watermark.

Two contracts (`[dream] mode`):
- notes (the default): the model answers one item per fact (memvault.dream.notes); the runner
  checks each (memvault.dream.decisions) and writes the pages, index.md and MEMORY.md itself. The
  prompt holds the facts, then as much as fits of the related pages (their statements, each after
  its fact's handle) and the paths of the wiki.
- prose: the model writes page bodies and may propose MEMORY.md lines (memvault.dream.validate).
  The prompt holds the facts, then as much as fits of index.md (cut at a line), the related pages
  and MEMORY.md (whole or not at all: the model may only rewrite lines it was shown).
Either way each statement is checked against the facts it cites (memvault.dream.check), and what
passes is applied while the facts left over are asked about again.
"""

from __future__ import annotations

import json
import re

from memvault.base.credentials import find_credentials, kept_from_prompts
from memvault.dream.budget import Budget, Part, fit
from memvault.dream.check import Checker, known_people
from memvault.dream.decisions import BatchFacts, Review
from memvault.dream.llm import ContextTooLong
from memvault.dream.memory_md import lines_from_pages, parse_memory, render_memory
from memvault.dream.notes import Unreadable, build_notes_messages, notes_schema, read_items, repair_text
from memvault.dream.planner import Batch, Plan, watermark_after
from memvault.dream.prompt import Handles, base_tokens, build_messages, fact_record, page_record, repair_messages
from memvault.dream.results import BatchResult
from memvault.dream.runner import Change, Job, Runner, subject_label
from memvault.dream.schema import PAGE_MAX_BYTES, AnswerRejected, DreamAnswer, answer_schema, parse_answer, the_object
from memvault.dream.statements import statement_blocks
from memvault.dream.validate import Proposal, Prose, build_proposal
from memvault.errors import MemvaultError, VaultUnwritable
from memvault.formats import dreamlog
from memvault.formats.citations import without_lines_linking
from memvault.formats.layout import INDEX_FILE, MEMORY_FILE
from memvault.formats.pages import CITATION, INBOX_ZONE, Page, render_index, render_page, zone_of
from memvault.storage.store import Storage
from memvault.storage.wiki import list_pages, pages_holding_credentials, read_page, withheld_pages

PROMPT_PAGES = 20  # related pages offered per batch, most relevant first; as many as fit are sent
STATEMENTS_FROM = 16_384  # window (tokens) from which a notes request shows related pages' statements
_WORD = re.compile(r"[^\W_]{4,}", re.UNICODE)


class DayBatch(Job):
    partial = True  # what passes is applied; the facts left are asked about again
    handles: Handles  # never None here: empty before the first request

    def __init__(self, runner: Runner, batch: Batch):
        self.runner = runner
        self.storage: Storage = runner.storage
        self.plan: Plan = runner.plan
        self.batch = batch
        self.label = batch.label
        self.mode = self.storage.config.dream.mode
        self.zones = [z for z in self.storage.config.zones if z != INBOX_ZONE]
        self.facts = list(batch.facts)
        self.secret: list[str] = []
        self.tombstoned: set[str] = set()
        self.handles = Handles()  # the short ids of the latest request (none before the first)
        self.answer: DreamAnswer | dict | None = None  # the latest answer, as a dry run shows it
        self.review: Review | None = None  # notes mode: the items of the latest conversation
        self.asked: list[str] = []       # fact ids the latest request asks about, in order
        self.shown: set[str] = set()     # fact ids the request showed (batch and pages)
        self.memory_shown = True
        self.closed: set[str] = set()  # pages holding a credential: neither shown nor rewritten
        self.withheld: set[str] = set()

    def new_result(self, outcome: str = "ok") -> BatchResult:
        return BatchResult(self.label, outcome, facts=len(self.facts), late=len(self.batch.late))

    @property
    def fact_ids(self) -> list[str]:
        return [f.id for f in self.facts]

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

    # -- asking ------------------------------------------------------------------------------
    def messages(self, budget: Budget) -> list[dict] | None:
        if not self.facts:  # every fact forgotten since planning, or each holds a credential: nothing to ask
            return None
        storage = self.storage
        config = storage.config
        handles = self.handles = Handles(f.id for f in self.facts)
        late = {f.id for f in self.batch.late}
        room = budget.fact_room(base_tokens(config.zones, config.dream.memory_max_lines, self.mode))
        data: dict = {"batch": self.label, "facts": [
            fact_record(f, handles.short[f.id], late=f.id in late, max_tokens=max(64, room)) for f in self.facts]}
        # pages citing a forgotten fact are withheld (memvault.storage.wiki): never shown to a model,
        # nor the MEMORY.md and index.md lines written from them; the scrub rewrites them first
        # and so are pages holding a credential (a hand edit put it there), which dream leaves alone
        self.closed = pages_holding_credentials(storage, self.runner.credential_pages)
        self.withheld = withheld_pages(storage) | self.closed
        related = self._relevant_pages(self.withheld)
        if self.mode == "notes":
            messages = self._notes_request(data, related, budget, len(late))
        else:
            messages = self._prose_request(data, related, budget, len(late))
        if messages is None:
            raise ContextTooLong(f"{len(self.facts)} fact(s) do not fit a prompt of {budget.prompt_limit} tokens")
        self.asked = list(self.fact_ids)
        self.shown = set(self.fact_ids) | {handles.full[h] for h in self._shown_handles(data)}
        self.review = Review(self._batch_facts()) if self.mode == "notes" else None
        return messages

    def _notes_request(self, data: dict, related: list[Page], budget: Budget, late: int) -> list[dict] | None:
        handles = self.handles
        wiki = [p for p in list_pages(self.storage.root) if zone_of(p) != INBOX_ZONE and p not in self.withheld]
        # A small model loses its way among statements it is not asked about: with them in an 8k
        # window the live 1.5B model filed a page's old statements in place of its batch's facts.
        # Below STATEMENTS_FROM tokens the related pages show their sections only.
        with_statements = budget.window >= STATEMENTS_FROM
        records = [notes_page_record(p, handles, statements=with_statements) for p in related]
        parts = [Part("pages", records, cap=budget.prompt_limit // 5), Part("wiki", wiki, cap=budget.prompt_limit // 6)]
        return fit(lambda d: build_notes_messages(label=self.label, data=d, zones=self.zones, late=late),
                   data, parts, budget.prompt_limit)

    def _prose_request(self, data: dict, related: list[Page], budget: Budget, late: int) -> list[dict] | None:
        storage = self.storage
        records = [page_record(p, self.handles) for p in related]
        pairs = memory_pairs(storage)
        memory = [f"{text} ({path})" for text, path in pairs if path not in self.withheld]
        # MEMORY.md is shown whole or not at all (the model may only rewrite lines it was shown):
        # with a line about a closed page, or holding a credential, the runner keeps it as it is
        hidden = any(path in self.closed for _text, path in pairs) or bool(find_credentials(memory))
        if not memory and not hidden:
            data["memory_md"] = []  # nothing to keep: the model may write the first lines
        # the table of contents first (capped): a model that cannot see a page must still know it
        # exists, or it creates a near-duplicate; then the related pages; MEMORY.md last, since
        # without it the runner keeps the current lines and links new pages itself
        index_md = without_credentials(without_lines_linking(storage.read_text(INDEX_FILE), self.withheld))
        parts = [Part("index_md", index_md, cap=budget.prompt_limit // 6), Part("pages", records)]
        if not hidden:
            parts.append(Part("memory_md", memory, whole=True, cap=budget.max_output // 4))

        def render(d: dict) -> list[dict]:
            return build_messages(label=self.label, data=d, zones=self.zones, max_bytes=PAGE_MAX_BYTES,
                                  memory_max_lines=self.runner.dream.memory_max_lines, late=late,
                                  answer_tokens=budget.max_output)

        messages = fit(render, data, parts, budget.prompt_limit)
        self.memory_shown = "memory_md" in data
        return messages

    def _shown_handles(self, data: dict) -> set[str]:
        text = json.dumps(data.get("pages") or [])
        return {h for h in re.findall(r"\b([a-z]\d{1,6})\b", text) if h in self.handles.full}

    def schema(self) -> dict:
        if self.mode != "notes":
            return answer_schema()
        short = self.handles.short
        known = [short[i] for i in self.fact_ids] + sorted(short[i] for i in self.shown - set(self.fact_ids))
        return notes_schema([short[i] for i in self.asked], known, self.zones)

    def _batch_facts(self) -> BatchFacts:
        return BatchFacts(
            root=self.storage.root, zones=self.zones, facts={f.id: f for f in self.facts},
            known={i: f for i, f in self.plan.facts_by_id.items() if i not in self.tombstoned},
            shown=self.shown, closed=self.withheld, day=self.runner.now().date().isoformat(),
            label=self.label, checker=self._checker())

    def _checker(self) -> Checker:
        root = self.storage.root
        people = {p: (read_page(root, p) or Page(p, "", "")).title or None
                  for p in list_pages(root) if zone_of(p) == "people" and p not in self.withheld}
        return Checker(self.runner.meaning(), known_people(people), self.handles, *self.runner.vault_words())

    # -- checking ----------------------------------------------------------------------------
    def check(self, raw: str, tombstoned: set[str]) -> Proposal:
        if self.mode == "notes":
            return self._check_notes(raw)
        try:
            parsed = parse_answer(raw, self.handles)
        except AnswerRejected as e:  # no JSON object at all: every fact is still open
            return Proposal(unresolved={i: e.problems[0] for i in self.fact_ids}, problems=list(e.problems))
        self.answer = parsed.answer
        ctx = Prose(root=self.storage.root, zones=self.zones, batch_ids=set(self.fact_ids),
                    known_ids=set(self.plan.facts_by_id) - tombstoned, tombstoned=tombstoned,
                    day=self.runner.now().date().isoformat(), label=self.label,
                    memory_shown=self.memory_shown, closed=self.closed, checker=self._checker(),
                    facts={**self.plan.facts_by_id, **{f.id: f for f in self.facts}}, partial=True)
        return build_proposal(parsed.answer, ctx, problems=parsed.problems, notes=parsed.notes)

    def _check_notes(self, raw: str) -> Proposal:
        review = self.review
        assert review is not None  # messages() made it, in the notes mode
        try:
            data = the_object(raw)
            items, notes = read_items(data, self.handles)
        except (ValueError, Unreadable) as e:
            if isinstance(e, Unreadable):
                problem = str(e)
            elif not raw.strip():
                problem = 'the answer was empty; answer with {"facts":[one item per fact]}'
            elif isinstance(e, json.JSONDecodeError):
                problem = f"answer is not valid JSON ({e.msg} at line {e.lineno}); answer with the JSON object alone"
            else:
                problem = 'the answer is not a JSON object; answer with {"facts":[one item per fact]}'
            review.refuse_all(self.asked, problem)
        else:
            review.notes += notes
            review.review(items, self.asked)
        self.answer = {"facts": [review.accepted[i] for i in self.fact_ids if i in review.accepted]}
        return review.proposal()

    def repair(self, messages: list[dict], raw: str, proposal: Proposal) -> list[dict] | None:
        """The next turn of the conversation: only about what is still unresolved."""
        if self.mode != "notes":
            problems = [self.as_told(p) for p in proposal.problems]
            return repair_messages(messages, raw, problems) if problems else None
        self.asked = [i for i in self.fact_ids if i in proposal.unresolved]
        review = self.review
        assert review is not None  # messages() made it, in the notes mode
        shown = [review.shown(i) for i in self.asked]
        text = repair_text(shown, [self.handles.short[i] for i in self.asked])
        said = raw if raw.strip() else "(an empty answer)"
        return [*messages[:2], {"role": "assistant", "content": said}, {"role": "user", "content": text}]

    def preview(self, result: BatchResult, proposal: Proposal | None, raw: str | None,
                reason: str | None) -> BatchResult:
        result.reason = reason
        if reason is not None:
            result.proposal = safe_json(raw or "")
        elif self.answer is not None and proposal is not None:
            answer = self.answer
            result.proposal = answer if isinstance(answer, dict) else answer.model_dump(exclude_none=True)
            count(result, proposal)
        return result

    # -- applying ----------------------------------------------------------------------------
    def change(self, proposal: Proposal, fresh: set[str], result: BatchResult) -> Change:
        done = self._accounted(proposal) | fresh
        mark = watermark_after(self.runner.plan, done)
        moved = mark is not None and (self.storage.dreams.watermark is None or mark > self.storage.dreams.watermark)
        count(result, proposal)
        result.watermark = iso(mark) if mark else None
        self._leftovers(proposal, fresh, result)
        entry = self._log_entry(proposal, fresh, result, watermark=iso(mark) if moved else None)
        files = {path: render_page(page, self.plan.facts_by_id) for path, page in proposal.pages.items()}
        files.update(self._summary_files(proposal, result.watermark))
        conflicts = f"{result.conflicts} conflict" + ("" if result.conflicts == 1 else "s")
        message = (f"dream: {subject_label(self.label)} — {len(result.created)} created, "
                   f"{len(result.updated)} updated, {conflicts}, {result.noop} noop")
        return Change(files, entry, message, removed=[])

    def _leftovers(self, proposal: Proposal, fresh: set[str], result: BatchResult) -> None:
        """The result's notes, facts left open and statements dropped (None when there are none)."""
        # what the answer held that could not be used, though every fact was accounted for
        ignored = [f"ignored: {p}" for p in proposal.problems if p not in proposal.dropped
                   and p not in proposal.unresolved.values()]
        result.notes = list(proposal.notes) + ignored or None
        result.left = [i for i in self.fact_ids if i in proposal.unresolved and i not in fresh] or None
        result.dropped = self._dropped(proposal, fresh) or None

    def _log_entry(self, proposal: Proposal, fresh: set[str], result: BatchResult, *,
                   watermark: str | None) -> str:
        """log.md's `ok` entry of the batch (`watermark`: where it moves to, None when it stays)."""
        repaired = f"; after {result.repairs} repair turn(s)" if result.repairs else ""
        left = f", {len(result.left)} left for a smaller batch" if result.left else ""
        return dreamlog.format_entry(
            self.runner.now().isoformat(), "ok", self.label, watermark=watermark,
            detail=(f"{result.facts} facts ({result.late} late): {len(result.created)} created, "
                    f"{len(result.updated)} updated, {result.conflicts} conflict(s), "
                    f"{result.duplicates} duplicate(s), {result.noop} noop{left}; model "
                    f"{self.runner.settings.model} ({self.mode}){repaired}"),
            ids={"settled": [i for i in proposal.settled if i not in fresh],
                 "kept": [i for i in [*proposal.kept, *self.secret] if i not in fresh]},
            notes=result.notes or (), dropped=result.dropped or (),
        )

    def _accounted(self, proposal: Proposal) -> set[str]:
        cited = {i for page in proposal.pages.values() for i in CITATION.findall(page.body)}
        return cited | set(proposal.settled) | set(proposal.kept) | set(self.secret) | (
            set(proposal.dispositions) - set(proposal.unresolved))

    def _dropped(self, proposal: Proposal, fresh: set[str]) -> list[str]:
        """log.md's record of what this batch left: each fact still open, and each statement refused."""
        out = [f"fact {i}: {reason}" for i, reason in proposal.unresolved.items() if i not in fresh]
        return out + [p for p in proposal.dropped if p not in out]

    def exhausted(self, runner: Runner, reason: str, attempt: int, failed_entry: str,
                  snapshot: dict[str, str] | None) -> BatchResult:
        """After max_retries the facts are skipped: they stay searchable and the run goes on."""
        batch = self.batch
        ids = [f.id for f in batch.facts]
        mark = watermark_after(runner.plan, set(ids))
        moved = mark is not None and (self.storage.dreams.watermark is None or mark > self.storage.dreams.watermark)
        entry = failed_entry + dreamlog.format_entry(
            runner.now().isoformat(), "skipped", self.label, watermark=iso(mark) if moved else None,
            detail=f"after {attempt} failed attempts; its facts stay searchable as raw facts",
            ids={"unconsolidated": ids},
        )
        result = BatchResult(self.label, "skipped", facts=len(batch.facts), late=len(batch.late),
                             reason=reason, attempt=attempt, watermark=iso(mark))
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
            except VaultUnwritable:
                raise  # (a full disk fails every fact's search the same way)
            except MemvaultError:  # e.g. a fact of punctuation only: no query to make
                continue
            for hit in hits:  # several sections of one page may match
                if hit.kind == "page" and hit.path is not None and hit.path not in paths:
                    paths.append(hit.path)
        if not paths:
            paths = pages_sharing_words(self.storage, self.facts)
        chosen: list[Page] = []
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
        read = {p: read_page(storage.root, p) for p in list_pages(storage.root)}
        pages = {p: page for p, page in read.items() if page is not None}
        pages.update(proposal.pages)
        dream = self.runner.dream
        if self.mode == "notes":  # the runner's own summary, from what the pages say
            when = {i: f.at for i, f in self.plan.facts_by_id.items()}
            skip = {p for p in pages if zone_of(p) == INBOX_ZONE} | self.withheld
            lines = lines_from_pages(pages, when, skip=skip)
        elif proposal.memory is not None:
            lines = proposal.memory
        else:  # keep the current summary, and give each new page a line so it is reachable
            lines = memory_pairs(storage) + [(proposal.pages[p].title, p) for p in proposal.created]
        memory = render_memory(lines, pages, watermark=watermark, max_lines=dream.memory_max_lines,
                               max_bytes=dream.memory_max_bytes)
        return {INDEX_FILE: render_index(pages.values(), storage.config.zones), MEMORY_FILE: memory}


def notes_page_record(page: Page, handles: Handles, *, statements: bool = True) -> dict:
    """A related page as the notes request shows it: its sections' statements, each after the
    handles of the facts it cites (the model can say a fact repeats or supersedes one of them),
    or with `statements` False its section headings only."""
    if not statements:
        headings = [line.lstrip("#").strip() for line in page.body.split("\n") if line.startswith("#")]
        return {"path": page.path, "title": page.title, "sections": list(dict.fromkeys(h for h in headings if h))}
    sections: dict[str, list[str]] = {}
    lines = page.body.split("\n")
    heading_at = {n: line.lstrip("#").strip() for n, line in enumerate(lines) if line.startswith("#")}
    for start, _end, text in statement_blocks(page.body):
        heading = next((heading_at[n] for n in range(start, -1, -1) if n in heading_at), "")
        ids = [handles.add(i) for i in dict.fromkeys(CITATION.findall(text))]
        plain = re.sub(r"\s*\[\^[^\]]*\]", "", text)
        plain = re.sub(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+", "", plain).strip()
        sections.setdefault(heading or page.title, []).append(f"{', '.join(ids)}: {plain}" if ids else plain)
    return {"path": page.path, "title": page.title, "sections": sections}


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
