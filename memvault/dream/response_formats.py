"""Which response_format a model's server is sent: the answer's schema where it takes one.

A hosted provider gets the strongest JSON mode litellm says it supports; a local server (ollama,
an OpenAI-compatible api_base) the LADDER, stepping down when it refuses a format, remembered
across runs in .memvault/dream-llm.json.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


class Endpoint(Protocol):
    """What the ladder needs of memvault.dream.llm.LLMSettings (which imports this module)."""

    @property
    def model(self) -> str: ...

    @property
    def api_base(self) -> str | None: ...


def response_format_for(litellm, model: str, schema: dict) -> dict | None:
    """Strongest JSON mode the provider supports; the answer is validated either way."""
    try:
        if litellm.supports_response_schema(model=model):
            return {
                "type": "json_schema",
                "json_schema": {"name": "dream_batch", "schema": schema, "strict": False},
            }
        if "response_format" in (litellm.get_supported_openai_params(model=model) or []):
            return {"type": "json_object"}
    except Exception:  # noqa: BLE001 - unknown model strings: plain text, the validator still guards
        return None
    return None


# What a local server is sent, strongest first: the answer's schema as OpenAI spells it (llama.cpp's
# llama-server, vLLM, LM Studio; litellm hands it to ollama as `format`), then as llama-cpp-python's
# server takes it (json_object with a "schema", which it turns into a grammar; it answers the first
# with HTTP 500), then plain JSON mode. A server that refuses one is sent the next, at once.
LADDER = ("json_schema", "json_object_schema", "json_object")
# what servers say when they refuse a response_format (the status varies: 400, 422, even 500)
_FORMAT_WORDS = ("response_format", "json_schema", "schema", "grammar")


@dataclass
class ResponseFormats:
    """Which response_format each model's server takes, remembered for the run and in a small file
    (.memvault/dream-llm.json) across runs, so a refusal costs one request once."""

    path: Path | None = None
    known: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> ResponseFormats:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        known = {k: v for k, v in data.items() if isinstance(v, str) and v in LADDER} if isinstance(data, dict) else {}
        return cls(path, known)

    @staticmethod
    def key(settings: Endpoint) -> str:
        return f"{settings.model} {settings.api_base or ''}".strip()

    def current(self, settings: Endpoint) -> str:
        return self.known.get(self.key(settings), LADDER[0])

    def step_down(self, settings: Endpoint) -> bool:
        """The server refused the current format: use the next one from now on; False at the last."""
        at = LADDER.index(self.current(settings))
        if at + 1 >= len(LADDER):
            return False
        self.known[self.key(settings)] = LADDER[at + 1]
        if self.path is not None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.path.write_text(json.dumps(self.known, indent=1) + "\n", encoding="utf-8")
            except OSError:
                pass  # remembered for this run only
        return True


def format_for(kind: str, schema: dict) -> dict:
    if kind == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": "dream_batch", "schema": schema, "strict": False}}
    if kind == "json_object_schema":
        return {"type": "json_object", "schema": schema}
    return {"type": "json_object"}


def format_refused(exc: Exception) -> bool:
    """Did the server refuse the response_format (not the request as such)?"""
    status = getattr(exc, "status_code", None)
    if type(exc).__name__ == "ContextWindowExceededError" or status not in (400, 422, 500, 501):
        return False
    text = str(exc).lower()
    return any(word in text for word in _FORMAT_WORDS)
