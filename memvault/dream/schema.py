"""The JSON answer the dream LLM must give for one batch, and its parsing.

Shape only: checks against the vault (paths, ids, tombstones, proof of work) are in validate.py.
"""

from __future__ import annotations

import json
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memvault.errors import LLMError

PAGE_MAX_BYTES = 64_000
ANSWER_MAX_BYTES = 2_000_000
TITLE_MAX = 120
TAG_MAX = 40
NOTE_MAX = 500
MEMORY_LINE_MAX = 300


class AnswerRejected(LLMError):
    """The model answered, but the answer cannot be applied; the attempt fails."""


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
    note: str | None = Field(default=None, max_length=NOTE_MAX)


class MemoryLine(_Strict):
    text: str = Field(max_length=MEMORY_LINE_MAX)
    page: str = Field(max_length=200)


class DreamAnswer(_Strict):
    pages: list[PageOp] = Field(default_factory=list, max_length=100)
    facts: list[Disposition] = Field(max_length=20_000)
    memory: list[MemoryLine] | None = Field(
        default=None, description="the whole new MEMORY.md, most important first; omit to keep"
    )


def answer_schema() -> dict:
    """JSON schema handed to providers that support structured output."""
    return DreamAnswer.model_json_schema()


_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n\s*```\s*$", re.DOTALL)


def parse_answer(text: str) -> DreamAnswer:
    """Parse the raw model text into a DreamAnswer or raise AnswerRejected with a one-line reason."""
    if len(text.encode("utf-8", "replace")) > ANSWER_MAX_BYTES:
        raise AnswerRejected(f"answer too large ({len(text)} characters)")
    fenced = _FENCE.match(text)
    if fenced:  # models without a JSON mode like to wrap the object in a code fence
        text = fenced.group(1)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AnswerRejected(f"answer is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise AnswerRejected("answer is not a JSON object")
    try:
        answer = DreamAnswer.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "answer"
        raise AnswerRejected(
            f"answer does not match the schema: {where}: {first['msg']}"
            + (f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else "")
        ) from None
    for op in answer.pages:
        if len(op.body.encode("utf-8")) > PAGE_MAX_BYTES:
            raise AnswerRejected(f"page {op.path!r} body exceeds {PAGE_MAX_BYTES} bytes")
    return answer
