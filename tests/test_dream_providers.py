"""Provider errors through litellm's real call path: which are retried, which count, and what is said.

Faults tried, each as the provider's own HTTP error: a bad API key (401), an unknown model (404),
a content-policy refusal and a plain bad request (400), a server that stays overloaded (503);
and no API key at all, which never reaches the server. Only the refusals of the request count
towards skipping a batch; a refused setup (key, model) and an outage never do.
"""

from __future__ import annotations

import pytest
from support.dream import MODEL, FakeLLM, dream, log_lines

POLICY = {"error": {"message": "Your request was rejected as a result of our safety system.",
                    "type": "invalid_request_error", "param": None, "code": "content_policy_violation"}}


@pytest.mark.parametrize("step, said", [
    # (litellm has once, in a full run, read it as a plain BadRequestError: the provider's words are what counts)
    ({"status": 400, "body": POLICY}, "Your request was rejected as a result of our safety system"),
    ({"status": 400}, "the provider rejected the request (BadRequestError: Invalid value for 'temperature'"),
])
def test_deterministic_refusals_are_failed_attempts_asked_once(vault, step, said):
    fact = vault.add("Uma sings in a choir", at="2026-11-01T09:00:00")
    with FakeLLM(default=step) as fake:
        report = dream(vault, fake)

    assert len(fake.requests) == 1  # never retried within a run: the answer would be the same
    result = report.batches[0]
    assert result.outcome == "failed" and result.attempt == 1 and said in result.reason
    assert report.error == f"batch 2026-11-01..2026-11-01: {MODEL}: {result.reason.split(': ', 1)[1]}"
    assert "\n" not in report.error and "litellm." not in report.error  # one line, the provider's words
    line = log_lines(vault)[-1]
    assert " dream failed 2026-11-01..2026-11-01 · attempt 1/3: " in line and "watermark=" not in line
    status = vault.dream_status()
    assert status["failed_attempts"] == 1 and status["failing"]["batch"] == "2026-11-01..2026-11-01"
    assert said in status["failing"]["reason"] and status["failing"]["errors"] == 0
    assert vault.watermark is None and fact.id not in (vault.root / "log.md").read_text()


@pytest.mark.parametrize("step, said", [
    ({"status": 401}, "the provider refused the API key (Incorrect API key provided"),
    ({"status": 404}, "the provider does not know this model (The model `fake-dream` does not exist"),
])
def test_a_key_or_model_the_provider_refuses_is_asked_once_and_never_skips_the_batch(vault, step, said):
    """Three nights with a wrong key (or model) must not skip the batch: every batch would fail
    alike, so it is the setup to fix, logged as an error and never counted."""
    fact = vault.add("Uma sings in a choir", at="2026-11-01T09:00:00")
    with FakeLLM(default=step) as fake:
        reports = [dream(vault, fake) for _night in range(4)]

    assert len(fake.requests) == 4  # once a run: the answer would be the same
    assert [r.batches[0].outcome for r in reports] == ["error"] * 4
    assert said in reports[-1].error and "\n" not in reports[-1].error
    assert " dream error 2026-11-01..2026-11-01 · LLM not set up: " in log_lines(vault)[-1]
    status = vault.dream_status()
    assert status["failed_attempts"] == 0 and status["failing"]["errors"] == 4
    assert vault.watermark is None and fact.id not in (vault.root / "log.md").read_text()


def test_an_overloaded_server_is_retried_then_an_outage_that_never_counts(vault):
    vault.add("Uma sings in a choir", at="2026-11-01T09:00:00")
    with FakeLLM(default={"status": 503}) as fake:
        first = dream(vault, fake)
        second = dream(vault, fake)

    assert len(fake.requests) == 6  # three calls per run: backoff between them
    assert [b.outcome for b in first.batches + second.batches] == ["error", "error"]
    assert "no answer after 3 attempt(s): service unavailable (503): The engine is currently overloaded" in first.error
    status = vault.dream_status()
    assert status["failed_attempts"] == 0  # an outage must not skip batches...
    failing = status["failing"]            # ...but it is not silent either
    assert failing["failures"] == failing["errors"] == 2 and failing["outcome"] == "error"
    assert failing["since"] == log_lines(vault)[-2].split()[1]


def test_an_empty_answer_is_a_failed_attempt_so_the_batch_is_skipped_in_the_end(vault):
    """A server answering HTTP 200 with no text, every time (a model that gives up, a broken
    template): an answer, rejected and repaired like any other, so it counts towards skipping the
    batch instead of stalling it for ever as an outage."""
    vault.add("Uma sings in a choir", at="2026-11-01T09:00:00")
    with FakeLLM(default="") as fake:
        reports = [dream(vault, fake) for _night in range(3)]

    assert [r.batches[0].outcome for r in reports] == ["failed", "failed", "skipped"]
    assert "the answer was empty" in reports[0].error
    assert len(fake.requests) == 9  # the answer and two repair turns, each night
    repair = fake.requests[1]["messages"]
    assert repair[2] == {"role": "assistant", "content": "(an empty answer)"}  # never an empty turn
    assert vault.watermark is not None  # skipped: its facts stay searchable as raw facts


def test_no_api_key_is_an_error_naming_the_variable_without_calling(vault, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    vault.add("Uma sings in a choir", at="2026-11-01T09:00:00")
    with FakeLLM(default="{}") as fake:
        report = dream(vault, fake, llm={"api_key": None})

    assert fake.requests == [] and report.batches[0].outcome == "error"  # never counted (see above)
    assert report.error.endswith(f"{MODEL}: no API key: set OPENAI_API_KEY (any value for a local server "
                                 "without authentication)")
