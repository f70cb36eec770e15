"""The runner writes the pages: each accepted statement under its section, with its citation.

The model only proposes (a page, a section heading, a statement per fact); this module turns the
accepted proposals into page bodies. A page keeps every statement it had; a new statement goes to
the end of its section (a new `## heading` when the page has none of that name); a statement a page
already says word for word gets the new citation on that line; a statement that supersedes an
older fact's goes right after the older line, which is marked with the day the newer fact took over
(`(until 2026-11-05 [^new])`: the date, like every word on a page, follows from a cited fact).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from memvault.formats.pages import CITATION, Page, zone_of

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_UNTIL = re.compile(r"\s*\(until \d{4}-\d{2}-\d{2}(?: \[\^[^\]]+\])?\)")
_ANY_CITATION = re.compile(r"\s*\[\^[^\]]*\]")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+")
CATEGORY_HEADINGS = {"fact": "Notes", "preference": "Preferences", "correction": "Corrections",
                     "entity": "Entities", "decision": "Decisions", "relationship": "Relationships",
                     "principle": "Principles", "commitment": "Commitments", "moment": "Moments",
                     "skill": "Skills", "event": "Events"}


@dataclass
class Filing:
    """One accepted statement: which fact, on which page, under which heading."""

    fact_id: str
    page: str
    section: str
    statement: str
    supersedes: str | None = None
    day: str = ""            # the fact's day: the date an older line is marked "until"


def statement_key(text: str) -> str:
    """What makes two statements the same: their words, without citations, marks or case."""
    text = _UNTIL.sub("", CITATION.sub("", _ANY_CITATION.sub("", text)))
    text = _LIST_ITEM.sub("", text)
    return " ".join(text.casefold().split()).rstrip(".!;: ")


def clean_statement(text: str) -> str:
    """One line, no footnote the model may have added (the runner cites), no list marker."""
    text = _ANY_CITATION.sub("", " ".join(text.split()))
    return _LIST_ITEM.sub("", text).strip()


def heading_key(text: str) -> str:
    return " ".join(text.lstrip("#").casefold().split())


def category_heading(category: str) -> str:
    return CATEGORY_HEADINGS.get(category, category.replace("-", " ").replace("_", " ").capitalize() or "Notes")


def title_from_slug(path: str) -> str:
    """A new page's title: its slug's words; a person's name capitalised word by word."""
    words = path.rsplit("/", 1)[-1].removesuffix(".md").split("-")
    if zone_of(path) == "people":
        return " ".join(w.capitalize() for w in words if w)
    text = " ".join(w for w in words if w)
    return text[:1].upper() + text[1:]


@dataclass
class Draft:
    """A page body as lines, growing by filings."""

    lines: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, body: str) -> Draft:
        return cls(body.strip("\n").split("\n") if body.strip() else [])

    @property
    def body(self) -> str:
        text = "\n".join(self.lines)
        return re.sub(r"\n{3,}", "\n\n", text).strip("\n")

    def line_citing(self, fact_id: str) -> int | None:
        for n, line in enumerate(self.lines):
            if fact_id in CITATION.findall(line):
                return n
        return None

    def same_statement(self, statement: str) -> int | None:
        key = statement_key(statement)
        for n, line in enumerate(self.lines):
            if _LIST_ITEM.match(line) and statement_key(line) == key:
                return n
        return None

    def cite(self, n: int, fact_id: str) -> None:
        """One more citation on line n, before any "(until ...)" mark."""
        line = self.lines[n]
        mark = _UNTIL.search(line)
        at = mark.start() if mark else len(line.rstrip())
        self.lines[n] = f"{line[:at]} [^{fact_id}]{line[at:]}"

    def mark_until(self, n: int, day: str, fact_id: str) -> None:
        if not _UNTIL.search(self.lines[n]):
            self.lines[n] = f"{self.lines[n].rstrip()} (until {day} [^{fact_id}])"

    def section_end(self, heading: str) -> int | None:
        """Where a new line of section `heading` goes (after its last line), None without it."""
        key = heading_key(heading)
        for n, line in enumerate(self.lines):
            m = _HEADING.match(line)
            if not m or heading_key(m.group(2)) != key:
                continue
            level, end = len(m.group(1)), len(self.lines)
            for j in range(n + 1, len(self.lines)):
                other = _HEADING.match(self.lines[j])
                if other and len(other.group(1)) <= level:
                    end = j
                    break
            while end > n + 1 and not self.lines[end - 1].strip():
                end -= 1
            return end
        return None

    def insert(self, n: int, line: str) -> None:
        before = self.lines[n - 1] if n > 0 else ""
        if _HEADING.match(before):
            self.lines[n:n] = ["", line]
        else:
            self.lines.insert(n, line)

    def file(self, filing: Filing) -> None:
        line = f"- {filing.statement} [^{filing.fact_id}]"
        older = self.line_citing(filing.supersedes) if filing.supersedes else None
        if older is not None:
            self.mark_until(older, filing.day, filing.fact_id)
            self.insert(older + 1, line)
            return
        same = self.same_statement(filing.statement)
        if same is not None:
            self.cite(same, filing.fact_id)
            return
        end = self.section_end(filing.section)
        if end is None:
            self.lines += ([""] if self.lines else []) + [f"## {filing.section}", "", line]
        else:
            self.insert(end, line)


def compose(existing: Mapping[str, Page | None], filings: Iterable[Filing], *, day: str,
            facts: Mapping[str, object]) -> dict[str, Page]:
    """The pages the filings change (new pages included), in their new state.

    `existing`: the current state of every page a filing names (None: a new page); `facts`: fact id
    -> fact, for a new page's tags. Filings of one page go in the order given; a filing that
    supersedes a fact filed in the same batch follows it.
    """
    filings = _superseded_first(list(filings))
    drafts: dict[str, Draft] = {}
    pages: dict[str, Page] = {}
    for filing in filings:
        page = pages.get(filing.page)
        if page is None:
            before = existing.get(filing.page)
            page = _fresh(filing.page, before, day)
            pages[filing.page] = page
            drafts[filing.page] = Draft.of(page.body)
        drafts[filing.page].file(filing)
        fact = facts.get(filing.fact_id)
        if filing.page not in existing or existing.get(filing.page) is None:
            page.tags = _tags(page.tags, getattr(fact, "tags", ()))
    for path, page in pages.items():
        page.body = drafts[path].body
        page.sources = list(dict.fromkeys([*page.sources, *CITATION.findall(page.body)]))
    return pages


def _fresh(path: str, before: Page | None, day: str) -> Page:
    if before is None:
        return Page(path=path, title=title_from_slug(path), zone=zone_of(path), tags=[], created=day,
                    updated=day, body="")
    return Page(path=path, title=before.title, zone=before.zone or zone_of(path), tags=list(before.tags),
                created=before.created or day, updated=day, sources=list(before.sources), body=before.body)


_TAG = re.compile(r"^[\w][\w./ -]{0,39}$")


def _tags(tags: list[str], more: Iterable[str]) -> list[str]:
    merged = list(dict.fromkeys([*tags, *(t for t in more if isinstance(t, str) and _TAG.match(t))]))
    return merged[:20]


def _superseded_first(filings: list[Filing]) -> list[Filing]:
    """Filings in order, except that one superseding a fact of the same batch comes after it."""
    by_fact = {f.fact_id: f for f in filings}
    ordered: list[Filing] = []
    placed: set[str] = set()

    def place(filing: Filing, seen: frozenset) -> None:
        if filing.fact_id in placed:
            return
        older = by_fact.get(filing.supersedes or "")
        if older is not None and older.fact_id not in seen:
            place(older, seen | {filing.fact_id})
        placed.add(filing.fact_id)
        ordered.append(filing)

    for filing in filings:
        place(filing, frozenset({filing.fact_id}))
    return ordered
