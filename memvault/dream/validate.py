"""The prose contract's answer checked against the vault, statement by statement, and the pages it writes.

In the prose mode (`[dream] mode = "prose"`, and the scrub) the model writes page bodies citing
facts as `[^id]`. Every paragraph, list item and table row it adds is a statement: it must cite a
fact of the batch (or one the page already cites) and pass memvault.dream.check against the facts
it cites. A day batch takes what passes (`partial`): a statement that fails is dropped from its
page with its reason, and a fact left without a passing statement is unresolved (asked about again,
then retried in a smaller batch). The scrub takes an answer whole or not at all.

Nothing here writes: a Proposal says what would be written. Steps: the page operations
(`_draft_pages`), their statements (`_keep_checked`), the dispositions (`_account`), the MEMORY.md
lines (`_memory_lines`), the conflicts inbox (`add_conflicts`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memvault.dream.schema import PAGE_MAX_BYTES, AnswerRejected, DreamAnswer
from memvault.dream.statements import statement_blocks, statements
from memvault.errors import UnsafePath
from memvault.formats.pages import (
    CONFLICTS_PAGE,
    INBOX_ZONE,
    Page,
    PagePathError,
    cited_ids,
    clean_body,
    has_control,
    replace_section,
    zone_of,
)
from memvault.storage.wiki import check_page_path, list_pages, read_page

if TYPE_CHECKING:
    from memvault.dream.check import Checker

UNCITED_SHOWN = 3


@dataclass
class Proposal:
    pages: dict[str, Page] = field(default_factory=dict)     # path -> new state, changed pages only
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    dispositions: dict[str, str] = field(default_factory=dict)  # fact id -> disposition
    settled: list[str] = field(default_factory=list)  # duplicates of a fact a page cites: leave search
    kept: list[str] = field(default_factory=list)     # noops, other duplicates: accounted, still searchable
    conflicts: list[dict] = field(default_factory=list)
    memory: list[tuple[str, str]] | None = None
    notes: list[str] = field(default_factory=list)    # what was dropped leniently
    unresolved: dict[str, str] = field(default_factory=dict)  # fact id -> why it is not accounted for
    dropped: list[str] = field(default_factory=list)  # statements refused by the check, with the reason
    duplicates: dict[str, str] = field(default_factory=dict)  # fact id -> the fact it repeats
    problems: list[str] = field(default_factory=list)  # every problem found (for a repair turn)
    dropped_ids: dict[str, str] = field(default_factory=dict)  # fact id -> why its statement was dropped

    def count(self, disposition: str) -> int:
        return sum(1 for d in self.dispositions.values() if d == disposition)


@dataclass
class Prose:
    """What checking a prose answer needs to know."""

    root: Path
    zones: Sequence[str]
    batch_ids: set[str]
    known_ids: set[str]
    tombstoned: set[str]
    day: str
    label: str
    memory_shown: bool = True
    closed: Collection[str] = ()
    checker: Checker | None = None   # None: citations only
    facts: dict = field(default_factory=dict)  # fact id -> Fact, what statements are checked against
    partial: bool = False            # a day batch: take what passes; the scrub: all or nothing


def _short(ids: Sequence[str], n: int = 5) -> str:
    ids = list(ids)
    return ", ".join(ids[:n]) + (f" (+{len(ids) - n} more)" if len(ids) > n else "")


def _checked_path(path: str, root: Path, zones: Sequence[str], problems: list[str]) -> str | None:
    try:
        return check_page_path(path, root, zones)
    except PagePathError as e:
        problems.append(str(e))
        return None


def _meta_problems(op) -> list[str]:
    found = []
    if op.title is not None and (has_control(op.title) or not op.title.strip()):
        found.append(f"page {op.path!r}: title must be one non-empty line")
    if op.section is not None and has_control(op.section):
        found.append(f"page {op.path!r}: section heading must be one line")
    if has_control(op.body, allow_newlines=True):
        found.append(f"page {op.path!r}: body contains control characters")
    return found


def build_proposal(answer: DreamAnswer, ctx: Prose, *, problems: Sequence[str] = (),
                   notes: Sequence[str] = ()) -> Proposal:
    """Check the answer for this batch and compute the pages it writes.

    `problems` and `notes` carry what parsing found already. With `ctx.partial` the proposal holds
    what passed and `unresolved` the facts left; otherwise AnswerRejected lists every problem.
    """
    problems = list(problems)
    prop = Proposal(notes=list(notes))
    drafts, refused = _draft_pages(answer, ctx, prop, problems)
    _account(answer, ctx, prop, drafts, refused, problems)
    prop.problems = problems
    if problems and not ctx.partial:
        raise AnswerRejected(problems)
    on_pages = cited_on_pages(ctx.root, set(prop.duplicates.values()), prop.pages)
    for fid, original in prop.duplicates.items():
        (prop.settled if original in on_pages else prop.kept).append(fid)
    if prop.conflicts:
        add_conflicts(prop, ctx.root, ctx.day, ctx.label, ctx.facts, ctx.checker)
    if answer.memory is not None:
        prop.memory = _memory_lines(answer.memory, ctx, prop)
    return prop


# -- pages -------------------------------------------------------------------------------------

def _draft_pages(answer: DreamAnswer, ctx: Prose, prop: Proposal,
                 problems: list[str]) -> tuple[dict[str, Page], dict[str, str]]:
    """Each page operation as the page it would leave (statements checked), or why it is refused."""
    drafts: dict[str, Page] = {}   # every page the answer writes, for the dispositions
    refused: dict[str, str] = {}   # path -> why the whole operation is refused
    if ctx.checker is not None:  # the people pages this answer makes are known people too
        for op in answer.pages:
            ctx.checker.people.add(op.path, op.title)
    for op in answer.pages:
        path = _checked_path(op.path, ctx.root, ctx.zones, problems)
        if path is None:
            refused[op.path] = problems[-1]
            continue
        if path in drafts:
            problems.append(f"page {path!r} is edited twice in one answer")
            continue
        found = _meta_problems(op)
        made = _apply_op(op, path, ctx, found)
        if made is None:
            problems.extend(found)
            refused[path] = found[-1] if found else "refused"
            continue
        page, before, allowed = made
        checked = _keep_checked(page, before, allowed, ctx, prop)
        too_big = len(page.body.encode()) > PAGE_MAX_BYTES
        if too_big:
            checked.append(f"page {path!r} would exceed {PAGE_MAX_BYTES} bytes")
        drafts[path] = page
        problems.extend(checked)
        if too_big or (checked and not ctx.partial) or not cited_ids(page.body):
            if too_big:
                refused[path] = checked[-1]
            elif checked:
                refused[path] = f"none of its new statements can be kept ({checked[0]})"
            else:
                refused[path] = (f"page {path!r} cites no fact: every paragraph and list item needs the [^id] of "
                                 "the fact it states")
                problems.append(refused[path])
            continue
        # sources keep every fact the page ever drew from (minus forgotten ones), so a fact whose
        # statement a later correction replaced still counts as consolidated
        page.sources = [s for s in dict.fromkeys(page.sources + cited_ids(page.body)) if s not in ctx.tombstoned]
        if page.body != before or op.action == "create":
            prop.pages[path] = page
            (prop.created if op.action == "create" else prop.updated).append(path)
    return drafts, refused


def _apply_op(op, path: str, ctx: Prose, found: list[str]) -> tuple[Page, str, set[str]] | None:
    """The page an operation leaves, the body it had and the ids it may cite; None if refused."""
    existing = read_page(ctx.root, path)
    if op.action == "create":
        if existing is not None or (ctx.root / path).exists():
            found.append(f"cannot create {path!r}: it already exists (use update)")
        if op.section is not None:
            found.append(f"cannot create {path!r} with a section edit")
        if found:
            return None
        page = Page(path=path, title=(op.title or Path(path).stem.replace("-", " ")).strip(),
                    zone=zone_of(path), tags=list(op.tags), created=ctx.day, updated=ctx.day, body=clean_body(op.body))
        return page, "", set(ctx.batch_ids)
    if existing is None:
        found.append(f"cannot update {path!r}: no such page (use create)")
        return None
    if path in ctx.closed:  # never shown to the model: a rewrite would lose what it holds
        found.append(f"cannot update {path!r}: that page is not open to this batch; put these facts on another page")
        return None
    if found:
        return None
    body = clean_body(op.body)
    if op.section is not None:
        body = replace_section(existing.body, op.section, body)
    page = Page(path=path, title=(op.title or existing.title).strip(), zone=zone_of(path),
                tags=list(op.tags) or existing.tags, created=existing.created or ctx.day,
                updated=ctx.day, sources=list(existing.sources), body=body)
    return page, existing.body, set(ctx.batch_ids) | set(existing.sources) | set(cited_ids(existing.body))


def _keep_checked(page: Page, before: str, allowed: set[str], ctx: Prose, prop: Proposal) -> list[str]:
    """Drop from the page each new statement that cites nothing it may cite, or says what its facts
    do not; the problems, one per statement (the whole answer's, for the scrub)."""
    old = set(statements(before))
    found, drop = [], []
    for start, end, text in statement_blocks(page.body):
        if text in old:
            continue
        reason = _statement_problem(text, page.path, allowed, ctx)
        if reason is None:
            continue
        # a statement citing a forgotten fact is not quoted: log.md would keep what it says
        shown = "a statement" if reason.startswith("cites forgotten") else f"statement {_quoted(text)}"
        found.append(f"page {page.path!r}: {shown} {reason}")
        drop.append((start, end))
        for fid in cited_ids(text):
            prop.dropped_ids.setdefault(fid, found[-1])
    if drop and ctx.partial:
        lines = page.body.split("\n")
        for start, end in reversed(drop):
            del lines[start:end]
        page.body = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n")
        prop.dropped += found
    return found


def _statement_problem(text: str, path: str, allowed: set[str], ctx: Prose) -> str | None:
    cites = cited_ids(text)
    if not cites:
        person = ctx.checker.people.check(path, text, what="it") if ctx.checker is not None else None
        whose = f"; and {person.reason}" if person is not None and not person.ok else ""
        return f"cites no fact{whose}"
    dead = [c for c in cites if c in ctx.tombstoned]
    if dead:
        return f"cites forgotten fact(s) {_short(dead)}"
    foreign = [c for c in cites if c not in allowed]
    if foreign:
        return f"cites id(s) neither in the batch nor on the page: {_short(foreign)}"
    facts = [ctx.facts[c] for c in cites if c in ctx.facts]
    if ctx.checker is None or not facts:
        return None
    verdict = ctx.checker.statement(text, facts, path)
    if verdict.ok:
        others = [ctx.facts[i] for i in ctx.batch_ids if i in ctx.facts and i not in cites]
        verdict = ctx.checker.swapped(text, facts, others)
    return None if verdict.ok else f"fails the check: {verdict.reason}"


def _quoted(text: str) -> str:
    return repr(text if len(text) <= 120 else text[:119] + "…")


# -- dispositions -----------------------------------------------------------------------------

def _account(answer: DreamAnswer, ctx: Prose, prop: Proposal, drafts: dict[str, Page],
             refused: dict[str, str], problems: list[str]) -> None:
    """Each fact's disposition: accounted for, or unresolved with the reason."""
    seen: set[str] = set()
    for d in answer.facts:
        if d.id in ctx.tombstoned:
            continue  # forgotten while the batch was planned: nothing to account for
        if d.id not in ctx.batch_ids:
            problems.append(f"disposition for fact {d.id!r}, which is not in this batch")
            continue
        if d.id in seen:
            problems.append(f"fact {d.id} has more than one disposition")
            continue
        seen.add(d.id)
        problem = _disposition_problem(d, ctx, prop, drafts, refused)
        if problem:
            problems.append(problem)
            prop.unresolved[d.id] = problem
        else:
            prop.dispositions[d.id] = d.disposition
    missing = sorted(ctx.batch_ids - seen - ctx.tombstoned)
    if missing:
        problems.append(f"answer leaves {len(missing)} fact(s) without a disposition: {_short(missing)}")
        prop.unresolved.update({fid: f"no disposition was given for fact {fid}" for fid in missing})
    # a fact a written page cites is consolidated there, whatever its disposition said
    cited = {i for page in prop.pages.values() for i in cited_ids(page.body)}
    for fid in [f for f in prop.unresolved if f in cited]:
        del prop.unresolved[fid]
        prop.dispositions[fid] = "consolidated"


def _disposition_problem(d, ctx: Prose, prop: Proposal, drafts: dict[str, Page],
                         refused: dict[str, str]) -> str | None:
    if d.disposition == "consolidated":
        return _consolidated_problem(d, ctx, prop, drafts, refused)
    if d.disposition == "duplicate":
        if d.duplicate_of == d.id:
            return (f"fact {d.id} is marked a duplicate of itself; name the other fact that says the same, "
                    "or consolidate it")
        if d.duplicate_of not in ctx.known_ids or d.duplicate_of in ctx.tombstoned:
            return f"fact {d.id} is a duplicate of unknown fact {d.duplicate_of!r}"
        prop.duplicates[d.id] = d.duplicate_of
        return None
    if d.disposition == "noop":
        if not (d.note or "").strip():
            return (f"fact {d.id} is marked noop without a note saying why it has no lasting value; a fact "
                    "worth keeping goes on a page")
        prop.kept.append(d.id)
        return None
    others = [o for o in d.conflicts_with if o != d.id]
    bad = [o for o in others if o not in ctx.known_ids or o in ctx.tombstoned]
    if bad:
        return f"fact {d.id} conflicts with unknown fact(s) {_short(bad)}"
    if not others:
        return f"fact {d.id} is marked conflicting without naming another fact it conflicts with"
    prop.conflicts.append({"id": d.id, "with": others, "note": d.note or ""})
    return None


def _consolidated_problem(d, ctx: Prose, prop: Proposal, drafts: dict[str, Page],
                          refused: dict[str, str]) -> str | None:
    if d.id in prop.dropped_ids and d.id not in {i for p in prop.pages.values() for i in cited_ids(p.body)}:
        return f"fact {d.id}: its statement was dropped ({prop.dropped_ids[d.id]})"
    if d.page in refused:
        return f"fact {d.id} is consolidated into {d.page!r}, which was refused: {refused[d.page]}"
    target = drafts.get(d.page or "")
    if target is None and d.page:
        # the model names the page: check the path before reading anything there
        found: list[str] = []
        checked = _checked_path(d.page, ctx.root, ctx.zones, found)
        if checked is None:
            return found[0]
        target = read_page(ctx.root, checked)
    if target is None:
        return f"fact {d.id} is consolidated into {d.page!r}, no such page"
    if d.id not in cited_ids(target.body):
        return f"fact {d.id} is consolidated into {d.page!r} but not cited there"
    return None


def cited_on_pages(root: Path, ids: set[str], written: dict[str, Page]) -> set[str]:
    """Which of `ids` a page cites once the proposal is written."""
    found = {i for page in written.values() for i in cited_ids(page.body) if i in ids}
    for path in list_pages(root) if ids - found else []:
        if path in written:
            continue
        text = (root / path).read_text(encoding="utf-8", errors="replace")
        if any(i in text for i in ids - found):
            page = read_page(root, path)
            found |= ids & set(cited_ids(page.body) if page else [])
    return found


# -- MEMORY.md ------------------------------------------------------------------------------------

def _memory_lines(lines, ctx: Prose, prop: Proposal) -> list[tuple[str, str]] | None:
    if not ctx.memory_shown:
        prop.notes.append("ignored \"memory\": the model was not shown the current MEMORY.md")
        return None
    kept, nowhere, unsupported = [], 0, 0
    for line in lines:
        page = _a_wiki_page(line.page, ctx.root, ctx.zones, prop.pages)
        if page is None:
            nowhere += 1
        elif not _line_supported(line.text, page, ctx):
            unsupported += 1
        else:
            kept.append((line.text, line.page))
    if nowhere:
        prop.notes.append(f"dropped {nowhere} MEMORY.md line(s) naming no wiki page")
    if unsupported:
        prop.notes.append(f"dropped {unsupported} MEMORY.md line(s) saying what their page's facts do not")
    if not kept:
        prop.notes.append("no usable MEMORY.md line: the current ones are kept")
        return None
    return kept


def _line_supported(text: str, page: Page, ctx: Prose) -> bool:
    """A MEMORY.md line holds no name or number that the facts its page cites do not."""
    if ctx.checker is None:
        return True
    from memvault.dream.check import specifics

    facts = [ctx.facts[i] for i in cited_ids(page.body) if i in ctx.facts]
    return bool(facts) and specifics(text, facts).ok


def _a_wiki_page(path: str, root: Path, zones: Sequence[str], proposed: Mapping[str, Page]) -> Page | None:
    """The existing wiki page a memory line's `page` names, else None. The model may name any file
    (`index.md`, `../../etc/passwd`, a symlink, the conflicts inbox, which is a queue for a person,
    no knowledge): such a line names no page and is dropped, with the batch's other lines, never
    failing the dream or emptying MEMORY.md."""
    try:
        path = check_page_path(path, root, zones)
        return proposed.get(path) or read_page(root, path)
    except (PagePathError, UnsafePath):
        return None


# -- conflicts ----------------------------------------------------------------------------------

def add_conflicts(prop: Proposal, root: Path, day: str, label: str, facts: Mapping[str, Any],
                  checker: Checker | None) -> None:
    """Write each conflict to the inbox page for a human instead of guessing. The model's reason is
    checked as a statement is (against the facts in conflict); one naming what they do not is
    replaced by "these facts disagree" (a small model copied its instructions there)."""
    inbox = read_page(root, CONFLICTS_PAGE) or Page(
        path=CONFLICTS_PAGE, title="Conflicts to review", zone=INBOX_ZONE, tags=["inbox"],
        created=day, body="Facts that disagree, found by `memvault dream`. Resolve them by adding "
        "a correcting fact; delete an entry once it is settled.\n\n## Open",
    )
    lines, replaced = [], 0
    for c in prop.conflicts:
        note = " ".join(c["note"].split())
        if note and checker is not None:
            said = checker.reason(note, [facts[i] for i in [c["id"], *c["with"]] if i in facts])
            note, replaced = (said, replaced) if said is not None else ("", replaced + 1)
        note = note or "these facts disagree"
        others = " ".join(f"[^{o}]" for o in c["with"])
        lines.append(f"- {day} (batch {label}): {note} — new [^{c['id']}] vs {others}")
    if "## Open" not in inbox.body:
        inbox.body = inbox.body.rstrip("\n") + "\n\n## Open"
    inbox.body = inbox.body.rstrip("\n") + "\n\n" + "\n".join(lines)
    inbox.updated = day
    inbox.sources = list(dict.fromkeys(inbox.sources + cited_ids(inbox.body)))
    prop.pages[CONFLICTS_PAGE] = inbox
    if replaced:
        prop.notes.append(f"replaced {replaced} conflict reason(s) naming what their facts do not")
