"""Checking the notes contract's items, fact by fact, and what the accepted ones write.

An item is accepted or refused on its own: a refused item leaves its fact unresolved (asked again
in a repair turn that quotes it and shows it fixed, then retried in a smaller batch, then counted),
while the accepted ones are applied. A statement is accepted only when memvault.dream.check passes
it; the runner then writes it (memvault.dream.compose) with its citation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from memvault.dream.check import PASS, Checker, Verdict, specifics
from memvault.dream.compose import Filing, category_heading, clean_statement, compose
from memvault.dream.notes import DISPOSITION, VERBS, shown_item
from memvault.dream.schema import PAGE_MAX_BYTES
from memvault.dream.validate import Proposal, add_conflicts, cited_on_pages
from memvault.dream.words import COMMON, fold, tokens
from memvault.formats.facts import Fact
from memvault.formats.pages import INBOX_ZONE, Page, PagePathError, page_slug, zone_of
from memvault.storage.wiki import check_page_path, read_page

STATEMENT_MAX = 400
SECTION_MAX = 60
REASON_MAX = 500
# How close two facts must be for one to repeat the other, or to contradict it (about the same
# thing): restatements of one fact scored 0.75 and up, facts about the same person 0.30-0.77
# (bench/dream_check.py); by words, the share of one's content words the other holds.
DUPLICATE_AT = {"embedding": 0.75, "words": 0.5}
CONFLICT_AT = {"embedding": 0.5, "words": 0.25}
# the prompt's placeholders, which a small model copies rather than fills in
_PLACEHOLDER = re.compile(r"<[^<>]{0,60}>|^(?:\.\.\.|…|its topic|the fact|why it has no lasting value"
                          r"|how they disagree)$", re.IGNORECASE)


@dataclass
class BatchFacts:
    """What the checks of one batch know."""

    root: Path
    zones: Sequence[str]
    facts: dict[str, Fact]         # the batch's facts by id (those sent to the model)
    known: dict[str, Fact]         # every live fact by id: what `of`, `with`, `supersedes` may name
    shown: set[str]                # fact ids the request showed (the batch and cited on pages shown)
    closed: set[str]               # pages no answer may write (holding a credential, citing a forgotten fact)
    day: str                       # today, for created/updated
    label: str
    checker: Checker


@dataclass
class Refusal:
    item: dict | None    # as the model gave it (None: no item for the fact)
    problem: str
    fixed: dict


@dataclass
class Review:
    """The items of one conversation: accepted per fact, refused with what is wrong."""

    batch: BatchFacts
    accepted: dict[str, dict] = field(default_factory=dict)
    refused: dict[str, Refusal] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def review(self, items: dict[str, dict], asked: Sequence[str]) -> None:
        """Check the answer's item for each fact asked about; earlier acceptances stand."""
        self._learn_people(items)
        for fid in asked:
            item = items.get(fid)
            problem = self._problem(fid, item) if item is not None else "no item was given for this fact"
            if problem is not None:
                self.refused[fid] = Refusal(item, problem, self._fixed(fid, item, problem))
            elif item is not None:  # (always, when there is no problem)
                self.accepted[fid] = self._tidy(fid, item)
                self.refused.pop(fid, None)
        self._full_pages()

    def refuse_all(self, asked: Sequence[str], problem: str) -> None:
        """An answer with nothing to read (not JSON, no list): every fact asked about is unresolved."""
        for fid in asked:
            self.refused[fid] = Refusal(None, problem, self._fixed(fid, None, problem))

    @property
    def unresolved(self) -> list[str]:
        return [fid for fid in self.batch.facts if fid not in self.accepted]

    # -- one item ------------------------------------------------------------------------------
    def _problem(self, fid: str, item: dict) -> str | None:
        verb = item.get("do")
        if verb not in VERBS:
            return f'"do" must be one of {", ".join(VERBS)}'
        copied = [k for k in ("statement", "section", "reason") if _copied(item.get(k), self.batch.facts[fid].text)]
        if copied:
            return f'"{copied[0]}" is a placeholder of the instructions: fill it in from the fact'
        check = {"file": self._file_problem, "duplicate": self._duplicate_problem,
                 "noop": self._noop_problem, "conflict": self._conflict_problem}[verb]
        return check(fid, item)

    def _file_problem(self, fid: str, item: dict) -> str | None:
        batch = self.batch
        page, statement = item.get("page"), item.get("statement")
        if not isinstance(page, str) or not page.strip():
            return '"page" is missing: give the path of the page for this fact'
        try:
            check_page_path(page, batch.root, batch.zones)
        except PagePathError as e:
            return str(e)
        if page in batch.closed:
            return f"page {page} is not open to this batch: file the fact on another page"
        if not isinstance(statement, str) or not clean_statement(statement):
            return '"statement" is missing: give the fact as one short sentence'
        statement = clean_statement(statement)
        if len(statement) > STATEMENT_MAX:
            return f"the statement is longer than {STATEMENT_MAX} characters: say it in one short sentence"
        older = item.get("supersedes")
        if older is not None and (older == fid or older not in batch.known or older not in batch.shown):
            return f"\"supersedes\" names {self._told(older)!r}, which is no older fact shown to you"
        fact = batch.facts[fid]
        verdict = batch.checker.statement(statement, [fact], page)
        if verdict.ok:
            verdict = self._not_swapped(fid, statement)
        return None if verdict.ok else self._said(fid, verdict)

    def _not_swapped(self, fid: str, statement: str) -> Verdict:
        """A statement that says what another fact of the batch says, not its own."""
        facts = self.batch.facts
        return self.batch.checker.swapped(statement, [facts[fid]], [f for i, f in facts.items() if i != fid])

    def _duplicate_problem(self, fid: str, item: dict) -> str | None:
        other = item.get("of")
        if other == fid:
            return "a fact is no duplicate of itself: name the other fact that says the same, or file it"
        if not isinstance(other, str) or other not in self.batch.known or other not in self.batch.shown:
            return f"\"of\" names {self._told(other)!r}, which is no fact shown to you"
        return self._related(fid, other, DUPLICATE_AT, "does not say what fact {} says: file it on a page")

    def _noop_problem(self, fid: str, item: dict) -> str | None:
        if not _says_something(item.get("reason")):
            return '"reason" is missing: say why the fact has no lasting value, or file it on a page'
        return None

    def _related(self, fid: str, other: str, at: dict, problem: str) -> str | None:
        """None when the two facts are close enough (DUPLICATE_AT, CONFLICT_AT), else the problem."""
        checker = self.batch.checker
        meaning = checker.meaning
        score = meaning.score(self.batch.known[fid].text, [self.batch.known[other].text], checker.people.names)
        return None if score >= at[meaning.method] else problem.format(self._told(other))

    def _conflict_problem(self, fid: str, item: dict) -> str | None:
        others = item.get("with")
        if not isinstance(others, list) or not [o for o in others if o != fid]:
            return '"with" must list the other fact(s) this one contradicts'
        bad = [o for o in others if not isinstance(o, str) or o not in self.batch.known or o not in self.batch.shown]
        if bad:
            return f"\"with\" names {self._told(bad[0])!r}, which is no fact shown to you"
        if not _says_something(item.get("reason")):
            return '"reason" is missing: say how the facts disagree'
        for other in others:
            if other != fid:
                far = self._related(fid, other, CONFLICT_AT, "is not about what fact {} is about: file it on a page")
                if far:
                    return far
        return None

    def _said(self, fid: str, verdict: Verdict) -> str:
        """A refused statement's reason, with the fact's own words for the model to compare."""
        text = " ".join(self.batch.facts[fid].text.split())
        return f"{verdict.reason}. The fact says: {json.dumps(text[:300], ensure_ascii=False)}"

    def _told(self, fid) -> str:
        handles = self.batch.checker.handles
        return handles.short.get(fid, fid) if handles and isinstance(fid, str) else str(fid)

    # -- what is accepted ---------------------------------------------------------------------
    def _tidy(self, fid: str, item: dict) -> dict:
        """An accepted item as it will be applied: statement on one line, a sound heading, a reason cut."""
        item = dict(item)
        if item["do"] == "file":
            item["statement"] = clean_statement(item["statement"])
            item["section"] = self._heading(fid, item)
        if isinstance(item.get("reason"), str):
            item["reason"] = " ".join(item["reason"].split())[:REASON_MAX]
        return item

    def _heading(self, fid: str, item: dict) -> str:
        """The model's heading when it holds nothing its fact does not (a topic word may open it);
        else one made without the model, from the fact's category."""
        fact = self.batch.facts[fid]
        fallback = category_heading(fact.category)
        given = item.get("section")
        if not isinstance(given, str):
            return fallback
        heading = " ".join(given.replace("#", " ").split())[:SECTION_MAX].strip(" :-")
        if not heading:
            return fallback
        words = tokens(heading)
        if len(words) > 1 and all(t.capital for t in words if len(t.text) >= 4):
            # Title Case: keep the capitals the fact has, so a name still has to be in it
            capital = {fold(t.text) for t in tokens(fact.text) if t.capital}
            heading = _sentence_case(heading, capital)
        verdict = specifics(heading[:1].lower() + heading[1:], [fact]) if heading else PASS
        first = fold(words[0].text) if words else ""
        if verdict.ok and words and words[0].text.isupper() and len(words[0].text) > 1 and first not in COMMON:
            verdict = specifics(heading, [fact])  # an acronym opening the heading is a name too
        if verdict.ok:
            verdict = self.batch.checker.people.check(item["page"], heading, what="the heading")
        if not verdict.ok:
            self.notes.append(f"fact {fid}: section {heading!r} replaced by {fallback!r} ({verdict.reason})")
            return fallback
        return heading

    def _full_pages(self) -> None:
        """Refuse what would take a page past its size limit."""
        pages = self.pages()
        for path, page in pages.items():
            if len(page.body.encode("utf-8")) <= PAGE_MAX_BYTES:
                continue
            for fid, item in list(self.accepted.items()):
                if item["do"] == "file" and item["page"] == path:
                    del self.accepted[fid]
                    problem = f"page {path} would exceed {PAGE_MAX_BYTES} bytes: file the fact on another page"
                    self.refused[fid] = Refusal(item, problem, self._fixed(fid, item, problem))

    def filings(self) -> list[Filing]:
        return [Filing(fid, item["page"], item["section"], item["statement"], item.get("supersedes"),
                       day=self.batch.facts[fid].at.date().isoformat())
                for fid, item in self.accepted.items() if item["do"] == "file"]

    def pages(self) -> dict[str, Page]:
        filings = self.filings()
        existing = {f.page: read_page(self.batch.root, f.page) for f in filings}
        return compose(existing, filings, day=self.batch.day, facts=self.batch.facts)

    def proposal(self) -> Proposal:
        """What the accepted items write; the refused ones are listed as unresolved."""
        prop = Proposal(notes=list(self.notes))
        pages = self.pages()
        for path, page in pages.items():
            prop.pages[path] = page
            (prop.updated if read_page(self.batch.root, path) else prop.created).append(path)
        duplicates = {}
        for fid, item in self.accepted.items():
            prop.dispositions[fid] = DISPOSITION[item["do"]]
            if item["do"] == "duplicate":
                duplicates[fid] = item["of"]
            elif item["do"] == "noop":
                prop.kept.append(fid)
            elif item["do"] == "conflict":
                prop.conflicts.append({"id": fid, "with": [o for o in item["with"] if o != fid],
                                       "note": item.get("reason") or ""})
        on_pages = cited_on_pages(self.batch.root, set(duplicates.values()), prop.pages)
        for fid, original in duplicates.items():
            (prop.settled if original in on_pages else prop.kept).append(fid)
        if prop.conflicts:
            add_conflicts(prop, self.batch.root, self.batch.day, self.batch.label, self.batch.known,
                          self.batch.checker)
        prop.unresolved = {fid: self.refused[fid].problem if fid in self.refused else "no item was given"
                           for fid in self.unresolved}
        return prop

    # -- the repair turn ------------------------------------------------------------------------
    def _learn_people(self, items: dict[str, dict]) -> None:
        """People pages this answer files to become known people (accepted items' pages already are)."""
        people = self.batch.checker.people
        for item in [*items.values(), *self.accepted.values()]:
            page = item.get("page")
            if item.get("do") == "file" and isinstance(page, str) and _is_page_path(page) \
                    and zone_of(page) == "people":
                people.add(page)  # (the existing people pages are known from the start, with their titles)

    def _fixed(self, fid: str, item: dict | None, problem: str) -> dict:
        """An item for this fact that the checks would accept: the model's, mended."""
        fact = self.batch.facts[fid]
        text = " ".join(fact.text.split())
        if len(text) > STATEMENT_MAX:
            text = text[:STATEMENT_MAX - 1].rsplit(" ", 1)[0] + "…"
        page = item.get("page") if item else None
        people = self.batch.checker.people
        if not isinstance(page, str) or not _is_page_path(page) or page in self.batch.closed or \
                "would exceed" in problem or not people.check(page, fact.text, fact.tags).ok:
            page = people.page_naming(fact.text, fact.tags) or self._topic_page(fact, item)
        section = item.get("section") if item and isinstance(item.get("section"), str) else None
        return {"id": fid, "do": "file", "page": page,
                "section": " ".join((section or category_heading(fact.category)).split())[:SECTION_MAX],
                "statement": text}

    def _topic_page(self, fact, item: dict | None) -> str:
        zone = "topics" if "topics" in self.batch.zones else next(
            (z for z in self.batch.zones if z != INBOX_ZONE), "topics")
        words = [t.text for t in tokens(fact.text) if fold(t.text) not in COMMON][:3]
        return f"wiki/{zone}/{page_slug(' '.join(words) or 'notes')}.md"

    def shown(self, fid: str) -> tuple[str, str, str]:
        """(the item as given, the problem, the fixed item) for the repair turn, ids as handles."""
        refusal = self.refused[fid]
        handles = self.batch.checker.handles
        given = shown_item(refusal.item, handles) if refusal.item is not None else \
            f'(no item for {handles.short.get(fid, fid) if handles else fid})'
        return given, refusal.problem, shown_item(refusal.fixed, handles)


def _copied(value, fact_text: str) -> bool:
    """Is this a placeholder of the instructions ("<its topic>", "...") rather than words of the
    fact? A fact that itself holds "<div>" may be restated with it."""
    if not isinstance(value, str):
        return False
    found = _PLACEHOLDER.search(value.strip())
    return found is not None and found.group(0).casefold() not in fact_text.casefold()


def _says_something(text) -> bool:
    """A reason with at least one word in it (not "", "...", "-")."""
    return isinstance(text, str) and re.search(r"[^\W\d_]{2,}", text) is not None


def _is_page_path(path: str) -> bool:
    parts = path.split("/")
    return len(parts) == 3 and parts[0] == "wiki" and parts[2].endswith(".md")


def _sentence_case(heading: str, keep: set[str]) -> str:
    words = heading.split(" ")
    out = [words[0]]
    for word in words[1:]:
        out.append(word if fold(word) in keep or word.isupper() else word.lower())
    return " ".join(out)
