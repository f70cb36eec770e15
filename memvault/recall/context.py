"""Context bundles: the part of the vault worth putting into a prompt, within a token budget.

Order of a bundle: MEMORY.md (trimmed so the rest gets room), then the wiki sections and facts
most relevant to the query (hybrid search), then the most recent facts. A fact is never shown
twice: not when an included page section already cites it, not when it is both relevant and
recent. The whole rendered bundle, headings included, is counted against the budget.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from memvault.base import tokens
from memvault.base.credentials import find_credentials, kept_from_prompts
from memvault.errors import InvalidInput
from memvault.formats.citations import without_lines_linking
from memvault.formats.layout import MEMORY_FILE
from memvault.formats.pages import cited_ids, clean_body
from memvault.index.query import MAX_LIMIT, MAX_QUERY_CHARS, SearchQuery
from memvault.index.search import search
from memvault.recall.succession import successors_of
from memvault.recall.timeline import RecentQuery
from memvault.recall.timeline import recent as recent_facts
from memvault.storage.paths import template_root
from memvault.storage.store import Storage
from memvault.storage.wiki import withheld_pages

DEFAULT_BUDGET = 2000
MAX_BUDGET = 1_000_000
_COMMENT = re.compile(r"<!--.*?-->\n?", re.DOTALL)


@dataclass
class ContextItem:
    """One block of a bundle: MEMORY.md, a wiki page section, or a fact."""

    kind: str  # "memory" | "page" | "fact"
    reason: str  # "memory" | "relevant" | "recent"
    id: str  # fact id, `<path>#<heading-slug>` for a section, "MEMORY.md"
    path: str
    text: str
    at: str | None = None
    heading: str | None = None
    category: str | None = None
    tags: list[str] = field(default_factory=list)
    source: str | None = None
    session: str | None = None
    score: float | None = None
    truncated: bool = False
    cites: list[str] = field(default_factory=list)
    tokens: int = 0
    superseded_by: str | None = None  # a fact: the newer fact that replaces it


    def render(self) -> str:
        if self.kind == "memory":
            return self.text + ("\n…" if self.truncated else "")
        if self.kind == "page":
            day = f" ({self.at[:10]})" if self.at else ""
            return f"### {self.id}{day}\n\n{self.text}"
        when = self.at[:16].replace("T", " ") if self.at else ""
        body = self.text.replace("\n", "\n  ")
        replaced = f" (superseded by `{self.superseded_by}`)" if self.superseded_by else ""
        return f"- {when} `{self.id}` [{self.category}]{replaced} {body}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "reason": self.reason, "id": self.id, "path": self.path, "at": self.at,
            "heading": self.heading, "category": self.category, "tags": list(self.tags),
            "source": self.source, "session": self.session,
            "score": None if self.score is None else round(self.score, 6),
            "cites": list(self.cites), "truncated": self.truncated, "tokens": self.tokens, "text": self.text,
            "superseded_by": self.superseded_by,
        }


@dataclass
class Bundle:
    query: str | None
    budget: int
    tokenizer: str
    searched: bool  # False when there was no query (or --relevant 0)
    items: list[ContextItem]
    omitted: int  # candidates left out for lack of budget
    markdown: str
    tokens: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query, "budget": self.budget, "tokens": self.tokens, "tokenizer": self.tokenizer,
            "searched": self.searched, "omitted": self.omitted,
            "items": [item.to_dict() for item in self.items], "markdown": self.markdown,
        }


def build_context(storage: Storage, query: str | None = None, *, budget: int = DEFAULT_BUDGET,
                  recent: int = 20, relevant: int = 20) -> Bundle:
    """Assemble a bundle of at most `budget` tokens (see the module docstring for the order)."""
    _check_sizes(budget, recent, relevant)
    query = " ".join(query.split()) if query else None
    searched = bool(query) and relevant > 0
    sections = [
        (f"## Relevant to: {query}" if query else "## Relevant", _relevant_items(storage, query, relevant)),
        ("## Recent facts", _recent_items(storage, recent)),
    ]
    fitter = _Fitter(budget)
    _fit_memory(storage, fitter, sections)
    omitted = _fit_sections(fitter, sections)
    markdown, included = fitter.finish()
    return Bundle(query=query, budget=budget, tokenizer=tokens.tokenizer_name(), searched=searched,
                  items=included, omitted=omitted + fitter.dropped, markdown=markdown,
                  tokens=tokens.count(markdown))


def _check_sizes(budget: int, recent: int, relevant: int) -> None:
    if isinstance(budget, bool) or not isinstance(budget, int) or not 1 <= budget <= MAX_BUDGET:
        raise InvalidInput(f"budget must be a whole number of tokens from 1 to {MAX_BUDGET}, got {budget!r}")
    for name, value in (("recent", recent), ("relevant", relevant)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidInput(f"{name} must be a whole number of at least 0, got {value!r}")
    if relevant > MAX_LIMIT:  # as many as a search returns
        raise InvalidInput(f"relevant must be a whole number from 0 to {MAX_LIMIT}, got {relevant!r}")


def _relevant_items(storage: Storage, query: str | None, relevant: int) -> list[ContextItem]:
    """The page sections, then the facts, that a search for `query` finds (none without a query)."""
    if not query or relevant <= 0:
        return []
    # A context's query may be a whole prompt: its first MAX_QUERY_CHARS characters are searched
    # (a search query longer than that is refused; a prompt is no mistake).
    hits = search(storage, SearchQuery(query[:MAX_QUERY_CHARS], limit=relevant))
    # a bundle exists to go into a prompt: a fact holding a credential (--allow-secret, or unmarked
    # by a hand edit) never does, nor a page section holding one
    page_hits = [h for h in hits if h.kind == "page"]
    closed = find_credentials(["\n".join([h.heading or "", *h.tags, h.text]) for h in page_hits])
    pages = [_page_item(h) for i, h in enumerate(page_hits) if i not in closed]
    facts = _in_thread_order(storage, [h for h in hits if h.kind == "fact"])
    held = kept_from_prompts(facts)
    return pages + [_fact_item(h, "relevant") for h in facts if h.id not in held]


def _recent_items(storage: Storage, recent: int) -> list[ContextItem]:
    """The `recent` newest facts, each marked with the fact that supersedes it, if any."""
    newest = recent_facts(storage, RecentQuery(recent)) if recent else []
    held = kept_from_prompts(newest)
    latest = [_fact_item(f, "recent") for f in newest if f.id not in held]
    replaced = successors_of(storage, [item.id for item in latest]) if latest else {}
    for item in latest:
        item.superseded_by = replaced.get(item.id)
    return latest


def _fit_memory(storage: Storage, fitter: _Fitter, sections: list[tuple[str, list[ContextItem]]]) -> None:
    """MEMORY.md first, trimmed to what the other items leave, and at least half the budget."""
    memory = _memory_item(storage)
    if memory is None:
        return
    wanted = sum(tokens.count(item.render()) + 2 for _, items in sections for item in items)
    room = fitter.budget - min(fitter.budget // 2, wanted) - fitter.cost("## MEMORY.md") - 1
    memory = _trim(memory, room)
    if memory is not None:
        fitter.add("## MEMORY.md", None)
        fitter.add(memory.render(), memory)


def _fit_sections(fitter: _Fitter, sections: list[tuple[str, list[ContextItem]]]) -> int:
    """Each section's items that fit, under its heading, none shown twice (a fact a section cites
    is shown); returns how many were left out."""
    shown: set[str] = set()
    omitted = 0
    for heading, items in sections:
        opened = False
        for item in items:
            if item.id in shown:
                continue
            block = item.render()
            # A section's first item also pays for the heading, and follows it after a blank line.
            extra = 0 if opened else fitter.cost(heading)
            if not fitter.fits(block, item if opened else None, extra):
                omitted += 1
                continue
            if not opened:
                fitter.add(heading, None)
                opened = True
            fitter.add(block, item)
            shown.add(item.id)
            shown.update(item.cites)
    return omitted


class _Fitter:
    """Blocks kept under the budget: blank lines between blocks, facts of a list on their own lines."""

    def __init__(self, budget: int):
        self.budget = budget
        self.blocks: list[tuple[str, str, ContextItem | None]] = []  # (separator before, text, item)
        self.used = 0
        self.dropped = 0

    def _separator(self, item: ContextItem | None) -> str:
        if not self.blocks:
            return ""
        previous = self.blocks[-1][2]
        listed = item is not None and item.kind == "fact" and previous is not None and previous.kind == "fact"
        return "\n" if listed else "\n\n"

    def cost(self, block: str, item: ContextItem | None = None) -> int:
        return tokens.count(self._separator(item) + block + "\n")

    def fits(self, block: str, item: ContextItem | None, extra: int = 0) -> bool:
        return self.used + extra + self.cost(block, item) <= self.budget

    def add(self, block: str, item: ContextItem | None) -> None:
        separator = self._separator(item)
        if item is not None:
            item.tokens = tokens.count(block)
        self.used += tokens.count(separator + block + "\n")
        self.blocks.append((separator, block, item))

    def render(self) -> str:
        return "".join(sep + text for sep, text, _ in self.blocks) + "\n" if self.blocks else ""

    def finish(self) -> tuple[str, list[ContextItem]]:
        # Counts of parts need not add up exactly to the count of the whole: check the whole,
        # and drop blocks from the end until it fits.
        text = self.render()
        while self.blocks and tokens.count(text) > self.budget:
            item = self.blocks.pop()[2]
            self.dropped += item is not None
            while self.blocks and self.blocks[-1][2] is None:
                self.blocks.pop()  # a heading left without items
            text = self.render()
        return text, [item for _, _, item in self.blocks if item is not None]


def memory_for_prompts(storage: Storage) -> str | None:
    """MEMORY.md as a prompt may read it (a bundle, the MCP resource), None when there is none:
    without the lines written from a page citing a forgotten fact, which may repeat it (withheld
    until the scrub), nor a line holding a credential (a hand edit's)."""
    try:
        text = storage.path(MEMORY_FILE).read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError):
        return None
    text = without_lines_linking(text, withheld_pages(storage))
    lines = text.split("\n")
    found = find_credentials(lines)
    return "\n".join(line for i, line in enumerate(lines) if i not in found) if found else text


def _memory_item(storage: Storage) -> ContextItem | None:
    text = memory_for_prompts(storage)
    if text is None or _placeholder(text):
        return None
    lines = _COMMENT.sub("", text).strip("\n").split("\n")
    if lines and re.match(r"^#\s", lines[0]):
        lines = lines[1:]  # the bundle gives the file its own heading
    text = "\n".join(lines).strip("\n")
    if not text.strip():
        return None
    return ContextItem(kind="memory", reason="memory", id=MEMORY_FILE, path=MEMORY_FILE, text=text)


def _placeholder(text: str) -> bool:
    """Is MEMORY.md still what `init` wrote, before the first dream ("Nothing consolidated yet")?
    It tells a prompt nothing."""
    try:
        written = (template_root() / MEMORY_FILE).read_text(encoding="utf-8")
    except OSError:
        return False
    return text.split() == written.split()


def _trim(memory: ContextItem, room: int) -> ContextItem | None:
    if tokens.count("\n\n" + memory.render() + "\n") <= room:
        return memory
    # Room for the "…" marker that says the file was cut.
    text = tokens.truncate(memory.text, room - tokens.count("\n\n" + "\n…\n")).rstrip()
    if not text:
        return None
    memory.text, memory.truncated = text, True
    return memory


def _in_thread_order(storage: Storage, facts: list[Any]) -> list[Any]:
    """Relevant facts of one thread (session) together, where the best of them ranks, in the
    order they were written: a question before its answer, as the conversation went."""
    counts = Counter(hit.session for hit in facts if hit.session)
    threaded = [hit for hit in facts if counts.get(hit.session, 0) > 1]
    if not threaded:
        return facts
    lines = _log_lines(storage, {hit.path for hit in threaded if hit.path})
    groups: dict[Any, list[Any]] = {}
    for hit in facts:
        groups.setdefault(hit.session if counts.get(hit.session, 0) > 1 else ("", hit.id), []).append(hit)
    # Thread order is the index's: time, then place in the daily log (memvault.index.documents).
    return [hit for group in groups.values()
            for hit in sorted(group, key=lambda h: (_moment(h.at), lines.get(h.id, 0)))]


def _log_lines(storage: Storage, paths: set[str]) -> dict[str, int]:
    """The line of each fact in these daily logs."""
    lines: dict[str, int] = {}
    for rel in paths:
        try:
            facts, _problems = storage.facts.read_log(storage.path(rel))
        except (OSError, ValueError):
            continue  # changed under us: time order alone
        lines.update((fact.id, fact.line) for fact in facts)
    return lines


def _moment(at: str | None) -> datetime:
    try:
        moment = datetime.fromisoformat(at or "")
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _page_item(hit: Any) -> ContextItem:
    text = _COMMENT.sub("", clean_body(hit.text)).strip("\n")
    cites = cited_ids(hit.text)
    return ContextItem(kind="page", reason="relevant", id=hit.id, path=hit.path or hit.id.split("#")[0],
                       text=text, at=hit.at, heading=hit.heading, tags=list(hit.tags or ()),
                       score=hit.score, cites=cites)


def _fact_item(fact: Any, reason: str) -> ContextItem:
    at = fact.at if isinstance(fact.at, str) or fact.at is None else fact.at.isoformat()
    return ContextItem(kind="fact", reason=reason, id=fact.id, path=fact.path, text=fact.text, at=at,
                       category=fact.category, tags=list(fact.tags or ()), source=fact.source,
                       session=getattr(fact, "session", None), score=getattr(fact, "score", None),
                       superseded_by=getattr(fact, "superseded_by", None))
