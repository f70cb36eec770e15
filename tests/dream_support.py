"""Helpers for the dream tests: a fake model wired into litellm, and answer builders."""

from __future__ import annotations

import json
from datetime import date

from fake_llm import FakeLLM, request_data  # noqa: F401  (re-exported for the tests)

TODAY = date(2026, 11, 22)
MODEL = "openai/fake-dream"


def settings(fake: FakeLLM, **overrides):
    from memvault.dream.llm import LLMSettings

    values = dict(model=MODEL, api_base=fake.api_base, api_key="sk-test", timeout=10, attempts=3, backoff=0.01)
    values.update(overrides)
    return LLMSettings(**values)


def dream(vault, fake: FakeLLM, **options):
    options.setdefault("today", TODAY)
    return vault.dream(llm=settings(fake, **options.pop("llm", {})), **options)


def answer(pages=(), facts=(), memory=None) -> str:
    data = {"pages": list(pages), "facts": list(facts)}
    if memory is not None:
        data["memory"] = memory
    return json.dumps(data)


def consolidated(fid: str, page: str) -> dict:
    return {"id": fid, "disposition": "consolidated", "page": page}


def log_lines(vault) -> list[str]:
    return [line for line in (vault.root / "log.md").read_text().splitlines() if " dream " in line]
