"""Reading the wiki: its pages, one page, and whether a page path is safe to write.

The page format itself (frontmatter, citations, sections) is memvault.formats.pages; this module
is where it meets the files.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from memvault.formats.layout import WIKI_DIR
from memvault.formats.pages import (
    INBOX_ZONE,
    SLUG,
    ZONE,
    Page,
    PagePathError,
    clean_body,
    has_control,
    page_tags,
    split_frontmatter,
    zone_of,
)
from memvault.storage.paths import inside


def check_page_path(path: str, root: Path, zones: Sequence[str], *, allow_inbox: bool = False) -> str:
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
    if zone == INBOX_ZONE and not allow_inbox:
        raise PagePathError(f"page path {shown}: {INBOX_ZONE} is written by the runner only")
    if zone != INBOX_ZONE and (not ZONE.match(zone) or (zones and zone not in zones)):
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
        found.append(file.relative_to(root).as_posix())
    return sorted(found)
