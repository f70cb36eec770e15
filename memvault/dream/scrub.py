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
from memvault.dream.budget import Budget, Part, fit
from memvault.dream.memory_md import render_memory
from memvault.dream.prompt import Handles, build_scrub_messages, fact_record, page_record
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
    later: list[str] = field(default_factory=list)          # no room in this request: the next scrub

    stripped: int = 0                                       # pages the runner rewrote itself

    def strip(self, path: str, day: str) -> None:
        """The runner rewrites a page itself: its lines citing forgotten facts are dropped."""
        self.stripped += 1
        page = self.ask.pop(path)
        body = strip_forgotten_statements(page.body, self.forgotten)
        if cited_ids(body):
            self.direct[path] = replace(page, body=body, updated=day)
        else:
            self.removed.append(path)


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
    """Pages that would still cite a forgotten fact once `pages` are written and removals done
    (pages left for the next scrub aside)."""
    left = {}
    for path, page in pages.items():
        dead = [i for i in dict.fromkeys(cited_ids(page.body) + page.sources) if i in plan.forgotten]
        if dead:
            left[path] = dead
    for path, ids in pages_citing(storage, plan.forgotten).items():
        if path not in pages and path not in plan.removed and path not in plan.later:
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
        self.memory_shown = True
        self.how = ""  # how the pages were rewritten, for log.md (the model unless the runner stripped)

    def new_result(self, outcome: str = "ok") -> BatchResult:
        return BatchResult(self.label, outcome, removed=[] if outcome in ("ok", "proposed") else None)

    def start(self, tombstoned: set[str]) -> BatchResult | None:
        self.plan = plan_scrub(self.storage, tombstoned)
        self.how = ""
        return None if self.plan is not None else self.new_result()

    def shrink(self) -> int:
        """Leave the last page sent for the next scrub; a page alone too big is stripped by the runner."""
        plan = self.plan
        if len(plan.ask) > 1:
            plan.later.append(plan.ask.pop(list(plan.ask)[-1]).path)
        elif plan.ask:
            plan.strip(next(iter(plan.ask)), self.runner.now().date().isoformat())
        else:
            return 0
        return max(1, len(plan.ask))

    def messages(self, budget: Budget) -> list[dict] | None:
        plan = self.plan
        if not plan.ask:
            return None
        while True:
            messages = self._request(budget)
            if messages is not None:
                break
            self.shrink()  # as many pages as fit now; the rest in the next scrub
            if not plan.ask:
                return None
        self.runner.say(f"  {len(plan.ask)} page(s) to rewrite without forgotten facts"
                        + (f" ({len(plan.later)} more in the next scrub)" if plan.later else ""))
        return messages

    def _request(self, budget: Budget) -> list[dict] | None:
        plan = self.plan
        facts_by_id = self.runner.plan.facts_by_id
        live = {i for page in plan.ask.values() for i in cited_ids(page.body) + page.sources}
        facts = [facts_by_id[i] for i in sorted(live) if i in facts_by_id]
        handles = self.handles = Handles([f.id for f in facts] + sorted(plan.cited))
        data = {
            "batch": "scrub",
            "forgotten_ids": [handles.short[i] for i in sorted(plan.cited)],
            "pages": [page_record(p, handles, cited=True) for p in plan.ask.values()],
            "facts": [fact_record(f, handles.short[f.id]) for f in facts],
        }
        memory = memory_lines(self.storage)
        max_lines = self.runner.dream.memory_max_lines
        messages = fit(lambda d: build_scrub_messages(data=d, memory_max_lines=max_lines), data,
                       [Part("memory_md", memory, whole=True, cap=budget.max_output // 4)], budget.prompt_limit)
        self.memory_shown = "memory_md" in data
        return messages

    def check(self, raw: str, tombstoned: set[str]) -> Proposal:
        plan = self.plan
        parsed = parse_answer(raw, self.handles)
        problems = list(parsed.problems)
        for op in parsed.answer.pages:
            if op.action != "update" or op.path not in plan.ask:
                problems.append(f"a scrub only rewrites the pages it was given, not {op.path[:80]!r}")
        answer = parsed.answer.model_copy(update={"pages": [
            op for op in parsed.answer.pages if op.action == "update" and op.path in plan.ask]})
        proposal = build_proposal(
            answer, root=self.storage.root, zones=self.zones, batch_ids=set(),
            known_ids=set(self.runner.plan.facts_by_id) - tombstoned, tombstoned=tombstoned,
            day=self.runner.now().date().isoformat(), label=SCRUB_LABEL,
            problems=problems, notes=parsed.notes, memory_shown=self.memory_shown,
        )
        left = leftover_citations(self.storage, plan, {**plan.direct, **proposal.pages})
        if left:
            raise AnswerRejected([f"page {path!r} still cites forgotten fact(s) {', '.join(ids[:5])}"
                                  for path, ids in left.items()])
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
        how = self.how or f"model {self.runner.settings.model}" + (
            f"; the runner removed the citing lines of {plan.stripped} page(s) too big for the model's window"
            if plan.stripped else "")
        detail = (f"{len(rewritten)} page(s) rewritten, {len(removed)} removed, without "
                  f"{len(plan.cited)} forgotten fact(s); {how}")
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
        for path in list(plan.ask):
            plan.strip(path, runner.now().date().isoformat())
        stripped = Proposal()
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
