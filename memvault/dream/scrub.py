"""Dream scrub: rewrite the pages that still cite forgotten facts, one commit, before the day batches.

A forgotten fact must not live on in a statement a page derived from it, nor in the page's title,
slug, tags or the MEMORY.md and index.md lines written from it. The model is never shown what a
forgotten fact said: it receives each page with the lines citing forgotten facts already taken
out (strip_forgotten_statements), without its title and tags, and writes a coherent body and a
new title; the runner moves the page to the slug of that title. The runner itself fixes what
needs no judgement: ids left only in `sources`, lines of the runner-written inbox, and pages that
cite nothing but forgotten facts (removed). After max_retries rejected answers the runner keeps
the stripped bodies under a neutral title, so a model that keeps failing blocks nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from memvault.base.credentials import kept_from_prompts
from memvault.dream.batch import memory_pairs, safe_json
from memvault.dream.budget import Budget, fit
from memvault.dream.check import Checker, fact_words, known_people
from memvault.dream.memory_md import lines_from_pages, render_memory
from memvault.dream.prompt import Handles, build_scrub_messages, fact_record
from memvault.dream.results import BatchResult
from memvault.dream.runner import Change, Job, Runner
from memvault.dream.schema import AnswerRejected, parse_answer
from memvault.dream.validate import Proposal, Prose, build_proposal
from memvault.dream.words import content_words, fold
from memvault.formats import dreamlog
from memvault.formats.citations import strip_forgotten_statements
from memvault.formats.layout import INDEX_FILE, MEMORY_FILE
from memvault.formats.pages import INBOX_ZONE, Page, cited_ids, page_slug, render_index, render_page, zone_of
from memvault.storage.store import Storage
from memvault.storage.wiki import list_pages, pages_citing, pages_holding_credentials, read_page

SCRUB_LABEL = dreamlog.SCRUB_LABEL
NEUTRAL_TITLE = "Notes rewritten after a forget"


@dataclass
class ScrubPlan:
    forgotten: set[str]                                     # tombstoned ids when planned
    ask: dict[str, Page] = field(default_factory=dict)      # the model rewrites these
    direct: dict[str, Page] = field(default_factory=dict)   # the runner rewrites these
    removed: list[str] = field(default_factory=list)        # cite nothing but forgotten facts
    cited: set[str] = field(default_factory=set)            # forgotten ids the pages cite
    later: list[str] = field(default_factory=list)          # no room in this request: the next scrub

    stripped: int = 0                                       # pages the runner rewrote itself: too big
    closed: int = 0                                         # ... holding a credential
    notes: int = 0                                          # ... written in the notes mode
    asked: bool = False                                     # a model was asked to rewrite pages

    def strip(self, path: str, day: str, *, closed: bool = False, facts: dict | None = None) -> None:
        """The runner rewrites a page itself: its lines citing forgotten facts are dropped, and its
        title and tags, which may repeat them, give way to a neutral title, unless (`facts`: the
        live facts by id) every word of the title and every tag is one the facts it still cites say."""
        if closed:
            self.closed += 1
        elif facts is not None:
            self.notes += 1
        else:
            self.stripped += 1
        page = self.ask.pop(path)
        body = strip_forgotten_statements(page.body, self.forgotten)
        if not cited_ids(body):
            self.removed.append(path)
            return
        title, tags = NEUTRAL_TITLE, []
        if facts is not None:
            said = fact_words([facts[i] for i in cited_ids(body) if i in facts])
            if content_words(page.title) <= said:
                title = page.title
            tags = [t for t in page.tags if fold(t) in said]
        self.direct[path] = replace(page, body=body, updated=day, title=title, tags=tags)


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


def _free_path(path: str, taken: set[str]) -> str:
    """`path`, or `path` with -2, -3 ... before .md when another page has it."""
    stem, number = path.removesuffix(".md"), 2
    candidate = path
    while candidate in taken:
        candidate, number = f"{stem}-{number}.md", number + 1
    return candidate


def scrub_due(storage: Storage) -> bool:
    return bool(pages_citing(storage))


class Scrub(Job):
    label = SCRUB_LABEL

    def __init__(self, runner: Runner):
        self.runner = runner
        self.storage: Storage = runner.storage
        self.zones = [z for z in self.storage.config.zones if z != INBOX_ZONE]
        self.plan = ScrubPlan(set())  # nothing to do until start() plans the scrub
        self.memory_shown = False
        self.moved: dict[str, str] = {}  # old page path -> the slug of its new title
        self.stand_ins: dict[str, str] = {}  # the path the model sees -> the page's path
        self.how = ""  # how the pages were rewritten, for log.md (the model unless the runner stripped)

    def new_result(self, outcome: str = "ok") -> BatchResult:
        return BatchResult(self.label, outcome, removed=[] if outcome in ("ok", "proposed") else None)

    def start(self, tombstoned: set[str]) -> BatchResult | None:
        plan = plan_scrub(self.storage, tombstoned)
        self.how = ""
        if plan is None:
            self.plan = ScrubPlan(tombstoned)
            return self.new_result()
        self.plan = plan
        # a page holding a credential (a hand edit put it there) is never sent to a model: the
        # runner strips its forgotten statements itself
        day = self.runner.now().date().isoformat()
        for path in pages_holding_credentials(self.storage, self.runner.credential_pages) & set(self.plan.ask):
            self.plan.strip(path, day, closed=True)
        if self.storage.config.dream.mode == "notes":
            # a notes page is one cited statement a line: taking out the forgotten ones needs no model
            facts = {i: f for i, f in self.runner.plan.facts_by_id.items() if i not in tombstoned}
            for path in list(self.plan.ask):
                self.plan.strip(path, day, facts=facts)
        return None

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
        plan.asked = True
        return messages

    def _request(self, budget: Budget) -> list[dict] | None:
        """Each page as it will read without its forgotten facts: the lines citing them taken out,
        no title, no tags, no forgotten id; the live facts it cites. Never MEMORY.md (its lines of
        these pages may repeat a forgotten fact: the runner relinks them to the new titles)."""
        plan = self.plan
        facts_by_id = self.runner.plan.facts_by_id
        bodies = {path: strip_forgotten_statements(page.body, plan.forgotten) for path, page in plan.ask.items()}
        live = {i for path, page in plan.ask.items() for i in cited_ids(bodies[path]) + page.sources}
        cited = [facts_by_id[i] for i in sorted(live) if i in facts_by_id]
        held = kept_from_prompts(cited)
        facts = [f for f in cited if f.id not in held]
        handles = self.handles = Handles([f.id for f in facts])
        # a slug may repeat a forgotten fact as well as a title can: the model sees stand-in paths
        self.stand_ins = {f"wiki/{zone_of(path)}/page-{n}.md": path for n, path in enumerate(plan.ask, 1)}
        data = {
            "batch": "scrub",
            "pages": [{"path": stand_in, "cited": [handles.add(f.id) for f in facts if f.id in plan.ask[path].sources],
                       "body": handles.shorten(bodies[path])} for stand_in, path in self.stand_ins.items()],
            "facts": [fact_record(f, handles.short[f.id]) for f in facts],
        }
        self.memory_shown = False
        return fit(lambda d: build_scrub_messages(data=d), data, [], budget.prompt_limit)

    def check(self, raw: str, tombstoned: set[str]) -> Proposal:
        plan = self.plan
        parsed = parse_answer(raw, self.handles)
        problems = list(parsed.problems)
        parsed.answer.pages = [op.model_copy(update={"path": self.stand_ins.get(op.path, op.path)})
                               for op in parsed.answer.pages]
        for op in parsed.answer.pages:
            if op.action != "update" or op.path not in plan.ask:
                problems.append(f"a scrub only rewrites the pages it was given, not {op.path[:80]!r}")
            elif not (op.title or "").strip():
                problems.append(f"page {op.path!r} needs a new title (its old one may repeat a forgotten fact)")
        answer = parsed.answer.model_copy(update={"pages": [
            op for op in parsed.answer.pages if op.action == "update" and op.path in plan.ask]})
        facts = self.runner.plan.facts_by_id
        root = self.storage.root
        people = {p: (read_page(root, p) or Page(p, "", "")).title or None
                  for p in list_pages(root) if zone_of(p) == "people"}
        ctx = Prose(root=self.storage.root, zones=self.zones, batch_ids=set(),
                    known_ids=set(facts) - tombstoned, tombstoned=tombstoned,
                    day=self.runner.now().date().isoformat(), label=SCRUB_LABEL, memory_shown=self.memory_shown,
                    checker=Checker(self.runner.meaning(), known_people(people), self.handles,
                                    *self.runner.vault_words()), facts=facts)
        proposal = build_proposal(answer, ctx, problems=problems, notes=parsed.notes)
        left = leftover_citations(self.storage, plan, {**plan.direct, **proposal.pages})
        if left:
            raise AnswerRejected([
                f"page {path!r} is missing from the answer (it still cites forgotten facts): rewrite every page given"
                if path in plan.ask and path not in proposal.pages else
                f"page {path!r} still cites forgotten fact(s) {', '.join(ids[:5])}" for path, ids in left.items()])
        return proposal

    def as_told(self, problem: str) -> str:
        """Problems reach the model with the stand-in paths it saw, and never a forgotten id."""
        for stand_in, path in self.stand_ins.items():
            problem = problem.replace(repr(path), repr(stand_in)).replace(path, stand_in)
        problem = super().as_told(problem)
        for fid in self.plan.forgotten:
            problem = problem.replace(fid, "(forgotten)")
        return problem

    def writes(self, proposal: Proposal) -> tuple[dict[str, Page], list[str]]:
        """The pages to write, each under the slug of its new title (a slug may repeat a forgotten
        fact as well as a title can), and the pages to remove, the old paths of moved pages too."""
        pages = dict(self.plan.direct)
        for path, page in proposal.pages.items():
            if not page.tags or page.tags == self.plan.ask[path].tags:
                page.tags = []  # the old tags were not shown to the model and may repeat a forgotten fact
            pages[path] = page
        removed = list(self.plan.removed)
        self.moved = {}
        taken = set(list_pages(self.storage.root)) - set(pages) - set(removed)
        for path, page in list(pages.items()):
            if path not in self.plan.ask and page.title != NEUTRAL_TITLE:
                continue  # ids in `sources` only, the inbox, a title its live facts say: nothing to hide
            new = _free_path(f"wiki/{zone_of(path)}/{page_slug(page.title)}.md", taken)
            taken.add(new)
            if new != path:
                self.moved[path] = new
                pages[new] = replace(pages.pop(path), path=new)
                removed.append(path)
        return pages, removed

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
        files.update(self._summary(pages, removed))
        ways = [f"model {self.runner.settings.model}"] if plan.asked else []
        if plan.stripped:
            ways.append(f"the runner removed the citing lines of {plan.stripped} page(s) too big for the "
                        "model's window")
        if plan.closed:
            ways.append(f"the runner removed the citing lines of {plan.closed} page(s) holding a credential, "
                        "which no model is shown")
        if plan.notes:
            ways.append(f"the runner removed the citing lines of {plan.notes} page(s) (notes mode)")
        how = self.how or "; ".join(ways) or "the runner alone"
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

    def _summary(self, written: dict[str, Page], removed: list[str]) -> dict[str, str]:
        """index.md and MEMORY.md; no summary line may keep text from a rewritten or removed page."""
        storage = self.storage
        read = {p: read_page(storage.root, p) for p in list_pages(storage.root) if p not in removed}
        pages = {p: page for p, page in read.items() if page is not None}
        before = {p: page.body for p, page in pages.items()}
        pages.update(written)
        touched = {p for p, page in written.items() if before.get(p) != page.body} | set(removed)
        watermark = storage.dreams.watermark
        dream = self.runner.dream
        if storage.config.dream.mode == "notes":  # rebuilt from the pages: nothing of a forgotten fact stays
            when = {i: f.at for i, f in self.runner.plan.facts_by_id.items()}
            skip = {p for p in pages if zone_of(p) == INBOX_ZONE}
            memory_md = render_memory(lines_from_pages(pages, when, skip=skip), pages,
                                      watermark=watermark.isoformat() if watermark else None,
                                      max_lines=dream.memory_max_lines, max_bytes=dream.memory_max_bytes)
            return {INDEX_FILE: render_index(pages.values(), storage.config.zones), MEMORY_FILE: memory_md}
        lines = []
        for text, path in memory_pairs(storage):
            if path in touched:
                # the line may repeat what a forgotten fact said: a plain link to the new title
                path = self.moved.get(path, path)
                text = pages[path].title if path in pages else text
            lines.append((text, path))
        memory_md = render_memory(lines, pages, watermark=watermark.isoformat() if watermark else None,
                                  max_lines=dream.memory_max_lines, max_bytes=dream.memory_max_bytes)
        return {INDEX_FILE: render_index(pages.values(), storage.config.zones), MEMORY_FILE: memory_md}
