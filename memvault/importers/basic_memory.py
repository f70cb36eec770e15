"""A basic-memory project (`--format basic-memory`): the observations and relations of its notes.

As basic-memory's NOTE-FORMAT.md and its parser (markdown/plugins.py) define them: a note is a
markdown file with YAML frontmatter (`title`, `type`, `tags`, `permalink`, `created`,
`modified`); an observation is a list item `- [category] content #tag (context)` (or one without
a category that carries a #tag); a relation is a list item `relation_type [[Target]] (context)`.
Each observation is a fact with the note as its source (`basic-memory:<permalink>`), its #tags as
tags and its category as the fact's when the vault has one of that name, else as a tag; each
relation is a `relationship` fact, "<note title> <relation type> <target>". Facts land on the
note's `created` day (else `modified`, else the day the file was last written). Prose, task
items and plain list items are skipped and counted.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from memvault.importers import markdown as md
from memvault.importers.records import (
    Occurrences,
    Progress,
    Record,
    Skipped,
    file_time,
    holds_nothing,
    key_of,
    label,
    markdown_files,
    read_note,
    tag,
    unstorable,
    vaults_skipped,
)

FORMAT = "basic-memory"
# What basic-memory's parser refuses as a category: a clock ("[00:11]") and task markers.
_CATEGORY = re.compile(r"\[([^\[\]()]+)\]\s+(.+)", re.S)
_CLOCK = re.compile(r"\d{1,3}:\d{2}(?::\d{2})?(?:[.,]\d{1,3})?(?:\s+-\s+\d{1,3}:\d{2}(?::\d{2})?(?:[.,]\d{1,3})?)?$")
_RELATION = re.compile(r"(?P<type>\"[^\"]+\"|'[^']+'|[^\s\[]+)\s*\[\[(?P<target>[^\]]+)\]\]"
                       r"(?:\s*\((?P<context>.*)\))?\s*$", re.S)
_TAG = re.compile(r"(?:^|\s)#([^\s#]+(?:#[^\s#]+)*)")


def read(root: Path, progress: Progress, categories: tuple[str, ...] = ()) -> Iterator[Record | Skipped]:
    names = {name.casefold(): name for name in categories}
    vaults: list[Path] = []
    files = [root] if root.is_file() else markdown_files(root, vaults=vaults)
    if not files:
        raise holds_nothing(f"{root}: holds no notes (.md files)", vaults)
    base = root.parent if root.is_file() else root
    yield from vaults_skipped(vaults, base)
    for done, path in enumerate(files, start=1):
        yield from _note(path, path.relative_to(base).as_posix(), names)
        progress("reading", done, len(files))


def _note(path: Path, rel: str, categories: dict[str, str]) -> Iterator[Record | Skipped]:
    raw, body, offset = md.split_frontmatter(read_note(path))
    front = _frontmatter(raw)
    title = str(front.get("title") or path.stem)
    permalink = str(front.get("permalink") or rel.removesuffix(".md"))
    at = _date(front, path)
    source = label(f"{FORMAT}:{permalink}")
    copies = Occurrences()
    for block in md.blocks(body, offset + 1):
        place = f"{rel}:{block.line}"
        if block.kind == md.HEADING:
            continue
        if block.kind != md.ITEM:
            yield Skipped("paragraphs and blocks that are not observations or relations", place)
            continue
        fields = _relation(block.text, title) or _observation(block.text, categories)
        if fields is None:
            yield Skipped("list items that are not observations or relations", place)
            continue
        reason = unstorable(fields["text"], "observations")
        if reason:
            yield Skipped(reason, place)
            continue
        fields.update(at=at, source=source, key=key_of(FORMAT, permalink, fields["text"], copies.next(fields["text"])))
        yield Record(fields, place)


def _observation(item: str, categories: dict[str, str]) -> dict[str, Any] | None:
    """`[category] content #tag (context)`, or content with a #tag; None for anything else."""
    first = item.split("\n", 1)[0].strip()
    if first.startswith(("[ ]", "[x]", "[X]", "[-]")) or re.match(r"\[[^\]]*\]\([^)]*\)", first):
        return None  # a task, or a markdown link
    category, content = _category_and_content(item)
    tags = [part for word in _TAG.findall(content) for part in word.split("#") if part]
    if category is None and not tags:
        return None
    fields: dict[str, Any] = {"text": content, "category": "fact", "tags": []}
    if category is not None and category.casefold() in categories:
        fields["category"] = categories[category.casefold()]
    elif category is not None and tag(category):
        fields["tags"].append(tag(category))
    fields["tags"] += [word for word in (tag(t) for t in tags) if word]
    fields["tags"] = list(dict.fromkeys(fields["tags"]))
    return fields


def _category_and_content(item: str) -> tuple[str | None, str]:
    """An observation's `[category]` (None when there is none, or it is a time or a lone mark) and its content."""
    found = _CATEGORY.match(item.strip())
    category = found.group(1).strip() if found else None
    if category is not None and (_CLOCK.match(category) or (len(category) == 1 and not category.isalnum())):
        return None, item.strip()
    return category, found.group(2).strip() if found else item.strip()


def _relation(item: str, title: str) -> dict[str, Any] | None:
    found = _RELATION.match(item.strip())
    if found is None:
        return None
    kind = found.group("type").strip("\"'").strip()
    text = f"{title} {kind} {found.group('target').strip()}"
    if found.group("context"):
        text += f" ({found.group('context').strip()})"
    return {"text": text, "category": "relationship", "tags": []}


def _frontmatter(raw: str) -> dict:
    if not raw.strip():
        return {}
    import yaml

    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError:
        return {}  # as basic-memory reads it: a note whose frontmatter is broken is plain markdown
    return data if isinstance(data, dict) else {}


def _date(front: dict, path: Path) -> datetime | str:
    """The note's `created` (else `modified`) date, as basic-memory reads it; else the file's time."""
    for name in ("created", "modified"):
        value = front.get(name)
        if isinstance(value, datetime):
            return value
        if value is not None and hasattr(value, "isoformat"):
            return value.isoformat()  # a date: midnight in the vault's zone
        if isinstance(value, str) and value.strip():
            return value.strip()
    return file_time(path)
