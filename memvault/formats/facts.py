"""Facts and the daily log format.

A fact is one markdown list item in the log of the day it happened. The text comes first so the
file reads naturally; the metadata rides in an HTML comment that markdown viewers hide:

    - Alice prefers green tea. <!-- mv {"id":"01jdq5x8k2m7v3qa","at":"2026-11-22T18:47:07+01:00",...} -->
      further lines of the same fact are indented by two spaces

Only "\\n" splits lines, and every text line is prefixed, so any text (blank lines, "## ", "---",
"- ", carriage returns, unicode) round-trips exactly. What a caller asks to remember, and the
checks of each field, are memvault.formats.drafts.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

META_OPEN = " <!-- mv "
META_CLOSE = " -->"
INDENT = "  "
_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"
_CROCKFORD_PAIRS = tuple(a + b for a in _CROCKFORD for b in _CROCKFORD)
_PLAIN_ID = re.compile(r"[0-9A-Za-z_.:+-]+")
ID_PATTERN = re.compile(r"^[0-9a-hjkmnp-tv-z]{16}$")
_CROCKFORD_ALIASES = str.maketrans({"o": "0", "i": "1", "l": "1"})


@dataclass(frozen=True)
class Fact:
    id: str
    text: str
    at: datetime
    category: str = "fact"
    tags: tuple[str, ...] = ()
    source: str | None = None
    session: str | None = None
    importance: float | None = None
    path: str = ""
    line: int = 0
    secret: bool = False  # holds a credential, stored on purpose (`add --allow-secret`): never sent to an LLM
    supersedes: str | None = None  # the id of the older fact this one replaces (a correction, a new state)
    key: str | None = None  # the caller's name for this fact: a second add with the same key adds nothing

    @property
    def day(self) -> date:
        return self.at.date()

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "text": self.text,
            "at": self.at.isoformat(),
            "category": self.category,
            "tags": list(self.tags),
            "source": self.source,
            "session": self.session,
            "importance": self.importance,
            "secret": self.secret,
            "key": self.key,
            "path": self.path,
            "supersedes": self.supersedes,
        }


@dataclass(frozen=True)
class ParseProblem:
    path: str
    line: int
    message: str
    read: bool = False  # the line was still read as a fact (bytes that are not UTF-8, read as U+FFFD)

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


def id_length_hint(typed: str) -> str:
    """What to add to "no fact with id ..." when the id typed is not as long as memvault's are."""
    return "" if len(typed) == 16 else f" (a fact id is 16 characters, as `add` printed it; this is {len(typed)})"


def new_fact_id(now_ns: int | None = None) -> str:
    """16 chars of lowercase Crockford base32: 55 bits of microseconds, then 25 random bits.

    Ids sort by creation time, which keeps `git log` and listings in a sensible order, and the
    random tail keeps parallel writers from ever colliding in practice.
    """
    micros = (now_ns if now_ns is not None else time.time_ns()) // 1000
    value = ((micros & ((1 << 55) - 1)) << 25) | secrets.randbits(25)
    # Two characters (10 bits) at a time: a loop over the 16 took a second for an import of 100k facts.
    pairs = _CROCKFORD_PAIRS
    return (pairs[value >> 70] + pairs[(value >> 60) & 1023] + pairs[(value >> 50) & 1023]
            + pairs[(value >> 40) & 1023] + pairs[(value >> 30) & 1023] + pairs[(value >> 20) & 1023]
            + pairs[(value >> 10) & 1023] + pairs[value & 1023])


def normalize_id(typed: str) -> str:
    """A fact id as a person may type it: any case, Crockford's O for 0 and I or L for 1."""
    return typed.strip().lower().translate(_CROCKFORD_ALIASES)


# One encoder for every item: json.dumps makes a new one per call when given options (an import's
# 100,000 items spent half a second on that).
_META_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def format_item(fact: Fact) -> str:
    """The fact as a log item, ending with a newline."""
    meta: dict[str, Any] = {"id": fact.id, "at": fact.at.isoformat(), "category": fact.category}
    if fact.tags:
        meta["tags"] = list(fact.tags)
    if fact.source is not None:
        meta["source"] = fact.source
    if fact.session is not None:
        meta["session"] = fact.session
    if fact.importance is not None:
        meta["importance"] = fact.importance
    if fact.secret:
        meta["secret"] = True
    if fact.supersedes is not None:
        meta["supersedes"] = fact.supersedes
    if fact.key is not None:
        meta["key"] = fact.key
    encoded = comment_json(_META_JSON.encode(meta))
    first, *rest = fact.text.split("\n")
    lines = [f"- {first}{META_OPEN}{encoded}{META_CLOSE}"]
    lines.extend(INDENT + line for line in rest)
    return "\n".join(lines) + "\n"


def comment_json(encoded: str) -> str:
    """JSON as a metadata comment holds it: "<" and ">" never appear raw, so " -->" can only be
    the comment's end."""
    return encoded.replace("<", "\\u003c").replace(">", "\\u003e")


def stored_id(fact_id: str) -> str:
    """How an item's metadata comment writes this id: the JSON string, quotes included. Readers
    accept an item only when its id is written so (see `_parse_item`), so finding this text in a
    log is how to find the log that may hold the fact, whatever spacing a hand edit gave the JSON."""
    if _PLAIN_ID.fullmatch(fact_id):  # every id memvault makes: nothing to escape (parse_log's hot path)
        return f'"{fact_id}"'
    return comment_json(json.dumps(fact_id, ensure_ascii=False))


def log_header(day: date) -> str:
    return f"# {day.isoformat()}\n\n"


@dataclass(frozen=True)
class Chunk:
    """A piece of a daily log, exactly as stored: one fact item with its continuation lines, or one
    other line. Joined in order, the chunks give the file back byte for byte."""

    text: str
    line: int       # 1-based number of its first line
    is_item: bool


def split_log(content: str) -> list[Chunk]:
    """The one rule that cuts a daily log into items, shared by the parser and the merge driver.

    Only "\n" ends a line (a fact's text may hold "\r", U+2028 and the like). An item is a
    "- " line plus the indented lines after it, and the blank lines between them (an editor may
    strip the two spaces of an empty text line); blank lines after its last indented line are
    not part of it.
    """
    lines = content.split("\n")
    ends = ["\n"] * (len(lines) - 1) + [""]
    if lines[-1] == "":
        lines.pop()
        ends.pop()
    chunks: list[Chunk] = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("- "):
            chunks.append(Chunk(lines[i] + ends[i], i + 1, False))
            i += 1
            continue
        end = j = i + 1
        while j < len(lines) and (lines[j].startswith(INDENT) or _blank(lines[j])):
            j += 1
            if lines[j - 1].startswith(INDENT):
                end = j
        chunks.append(Chunk("".join(line + e for line, e in zip(lines[i:end], ends[i:end], strict=True)), i + 1, True))
        i = end
    return chunks


def _blank(line: str) -> bool:
    return line in ("", "\r")


def parse_log(content: str, path: str) -> tuple[list[Fact], list[ParseProblem]]:
    """Every fact in a daily log, plus the lines that look like items but do not parse."""
    facts: list[Fact] = []
    problems: list[ParseProblem] = []
    for chunk in split_log(content):
        lines = chunk.text.split("\n")
        if lines[-1] == "":
            lines.pop()
        if not chunk.is_item:
            line = lines[0]
            if line.strip() and not line.startswith("#") and not line.startswith(INDENT):
                problems.append(ParseProblem(path, chunk.line, "line is not a fact item"))
            continue
        first, rest = lines[0], lines[1:]
        if first.endswith(META_CLOSE + "\r"):
            # Saved with CRLF line ends (an editor on Windows): memvault never writes "\r" right
            # after the metadata, so the item's every line end is a CRLF, not text.
            first, rest = first[:-1], [line.removesuffix("\r") for line in rest]
        continuation = ["" if _blank(line) else line[len(INDENT):] for line in rest]
        try:
            facts.append(_parse_item(first, continuation, path, chunk.line))
        except ValueError as e:
            problems.append(ParseProblem(path, chunk.line, str(e)))
    return facts, problems


def item_id(first: str) -> str | None:
    """The id of the fact whose log item starts with this line; None when it is no fact's item."""
    try:
        return _metadata(first.removesuffix("\r"))[1]["id"]
    except ValueError:
        return None


def _metadata(first: str) -> tuple[int, dict[str, Any]]:
    """Where an item's metadata comment starts, and what it holds (an id written as memvault
    writes it, at least)."""
    cut = first.rfind(META_OPEN)
    if cut < 0 or not first.endswith(META_CLOSE):
        raise ValueError("fact item has no memvault metadata comment")
    encoded = first[cut + len(META_OPEN): -len(META_CLOSE)]
    try:
        meta = json.loads(encoded)
        fact_id = meta["id"]
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"unreadable fact metadata ({e.__class__.__name__})") from None
    if not isinstance(fact_id, str) or not fact_id:
        raise ValueError("fact metadata needs an id")
    stored = stored_id(fact_id)
    if f'"id":{stored}' not in encoded and not re.search(r'"id"\s*:\s*' + re.escape(stored), encoded):
        # An id spelt with \u escapes would hide the fact from every lookup by id (show, forget,
        # purge, sync's check for a reused id), which search for the id as written.
        raise ValueError("fact id is written with escapes; write it as plain text")
    return cut, meta


def _parse_item(first: str, continuation: list[str], path: str, line_no: int) -> Fact:
    cut, meta = _metadata(first)
    fact_id = meta["id"]
    try:
        at = datetime.fromisoformat(meta["at"])
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"unreadable fact metadata ({e.__class__.__name__})") from None
    if at.tzinfo is None:
        raise ValueError("fact metadata needs a timezone-aware time")
    text = "\n".join([first[2:cut], *continuation])
    tags = meta.get("tags") or ()
    importance = meta.get("importance")
    supersedes = meta.get("supersedes")
    key = meta.get("key")
    return Fact(
        id=fact_id,
        text=text,
        at=at,
        category=str(meta.get("category") or "fact"),
        tags=tuple(str(t) for t in tags) if isinstance(tags, list) else (),
        source=meta.get("source"),
        session=meta.get("session"),
        importance=float(importance) if isinstance(importance, (int, float)) else None,
        path=path,
        line=line_no,
        secret=meta.get("secret") is True,
        supersedes=supersedes if isinstance(supersedes, str) and supersedes else None,
        key=key if isinstance(key, str) and key else None,
    )
