"""Reading the wiki: its pages, one page, whether a page path is safe to write, and which pages
cite which facts.

The page format itself (frontmatter, citations, sections) is memvault.formats.pages; this module
is where it meets the files. The citation lookups are the ones `forget` (its notice), `doctor`
(its check), dream (its scrub and its plan), search (its default scope) and context rely on;
page frontmatter is parsed only when a page mentions a wanted id.

A page that cites a forgotten fact (in its body or its `sources`) is *withheld* until the scrub
rewrites it: not only its statements but its title, its slug and the MEMORY.md and index.md lines
written from it may repeat what the fact said. Search and context leave it out, no model is
shown it, and the live facts it drew from count as not consolidated meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from memvault.base.credentials import find_credentials
from memvault.formats import dreamlog
from memvault.formats.citations import mentions_any, page_citations
from memvault.formats.layout import CONFIG_FILE, WIKI_DIR
from memvault.formats.pages import (
    INBOX_ZONE,
    SLUG,
    ZONE,
    Page,
    PagePathError,
    cited_ids,
    clean_body,
    has_control,
    page_tags,
    split_frontmatter,
    zone_of,
)
from memvault.storage.paths import inside
from memvault.storage.store import Storage


def check_page_path(path: str, root: Path, zones: Sequence[str]) -> str:
    """Return the path if it is wiki/<zone>/<slug>.md inside the vault, else raise PagePathError."""
    shown = repr(path)[:80]
    if has_control(path) or "\\" in path or ":" in path:
        raise PagePathError(f"page path {shown} contains forbidden characters")
    if path.startswith("/"):
        raise PagePathError(f"page path {shown} is absolute")
    parts = path.split("/")
    if any(p in ("", ".", "..") or p.startswith(".") for p in parts):
        raise PagePathError(f"page path {shown} escapes wiki/ or names a hidden path")
    if len(parts) != 3 or parts[0] != WIKI_DIR or not parts[2].endswith(".md"):
        raise PagePathError(f"page path {shown} is not wiki/<zone>/<slug>.md")
    zone, slug = parts[1], parts[2][:-3]
    if zone == INBOX_ZONE:
        raise PagePathError(f"page path {shown}: {INBOX_ZONE} is written by the runner only")
    if not ZONE.match(zone) or (zones and zone not in zones):
        raise PagePathError(f"page path {shown}: unknown zone {zone!r} (zones: {', '.join(zones)})")
    if not SLUG.match(slug):
        raise PagePathError(f"page path {shown}: slug must be lowercase letters, digits and '-'")
    # a symlink anywhere on the way could point the write outside the vault
    probe = root
    for part in parts:
        probe = probe / part
        if probe.is_symlink():
            raise PagePathError(f"page path {shown} goes through a symlink")
    return path


def read_page(root: Path, path: str) -> Page | None:
    file = inside(root, path)  # UnsafePath if the page or its zone folder is a symlink
    if not file.is_file():
        return None
    meta, rest = split_frontmatter(file.read_text(encoding="utf-8"))
    sources = meta.get("sources") or []
    return Page(
        path=path,
        title=str(meta.get("title") or Path(path).stem),
        zone=str(meta.get("zone") or zone_of(path)),
        tags=page_tags(meta.get("tags")),
        created=str(meta.get("created") or ""),
        updated=str(meta.get("updated") or ""),
        sources=[str(s) for s in sources] if isinstance(sources, list) else [],
        body=clean_body(rest),
    )


def list_pages(root: Path) -> list[str]:
    """Vault-relative paths of all wiki pages, sorted; symlinks and hidden files are ignored."""
    wiki = root / WIKI_DIR
    if not wiki.is_dir() or wiki.is_symlink():
        return []
    found = []
    for file in wiki.glob("*/*.md"):
        if file.is_symlink() or file.parent.is_symlink() or file.name.startswith("."):
            continue
        if (file.parent / CONFIG_FILE).exists():
            continue  # another vault cloned into the wiki: its files are its own
        found.append(file.relative_to(root).as_posix())
    return sorted(found)


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
    wanted = set(storage.tombstone_log.tombstones()) if ids is None else {str(i).strip() for i in ids}
    if not wanted:
        return {}
    found: dict[str, list[str]] = {}
    for rel in list_pages(storage.root):
        try:
            text = (storage.root / rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if not mentions_any(text, wanted):
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
