"""Whole live nights replayed, one per contract: what Qwen2.5-Coder-1.5B answered to
bench/dream_live.py on LoCoMo conversation 0 (74 facts, 8 days), sent back verbatim through
litellm's real call path, and what a user then finds in the vault.

tests/data/llm-transcripts/qwen2.5-coder-1.5b-q4km-notes/ and -prose/ hold every call of those
runs (README.md there: a table of what each answer did). The fake server answers a request with the recorded
answer to the same messages (and refuses the json_schema response format with llama-cpp-python's
HTTP 500, as the real server did), so a change that alters what memvault asks fails here first
("no recorded answer"). The meaning check uses the real embedding model, as the live run did.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path

import pytest
from support.dream import FakeLLM, dream, log_lines, use_mode
from support.git import is_clean

from memvault.formats.pages import CITATION, CONFLICTS_PAGE
from memvault.storage.wiki import list_pages, read_page

DATA = Path(__file__).resolve().parent / "data" / "llm-transcripts"
FACTS = DATA / "qwen2.5-coder-1.5b-q4km" / "facts.jsonl"
NIGHTS = 3


@dataclass(frozen=True)
class Night:
    mode: str
    batches: int        # the batches the recorded night made
    expected: dict      # what it did (README.md there)

    @property
    def run(self) -> Path:
        return DATA / f"qwen2.5-coder-1.5b-q4km-{self.mode}"


NIGHTS_RECORDED = [
    # every batch applied, 24 statements refused and their facts asked again and filed in smaller
    # batches, one fact kept raw as a noop, the watermark at the last day, every fact accounted for
    Night("notes", 9, {"applied": 9, "batches": 9, "watermark": "2023-07-15", "pending": 0, "dropped": 24,
                       "cited": 73}),
    # the same conversation in the prose contract: the model wrote few pages, called most facts a
    # conflict or a noop, ran past its answer length on one day; the watermark stopped at 06-27
    Night("prose", 15, {"applied": 9, "batches": 15, "watermark": "2023-06-27", "pending": 33, "dropped": 43,
                        "cited": 32}),
]
SETTINGS = {"context_window": 8192, "max_output_tokens": 2048, "attempts": 2, "backoff": 0.01}

pytestmark = pytest.mark.real_model


def calls(run: Path) -> list[dict]:
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(run.glob("[0-9][0-9][0-9].json"))]


def key(body: dict) -> tuple[str, str | None]:
    """The messages and response format; a full fact id in a citation (MEMORY.md lines the prose
    contract shows) is left out, since ids are minted from the clock and differ in every run, and so
    are the digits of a similarity a repair turn quotes: another onnxruntime build moves a cosine by
    1e-4, enough to print 0.17 for 0.18 (which side of the check's threshold it falls still counts)."""
    fmt = body.get("response_format") or {}
    messages = re.sub(r"\[\^[0-9a-z]{16}\]", "[^]", json.dumps(body["messages"], ensure_ascii=False))
    return re.sub(r"\(similarity \d\.\d\d <", "(similarity <", messages), fmt.get("type")


class Replay:
    """Answers each request with the recorded answer to the same messages and response format."""

    def __init__(self, run: Path):
        self.answers = {key(c["request"]): c for c in calls(run)}
        self.missing: list[dict] = []

    def __call__(self, body: dict) -> dict:
        recorded = self.answers.get(key(body))
        if recorded is None:
            self.missing.append(body)
            return {"status": 500}
        return {"status": recorded["status"], "body": recorded["response"]}


def add_conversation(vault) -> dict[str, object]:
    """The 74 facts, added in the order bench/dream_live.py added them (handles follow that order)."""
    facts = {}
    for line in FACTS.read_text(encoding="utf-8").splitlines():
        f = json.loads(line)
        fact = vault.add(f["text"], at=f["at"], tags=f["tags"], source=f["source"], session=f["session"])
        facts[fact.id] = fact
    return facts


# The day the nights were recorded. A dream dates the pages it writes with the day it runs, and
# search's recency places each candidate between the oldest and the newest, so which pages a later
# batch is shown depends on that day: the replay runs on it, whatever the machine's clock says.
RECORDED_ON = datetime(2026, 11, 28, 12, 0)


@pytest.fixture(params=NIGHTS_RECORDED, ids=lambda night: night.mode)
def replayed(vault, request, monkeypatch):
    """The vault, its 74 facts, dreamt through the recorded answers, one run a night as the bench did."""
    from memvault.dream.runner import Runner

    monkeypatch.setattr(Runner, "now", lambda runner: RECORDED_ON.replace(tzinfo=runner.storage.tz))
    night = request.param
    use_mode(vault, night.mode)
    facts = add_conversation(vault)
    replay = Replay(night.run)
    reports = []
    with FakeLLM(default=replay) as fake:
        fake.accepts = ("text", "json_object")  # llama-cpp-python's server: json_schema is an HTTP 500
        done = 0
        for _ in range(NIGHTS):
            report = dream(vault, fake, today=date(2023, 7, 16), llm=SETTINGS, max_batches=night.batches - done)
            reports.append(report)
            done += len(report.batches)
            if report.caught_up or not report.batches or done >= night.batches:
                break
    assert not replay.missing, "no recorded answer for a request: memvault now asks something else"
    return night, facts, reports, fake


def statement_lines(body: str) -> list[str]:
    return [line for line in body.splitlines() if line.startswith("- ")]


def own_faults(line: str, cited: list) -> list[str]:
    """This test's own reading (not memvault's checker): capitalised words inside a sentence and
    digits of a statement that its cited facts (text, tags, their dates) do not hold."""
    text = re.sub(r"\[\^[0-9a-z]+\]|\(until \d{4}-\d{2}-\d{2}", " ", line[2:])
    held = " ".join(f.text + " " + " ".join(f.tags) for f in cited).lower()
    dates = {str(n) for f in cited for n in (f.at.year, f.at.month, f.at.day)}
    dates |= {f.at.strftime("%B").lower() for f in cited} | {f.at.strftime("%A").lower() for f in cited}
    faults = []
    for m in re.finditer(r"(?<=[a-z,;] )([A-Z][a-zA-Z]+)", text):  # inside a sentence
        word = re.sub(r"(?:'s|’s|s)$", "", m.group(1)).lower()
        if word not in held and word not in dates:
            faults.append(m.group(1))
    faults += [n for n in re.findall(r"\d+", text) if n not in held and n not in dates]
    return faults


def test_the_recorded_live_night_leaves_only_cited_checked_statements_and_an_honest_watermark(vault, replayed):
    night, facts, reports, fake = replayed
    expected = night.expected
    batches = [b for r in reports for b in r.batches]
    applied = [b for b in batches if b.outcome == "ok"]
    assert fake.requests[0]["response_format"]["type"] == "json_schema"  # refused once (HTTP 500) ...
    assert all(r["response_format"]["type"] == "json_object" for r in fake.requests[1:])  # ... then remembered
    assert len(applied) == expected["applied"] and len(batches) == expected["batches"]

    # every page line is a statement of cited facts that hold its names and numbers
    cited_anywhere = set()
    for path in list_pages(vault.root):
        page = read_page(vault.root, path)
        for line in statement_lines(page.body):
            if path == CONFLICTS_PAGE:  # the runner's date and batch label, then the model's reason
                line = re.sub(r"^- \d{4}-\d{2}-\d{2} \(batch [^)]*\): ", "- ", line)
            ids = CITATION.findall(line)
            assert ids and all(i in facts for i in ids), (path, line)
            cited_anywhere |= set(ids)
            assert own_faults(line, [facts[i] for i in ids]) == [], (path, line)
        if path.startswith("wiki/people/"):  # a person's page holds no fact tagged only with another person
            subject = path.rsplit("/", 1)[1][:-3]
            for i in set(CITATION.findall(page.body)):
                assert subject in facts[i].tags or subject in facts[i].text.lower(), (path, facts[i].text)
    assert len(cited_anywhere) == expected["cited"]

    # the watermark and what stays raw: every fact is accounted for, or waits with its reason
    status = vault.dream_status()
    assert str(vault.watermark) == expected["watermark"]
    assert status["pending_facts"] == expected["pending"]
    lines = log_lines(vault)
    assert len([line for line in lines if " dream ok " in line]) == len(applied)
    text = (vault.root / "log.md").read_text()
    dropped = re.findall(r"^  dropped: (.*)$", text, re.MULTILINE)
    assert len(dropped) == expected["dropped"] and all(": " in d for d in dropped)  # each with its reason

    # MEMORY.md: the runner's, each line linking a page that exists
    memory = [line for line in (vault.root / "MEMORY.md").read_text().splitlines() if line.startswith("- ")]
    assert memory
    for line in memory:
        link = re.search(r"\]\((wiki/[^)]+\.md)\)$", line)
        assert link and (vault.root / link.group(1)).is_file() and len(line) <= 300, line
    assert is_clean(vault.root)
