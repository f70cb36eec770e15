"""Check a model answer against the vault and turn it into the exact pages to write.

Nothing here writes: a Proposal is either complete and consistent (the batch's proof of work
holds) or AnswerRejected is raised with every problem found, so a repair turn can name them all.
Strict where it matters (paths, citations, ids, tombstones, a reason for every fact leaving the
batch without a page); lenient where nothing is lost (MEMORY.md lines naming no page are dropped
with a note).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from memvault.dream.schema import PAGE_MAX_BYTES, AnswerRejected, DreamAnswer
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

UNCITED_SHOWN = 3
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+")
_RULE = re.compile(r"^(?:[-*_]\s*){3,}$|^\|?[\s:|-]+\|?$")
_LABEL = re.compile(r"^[*_]{1,3}[^*_]+[*_]{1,3}:?$")


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

    def count(self, disposition: str) -> int:
        return sum(1 for d in self.dispositions.values() if d == disposition)


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


def statements(body: str) -> list[str]:
    """The paragraphs and list items of a page body (headings, rules, fences and labels excluded)."""
    blocks: list[str] = []
    current: list[str] = []
    fence = False
    lines = body.split("\n")

    def flush():
        if current:
            blocks.append(" ".join(current))
            current.clear()

    for n, line in enumerate(lines):
        text = line.strip()
        if text.startswith(("```", "~~~")):
            fence = not fence
            flush()
            continue
        header_row = text.startswith("|") and n + 1 < len(lines) and _RULE.match(lines[n + 1].strip() or "x")
        if fence or not text or text.startswith(("#", "<!--")) or _RULE.match(text) or _LABEL.match(text) \
                or header_row:
            flush()
            continue
        if _LIST_ITEM.match(line) or text.startswith("|"):
            flush()
        current.append(text)
    flush()
    return blocks


def uncited_statements(body: str, before: str = "") -> list[str]:
    """Statements of `body` that cite no fact and were not already on the page (`before`)."""
    old = set(statements(before))
    return [s for s in statements(body) if not cited_ids(s) and s not in old]


def build_proposal(
    answer: DreamAnswer,
    *,
    root: Path,
    zones: Sequence[str],
    batch_ids: set[str],
    known_ids: set[str],
    tombstoned: set[str],
    day: str,
    label: str,
    problems: Sequence[str] = (),
    notes: Sequence[str] = (),
    memory_shown: bool = True,
    closed: Collection[str] = (),
) -> Proposal:
    """Validate the answer for this batch and compute the resulting pages (proof of work included).

    `problems` and `notes` carry what parsing found already; every problem is raised together.
    """
    problems = list(problems)
    prop = Proposal(notes=list(notes))
    drafts: dict[str, Page] = {}   # every page the answer writes, problems or not, for the dispositions
    for op in answer.pages:
        path = _checked_path(op.path, root, zones, problems)
        if path is None:
            continue
        if path in drafts:
            problems.append(f"page {path!r} is edited twice in one answer")
            continue
        found = _meta_problems(op)
        existing = read_page(root, path)
        before = ""
        if op.action == "create":
            if existing is not None or (root / path).exists():
                found.append(f"cannot create {path!r}: it already exists (use update)")
            if op.section is not None:
                found.append(f"cannot create {path!r} with a section edit")
            body = clean_body(op.body)
            page = Page(path=path, title=(op.title or Path(path).stem.replace("-", " ")).strip(),
                        zone=zone_of(path), tags=list(op.tags), created=day, updated=day, body=body)
            allowed = batch_ids
        elif existing is None:
            problems.append(f"cannot update {path!r}: no such page (use create)")
            continue
        elif path in closed:  # never shown to the model: a rewrite would lose what it holds
            problems.append(f"cannot update {path!r}: that page is not open to this batch; "
                            "put these facts on another page")
            continue
        else:
            before = existing.body
            if op.section is not None:
                body = replace_section(existing.body, op.section, clean_body(op.body))
            else:
                body = clean_body(op.body)
            page = Page(path=path, title=(op.title or existing.title).strip(), zone=zone_of(path),
                        tags=list(op.tags) or existing.tags, created=existing.created or day,
                        updated=day, sources=list(existing.sources), body=body)
            allowed = batch_ids | set(existing.sources) | set(cited_ids(existing.body))
        drafts[path] = page
        cites = cited_ids(page.body)
        if not page.body.strip() or not cites:
            found.append(f"page {path!r} cites no fact: every paragraph and list item needs the [^id] of "
                         "the fact it states")
        else:
            uncited = uncited_statements(page.body, before)
            if uncited:
                shown = "; ".join(repr(s[:70]) for s in uncited[:UNCITED_SHOWN])
                more = f" (+{len(uncited) - UNCITED_SHOWN} more)" if len(uncited) > UNCITED_SHOWN else ""
                found.append(f"page {path!r}: {len(uncited)} paragraph(s) or list item(s) cite no fact: "
                             f"{shown}{more}; cite the fact each one states, or leave it out")
        dead = [c for c in cites if c in tombstoned]
        if dead:
            found.append(f"page {path!r} cites forgotten fact(s) {_short(dead)}")
        foreign = [c for c in cites if c not in allowed and c not in tombstoned]
        if foreign:
            found.append(f"page {path!r} cites id(s) neither in the batch nor on the page: {_short(foreign)}")
        if len(page.body.encode()) > PAGE_MAX_BYTES:
            found.append(f"page {path!r} would exceed {PAGE_MAX_BYTES} bytes")
        problems.extend(found)
        if found:
            continue
        # sources keep every fact the page ever drew from (minus forgotten ones), so a fact whose
        # statement a later correction replaced still counts as consolidated
        page.sources = [s for s in dict.fromkeys(page.sources + cites) if s not in tombstoned]
        prop.pages[path] = page
        (prop.created if op.action == "create" else prop.updated).append(path)

    duplicates: dict[str, str] = {}
    for d in answer.facts:
        if d.id in tombstoned:
            continue  # forgotten while the batch was planned: nothing to account for
        if d.id not in batch_ids:
            problems.append(f"disposition for fact {d.id!r}, which is not in this batch")
            continue
        if d.id in prop.dispositions:
            problems.append(f"fact {d.id} has more than one disposition")
            continue
        prop.dispositions[d.id] = d.disposition
        if d.disposition == "consolidated":
            target = drafts.get(d.page or "")
            if target is None and d.page:
                # the model names the page: check the path before reading anything there
                checked = _checked_path(d.page, root, zones, problems)
                target = read_page(root, checked) if checked else None
                if checked is None:
                    continue
            if target is None:
                problems.append(f"fact {d.id} is consolidated into {d.page!r}, no such page")
            elif d.id not in cited_ids(target.body):
                problems.append(f"fact {d.id} is consolidated into {d.page!r} but not cited there")
        elif d.disposition == "duplicate":
            if d.duplicate_of == d.id:
                problems.append(f"fact {d.id} is marked a duplicate of itself; name the other fact that says "
                                "the same, or consolidate it")
            elif d.duplicate_of not in known_ids or d.duplicate_of in tombstoned:
                problems.append(f"fact {d.id} is a duplicate of unknown fact {d.duplicate_of!r}")
            else:
                duplicates[d.id] = d.duplicate_of
        elif d.disposition == "noop":
            if not (d.note or "").strip():
                problems.append(f"fact {d.id} is marked noop without a note saying why it has no lasting "
                                "value; a fact worth keeping goes on a page")
            prop.kept.append(d.id)
        else:
            others = [o for o in d.conflicts_with if o != d.id]
            bad = [o for o in others if o not in known_ids or o in tombstoned]
            if bad:
                problems.append(f"fact {d.id} conflicts with unknown fact(s) {_short(bad)}")
            elif not others:
                problems.append(f"fact {d.id} is marked conflicting without naming another fact it conflicts with")
            else:
                prop.conflicts.append({"id": d.id, "with": others, "note": d.note or ""})

    missing = sorted(batch_ids - set(prop.dispositions) - tombstoned)
    if missing:
        problems.append(f"answer leaves {len(missing)} fact(s) without a disposition: {_short(missing)}")
    if problems:
        raise AnswerRejected(problems)
    # A duplicate leaves the default search only when what it repeats is on a page.
    on_pages = _cited_on_pages(root, set(duplicates.values()), prop.pages)
    for fid, original in duplicates.items():
        (prop.settled if original in on_pages else prop.kept).append(fid)
    if prop.conflicts:
        _add_conflicts(prop, root, day, label)
    if answer.memory is not None:
        prop.memory = _memory_lines(answer.memory, root, zones, prop, memory_shown)
    return prop


def _cited_on_pages(root: Path, ids: set[str], written: dict[str, Page]) -> set[str]:
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


def _memory_lines(lines, root: Path, zones: Sequence[str], prop: Proposal,
                  shown: bool) -> list[tuple[str, str]] | None:
    if not shown:
        prop.notes.append("ignored \"memory\": the model was not shown the current MEMORY.md")
        return None
    kept, nowhere = [], 0
    for line in lines:
        if line.page in prop.pages or _a_wiki_page(line.page, root, zones):
            kept.append((line.text, line.page))
        else:
            nowhere += 1
    if nowhere:
        prop.notes.append(f"dropped {nowhere} MEMORY.md line(s) naming no wiki page")
    if not kept:
        prop.notes.append("no usable MEMORY.md line: the current ones are kept")
        return None
    return kept


def _a_wiki_page(path: str, root: Path, zones: Sequence[str]) -> bool:
    """Does a memory line's `page` name an existing wiki page? The model may name any file
    (`index.md`, `../../etc/passwd`, a symlink): such a line names no page and is dropped, with the
    batch's other lines, never failing the dream or emptying MEMORY.md."""
    try:
        return read_page(root, check_page_path(path, root, zones, allow_inbox=True)) is not None
    except (PagePathError, UnsafePath):
        return False


def _add_conflicts(prop: Proposal, root: Path, day: str, label: str) -> None:
    """Write each conflict to the inbox page for a human instead of guessing."""
    inbox = read_page(root, CONFLICTS_PAGE) or Page(
        path=CONFLICTS_PAGE, title="Conflicts to review", zone=INBOX_ZONE, tags=["inbox"],
        created=day, body="Facts that disagree, found by `memvault dream`. Resolve them by adding "
        "a correcting fact; delete an entry once it is settled.\n\n## Open",
    )
    lines = []
    for c in prop.conflicts:
        note = " ".join(c["note"].split()) or "these facts disagree"
        others = " ".join(f"[^{o}]" for o in c["with"])
        lines.append(f"- {day} (batch {label}): {note} — new [^{c['id']}] vs {others}")
    if "## Open" not in inbox.body:
        inbox.body = inbox.body.rstrip("\n") + "\n\n## Open"
    inbox.body = inbox.body.rstrip("\n") + "\n\n" + "\n".join(lines)
    inbox.updated = day
    inbox.sources = list(dict.fromkeys(inbox.sources + cited_ids(inbox.body)))
    prop.pages[CONFLICTS_PAGE] = inbox
