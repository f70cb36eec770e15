"""Helpers for the dream tests: a fake model wired into litellm, and answer builders."""

from __future__ import annotations

import json
from datetime import date, datetime

from support import ROOT
from support.fake_llm import FakeLLM, request_data  # noqa: F401  (re-exported for the tests)

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


# -- recorded requests and answers of a real model (tests/data/llm-transcripts) ------------------

TRANSCRIPTS = ROOT / "tests" / "data" / "llm-transcripts" / "qwen2.5-coder-1.5b-q4km"


def transcript(n: int) -> dict:
    """The recorded request/response pair number n (1: the refused 74-fact batch; 2-4: answers)."""
    return json.loads((TRANSCRIPTS / f"{n:03d}.json").read_text(encoding="utf-8"))


def recorded_answer(n: int) -> str:
    return transcript(n)["response"]["choices"][0]["message"]["content"]


def recorded_facts(n: int) -> list[dict]:
    """The fact records the recorded request carried (ids, times, tags, texts)."""
    text = transcript(n)["request"]["messages"][1]["content"]
    return json.loads(text[text.index("<data>\n") + 7:text.index("\n</data>")])["facts"]


def add_recorded_facts(vault, n: int) -> list:
    """Write the recorded batch's facts into the vault with their recorded ids (one commit), so the
    recorded answers, which name those ids, can be replayed."""
    from memvault.formats.facts import Fact

    storage = vault.storage
    facts = []
    for record in recorded_facts(n):
        at = datetime.fromisoformat(record["time"])
        facts.append(Fact(id=record["id"], text=record["text"], at=at, category=record["category"],
                          tags=tuple(record["tags"]), source=record["source"],
                          path=storage.relpath(storage.facts.log_path(at.date()))))
    storage.facts.append_facts(facts)
    return facts


LIVE = TRANSCRIPTS.parent / "qwen2.5-coder-1.5b-q4km-live"


def live(n: int) -> dict:
    """Call n of the live recording (tests/data/llm-transcripts/qwen2.5-coder-1.5b-q4km-live)."""
    return json.loads((LIVE / f"{n:03d}.json").read_text(encoding="utf-8"))


def live_answer(n: int) -> dict:
    """The recorded server answer of call n, sent verbatim by the fake server."""
    return {"body": live(n)["response"]}


def add_live_facts(vault, n: int) -> list:
    """The facts call n asked about, added in the order its handles name them (f1, f2, ...), so the
    recorded answer's handles mean what they meant."""
    text = live(n)["request"]["messages"][1]["content"]
    records = json.loads(text[text.index("<data>\n") + 7:text.index("\n</data>")])["facts"]
    return [vault.add(r["text"], at=r["time"].replace(" ", "T"), tags=r.get("tags", []), source=r.get("source"))
            for r in records]


def use_mode(vault, mode: str) -> None:
    """Set `[dream] mode` in the vault's memvault.toml (and commit it, as a user would)."""
    import re

    from support.git import git

    root = getattr(vault, "root", vault)
    toml = root / "memvault.toml"
    toml.write_text(re.sub(r'(?m)^mode = .*$', f'mode = "{mode}"', toml.read_text()))
    git(root, "commit", "-qm", f"dream mode {mode}", "--", "memvault.toml")
    storage = getattr(vault, "storage", None)
    if storage is not None:  # an open vault read its settings when it was opened
        from memvault.base.config import load_config

        storage.config = load_config(root / "memvault.toml")
