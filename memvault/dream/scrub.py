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

from memvault.citations import pages_citing, strip_forgotten_statements
from memvault.dream import journal
from memvault.dream.consolidate import (
    LOG_FILE, MEMORY_FILE, BatchResult, _memory_lines, _memory_pairs, _page_hashes, _read, _Runner,
    _safe_json, _Stale,
)
from memvault.dream.journal import SCRUB_LABEL, append_entry, failed_attempts, format_entry
from memvault.dream.llm import complete_json
from memvault.dream.memory_md import render_memory
from memvault.dream.pages import (
    INBOX_ZONE, Page, cited_ids, list_pages, read_page, render_index, render_page, zone_of,
)
from memvault.dream.planner import Batch
from memvault.dream.prompt import build_scrub_messages
from memvault.dream.schema import AnswerRejected, answer_schema, parse_answer
from memvault.dream.validate import Proposal, build_proposal
from memvault.errors import LLMError

SCRUB_BATCH = Batch(SCRUB_LABEL, [], [], [])


@dataclass
class ScrubPlan:
    forgotten: set[str]                                     # tombstoned ids when planned
    ask: dict[str, Page] = field(default_factory=dict)      # the model rewrites these
    direct: dict[str, Page] = field(default_factory=dict)   # the runner rewrites these
    removed: list[str] = field(default_factory=list)        # cite nothing but forgotten facts
    cited: set[str] = field(default_factory=set)            # forgotten ids the pages cite


def plan_scrub(vault, forgotten: set[str]) -> ScrubPlan | None:
    """What the scrub has to do, or None when no page cites a forgotten fact."""
    targets = pages_citing(vault, forgotten)
    if not targets:
        return None
    plan = ScrubPlan(forgotten)
    for path, ids in targets.items():
        page = read_page(vault.root, path)
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


def leftover_citations(vault, plan: ScrubPlan, pages: dict[str, Page]) -> dict[str, list[str]]:
    """Pages that would still cite a forgotten fact once `pages` are written and removals done."""
    left = {}
    for path, page in pages.items():
        dead = [i for i in dict.fromkeys(cited_ids(page.body) + page.sources) if i in plan.forgotten]
        if dead:
            left[path] = dead
    for path, ids in pages_citing(vault, plan.forgotten).items():
        if path not in pages and path not in plan.removed:
            left[path] = ids
    return left


class ScrubRunner(_Runner):
    def scrub(self, *, dry_run: bool) -> BatchResult:
        stale = ""
        for _ in range(3):
            try:
                return self._attempt_scrub(dry_run)
            except _Stale as e:
                self.say(f"  {SCRUB_LABEL}: {e}; asking again")
                stale = str(e)
        return self._log_failed(f"vault kept changing during the dream ({stale})")

    def _failure(self, reason: str) -> tuple[int, int, str]:
        """(attempt number, max_retries, the log.md line) of a failed scrub attempt."""
        attempt = failed_attempts(journal.parse_journal(_read(self.vault.root / LOG_FILE)), SCRUB_LABEL) + 1
        limit = self.dream.max_retries
        detail = f"attempt {attempt}/{limit}: {reason}"
        return attempt, limit, format_entry(self.now().isoformat(), "failed", SCRUB_LABEL, detail=detail)

    def _log_failed(self, reason: str) -> BatchResult:
        """A failed attempt, counted towards max_retries; the scrub is never skipped."""
        attempt, limit, entry = self._failure(reason)
        commit = self._log_only(entry, f"dream: scrub — attempt {attempt}/{limit} failed")
        return BatchResult(SCRUB_LABEL, "failed", reason=reason, attempt=attempt, commit=commit)

    def _attempt_scrub(self, dry_run: bool) -> BatchResult:
        vault = self.vault
        forgotten = set(vault.tombstones())
        plan = plan_scrub(vault, forgotten)
        result = BatchResult(SCRUB_LABEL, "proposed" if dry_run else "ok", removed=[])
        if plan is None:
            return result
        snapshot = _page_hashes(vault.root)
        proposal = Proposal()
        if plan.ask:
            live = {i for page in plan.ask.values() for i in cited_ids(page.body) + page.sources}
            facts = [self.plan.facts_by_id[i] for i in sorted(live) if i in self.plan.facts_by_id]
            messages = build_scrub_messages(
                pages=list(plan.ask.values()), facts=facts, forgotten=sorted(plan.cited),
                memory_lines=_memory_lines(vault.root), memory_max_lines=self.dream.memory_max_lines,
            )
            self.say(f"  asking {self.settings.model} to rewrite {len(plan.ask)} page(s) …")
            try:
                raw = complete_json(self.settings, messages, answer_schema())
            except LLMError as e:
                if dry_run:
                    raise
                return self._record_error(SCRUB_BATCH, str(e))
            if dry_run:
                result.proposal = _safe_json(raw)
            try:
                proposal = self._check(raw, plan, forgotten)
            except AnswerRejected as e:
                if dry_run:
                    result.reason = str(e)
                    return result
                return self._scrub_failed(plan, str(e), snapshot)
        if dry_run:
            result.updated = sorted([*plan.direct, *proposal.pages])
            result.removed = list(plan.removed)
            return result
        pages = {**plan.direct, **proposal.pages}
        return self._apply_scrub(result, plan, pages, proposal.memory, snapshot)

    def _check(self, raw: str, plan: ScrubPlan, forgotten: set[str]) -> Proposal:
        answer = parse_answer(raw)
        for op in answer.pages:
            if op.action != "update" or op.path not in plan.ask:
                raise AnswerRejected(f"a scrub only rewrites the pages it was given, not {op.path[:80]!r}")
        proposal = build_proposal(
            answer, root=self.vault.root, zones=self.zones, batch_ids=set(),
            known_ids=set(self.plan.facts_by_id) - forgotten, tombstoned=forgotten,
            day=self.now().date().isoformat(), label=SCRUB_LABEL,
        )
        left = leftover_citations(self.vault, plan, {**plan.direct, **proposal.pages})
        if left:
            path, ids = next(iter(left.items()))
            raise AnswerRejected(f"page {path!r} still cites forgotten fact(s) {', '.join(ids[:5])}")
        return proposal

    def _scrub_failed(self, plan: ScrubPlan, reason: str, snapshot: dict[str, str]) -> BatchResult:
        """A rejected answer; on the last allowed attempt the runner drops the cited lines itself."""
        attempt, limit, failed = self._failure(reason)
        if attempt < limit:
            return self._log_failed(reason)
        pages = dict(plan.direct)
        for path, page in plan.ask.items():
            body = strip_forgotten_statements(page.body, plan.forgotten)
            if cited_ids(body):
                pages[path] = replace(page, body=body, updated=self.now().date().isoformat())
            else:
                plan.removed.append(path)
        result = BatchResult(SCRUB_LABEL, "ok", reason=reason, attempt=attempt, removed=[])
        return self._apply_scrub(result, plan, pages, None, snapshot, before=failed,
                                 how=f"after {attempt} failed attempts the runner removed the citing lines")

    def _apply_scrub(self, result: BatchResult, plan: ScrubPlan, pages: dict[str, Page],
                     memory: list[tuple[str, str]] | None, snapshot: dict[str, str], *, before: str = "",
                     how: str = "") -> BatchResult:
        vault = self.vault
        with vault.write_lock():
            fresh = set(vault.tombstones()) - plan.forgotten
            cited = {i for page in pages.values() for i in cited_ids(page.body)}
            if fresh & cited:
                raise _Stale(f"fact(s) {', '.join(sorted(fresh & cited))} forgotten meanwhile")
            now_hashes = _page_hashes(vault.root)
            changed = [p for p in [*pages, *plan.removed] if now_hashes.get(p) != snapshot.get(p)]
            if changed:
                raise _Stale(f"page(s) {', '.join(changed)} edited meanwhile")
            rewritten = sorted(pages)
            result.updated, result.removed = rewritten, sorted(plan.removed)
            files = {path: render_page(page, self.plan.facts_by_id) for path, page in pages.items()}
            files.update(self._scrub_summary(pages, plan.removed, memory))
            detail = (f"{len(rewritten)} page(s) rewritten, {len(plan.removed)} removed, without "
                      f"{len(plan.cited)} forgotten fact(s); " + (how or f"model {self.settings.model}"))
            entry = before + format_entry(self.now().isoformat(), "ok", SCRUB_LABEL, detail=detail)
            files[LOG_FILE] = append_entry(_read(vault.root / LOG_FILE), entry)
            n = len(rewritten)
            message = f"dream: scrub — {n} page{'' if n == 1 else 's'} rewritten without forgotten facts"
            if plan.removed:
                message += f", {len(plan.removed)} removed"
            result.commit = self._commit(files, message, removed=plan.removed)
        return result

    def _scrub_summary(self, written: dict[str, Page], removed: list[str],
                       memory: list[tuple[str, str]] | None) -> dict[str, str]:
        """index.md and MEMORY.md; no summary line may keep text from a rewritten or removed page."""
        root = self.vault.root
        pages = {p: read_page(root, p) for p in list_pages(root) if p not in removed}
        before = {p: page.body for p, page in pages.items() if page is not None}
        pages.update(written)
        pages = {p: page for p, page in pages.items() if page is not None}
        if memory is not None:
            lines = memory
        else:
            touched = {p for p, page in written.items() if before.get(p) != page.body} | set(removed)
            lines = []
            for text, path in _memory_pairs(root):
                if path in touched:
                    # the line may repeat what a forgotten fact said: keep only a plain link
                    text = pages[path].title if path in pages else text
                lines.append((text, path))
        watermark = self.vault.watermark
        memory_md = render_memory(
            lines, pages, watermark=watermark.isoformat() if watermark else None,
            max_lines=self.dream.memory_max_lines, max_bytes=self.dream.memory_max_bytes,
        )
        return {"index.md": render_index(pages.values(), self.vault.config.zones), MEMORY_FILE: memory_md}


def scrub_due(vault) -> bool:
    return bool(pages_citing(vault))
