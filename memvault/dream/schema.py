"""The JSON answer the dream LLM must give for one batch, and its parsing.

Shape only: checks against the vault (paths, ids, tombstones, proof of work) are in validate.py.
Parsing is lenient where nothing can be lost: unknown keys, malformed tags and MEMORY.md lines
that are too long or malformed are dropped with a note. Everything else wrong with an item is a
problem, and every problem is collected, so a repair turn can name them all at once.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memvault.errors import LLMError

PAGE_MAX_BYTES = 64_000
ANSWER_MAX_BYTES = 2_000_000
TITLE_MAX = 120
TAG_MAX = 40
NOTE_MAX = 500
MEMORY_LINE_MAX = 300
TAG = re.compile(r"^[\w][\w./ -]{0,39}$")


class AnswerRejected(LLMError):
    """The model answered, but the answer cannot be applied; `problems` lists every reason."""

    def __init__(self, problems):
        self.problems = [problems] if isinstance(problems, str) else list(problems) or ["answer rejected"]
        more = len(self.problems) - 1
        super().__init__(self.problems[0] + (f" (+{more} more)" if more else ""))


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)


class PageOp(_Strict):
    action: Literal["create", "update"]
    path: str = Field(max_length=200, description="wiki/<zone>/<slug>.md")
    title: str | None = Field(default=None, max_length=TITLE_MAX)
    tags: list[str] = Field(default_factory=list, max_length=20)
    section: str | None = Field(
        default=None,
        max_length=TITLE_MAX,
        description="update only: heading of the one section to replace (appended if absent); "
        "omit to replace the whole body",
    )
    body: str = Field(description="markdown; every statement cites fact ids as [^id]")


class Disposition(_Strict):
    id: str = Field(max_length=64)
    disposition: Literal["consolidated", "duplicate", "noop", "conflict"]
    page: str | None = Field(default=None, max_length=200, description="for consolidated")
    duplicate_of: str | None = Field(default=None, max_length=64, description="for duplicate")
    conflicts_with: list[str] = Field(default_factory=list, max_length=20, description="for conflict")
    note: str | None = Field(default=None, max_length=NOTE_MAX, description="why, for noop and conflict")


class MemoryLine(_Strict):
    text: str = Field(max_length=MEMORY_LINE_MAX)
    page: str = Field(max_length=200)


class DreamAnswer(_Strict):
    pages: list[PageOp] = Field(default_factory=list, max_length=100)
    facts: list[Disposition] = Field(max_length=20_000)
    memory: list[MemoryLine] | None = Field(
        default=None, description="the whole new MEMORY.md, most important first; omit to keep"
    )


@dataclass
class Parsed:
    """An answer's valid items, what was dropped leniently (`notes`), and what is wrong (`problems`)."""

    answer: DreamAnswer
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


# Bounds a grammar would unroll stay out of the schema a server is sent: llama.cpp's converters turn
# `maxLength: 500` into 500 nested optional characters and `maxItems: 20000` into as many items (the
# prose schema crashed llama-cpp-python's server so). The answer is held to them when it is read.
_UNROLLED = frozenset({"maxLength", "minLength", "maxItems"})


def answer_schema() -> dict:
    """JSON schema handed to providers that support structured output."""
    return _without_bounds(DreamAnswer.model_json_schema())


def _without_bounds(node: object) -> Any:
    if isinstance(node, dict):
        return {k: _without_bounds(v) for k, v in node.items() if not (k in _UNROLLED and isinstance(v, int))}
    if isinstance(node, list):
        return [_without_bounds(v) for v in node]
    return node


# What models put around the object: a reasoning block first (`<think>…</think>`, from reasoning
# models served by ollama or llama.cpp), a code fence (``` or ~~~, any language tag), prose before
# or after it.
_THINKING = re.compile(r"^\s*<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n(.*?)\n[ \t]*\1[ \t]*$", re.DOTALL | re.MULTILINE)
_OBJECT_STARTS = 50  # "{" tried as the start of an object in prose, at most


def the_object(text: str) -> object:
    """The JSON value an answer holds: the whole text when it parses; else, among the fenced
    blocks and then the objects in the prose around them, the first object holding "facts" (the
    answer's one required key: an example object in the prose is passed over), else the first
    fenced object. JSONDecodeError of the whole text when there is none (a trailing comma in the
    answer itself is named as such, not answered with one of its inner objects)."""
    text = text.lstrip("\ufeff").strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError as whole:
        error = whole
    text = _THINKING.sub("", text, count=1).strip()
    fenced = []
    for block in _FENCE.finditer(text):
        try:
            value = json.loads(block.group(2))
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            fenced.append(value)
    for value in fenced + _objects_in(text):
        if "facts" in value:
            return value
    if fenced:
        return fenced[0]
    raise error


def _objects_in(text: str) -> list[dict]:
    """The objects that start at one of the first "{" of the text (a closing remark after one is left)."""
    decoder = json.JSONDecoder()
    found = []
    start = text.find("{")
    for _ in range(_OBJECT_STARTS):
        if start < 0:
            break
        try:
            value, _end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            found.append(value)
        start = text.find("{", start + 1)
    return found


def parse_answer(text: str, handles=None) -> Parsed:
    """Parse the raw model text; AnswerRejected only when there is no JSON object to look at.

    `handles` (memvault.dream.prompt.Handles) maps the request's short ids back to fact ids.
    """
    if len(text.encode("utf-8", "replace")) > ANSWER_MAX_BYTES:
        raise AnswerRejected(f"answer too large ({len(text)} characters)")
    if not text.strip():
        raise AnswerRejected("the answer was empty; answer with the JSON object")
    try:
        data = the_object(text)
    except json.JSONDecodeError as exc:
        raise AnswerRejected(f"answer is not valid JSON ({exc.msg} at line {exc.lineno}); answer with the JSON "
                             "object alone") from None
    if not isinstance(data, dict):
        raise AnswerRejected("answer is not a JSON object")
    notes: list[str] = []
    problems: list[str] = []
    unknown = [k for k in data if k not in DreamAnswer.model_fields]
    if unknown:
        notes.append(f"ignored unknown key(s) {', '.join(map(repr, unknown))}")
    pages = _items(data, "pages", PageOp, problems, notes, handles, required=False)
    facts = _items(data, "facts", Disposition, problems, notes, handles, required=True)
    memory = _memory(data.get("memory"), notes, handles)
    for op in pages:
        if len(op.body.encode("utf-8")) > PAGE_MAX_BYTES:
            problems.append(f"page {op.path!r} body exceeds {PAGE_MAX_BYTES} bytes")
    if len(pages) > 100:
        problems.append(f"answer edits {len(pages)} pages; at most 100 per batch")
    return Parsed(DreamAnswer(pages=pages[:100], facts=facts, memory=memory), notes, problems)


def _items(data: dict, key: str, model, problems: list[str], notes: list[str], handles, *, required: bool) -> list:
    raw = data.get(key)
    if raw is None:
        if required:
            problems.append(f"answer does not match the schema: {key!r} is missing (a list)")
        return []
    if not isinstance(raw, list):
        problems.append(f"answer does not match the schema: {key!r} must be a list")
        return []
    out = []
    for n, item in enumerate(raw):
        where = f"{key}[{n}]"
        if not isinstance(item, dict):
            problems.append(f"answer does not match the schema: {where} is not an object")
            continue
        extra = [k for k in item if k not in model.model_fields]
        if extra:
            notes.append(f"{where}: ignored unknown key(s) {', '.join(map(repr, extra))}")
            item = {k: v for k, v in item.items() if k in model.model_fields}
        if model is PageOp:
            item = _lenient_page(item, where, notes, problems, handles)
        else:
            item = _lenient_disposition(item, where, notes, handles)
        try:
            out.append(model.model_validate(item))
        except ValidationError as exc:
            name = item.get("path") or item.get("id")
            label = f"{where} ({str(name)[:80]})" if isinstance(name, str) else where
            for error in exc.errors():
                loc = ".".join(str(p) for p in error["loc"])
                problems.append(f"answer does not match the schema: {label}.{loc}: {error['msg']}")
    return out


def _lenient_page(item: dict, where: str, notes: list[str], problems: list[str], handles) -> dict:
    tags = item.get("tags")
    if tags is not None:
        listed = tags if isinstance(tags, list) else [tags]
        good = [t for t in listed if isinstance(t, str) and TAG.match(t)][:20]
        if len(good) != len(listed):
            notes.append(f"{where}: dropped tag(s) that are not plain words")
        item["tags"] = good
    if handles is not None and isinstance(item.get("body"), str):
        item["body"], unknown = handles.restore_text(handles.normal_citations(item["body"]))
        for handle in dict.fromkeys(unknown):
            problems.append(f"page {str(item.get('path'))[:80]!r} cites [^{handle}], which is no fact of this request")
    return item


def _lenient_disposition(item: dict, where: str, notes: list[str], handles) -> dict:
    note = item.get("note")
    if isinstance(note, str) and len(note) > NOTE_MAX:
        item["note"] = note[:NOTE_MAX]
        notes.append(f"{where}: note cut to {NOTE_MAX} characters")
    if handles is not None:
        for key in ("id", "duplicate_of"):
            if isinstance(item.get(key), str):
                item[key] = handles.restore(item[key])
        if isinstance(item.get("conflicts_with"), list):
            item["conflicts_with"] = [handles.restore(i) if isinstance(i, str) else i for i in item["conflicts_with"]]
    return item


def _memory(raw, notes: list[str], handles) -> list[MemoryLine] | None:
    if raw is None:
        return None
    if not isinstance(raw, list):
        notes.append("ignored \"memory\": not a list of lines")
        return None
    lines, long, bad = [], 0, 0
    for item in raw:
        text = item.get("text") if isinstance(item, dict) else None
        page = item.get("page") if isinstance(item, dict) else None
        if not isinstance(text, str) or not isinstance(page, str) or not text.strip() or len(page) > 200:
            bad += 1
            continue
        if handles is not None:
            text = handles.restore_text(text)[0]
        if len(text) > MEMORY_LINE_MAX:
            long += 1
            continue
        lines.append(MemoryLine(text=text, page=page))
    if long:
        notes.append(f"dropped {long} MEMORY.md line(s) over {MEMORY_LINE_MAX} characters")
    if bad:
        notes.append(f"dropped {bad} malformed MEMORY.md line(s)")
    if not lines:  # an empty or unusable summary never wipes the current one
        if raw:
            notes.append("no usable MEMORY.md line: the current ones are kept")
        return None
    return lines
