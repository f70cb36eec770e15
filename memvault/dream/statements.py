"""The statements of a page body: its paragraphs, list items and table rows.

A statement is what the check judges and what must cite a fact; headings, rules, code fences,
HTML comments, table headers and bold labels are not statements.
"""

from __future__ import annotations

import re

_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+")
_RULE = re.compile(r"^(?:[-*_]\s*){3,}$|^\|?[\s:|-]+\|?$")
_LABEL = re.compile(r"^[*_]{1,3}[^*_]+[*_]{1,3}:?$")


def statement_blocks(body: str) -> list[tuple[int, int, str]]:
    """(first line, end line, text) of each paragraph, list item and table row of a page body;
    headings, rules, fences, HTML comments and bold labels are not statements."""
    blocks: list[tuple[int, int, str]] = []
    start = 0
    current: list[str] = []
    fence = False
    lines = body.split("\n")

    def flush(end: int) -> None:
        if current:
            blocks.append((start, end, " ".join(current)))
            current.clear()

    for n, line in enumerate(lines):
        text = line.strip()
        if text.startswith(("```", "~~~")):
            fence = not fence
            flush(n)
            continue
        header_row = text.startswith("|") and n + 1 < len(lines) and _RULE.match(lines[n + 1].strip() or "x")
        if fence or not text or text.startswith(("#", "<!--")) or _RULE.match(text) or _LABEL.match(text) \
                or header_row:
            flush(n)
            continue
        if _LIST_ITEM.match(line) or text.startswith("|"):
            flush(n)
        if not current:
            start = n
        current.append(text)
    flush(len(lines))
    return blocks


def statements(body: str) -> list[str]:
    """The paragraphs and list items of a page body (headings, rules, fences and labels excluded)."""
    return [text for _start, _end, text in statement_blocks(body)]

