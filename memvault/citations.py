"""Which wiki pages cite which facts, and what is withheld until dream rewrites a page.

One place for the lookups that `forget` (its notice), `doctor` (its check), dream (its scrub and
its plan), search (its default scope) and context rely on. Page frontmatter is parsed only when
a page mentions a wanted id.

A page that cites a forgotten fact (in its body or its `sources`) is *withheld* until the scrub
rewrites it: not only its statements but its title, its slug and the MEMORY.md and index.md lines
written from it may repeat what the fact said. Search and context leave it out, no model is
shown it, and the live facts it drew from count as not consolidated meanwhile.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from memvault.base.credentials import find_credentials
from memvault.formats import dreamlog
from memvault.formats.pages import CITATION, FOOTNOTE_DEF, cited_ids, clean_body, split_frontmatter
from memvault.storage.store import Storage
from memvault.storage.wiki import list_pages, read_page

_TOKEN = re.compile(r"[0-9a-z]{6,40}")
_LIST_ITEM = re.compile(r"^([ \t]*)(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")


def accounted_ids(storage: Storage, entries: list[dreamlog.Entry], *,
                  skipping: Iterable[str] = ()) -> set[str]:
    """Fact ids some page draws from, or that log.md settled (duplicate, noop, skipped): dream's
    rule for a consolidated fact, and search's for the default scope (which `skipping` the
    withheld pages, so their live facts stay findable as facts)."""
    found = dreamlog.settled_ids(entries)
    skipped = set(skipping)
    for path in list_pages(storage.root):
        if path in skipped:
            continue
        page = read_page(storage.root, path)
        if page:
            found.update(page.sources)
            found.update(cited_ids(page.body))
    return found


def pages_citing(storage: Storage, ids: Iterable[str] | None = None) -> dict[str, list[str]]:
    """Page path -> the ids among `ids` it cites (body citations or frontmatter `sources`).

    `ids` defaults to every forgotten fact. Pages that mention none of the ids cost one read and
    one regex scan; only the others have their frontmatter parsed.
    """
    wanted = set(storage.tombstones()) if ids is None else {str(i).strip() for i in ids}
    if not wanted:
        return {}
    found: dict[str, list[str]] = {}
    for rel in list_pages(storage.root):
        try:
            text = (storage.root / rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if wanted.isdisjoint(_TOKEN.findall(text)):
            continue
        hits = [fid for fid in page_citations(text) if fid in wanted]
        if hits:
            found[rel] = hits
    return found


def pages_holding_credentials(storage: Storage, memo: dict | None = None) -> set[str]:
    """Pages whose file (title, tags or body) holds a credential. Dream writes pages only from
    facts, and never sends it one holding a credential, so a hand edit or another tool put it
    there: no model is shown such a page, nor the MEMORY.md and index.md lines linking it, and
    dream leaves it as it is. `memo` keeps each page's answer while its file is unchanged (a
    dream asks before every batch)."""
    memo = {} if memo is None else memo
    present: dict[str, tuple[int, int]] = {}
    lines: list[tuple[str, str]] = []  # (page, line) of the pages not known in this state
    for rel in list_pages(storage.root):
        try:
            st = (storage.root / rel).stat()
        except OSError:
            continue
        present[rel] = key = (st.st_mtime_ns, st.st_size)
        if rel in memo and memo[rel][0] == key:
            continue
        page = read_page(storage.root, rel)
        if page is not None:  # what a prompt would show of it, not the runner's sources block
            lines.extend((rel, line) for line in [page.title, *page.tags, *page.body.splitlines()])
    # line by line: the detector then reads only the lines that could hold one (about 1.4% of
    # texts), not every line of a page that has one such line somewhere
    holding = {lines[i][0] for i in find_credentials([line for _rel, line in lines])}
    for rel, key in present.items():
        if rel not in memo or memo[rel][0] != key:
            memo[rel] = (key, rel in holding)
    return {rel for rel in present if memo[rel][1]}


def withheld_pages(storage: Storage) -> set[str]:
    """Pages citing a forgotten fact: left out of search, context and prompts until the scrub."""
    return set(pages_citing(storage))


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
    if not forgotten or forgotten.isdisjoint(_TOKEN.findall(text)):
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
