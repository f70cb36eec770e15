"""The wiki page format: page paths, YAML frontmatter, fact citations, sections, and index.md.

Pure text in, text out: dream writes pages with it, and search, citations and doctor read them
with it (through memvault.storage.wiki), so they all agree on what a page says.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import yaml

from memvault.formats.layout import WIKI_DIR

INBOX_ZONE = "0_Inbox"
CONFLICTS_PAGE = f"{WIKI_DIR}/{INBOX_ZONE}/conflicts.md"
SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{0,79}$")
ZONE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$")
# A citation is a markdown footnote reference to a fact id: "Prefers tea [^01jd8x...]."
# The lookahead leaves out footnote definitions ("[^id]: 2026-11-01 preference · logs/...").
CITATION = re.compile(r"\[\^([0-9a-z]{6,40})\](?!:)")
# A footnote definition line; group 1 is what it defines.
FOOTNOTE_DEF = re.compile(r"^\[\^([^\]]*)\]:.*(?:\n|$)", re.MULTILINE)
SOURCES_MARK = "<!-- fact sources (written by memvault dream) -->"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def has_control(text: str, allow_newlines: bool = False) -> bool:
    if not allow_newlines and ("\n" in text or "\t" in text):
        return True
    return bool(_CONTROL.search(text))


class PagePathError(ValueError):
    """A page path that is not wiki/<zone>/<slug>.md inside the vault."""


def page_slug(title: str) -> str:
    """A slug for a page path from its title: ASCII lowercase words joined by "-" ("page" if none)."""
    import unicodedata

    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_title.lower()).strip("-")[:80].rstrip("-")
    return slug or "page"


def zone_of(path: str) -> str:
    """The zone of wiki/<zone>/<page>.md; "" for any other path."""
    parts = path.split("/")
    return parts[1] if len(parts) == 3 and parts[0] == WIKI_DIR else ""


def cited_ids(text: str) -> list[str]:
    """Fact ids cited in markdown text, in order of first appearance."""
    return list(dict.fromkeys(CITATION.findall(text)))


def clean_body(body: str) -> str:
    """Drop footnote definitions and the generated sources block: the runner writes those. A line
    a person wrote below the block (`echo "- …" >> page.md` puts it there) is the page's text:
    kept, at the end of the body, so the next dream neither drops it nor leaves it unread."""
    parts = (FOOTNOTE_DEF.sub("", part).strip("\n") for part in body.split(SOURCES_MARK))
    return "\n\n".join(part for part in parts if part.strip())


@dataclass
class Page:
    path: str
    title: str
    zone: str
    tags: list[str] = field(default_factory=list)
    created: str = ""
    updated: str = ""
    sources: list[str] = field(default_factory=list)
    body: str = ""

    def frontmatter(self) -> dict:
        return {
            "title": self.title,
            "zone": self.zone,
            "tags": list(self.tags),
            "created": self.created,
            "updated": self.updated,
            "sources": list(self.sources),
        }


def split_frontmatter(text: str) -> tuple[dict, str]:
    """YAML frontmatter (python-frontmatter, safe loader) and the rest of the file."""
    import frontmatter

    try:
        meta, body = frontmatter.parse(text, handler=frontmatter.YAMLHandler())
    except (yaml.YAMLError, ValueError):
        # A broken header is still a header: drop it rather than show or rewrite it as text.
        end = text.find("\n---", 4) if text.startswith("---\n") else -1
        meta, body = {}, (text[end + 4:].lstrip("\n") if end != -1 else text)
    return (meta if isinstance(meta, dict) else {}), body


def page_tags(value: object) -> list[str]:
    """Tags as a list of words, whether written as a YAML list or as "a, b" by a person."""
    if isinstance(value, str):
        return [t for t in re.split(r"[,\s]+", value) if t]
    if isinstance(value, list):
        return [str(t) for t in value if isinstance(t, (str, int))]
    return []


def render_page(page: Page, facts: Mapping[str, object]) -> str:
    """Frontmatter, body, then one footnote per cited fact so the page reads well anywhere."""
    import frontmatter

    header = frontmatter.YAMLHandler().export(page.frontmatter(), sort_keys=False, width=1000)
    lines = ["---", header, "---", "", page.body.strip("\n"), ""]
    ids = cited_ids(page.body)
    if ids:
        lines += [SOURCES_MARK, ""]
        for fid in ids:
            lines.append(f"[^{fid}]: {_describe(fid, facts.get(fid))}")
        lines.append("")
    return "\n".join(lines)


def _describe(fid: str, fact) -> str:
    if fact is None:
        return f"fact {fid}"
    return f"{fact.at.date().isoformat()} {fact.category} · {fact.path}"


def replace_section(body: str, heading: str, text: str) -> str:
    """Replace the section under `heading` (up to the next heading of the same or higher level)."""
    title = heading.lstrip("#").strip()
    lines = body.split("\n")
    text_lines = text.strip("\n").split("\n")
    if text_lines and re.match(rf"^#{{1,6}}\s+{re.escape(title)}\s*$", text_lines[0]):
        text_lines = text_lines[1:]  # the model repeated the heading; keep one
    for i, line in enumerate(lines):
        m = re.match(r"^(#{1,6})\s+(.*?)\s*$", line)
        if m and m.group(2) == title:
            level = len(m.group(1))
            end = len(lines)
            for j in range(i + 1, len(lines)):
                n = re.match(r"^(#{1,6})\s+", lines[j])
                if n and len(n.group(1)) <= level:
                    end = j
                    break
            new = [line, ""] + [t for t in text_lines] + [""]
            return "\n".join(lines[:i] + new + lines[end:]).strip("\n")
    return (body.rstrip("\n") + f"\n\n## {title}\n\n" + "\n".join(text_lines)).strip("\n")


def render_index(pages: Iterable[Page], zones: Sequence[str]) -> str:
    """index.md: every page grouped by zone (configured order first), then by title."""
    by_zone: dict[str, list[Page]] = {}
    for page in pages:
        by_zone.setdefault(zone_of(page.path), []).append(page)
    order = [z for z in zones if z in by_zone] + sorted(z for z in by_zone if z not in zones)
    out = ["# Index", "", "Table of contents of the wiki, regenerated by `memvault dream`.", ""]
    if not by_zone:
        out += ["(no pages yet)", ""]
    for zone in order:
        out += [f"## {zone}", ""]
        for page in sorted(by_zone[zone], key=lambda p: (p.title.lower(), p.path)):
            extra = f" — {', '.join(page.tags)}" if page.tags else ""
            out.append(f"- [{_md_text(page.title)}]({page.path}){extra}")
        out.append("")
    return "\n".join(out)


def _md_text(text: str) -> str:
    return text.replace("[", "\\[").replace("]", "\\]")
