"""What a real small model answered to `memvault dream`, replayed through litellm's real call path.

tests/data/llm-transcripts/ holds the requests memvault sent to Qwen2.5-Coder-1.5B (llama.cpp's
OpenAI-compatible server) and the server's answers, recorded as they were. The vault of each test
holds the recorded facts under their recorded ids, so the recorded answers mean what they meant.

Faults tried: the server's HTTP 400 "maximum context length" refusal (001); three answers that are
valid JSON but unusable (002-004: no [^id] citation anywhere, substantive facts marked noop
without a reason, facts "consolidated" into pages that do not cite them, MEMORY.md lines over 300
characters or naming no page, an extra top-level key copied from the input), each given again in
both repair turns, as a model at temperature 0 does; and a bad answer followed by a corrected one.
"""

from __future__ import annotations

import json
import re
from datetime import date

import pytest
from support.dream import FakeLLM, add_recorded_facts, dream, log_lines, recorded_answer, request_data, transcript
from support.fake_llm import consolidate_by_tag
from support.git import git, is_clean

from memvault.storage.wiki import read_page

CAROLINE, MELANIE = "wiki/people/caroline.md", "wiki/people/melanie.md"


def test_the_recorded_context_refusal_shrinks_the_batch_and_asks_again_at_once(vault):
    """Fault: 001.json, the real server refusing a 74-fact prompt as over its 8,192-token context,
    while memvault.toml claims a larger window: never an outage, never a failed attempt."""
    add_recorded_facts(vault, 1)
    refusal = transcript(1)
    assert refusal["status"] == 400 and "maximum context length" in refusal["response"]["error"]["message"]
    said = []
    with FakeLLM(script=[{"status": 400, "body": refusal["response"]}], default=consolidate_by_tag("people")) as fake:
        report = dream(vault, fake, llm={"context_window": 32_768, "max_output_tokens": 8192}, progress=said.append)

    first, second = (request_data(r)["facts"] for r in fake.requests[:2])
    assert len(first) == 74 and 0 < len(second) < len(first)  # the same facts, fewer, asked at once
    assert any("does not fit the model's context window (This model's maximum context length is 8192" in s
               for s in said)  # litellm raised ContextWindowExceededError from the real error text
    assert report.ok and report.caught_up and vault.watermark == date(2023, 7, 15)
    assert not [line for line in log_lines(vault) if " dream error " in line or " dream failed " in line]
    assert vault.dream_status()["failing"] is None and is_clean(vault.root)


def problems_in_log(vault) -> list[str]:
    text = (vault.root / "log.md").read_text()
    return re.findall(r"^  problem: (.*)$", text, re.MULTILINE)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_recorded_answers_are_rejected_with_every_problem_named_in_repair_turns_and_log_md(vault, n):
    """Faults: the answers of 002, 003 and 004, repeated in both repair turns."""
    facts = add_recorded_facts(vault, n)
    head = git(vault.root, "rev-parse", "HEAD").strip()
    with FakeLLM(default=recorded_answer(n)) as fake:
        report = dream(vault, fake)

    result = report.batches[0]
    assert result.outcome == "failed" and result.attempt == 1 and len(fake.requests) == 3
    problems = result.problems
    # the first problem no longer hides the others
    for page in (CAROLINE, MELANIE):
        assert f"page {page!r} cites no fact: every paragraph and list item needs the [^id] of the fact it states" \
            in problems
    recorded = json.loads(recorded_answer(n))["facts"]
    for disposition, fact in zip(recorded, facts, strict=True):
        if disposition["disposition"] == "noop":  # 002/003: substantive facts marked noop, no reason
            assert any(p.startswith(f"fact {fact.id} is marked noop without a note") for p in problems)
        elif disposition["page"] == CAROLINE or n == 4:
            assert f"fact {fact.id} is consolidated into {disposition['page']!r} but not cited there" in problems
    assert len(problems) == 9
    # lenient where nothing is lost: the copied key and the MEMORY.md lines are not problems
    assert not [p for p in problems if "tombstoned_ids" in p or "memory" in p.lower()]

    # the repair turn answers the model in the same conversation, naming every problem by handle
    turn = fake.requests[1]["messages"]
    assert turn[:2] == fake.requests[0]["messages"]
    assert turn[2] == {"role": "assistant", "content": recorded_answer(n)}
    listed = re.findall(r"^\d+\. (.*)$", turn[3]["content"], re.MULTILINE)
    assert len(listed) == len(problems) and not any(f.id in turn[3]["content"] for f in facts)
    assert any(p.startswith("fact f4 ") for p in listed)  # the handle the model was given, not the id

    # log.md keeps every problem of the final answer; nothing else was written
    assert problems_in_log(vault) == problems
    assert git(vault.root, "diff", "--name-only", head, "HEAD").split() == ["log.md"]
    assert vault.watermark is None and not (vault.root / CAROLINE).exists() and is_clean(vault.root)
    failing = vault.dream_status()["failing"]
    assert failing["batch"] == result.label and failing["problems"] == problems


def test_a_recorded_bad_answer_then_a_corrected_one_is_applied_after_one_repair_turn(vault):
    """Fault: 003's answer first; the model then follows the repair turn, but keeps two MEMORY.md
    lines of 002's answer, one of them over 300 characters (dropped with a note, not rejected)."""
    facts = add_recorded_facts(vault, 3)
    long_line, short_line = json.loads(recorded_answer(2))["memory"]
    assert len(long_line["text"]) > 300 >= len(short_line["text"])

    def corrected(body: dict) -> str:
        told = body["messages"][-1]["content"]
        assert "cites no fact" in told and "noop without a note" in told
        records = request_data(body)["facts"]
        pages = []
        for path, tag in ((CAROLINE, "caroline"), (MELANIE, "melanie")):
            lines = [f"- {r['text']} [^{r['id']}]" for r in records if tag in r.get("tags", [])]
            pages.append({"action": "create", "path": path, "title": tag.title(), "body": "\n".join(lines)})
        return json.dumps({
            "pages": pages,
            "facts": [{"id": r["id"], "disposition": "consolidated",
                       "page": CAROLINE if "caroline" in r["tags"] else MELANIE} for r in records],
            "memory": [long_line, short_line],
        })

    with FakeLLM(script=[recorded_answer(3), corrected]) as fake:
        report = dream(vault, fake)

    result = report.batches[0]
    assert report.ok and result.outcome == "ok" and result.repairs == 1 and len(fake.requests) == 2
    assert result.notes == ["dropped 1 MEMORY.md line(s) over 300 characters"]
    ok_line = log_lines(vault)[-1]
    assert "dream ok 2023-05-08..2023-05-08 watermark=2023-05-08" in ok_line and "after 1 repair turn(s)" in ok_line
    assert "  note: dropped 1 MEMORY.md line(s) over 300 characters" in (vault.root / "log.md").read_text()
    caroline = read_page(vault.root, CAROLINE)
    assert caroline.sources == [f.id for f in facts if "caroline" in f.tags]  # handles mapped back to ids
    memory = (vault.root / "MEMORY.md").read_text()
    assert short_line["text"][:60] in memory and long_line["text"][:60] not in memory
