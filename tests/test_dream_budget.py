"""Dream requests fit the model's window, against a server that counts tokens and refuses like real ones.

The fake server (tests/support/fake_llm.py) counts with its own tokenizer (cl100k_base times `ratio`, plus
ChatML framing), answers HTTP 400 with the real error text when prompt + max_tokens exceeds its
window, and cuts answers at max_tokens. Facts: LoCoMo conversation 0 (the recorded vault).

Faults tried: a server whose tokenizer is 15% less efficient than cl100k_base (memvault's stated
margin); one 4.5 times less efficient, answering llama.cpp's own "exceeds the available context
size" refusal; a window too small for one day's facts; answers longer than max_tokens.
"""

from __future__ import annotations

import json
from datetime import date

from support.dream import TRANSCRIPTS, FakeLLM, add_recorded_facts, dream, log_lines, request_data
from support.fake_llm import consolidate_by_tag
from support.git import is_clean


def locomo_drafts(limit: int | None = None, day: str | None = None) -> list[dict]:
    lines = (TRANSCRIPTS / "facts.jsonl").read_text(encoding="utf-8").splitlines()
    drafts = [json.loads(line) for line in lines][:limit]
    if day is not None:
        for draft in drafts:
            draft["at"] = f"{day}T{draft['at'][11:]}"
    return drafts


def test_every_request_fits_a_server_with_a_less_efficient_tokenizer(vault):
    """Fault: a server counting 15% more tokens than cl100k_base, refusing anything over 8,192."""
    add_recorded_facts(vault, 1)  # the 74 facts that made one 9,219-token prompt before
    with FakeLLM(default=consolidate_by_tag("people"), window=8192, ratio=1.15) as fake:
        report = dream(vault, fake)  # no [llm] context_window: litellm does not know the model either

    assert fake.refused == [] and report.ok and report.caught_up
    for body in fake.requests:
        assert body["max_tokens"] == 2048  # room reserved for the answer, and asked for
        assert fake.prompt_tokens(body) + body["max_tokens"] <= 8192
    assert len(fake.requests) == len(report.batches) >= 4
    assert vault.watermark == date(2023, 7, 15)
    status = vault.dream_status()
    assert status["pending_facts"] == 0 and status["late_facts"] == 0 and is_clean(vault.root)


def test_a_day_too_big_for_one_batch_is_split_and_the_watermark_waits_for_its_last_fact(vault):
    """Fault: a 4,096-token window (answers of 1,024) and a day of 14 facts, one batch per run."""
    vault.add_many(locomo_drafts(14, day="2026-11-01"))
    vault.add_many(locomo_drafts(17, day="2026-11-02")[14:])
    window = {"context_window": 4096}
    with FakeLLM(default=consolidate_by_tag("people"), window=4096, ratio=1.15) as fake:
        first = dream(vault, fake, max_batches=1, llm=window)
        assert first.batches[0].label == "2026-11-01..2026-11-01" and first.batches[0].facts < 14
        assert vault.watermark is None  # some of the day's facts are still to do
        rest = dream(vault, fake, llm=window)

    assert fake.refused == [] and rest.ok and rest.caught_up and vault.watermark == date(2026, 11, 2)
    lines = [line for line in log_lines(vault) if line.startswith("- ")]
    day_one = [line for line in lines if " dream ok 2026-11-01.." in line]
    # the day was split, and only the batch holding its last facts moves the watermark
    assert len(day_one) >= 2 and not any("watermark=" in line for line in day_one[:-1])
    assert "watermark=" in day_one[-1] and "watermark=2026-11-02" in lines[-1]
    sent = [f["text"] for body in fake.requests for f in request_data(body)["facts"]]
    assert len(sent) == len(set(sent)) == 17  # every fact once: none left behind, none asked twice


def test_refusals_from_a_server_counting_far_more_tokens_shrink_batches_never_an_outage(vault):
    """Fault: llama.cpp's own server (HTTP 400 "exceeds the available context size") whose tokenizer
    counts 4.5 times what cl100k_base does: memvault's count cannot be trusted, only the refusal."""
    vault.add_many(locomo_drafts(30))
    said = []
    with FakeLLM(default=consolidate_by_tag("people"), window=8192, ratio=4.5, flavor="llama.cpp") as fake:
        report = dream(vault, fake, progress=said.append)

    assert fake.refused and report.ok and report.caught_up
    assert any("does not fit the model's context window (the request exceeds the available context size" in s
               for s in said)
    assert not [line for line in log_lines(vault) if " dream error " in line or " dream failed " in line]
    sent = {f["text"] for body in fake.requests if fake.prompt_tokens(body) <= 8192
            for f in request_data(body)["facts"]}
    assert len(sent) == 30 and vault.dream_status()["pending_facts"] == 0


def test_an_answer_cut_at_max_tokens_shrinks_the_batch(vault):
    """Fault: a model writing a long note for every fact, so the answer for a full batch stops at
    max_tokens (finish_reason "length") and is no valid JSON."""
    vault.add_many(locomo_drafts(9, day="2026-11-01"))
    by_tag = consolidate_by_tag("people")

    def verbose(body: dict) -> str:
        answer = json.loads(by_tag(body))
        for disposition in answer["facts"]:
            disposition["note"] = "a long explanation nobody asked for " * 12
        return json.dumps(answer)

    said = []
    with FakeLLM(default=verbose) as fake:
        report = dream(vault, fake, llm={"max_output_tokens": 1024, "context_window": 16_384}, progress=said.append)

    sizes = [len(request_data(body)["facts"]) for body in fake.requests]
    assert sizes[0] == 9 and sizes[1] < 9 and all(body["max_tokens"] == 1024 for body in fake.requests)
    assert any("the answer stopped at max_tokens=1024; asking again about" in s for s in said)
    assert report.ok and report.caught_up and vault.watermark == date(2026, 11, 1)
    assert not [line for line in log_lines(vault) if " dream failed " in line]
