"""Check a model answer against the vault and turn it into the exact pages to write.

Nothing here writes: a Proposal is either complete and consistent (the batch's proof of work
holds) or AnswerRejected is raised with the first reason found.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from memvault.dream.schema import PAGE_MAX_BYTES, AnswerRejected, DreamAnswer
from memvault.pages import (
    CONFLICTS_PAGE,
    INBOX_ZONE,
    Page,
    PagePathError,
    check_page_path,
    cited_ids,
    clean_body,
    has_control,
    read_page,
    replace_section,
    zone_of,
)

TAG = re.compile(r"^[\w][\w./ -]{0,39}$")


@dataclass
class Proposal:
    pages: dict[str, Page] = field(default_factory=dict)     # path -> new state, changed pages only
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    dispositions: dict[str, str] = field(default_factory=dict)  # fact id -> disposition
    settled: list[str] = field(default_factory=list)          # duplicate/noop ids (for log.md)
    conflicts: list[dict] = field(default_factory=list)
    memory: list[tuple[str, str]] | None = None

    def count(self, disposition: str) -> int:
        return sum(1 for d in self.dispositions.values() if d == disposition)


def _short(ids: Sequence[str], n: int = 5) -> str:
    ids = list(ids)
    return ", ".join(ids[:n]) + (f" (+{len(ids) - n} more)" if len(ids) > n else "")


def _checked_path(path: str, root: Path, zones: Sequence[str]) -> str:
    try:
        return check_page_path(path, root, zones)
    except PagePathError as e:
        raise AnswerRejected(str(e)) from None


def _check_meta(op) -> None:
    if op.title is not None and (has_control(op.title) or not op.title.strip()):
        raise AnswerRejected(f"page {op.path!r}: title must be one non-empty line")
    for tag in op.tags:
        if not TAG.match(tag):
            raise AnswerRejected(f"page {op.path!r}: tag {tag[:40]!r} is not a plain word")
    if op.section is not None and has_control(op.section):
        raise AnswerRejected(f"page {op.path!r}: section heading must be one line")
    if has_control(op.body, allow_newlines=True):
        raise AnswerRejected(f"page {op.path!r}: body contains control characters")


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
) -> Proposal:
    """Validate the answer for this batch and compute the resulting pages (proof of work included)."""
    prop = Proposal()
    for op in answer.pages:
        path = _checked_path(op.path, root, zones)
        if path in prop.pages:
            raise AnswerRejected(f"page {path!r} is edited twice in one answer")
        _check_meta(op)
        existing = read_page(root, path)
        if op.action == "create":
            if existing is not None or (root / path).exists():
                raise AnswerRejected(f"cannot create {path!r}: it already exists (use update)")
            if op.section is not None:
                raise AnswerRejected(f"cannot create {path!r} with a section edit")
            body = clean_body(op.body)
            page = Page(path=path, title=(op.title or Path(path).stem.replace("-", " ")).strip(),
                        zone=zone_of(path), tags=list(op.tags), created=day, updated=day, body=body)
            allowed = batch_ids
            prop.created.append(path)
        else:
            if existing is None:
                raise AnswerRejected(f"cannot update {path!r}: no such page")
            if op.section is not None:
                body = replace_section(existing.body, op.section, clean_body(op.body))
            else:
                body = clean_body(op.body)
            page = Page(path=path, title=(op.title or existing.title).strip(), zone=zone_of(path),
                        tags=list(op.tags) or existing.tags, created=existing.created or day,
                        updated=day, sources=list(existing.sources), body=body)
            allowed = batch_ids | set(existing.sources) | set(cited_ids(existing.body))
            prop.updated.append(path)
        cites = cited_ids(page.body)
        if not page.body.strip() or not cites:
            raise AnswerRejected(f"page {path!r} cites no fact: every statement needs its [^id]")
        dead = [c for c in cites if c in tombstoned]
        if dead:
            raise AnswerRejected(f"page {path!r} cites forgotten fact(s) {_short(dead)}")
        foreign = [c for c in cites if c not in allowed]
        if foreign:
            raise AnswerRejected(
                f"page {path!r} cites id(s) neither in the batch nor on the page: {_short(foreign)}"
            )
        # sources keep every fact the page ever drew from (minus forgotten ones), so a fact whose
        # statement a later correction replaced still counts as consolidated
        page.sources = [s for s in dict.fromkeys(page.sources + cites) if s not in tombstoned]
        if len(page.body.encode()) > PAGE_MAX_BYTES:
            raise AnswerRejected(f"page {path!r} would exceed {PAGE_MAX_BYTES} bytes")
        prop.pages[path] = page

    for d in answer.facts:
        if d.id in tombstoned:
            continue  # forgotten while the batch was planned: nothing to account for
        if d.id not in batch_ids:
            raise AnswerRejected(f"disposition for fact {d.id!r}, which is not in this batch")
        if d.id in prop.dispositions:
            raise AnswerRejected(f"fact {d.id} has more than one disposition")
        prop.dispositions[d.id] = d.disposition
        if d.disposition == "consolidated":
            target = prop.pages.get(d.page or "")
            if target is None and d.page:
                # the model names the page: check the path before reading anything there
                target = read_page(root, _checked_path(d.page, root, zones))
            if target is None:
                raise AnswerRejected(f"fact {d.id} is consolidated into {d.page!r}, no such page")
            if d.id not in cited_ids(target.body):
                raise AnswerRejected(f"fact {d.id} is consolidated into {d.page!r} but not cited there")
        elif d.disposition == "duplicate":
            if d.duplicate_of == d.id or d.duplicate_of not in known_ids or d.duplicate_of in tombstoned:
                raise AnswerRejected(f"fact {d.id} is a duplicate of unknown fact {d.duplicate_of!r}")
            prop.settled.append(d.id)
        elif d.disposition == "noop":
            prop.settled.append(d.id)
        else:
            others = [o for o in d.conflicts_with if o != d.id]
            bad = [o for o in others if o not in known_ids or o in tombstoned]
            if not others or bad:
                raise AnswerRejected(f"fact {d.id} conflicts with unknown fact(s) {_short(bad) or 'none'}")
            prop.conflicts.append({"id": d.id, "with": others, "note": d.note or ""})

    missing = sorted(batch_ids - set(prop.dispositions))
    if missing:
        raise AnswerRejected(f"answer leaves {len(missing)} fact(s) without a disposition: {_short(missing)}")
    if prop.conflicts:
        _add_conflicts(prop, root, day, label)
    if answer.memory is not None:
        prop.memory = [(line.text, line.page) for line in answer.memory]
    return prop


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
