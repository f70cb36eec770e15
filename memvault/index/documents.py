"""What the index holds: one document per fact, one per section of a wiki page."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from memvault.formats.pages import CITATION, FOOTNOTE_DEF, page_tags, split_frontmatter

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^(```|~~~)")


@dataclass(frozen=True)
class Document:
    """A searchable unit. `key` is the fact id, or `<path>#<heading-slug>` for a page section."""

    key: str
    kind: str  # "fact" | "page"
    text: str
    file: str  # vault-relative file the document was read from
    at: str | None = None
    category: str | None = None
    tags: tuple[str, ...] = ()
    source: str | None = None
    heading: str | None = None
    importance: float | None = None
    title: str | None = None
    session: str | None = None
    # The fact before this one in its session's thread (same daily log), and that fact's text:
    # lexical matching reads a fact together with what came just before it.
    prev: str | None = None
    context: str | None = None
    secret: bool = False  # a fact holding a credential, stored on purpose: never put in a prompt
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def day(self) -> int | None:
        """The date as YYYYMMDD, the form date filters and the watermark compare in."""
        if not self.at:
            return None
        return int(self.at[:10].replace("-", ""))

    @property
    def search_text(self) -> str:
        """What lexical matching and the embedding see (citations stripped, page context added)."""
        body = _strip_citations(self.text)
        if self.kind == "page":
            context = " — ".join(p for p in (self.title, self.heading) if p)
            return f"{context}\n{body}" if context else body
        return body


def _strip_citations(text: str) -> str:
    """Citations of fact ids ("[^01hx...]") and footnote definition lines are provenance, not
    content: they stay in the shown text but are kept out of what is matched and embedded."""
    return CITATION.sub("", FOOTNOTE_DEF.sub("", text)).strip()


def fact_document(fact: Any, prev: Any = None) -> Document:
    """A fact (memvault.formats.facts.Fact) as an index document; `prev` is the fact before it in its thread."""
    return Document(
        key=fact.id,
        kind="fact",
        text=fact.text,
        file=fact.path,
        at=fact.at.isoformat(),
        category=fact.category,
        tags=tuple(fact.tags),
        source=fact.source,
        importance=fact.importance,
        session=fact.session,
        prev=prev.id if prev is not None else None,
        # a thread neighbour's words help a fact be found, but a credential's never travel
        context=_strip_citations(prev.text) if prev is not None and not prev.secret else None,
        secret=fact.secret,
    )


def fact_documents(facts: list[Any]) -> list[Document]:
    """The facts of one daily log as documents, each linked to the one before it in its session.

    A thread is the facts of one session in time order (log order for equal times). Only facts
    of the same log are linked, so a file's documents depend on that file alone and an
    incremental refresh stays exact; a session running past midnight starts a new link there.
    """
    last: dict[str, Any] = {}
    documents = []
    for fact in sorted(facts, key=lambda f: (f.at, f.line)):
        prev = last.get(fact.session) if fact.session else None
        documents.append(fact_document(fact, prev))
        if fact.session:
            last[fact.session] = fact
    return documents


def slugify(text: str) -> str:
    """GitHub-style heading anchor: lowercase words joined by dashes, punctuation dropped."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = re.sub(r"[^\w\s-]", "", text)
    return re.sub(r"[\s_]+", "-", text).strip("-") or "section"


def page_documents(text: str, path: str) -> list[Document]:
    """Split a wiki page into one document per heading section; frontmatter gives title, tags, date.

    The frontmatter is read by the page format's parser, so search and dream agree on a page's title, tags
    and dates (a header that is not valid YAML is ignored by both; the body is still indexed).
    """
    # Hand-edited pages may have Windows line ends; the header is only recognised with "\n".
    meta, body = split_frontmatter(text.replace("\r\n", "\n"))
    title = str(meta.get("title") or path.rsplit("/", 1)[-1].removesuffix(".md"))
    tags = tuple(page_tags(meta.get("tags")))
    at = _as_iso(meta.get("updated") or meta.get("created"))
    zone = meta.get("zone") or (path.split("/")[1] if path.count("/") >= 2 else None)

    sections: list[tuple[str | None, list[str]]] = [(None, [])]
    in_fence = False
    for line in body.splitlines():
        if _FENCE.match(line.lstrip()):
            in_fence = not in_fence
        match = None if in_fence else _HEADING.match(line)
        if match:
            sections.append((match.group(2).strip(), []))
        else:
            sections[-1][1].append(line)

    documents: list[Document] = []
    seen: dict[str, int] = {}
    for heading, lines in sections:
        content = "\n".join(lines).strip()
        if not content:
            continue
        label = heading or title
        slug = slugify(label)
        # Repeated headings get GitHub's -1, -2 suffixes so every section keeps a distinct id.
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        if count:
            slug = f"{slug}-{count}"
        documents.append(
            Document(
                key=f"{path}#{slug}",
                kind="page",
                text=content,
                file=path,
                at=at,
                tags=tags,
                heading=label,
                title=title,
                extra={"zone": zone},
            )
        )
    return documents


def _as_iso(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    text = str(value).strip()
    try:
        return datetime.fromisoformat(text).isoformat() if "T" in text else date.fromisoformat(text[:10]).isoformat()
    except ValueError:
        return None
