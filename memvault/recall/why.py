"""`memvault why TARGET`: where a memory came from, back to the facts and the commits.

TARGET is a line of MEMORY.md (its number, or words it holds), a page section
(`wiki/<zone>/<page>.md#<heading-slug>`, the id search gives it; a page alone means every
section), or a fact id. The answer walks down: the MEMORY.md line, the page it links, the page's
sections and the facts each cites; for every fact, its text, time, source and session, the commit
that added it, the dream that consolidated it (the commit that cited it, with its log.md entry, or
log.md's record of a duplicate), and what superseded or forgot it. A fact id's answer starts
from the fact, its chain of supersedes links, and the sections citing it now.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memvault.errors import InvalidInput, NotFound
from memvault.formats.dreamlog import kept_ids, settled_ids
from memvault.formats.facts import Fact
from memvault.formats.layout import MEMORY_FILE, WIKI_DIR
from memvault.formats.pages import cited_ids, clean_body
from memvault.index.documents import page_documents
from memvault.recall.succession import links
from memvault.storage.factlog import FactLog
from memvault.storage.history import Commit, Trail, trails
from memvault.storage.store import Storage
from memvault.storage.wiki import list_pages, pages_citing

_LINK = re.compile(r"\]\((wiki/[^)\s]+\.md)\)")
_WORD = re.compile(r"\w{3,}")


@dataclass
class Section:
    id: str            # <page path>#<heading-slug>, as search names it
    path: str
    heading: str
    text: str
    cites: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "path": self.path, "heading": self.heading, "text": self.text, "cites": self.cites}


@dataclass
class Source:
    """One fact and its trail through the history."""

    id: str
    fact: Fact | None              # None: no daily log holds it (purged, or a citation of nothing)
    added: Commit | None = None
    consolidated: dict[str, Any] | None = None
    forgotten: dict[str, Any] | None = None
    supersedes: str | None = None
    superseded_by: dict[str, Any] | None = None
    cited_by: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        fact = self.fact
        return {
            "id": self.id, "found": fact is not None,
            "text": fact.text if fact else None, "at": fact.at.isoformat() if fact else None,
            "category": fact.category if fact else None, "source": fact.source if fact else None,
            "session": fact.session if fact else None, "path": fact.path if fact else None,
            "added": _commit(self.added), "consolidated": self.consolidated, "cited_by": self.cited_by,
            "supersedes": self.supersedes, "superseded_by": self.superseded_by, "forgotten": self.forgotten,
        }


@dataclass
class Why:
    target: str
    kind: str                          # "memory" | "section" | "page" | "fact"
    memory_line: dict[str, Any] | None
    page: dict[str, Any] | None        # {"path", "written": Commit}
    sections: list[Section]
    facts: list[Source]

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "kind": self.kind, "memory_line": self.memory_line, "page": self.page,
                "sections": [s.to_dict() for s in self.sections], "facts": [f.to_dict() for f in self.facts]}


def why(storage: Storage, target: str) -> Why:
    """The chain from `target` back to its sources (InvalidInput or NotFound when there is none)."""
    if not isinstance(target, str) or not target.strip():
        raise InvalidInput("why needs a target: a line of MEMORY.md (its number or words), a page section "
                           "(wiki/<zone>/<page>.md#<heading>) or a fact id")
    target = target.strip()
    if target.startswith(f"{WIKI_DIR}/"):
        return _from_page(storage, target)
    if target.isdigit():
        return _from_memory(storage, target, int(target))
    try:
        fact = storage.facts.find_fact(target)
    except NotFound:
        from memvault.remote.purge import purged_tombstone

        gone = purged_tombstone(storage.tombstone_log, target)
        if gone is not None:  # its text is gone; its record and commits are not
            return _report(storage, target, "fact", None, [], first=[gone.id])
        return _from_memory(storage, target, None)
    return _from_fact(storage, target, fact)


def _from_memory(storage: Storage, target: str, number: int | None) -> Why:
    if not storage.path(MEMORY_FILE).is_file():
        raise NotFound("the vault has no MEMORY.md (dream writes it); give a page section or a fact id")
    lines = storage.read_text(MEMORY_FILE).split("\n")
    count = len(lines) - (lines[-1] == "")
    if number is not None:
        if not 1 <= number <= count:  # (a blank line is there, and links no page: said below)
            raise NotFound(f"MEMORY.md has no line {number} (it has {count} lines)")
    else:
        words = [w.casefold() for w in target.split()]
        matching = [n for n, text in enumerate(lines, start=1)
                    if _LINK.search(text) and all(w in text.casefold() for w in words)]
        if not matching:
            raise NotFound(f"no fact has the id {target!r}, and no line of MEMORY.md linking a page holds those words")
        if len(matching) > 1:
            numbers = ", ".join(map(str, matching))
            raise InvalidInput(f"{len(matching)} lines of MEMORY.md hold those words ({numbers}): give one's number")
        number = matching[0]
    text = lines[number - 1]
    linked = _LINK.search(text)
    if linked is None:
        linking = [str(n) for n, other in enumerate(lines, start=1) if _LINK.search(other)]
        raise InvalidInput(f"line {number} of MEMORY.md links no page, so it has no sources to trace (lines "
                           f"linking a page: {', '.join(linking) or 'none'})")
    path = linked.group(1)
    sections = _ranked(_sections(storage, path), text)
    report = _report(storage, target, "memory", path, sections)
    report.memory_line = {"number": number, "text": text, "page": path}
    return report


def _from_page(storage: Storage, target: str) -> Why:
    path, _hash, slug = target.partition("#")
    sections = _sections(storage, path)
    if slug:
        chosen = [s for s in sections if s.id == target]
        if not chosen:
            known = ", ".join("#" + s.id.partition("#")[2] for s in sections) or "none"
            raise NotFound(f"{path} has no section #{slug}; its sections: {known}")
        sections = chosen
    return _report(storage, target, "section" if slug else "page", path, sections)


def _from_fact(storage: Storage, target: str, fact: Fact) -> Why:
    chain = links(storage).chain(fact.id)
    citing = pages_citing(storage, chain)
    sections = [s for path in sorted(citing) for s in _sections(storage, path) if set(s.cites) & set(chain)]
    return _report(storage, target, "fact", None, sections, first=chain, cited=False)


def _sections(storage: Storage, path: str) -> list[Section]:
    if path not in list_pages(storage.root):
        raise NotFound(f"no wiki page {path}")
    text = storage.read_text(path)
    found = []
    for doc in page_documents(text, path):
        body = clean_body(doc.text)
        if body.strip():
            found.append(Section(doc.key, path, doc.heading or "", body, cited_ids(body)))
    return found


def _ranked(sections: list[Section], line: str) -> list[Section]:
    """The sections sharing most words with a MEMORY.md line first (the line says which it drew from
    no more precisely than that)."""
    words = {w.casefold() for w in _WORD.findall(line)}
    return sorted(sections, key=lambda s: -len(words & {w.casefold() for w in _WORD.findall(s.text)}))


def _report(storage: Storage, target: str, kind: str, path: str | None, sections: list[Section],
            first: Sequence[str] = (), cited: bool = True) -> Why:
    """The facts are `first`, then (when `cited`) those the sections cite."""
    ids = list(dict.fromkeys([*first, *(fid for s in sections if cited for fid in s.cites)]))
    page = None
    if path is not None:
        written = storage.git.log("-1", "--", path)
        page = {"path": path, "written": written[0].to_dict() if written else None}
    return Why(target, kind, None, page, sections, _sources(storage, ids))


def _sources(storage: Storage, ids: list[str]) -> list[Source]:
    known = links(storage)
    found, journal = trails(storage.git, ids)
    tombstones = storage.tombstone_log.tombstones()
    entries = storage.dreams.dream_entries()
    accounted = settled_ids(entries) | kept_ids(entries)  # what log.md holds now (an undo cut its lines)
    citing: dict[str, list[str]] = {}
    for page, cited in pages_citing(storage, ids).items():
        for fact_id in cited:
            citing.setdefault(fact_id, []).append(page)
    sources = []
    for fact_id in ids:
        trail = found.get(fact_id, Trail())
        fact = _fact(storage.facts, fact_id)
        successor = known.successor(fact_id)
        by = next((c for new, c in trail.superseded if new == successor), None)
        tombstone = tombstones.get(fact_id)
        sources.append(Source(
            fact_id, fact, trail.added, _consolidated(trail, journal, fact_id in citing, fact_id in accounted),
            {**tombstone.to_dict(), "commit": _commit(trail.forgotten)} if tombstone else None,
            fact.supersedes if fact else None,
            {"id": successor, "commit": _commit(by)} if successor else None,
            sorted(citing.get(fact_id, [])),
        ))
    return sources


def _fact(facts: FactLog, fact_id: str) -> Fact | None:
    try:
        return facts.find_fact(fact_id)
    except (NotFound, InvalidInput):
        return None


def _consolidated(trail: Trail, journal: dict[str, list], cited: bool, recorded: bool) -> dict[str, Any] | None:
    """The dream that took the fact in: the latest commit citing it in a page, with the log.md entry
    it wrote; else log.md's record of it (a duplicate settled or kept, a skipped batch's fact). Only
    while a page still cites it (`cited`) or log.md still records it (`recorded`): a dream undone
    since took nothing in."""
    if trail.cited is not None and cited:
        commit, how = trail.cited, "cited"
    elif trail.recorded is not None and recorded:
        commit, how = trail.recorded
    else:
        return None
    entries = journal.get(commit.sha) or []
    entry = next((e for e in entries if e.outcome in ("ok", "skipped")), entries[0] if entries else None)
    return {**_commit_fields(commit), "how": how, "batch": entry.label if entry else None,
            "outcome": entry.outcome if entry else None, "dream_at": entry.at if entry else None}


def _commit(commit: Commit | None) -> dict[str, Any] | None:
    return _commit_fields(commit) if commit else None


def _commit_fields(commit: Commit) -> dict[str, Any]:
    return {"commit": commit.sha, "at": commit.at, "message": commit.message}
