"""What a page's text cites, and a text without what forgotten facts said.

The text side of citations: which fact ids a page file draws from, the MEMORY.md or index.md
lines linking a page, and the statements citing a forgotten fact. Which pages of a vault cite
which facts (reading the wiki) is memvault.storage.wiki.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from memvault.formats.pages import CITATION, FOOTNOTE_DEF, cited_ids, clean_body, split_frontmatter

_TOKEN = re.compile(r"[0-9a-z]{6,40}")
_LIST_ITEM = re.compile(r"^([ \t]*)(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")


def mentions_any(text: str, ids: set[str]) -> bool:
    """Whether `text` holds any of `ids` as a word: a cheap look before parsing citations."""
    return not ids.isdisjoint(_TOKEN.findall(text))


def without_lines_linking(text: str, paths: Iterable[str]) -> str:
    """MEMORY.md or index.md without the lines that link to any of `paths` (markdown `](path)`)."""
    links = tuple(f"]({path})" for path in paths)
    if not links:
        return text
    return "".join(line for line in text.splitlines(keepends=True) if not any(link in line for link in links))


def page_citations(text: str) -> list[str]:
    """Every fact id a page file draws from: body citations first, then frontmatter `sources`."""
    meta, rest = split_frontmatter(text)
    sources = meta.get("sources") or []
    listed = [str(s) for s in sources] if isinstance(sources, list) else []
    return list(dict.fromkeys(cited_ids(clean_body(rest)) + listed))


def strip_forgotten_statements(text: str, forgotten_ids: Iterable[str]) -> str:
    """The text without the lines and list items whose citations include a forgotten id.

    A dropped list item takes its continuation lines and nested items with it; footnote
    definitions of forgotten ids go too. Everything else is returned unchanged, so text citing
    no forgotten id comes back identical.
    """
    forgotten = set(forgotten_ids)
    if not forgotten or not mentions_any(text, forgotten):
        return text
    lines = text.split("\n")
    out: list[str] = []
    dropped = False
    i = 0
    while i < len(lines):
        line = lines[i]
        item = _LIST_ITEM.match(line)
        end = i + 1
        if item:
            # the item's own continuation lines (indented, not a new item) belong to its statement
            indent = _width(item.group(1))
            while end < len(lines) and lines[end].strip() and _width(lines[end]) > indent \
                    and not _LIST_ITEM.match(lines[end]):
                end += 1
        block = lines[i:end]
        definition = FOOTNOTE_DEF.match(line)
        if forgotten.isdisjoint(CITATION.findall("\n".join(block))) and not (
                definition and definition.group(1) in forgotten):
            out.extend(block)
            i = end
            continue
        dropped = True
        if item:  # nested items under a dropped item lose their context: drop them too
            while end < len(lines) and lines[end].strip() and _width(lines[end]) > indent:
                end += 1
        i = end
    if not dropped:
        return text
    result = re.sub(r"\n{3,}", "\n\n", "\n".join(out))
    return result.strip("\n") + ("\n" if text.endswith("\n") else "")


def _width(prefix: str) -> int:
    return len(prefix.expandtabs(4)) - len(prefix.expandtabs(4).lstrip())
