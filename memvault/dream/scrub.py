"""Dream scrub: rewrite the pages that still cite forgotten facts, one commit, before the day batches.

A forgotten fact must not live on in a statement a page derived from it. The scrub sends every
page whose body cites a forgotten id to the model, which rewrites it without what only forgotten
facts said. The runner itself fixes what needs no judgement: ids left only in `sources`, lines of
the runner-written inbox, and pages that cite nothing but forgotten facts (removed). After
max_retries rejected answers the runner drops the cited lines itself (strip_forgotten_statements)
so a model that keeps failing can neither keep the content nor block anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from memvault import dreamlog
from memvault.citations import pages_citing, strip_forgotten_statements
from memvault.dream.batch import memory_lines, memory_pairs, safe_json
from memvault.dream.memory_md import render_memory
from memvault.dream.prompt import build_scrub_messages
from memvault.dream.results import BatchResult
from memvault.dream.runner import Change, Job, Runner
from memvault.dream.schema import AnswerRejected, parse_answer
from memvault.dream.validate import Proposal, build_proposal
from memvault.pages import INBOX_ZONE, Page, cited_ids, list_pages, read_page, render_index, render_page, zone_of
from memvault.storage.layout import INDEX_FILE, MEMORY_FILE
from memvault.storage.store import Storage

SCRUB_LABEL = dreamlog.SCRUB_LABEL


@dataclass
class ScrubPlan:
    forgotten: set[str]                                     # tombstoned ids when planned
    ask: dict[str, Page] = field(default_factory=dict)      # the model rewrites these
    direct: dict[str, Page] = field(default_factory=dict)   # the runner rewrites these
    removed: list[str] = field(default_factory=list)        # cite nothing but forgotten facts
    cited: set[str] = field(default_factory=set)            # forgotten ids the pages cite


def plan_scrub(storage: Storage, forgotten: set[str]) -> ScrubPlan | None:
    """What the scrub has to do, or None when no page cites a forgotten fact."""
    targets = pages_citing(storage, forgotten)
    if not targets:
        return None
    plan = ScrubPlan(forgotten)
    for path, ids in targets.items():
        page = read_page(storage.root, path)
        if page is None:
            continue
        plan.cited.update(ids)
        page.sources = [s for s in page.sources if s not in forgotten]
        body_ids = cited_ids(page.body)
        if forgotten.isdisjoint(body_ids):
            plan.direct[path] = page            # listed in `sources` only
        elif zone_of(path) == INBOX_ZONE:
            page.body = strip_forgotten_statements(page.body, forgotten)
            plan.direct[path] = page
        elif all(i in forgotten for i in body_ids):
            plan.removed.append(path)
        else:
            plan.ask[path] = page
    return plan


def leftover_citations(storage: Storage, plan: ScrubPlan, pages: dict[str, Page]) -> dict[str, list[str]]:
    """Pages that would still cite a forgotten fact once `pages` are written and removals done."""
    left = {}
    for path, page in pages.items():
        dead = [i for i in dict.fromkeys(cited_ids(page.body) + page.sources) if i in plan.forgotten]
        if dead:
            left[path] = dead
    for path, ids in pages_citing(storage, plan.forgotten).items():
        if path not in pages and path not in plan.removed:
            left[path] = ids
    return left


def scrub_due(storage: Storage) -> bool:
    return bool(pages_citing(storage))


class Scrub(Job):
    label = SCRUB_LABEL

    def __init__(self, runner: Runner):
        self.runner = runner
        self.storage: Storage = runner.storage
        self.zones = [z for z in self.storage.config.zones if z != INBOX_ZONE]
        self.plan: ScrubPlan | None = None
        self.how = ""  # how the pages were rewritten, for log.md (the model unless the runner stripped)

    def new_result(self, outcome: str = "ok") -> BatchResult:
        return BatchResult(self.label, outcome, removed=[] if outcome in ("ok", "proposed") else None)

    def start(self, tombstoned: set[str]) -> BatchResult | None:
        self.plan = plan_scrub(self.storage, tombstoned)
        self.how = ""
        return None if self.plan is not None else self.new_result()

    def messages(self) -> list[dict] | None:
        plan = self.plan
        if not plan.ask:
            return None
        facts_by_id = self.runner.plan.facts_by_id
        live = {i for page in plan.ask.values() for i in cited_ids(page.body) + page.sources}
        facts = [facts_by_id[i] for i in sorted(live) if i in facts_by_id]
        self.runner.say(f"  {len(plan.ask)} page(s) to rewrite without forgotten facts")
        return build_scrub_messages(
            pages=list(plan.ask.values()), facts=facts, forgotten=sorted(plan.cited),
            memory_lines=memory_lines(self.storage), memory_max_lines=self.runner.dream.memory_max_lines,
        )

    def check(self, raw: str, tombstoned: set[str]) -> Proposal:
        plan = self.plan
        answer = parse_answer(raw)
        for op in answer.pages:
            if op.action != "update" or op.path not in plan.ask:
                raise AnswerRejected(f"a scrub only rewrites the pages it was given, not {op.path[:80]!r}")
        proposal = build_proposal(
            answer, root=self.storage.root, zones=self.zones, batch_ids=set(),
            known_ids=set(self.runner.plan.facts_by_id) - tombstoned, tombstoned=tombstoned,
            day=self.runner.now().date().isoformat(), label=SCRUB_LABEL,
        )
        left = leftover_citations(self.storage, plan, {**plan.direct, **proposal.pages})
        if left:
            path, ids = next(iter(left.items()))
            raise AnswerRejected(f"page {path!r} still cites forgotten fact(s) {', '.join(ids[:5])}")
        return proposal

    def writes(self, proposal: Proposal) -> tuple[dict[str, Page], list[str]]:
        return {**self.plan.direct, **proposal.pages}, list(self.plan.removed)

    def preview(self, result: BatchResult, proposal: Proposal | None, raw: str | None,
                reason: str | None) -> BatchResult:
        if raw is not None:
            result.proposal = safe_json(raw)
        result.reason = reason
        if proposal is not None:
            result.updated = sorted([*self.plan.direct, *proposal.pages])
            result.removed = list(self.plan.removed)
        return result

    def change(self, proposal: Proposal, fresh: set[str], result: BatchResult) -> Change:
        plan = self.plan
        pages, removed = self.writes(proposal)
        rewritten = sorted(pages)
        result.updated, result.removed = rewritten, sorted(removed)
        files = {path: render_page(page, self.runner.plan.facts_by_id) for path, page in pages.items()}
        files.update(self._summary(pages, removed, proposal.memory))
        detail = (f"{len(rewritten)} page(s) rewritten, {len(removed)} removed, without "
                  f"{len(plan.cited)} forgotten fact(s); " + (self.how or f"model {self.runner.settings.model}"))
        entry = dreamlog.format_entry(self.runner.now().isoformat(), "ok", SCRUB_LABEL, detail=detail)
        n = len(rewritten)
        message = f"dream: scrub — {n} page{'' if n == 1 else 's'} rewritten without forgotten facts"
        if removed:
            message += f", {len(removed)} removed"
        return Change(files, entry, message, removed=list(removed))

    def exhausted(self, runner: Runner, reason: str, attempt: int, failed_entry: str,
                  snapshot: dict[str, str] | None) -> BatchResult:
        """The scrub is never skipped: on its last allowed attempt the runner drops the cited lines."""
        if snapshot is None:  # the vault kept changing: log the attempt and try next night
            result = self.new_result("failed")
            result.reason, result.attempt = reason, attempt
            message = f"dream: scrub — attempt {attempt}/{runner.dream.max_retries} failed"
            result.commit = runner.log_only(failed_entry, message)
            return result
        plan = self.plan
        stripped = Proposal()
        for path, page in plan.ask.items():
            body = strip_forgotten_statements(page.body, plan.forgotten)
            if cited_ids(body):
                stripped.pages[path] = replace(page, body=body, updated=runner.now().date().isoformat())
            else:
                plan.removed.append(path)
        self.how = f"after {attempt} failed attempts the runner removed the citing lines"
        result = self.new_result()
        result.reason, result.attempt = reason, attempt
        return runner.apply(self, stripped, plan.forgotten, snapshot, before=failed_entry, result=result)

    def _summary(self, written: dict[str, Page], removed: list[str],
                 memory: list[tuple[str, str]] | None) -> dict[str, str]:
        """index.md and MEMORY.md; no summary line may keep text from a rewritten or removed page."""
        storage = self.storage
        pages = {p: read_page(storage.root, p) for p in list_pages(storage.root) if p not in removed}
        before = {p: page.body for p, page in pages.items() if page is not None}
        pages.update(written)
        pages = {p: page for p, page in pages.items() if page is not None}
        if memory is not None:
            lines = memory
        else:
            touched = {p for p, page in written.items() if before.get(p) != page.body} | set(removed)
            lines = []
            for text, path in memory_pairs(storage):
                if path in touched:
                    # the line may repeat what a forgotten fact said: keep only a plain link
                    text = pages[path].title if path in pages else text
                lines.append((text, path))
        watermark = storage.watermark
        dream = self.runner.dream
        memory_md = render_memory(lines, pages, watermark=watermark.isoformat() if watermark else None,
                                  max_lines=dream.memory_max_lines, max_bytes=dream.memory_max_bytes)
        return {INDEX_FILE: render_index(pages.values(), storage.config.zones), MEMORY_FILE: memory_md}
