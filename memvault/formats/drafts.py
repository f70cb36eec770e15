"""What a caller asks to remember, checked field by field before it becomes a fact: `FactDraft`,
`make_fact`, the check of each field (text, category, tags, labels, importance, supersedes), and
`add --stdin`'s lines. The fact and its place in a daily log are memvault.formats.facts."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, tzinfo
from typing import Any

from memvault.base import jsonline
from memvault.base.dates import parse_at
from memvault.errors import InvalidInput
from memvault.formats.facts import Fact, new_fact_id
from memvault.formats.layout import log_relpath

MAX_TEXT_BYTES = 1024 * 1024
MAX_LABEL_CHARS = 200
# \s takes every line break of LINE_BREAKS too; C1 controls (\x80-\x9f, a terminal's CSI among them)
# are no more a word than C0 ones.
_TAG = re.compile(r"^[^\s,#\x00-\x1f\x7f-\x9f]+$")
# Every character str.splitlines() ends a line at. A source or session holding one is two lines
# wherever it is shown or read line by line (`sessions`' rows, an agent reading the JSON's text).
LINE_BREAKS = frozenset("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")
_NOT_PRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")  # every line break and control character
BOM = "\ufeff"


@dataclass
class FactDraft:
    """What a caller asks to remember, before it gets an id and a place in a log."""

    text: str
    category: str = "fact"
    tags: tuple[str, ...] = field(default_factory=tuple)
    source: str | None = None
    session: str | None = None
    importance: float | None = None
    at: datetime | date | str | None = None
    supersedes: str | None = None
    key: str | None = None


DRAFT_FIELDS = ("text", "category", "tags", "source", "session", "importance", "at", "supersedes", "key")


def make_fact(draft: FactDraft | Mapping[str, Any] | str, *, tz: tzinfo, categories: Iterable[str],
              now: datetime) -> Fact:
    """A draft (a FactDraft, a mapping of its fields, or just the text) checked field by field and
    given an id, a time and its day's log (InvalidInput if bad)."""
    if isinstance(draft, str):
        draft = FactDraft(text=draft)
    elif not isinstance(draft, (Mapping, FactDraft)):
        raise InvalidInput(f"a fact is its text, a mapping of its fields or a FactDraft, not {type(draft).__name__}")
    if isinstance(draft, Mapping):
        unknown = set(draft) - set(DRAFT_FIELDS)
        if unknown:
            raise InvalidInput(f"unknown field(s): {', '.join(sorted(unknown))}")
        draft = FactDraft(
            text=draft.get("text"),  # type: ignore[arg-type]
            category=draft.get("category") or "fact",
            tags=draft.get("tags") or (),
            source=draft.get("source"),
            session=draft.get("session"),
            importance=draft.get("importance"),
            at=draft.get("at"),
            supersedes=draft.get("supersedes"),
            key=draft.get("key"),
        )
    text = validate_text(draft.text)
    category = validate_category(draft.category, categories)
    tags = validate_tags(list(draft.tags) if isinstance(draft.tags, tuple) else draft.tags)
    source = validate_label(draft.source, "source")
    session = validate_label(draft.session, "session")
    importance = validate_importance(draft.importance)
    supersedes = validate_supersedes(draft.supersedes)
    key = validate_label(draft.key, "key")
    at = (now if draft.at is None else parse_at(draft.at, tz, now)).replace(microsecond=0)
    return Fact(id=new_fact_id(), text=text, at=at, category=category, tags=tags, source=source,
                session=session, importance=importance, path=log_relpath(at.date()), supersedes=supersedes,
                key=key)


def read_fact_lines(text: str) -> tuple[list[dict[str, Any]], list[int]]:
    """`add --stdin` input: one fact per line, as plain text, a JSON object (the fields of a
    FactDraft) or a JSON string; blank lines are skipped. Returns the drafts and their line numbers.

    A byte-order mark opening a line is dropped. A line that is JSON of another kind (`null`, `42`,
    `[1, 2]`) is refused rather than stored as text: it is more likely a producer's mistake than a
    memory.
    """
    drafts: list[dict[str, Any]] = []
    numbers: list[int] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        # A byte-order mark (Windows tools write one at the start of a file) is no part of a fact.
        line = raw.removesuffix("\r").removeprefix(BOM)
        if line.strip():
            drafts.append(_fact_line(line, number))
            numbers.append(number)
    if not drafts:
        raise InvalidInput("no facts on standard input")
    return drafts, numbers


def _fact_line(line: str, number: int) -> dict[str, Any]:
    try:
        value = jsonline.loads(line)
    except json.JSONDecodeError as e:
        if line.lstrip().startswith("{"):
            raise InvalidInput(f"line {number}: invalid JSON ({e.msg} at column {e.colno})") from None
        return {"text": line}
    except jsonline.TooDeep as e:
        # Refused even when it does not start with "{": it is a list or nothing, never a memory.
        raise InvalidInput(f"line {number}: invalid JSON ({e})") from None
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        return {"text": value}
    kind = {list: "a list", bool: "a boolean", type(None): "null"}.get(type(value), "a number")
    raise InvalidInput(f"line {number}: JSON {kind} is not a fact; give plain text, a JSON object or a JSON string")


def validate_text(text: object) -> str:
    if not isinstance(text, str):
        raise InvalidInput("fact text must be a string")
    if not text.strip():
        raise InvalidInput("fact text is empty")
    if "\x00" in text:
        raise InvalidInput("fact text contains a NUL character")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        check_encodable(text, "fact text")  # says which kind of lone surrogate
        raise
    if size > MAX_TEXT_BYTES:
        raise InvalidInput(f"fact text is larger than {MAX_TEXT_BYTES // 1024} KiB")
    return text


def check_encodable(value: str, name: str) -> None:
    """Refuse what cannot be written as UTF-8: a lone surrogate.

    Bytes that are not UTF-8 (on standard input, in an argument) reach Python as the surrogates
    U+DC80..U+DCFF (surrogateescape), so those are called invalid UTF-8; any other one came from
    a JSON or Python escape such as "\\ud800".
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        if all(0xDC80 <= ord(c) <= 0xDCFF for c in value[e.start:e.end]):
            raise InvalidInput(f"{name} is not valid UTF-8") from None
        raise InvalidInput(f"{name} is not valid unicode (lone surrogate)") from None


def validate_category(category: object, allowed: Iterable[str]) -> str:
    """The vault's spelling of a category typed in any case (`Preference` is `preference`)."""
    allowed = tuple(allowed)
    if isinstance(category, str):
        for name in allowed:
            if name.casefold() == category.strip().casefold():
                return name
    raise InvalidInput(f"unknown category {category!r}; use one of: {', '.join(allowed)}")


def validate_tags(tags: object) -> tuple[str, ...]:
    if tags is None:
        return ()
    if isinstance(tags, str) or not isinstance(tags, (list, tuple)):
        raise InvalidInput("tags must be a list of strings")
    for tag in tags:
        if isinstance(tag, str) and len(tag) > MAX_LABEL_CHARS:
            raise InvalidInput(f"invalid tag {tag[:40]!r}… ({len(tag)} characters): a tag is at most "
                               f"{MAX_LABEL_CHARS} characters")
        if not isinstance(tag, str) or not _TAG.match(tag):
            raise InvalidInput(f"invalid tag {tag!r}: tags are single words without spaces, line breaks, "
                               "control characters, commas or '#'")
        check_encodable(tag, "tag")
    return tuple(dict.fromkeys(tags))  # a tag given twice is one tag: kept once, in the order given


def validate_label(value: object, name: str) -> str | None:
    """source, session and key: short single-line identifiers."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{name} must be a non-empty string")
    if len(value) > MAX_LABEL_CHARS:
        raise InvalidInput(f"{name} must be one line of at most {MAX_LABEL_CHARS} characters")
    return check_one_line(value, name)


def check_one_line(value: str, name: str) -> str:
    """`value` if it is one line of printable text (it goes into a commit subject or a row)."""
    if _NOT_PRINTABLE.search(value):  # (one search: a character loop cost an import of 100k keys a second)
        line_break = next((c for c in value if c in LINE_BREAKS), None)
        if line_break is not None:
            raise InvalidInput(f"{name} must be one line: it holds a line break ({line_break!r})")
        control = next(c for c in value if ord(c) < 32 or 127 <= ord(c) <= 159)  # C0, DEL, C1
        raise InvalidInput(f"{name} holds a control character ({control!r}); give printable text")
    check_encodable(value, name)
    return value


def validate_supersedes(value: object) -> str | None:
    """The id a new fact supersedes, as typed (any case, Crockford's O, I, L); whether it names a
    live fact is the vault's to check (memvault.recall.succession)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput("supersedes must be a fact id (a non-empty string)")
    if len(value) > MAX_LABEL_CHARS:
        raise InvalidInput(f"supersedes must be a fact id, not {len(value)} characters")
    return check_one_line(value.strip(), "supersedes")


def validate_importance(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"importance must be a number between 0 and 1, got {value!r}")
    if not 0 <= value <= 1:  # nan too; compared as given (float(10**400) overflows)
        shown = value if isinstance(value, float) or abs(value) < 10**15 else "a whole number that large"
        raise InvalidInput(f"importance must be between 0 and 1, got {shown}")
    return float(value)
