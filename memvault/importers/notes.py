"""Markdown notes as records: each list item, paragraph or quote of a note is one fact.

Shared by the memory-folder and Claude Code readers. A code block or a table right after an item
or a paragraph goes with it (`Ran the migration:` and its commands are one memory); headings are
structure, not facts, but a `## 14:30` heading times the items under it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import datetime

from memvault.importers import markdown as md
from memvault.importers.markdown import Block
from memvault.importers.records import Occurrences, Record, Skipped, key_of, label, unstorable

_CLOCK = re.compile(r"(\d{1,2}):(\d{2})\b")
Clock = tuple[int, int] | None


def records_of(rel: str, text: str, fmt: str, when: Callable[[Clock], datetime | str], *,
               category: str = "fact", skip: Callable[[Block], str | None] | None = None,
               tags: tuple[str, ...] = ()) -> Iterator[Record | Skipped]:
    """The records of the note at `rel` (relative to the source), timed by `when(clock)`, where
    clock is the (hour, minute) of the latest `HH:MM` heading above the block, or None; `skip`
    gives the reason to leave a block out, or None."""
    _front, body, offset = md.split_frontmatter(text)
    source = label(f"{fmt}:{rel}")
    copies = Occurrences()
    clock: Clock = None
    for block in grouped(md.blocks(body, offset + 1)):
        if block.kind == md.HEADING:
            found = _CLOCK.match(block.text)
            clock = (int(found.group(1)), int(found.group(2))) if found and int(found.group(1)) < 24 else None
            continue
        place = f"{rel}:{block.line}"
        reason = unstorable(block.text, "items") or (skip(block) if skip else None)
        if reason:
            yield Skipped(reason, place)
            continue
        fields = {"text": block.text, "at": when(clock), "category": category, "tags": list(tags),
                  "source": source, "key": key_of(fmt, rel, block.text, copies.next(block.text))}
        yield Record(fields, place)


def grouped(blocks: list[Block]) -> Iterator[Block]:
    """The blocks, a code block or a table joined to the item, paragraph or quote just before it."""
    previous: Block | None = None
    for block in blocks:
        if block.kind in (md.CODE, md.TABLE) and previous is not None and previous.kind != md.HEADING:
            previous = Block(previous.kind, previous.line, f"{previous.text}\n\n{block.text}")
            continue
        if previous is not None:
            yield previous
        previous = block
    if previous is not None:
        yield previous
