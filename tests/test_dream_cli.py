"""`memvault dream` on the command line: JSON summary, dry run, undo, status, exit codes, and real
concurrency (a second dream, and `add` during a slow dream, as separate processes).

Bad inputs tried: no model configured; a malformed answer (exit 5, JSON error on stderr);
--undo combined with --dry-run; a second dream while one runs (exit 6).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from datetime import date, timedelta
from pathlib import Path

import pytest
from support.cli import run_memvault
from support.dream import MODEL, request_data
from support.fake_llm import (
    consolidate_everything,
    fake_llm_in_env,  # noqa: F401  (fixture: fake)
)
from support.git import commit_count, git, is_clean

DAY = (date.today() - timedelta(days=3)).isoformat()


def test_dream_json_summary_then_status_and_undo(cli, fake):
    cli("add", "Pia grows tomatoes", "--at", DAY)
    fake.default = consolidate_everything("wiki/topics/garden.md", "Garden")
    result = cli("dream", "--json")
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["pages_created"] == 1 and summary["watermark_after"] == DAY and summary["caught_up"]
    assert summary["watermark_before"] is None and summary["skipped"] == [] and summary["model"] == MODEL

    status = json.loads(cli("dream", "--status", "--json").stdout)
    assert status["watermark"] == DAY and status["pending_facts"] == 0 and status["last_dream"]["outcome"] == "ok"

    undone = cli("dream", "--undo", "--json")
    assert undone.exit_code == 0 and json.loads(undone.stdout)["watermark"] is None
    assert is_clean(cli.vault_dir) and not (cli.vault_dir / "wiki/topics/garden.md").exists()


def documented_error_types() -> set[str]:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "json.md").read_text(encoding="utf-8")
    line = next(line for line in doc.splitlines() if line.startswith("| type | string | error class:"))
    return {name.strip() for name in line.split("error class:", 1)[1].strip(" |").split(",")}


def test_refused_and_empty_undo_report_documented_errors(cli, fake):
    """Bad inputs: --undo over a hand edit of the batch's page, and --undo with nothing left to undo."""
    cli("add", "Tara rows", "--at", DAY)
    empty = cli("dream", "--undo", "--json")
    assert empty.exit_code == 3 and json.loads(empty.stderr)["error"]["type"] in documented_error_types()
    fake.default = consolidate_everything("wiki/people/tara.md", "Tara")
    assert cli("dream").exit_code == 0
    page = cli.vault_dir / "wiki/people/tara.md"
    page.write_text(page.read_text() + "\nBy hand.\n")
    git(cli.vault_dir, "commit", "-q", "-am", "edit tara by hand")
    head = git(cli.vault_dir, "rev-parse", "HEAD")
    refused = cli("dream", "--undo", "--json")
    error = json.loads(refused.stderr)["error"]
    assert refused.exit_code == 1 and error["type"] == "UndoRefused" and "later commit" in error["message"]
    assert error["type"] in documented_error_types() and refused.stdout == ""
    assert git(cli.vault_dir, "rev-parse", "HEAD") == head and is_clean(cli.vault_dir)


def test_dry_run_prints_the_proposal_and_writes_nothing(cli, fake):
    cli("add", "Quinn speaks Welsh", "--at", DAY)
    fake.default = consolidate_everything("wiki/people/quinn.md", "Quinn")
    before = commit_count(cli.vault_dir)
    result = cli("dream", "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert "wiki/people/quinn.md" in result.stdout and "proposed" in result.stdout
    assert commit_count(cli.vault_dir) == before and is_clean(cli.vault_dir)
    assert not (cli.vault_dir / "wiki/people/quinn.md").exists()

    # an answer a real run would refuse: the dry run says so and fails as that run would (it exited 0)
    fake.default = "I am sorry, I cannot help with that."
    rejected = cli("dream", "--dry-run")
    assert rejected.exit_code == 5, rejected.stderr
    assert "rejected" in rejected.stdout
    assert "no fact passed" in rejected.stderr.strip().splitlines()[-1] and "not valid JSON" in rejected.stderr
    assert commit_count(cli.vault_dir) == before and is_clean(cli.vault_dir)


def test_exit_codes_for_missing_model_bad_answer_and_bad_options(cli, fake, monkeypatch):
    cli("add", "Rosa sails", "--at", DAY)
    assert cli("dream", "--undo", "--dry-run").exit_code == 2
    for ignored in (["--status", "--min-facts", "3"], ["--undo", "--model", "x/y"], ["--status", "--max-batches", "1"]):
        refused = cli("dream", *ignored)  # an option --status or --undo would ignore: said, not obeyed
        assert refused.exit_code == 2 and ignored[1] in refused.stderr and refused.stderr.count("\n") == 1
    commits = commit_count(cli.vault_dir)
    for address in ("not a url", "ftp://127.0.0.1/v1", "http://127.0.0.1:99999/v1"):
        # a setting no server can answer: said at once, not retried as an outage and logged every night
        monkeypatch.setenv("MEMVAULT_API_BASE", address)
        wrong = cli("dream")
        assert wrong.exit_code == 2 and "MEMVAULT_API_BASE" in wrong.stderr and address in wrong.stderr, wrong.stderr
        assert wrong.stderr.count("\n") == 1 and commit_count(cli.vault_dir) == commits
    monkeypatch.setenv("MEMVAULT_API_BASE", fake.api_base)
    fake.default = "Sure! Here is what I would do: nothing."
    bad = cli("dream", "--json")
    assert bad.exit_code == 5
    assert json.loads(bad.stdout)["error"].endswith("answer is not valid JSON (Expecting value at line 1); answer with "
                                                    "the JSON object alone")
    assert json.loads(bad.stderr.splitlines()[-1])["error"]["exit_code"] == 5
    monkeypatch.delenv("MEMVAULT_MODEL")
    quiet = cli("dream", "--min-facts", "5", "--json")  # the README's cron line on a quiet night
    assert quiet.exit_code == 0 and json.loads(quiet.stdout)["gated"], quiet.stderr
    missing = cli("dream")
    assert missing.exit_code == 5 and "MEMVAULT_MODEL" in missing.stderr and "[llm] model" in missing.stderr
    plan = cli("dream", "--dry-run", "--json")  # the plan is worth seeing before a model is set up
    assert plan.exit_code == 0, plan.stderr
    assert [b["outcome"] for b in json.loads(plan.stdout)["batches"]] == ["planned"]
    plain = cli("dream", "--dry-run")
    assert plain.exit_code == 0 and "no model configured" in plain.stderr and "planned" in plain.stdout


def test_second_dream_refused_and_add_not_blocked_during_a_slow_dream(vault_dir, fake):
    """Real processes: the first dream waits on a slow model while others use the vault."""
    run_memvault("add", "Sam climbs", "--at", DAY, "--vault", str(vault_dir)).check_returncode()
    slow = consolidate_everything("wiki/people/sam.md", "Sam")
    # The first answer waits until the others have used the vault: a fixed delay of 8 s ran out
    # under load before the third process was done, and the late fact missed the dream.
    answered = threading.Event()
    fake.default = lambda body: (len(fake.requests) > 1 or answered.wait(120)) and {"content": slow(body)}
    first = subprocess.Popen([sys.executable, "-m", "memvault", "dream", "--json", "--vault", str(vault_dir)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300  # an upper bound: litellm alone takes 5-7 s to import, far more under load
    while not fake.requests and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.1)
    assert fake.requests, first.communicate()
    second = run_memvault("dream", "--vault", str(vault_dir))
    added = run_memvault("add", "Sam bought new shoes", "--vault", str(vault_dir))
    backdated = run_memvault("add", "Sam climbed El Cap", "--at", DAY, "--vault", str(vault_dir))
    still_dreaming = first.poll() is None
    answered.set()
    out, err = first.communicate(timeout=60)

    assert second.returncode == 6 and "already running" in second.stderr
    assert added.returncode == 0 and backdated.returncode == 0 and still_dreaming  # add never waited
    assert first.returncode == 0, err
    assert json.loads(out)["pages_created"] == 1
    assert is_clean(vault_dir)
    log = git(vault_dir, "log", "--format=%s")
    assert "add: " in log and "dream: " in log
    first_batch, second_batch = (json.dumps(request_data(r)) for r in fake.requests)
    assert "Sam climbs" in first_batch and "El Cap" not in first_batch  # not in the batch the model saw...
    assert "El Cap" in second_batch and '"late": true' in second_batch  # ...so it came next, as a late fact
    page = (vault_dir / "wiki/people/sam.md").read_text()
    assert "Sam climbs" in page and "El Cap" in page
    status = json.loads(run_memvault("dream", "--status", "--json", "--vault", str(vault_dir)).stdout)
    assert status["late_facts"] == 0 and status["pending_facts"] == 0


def test_a_failing_batch_is_told_once_on_stderr_then_named_by_status_and_doctor(cli, fake, monkeypatch):
    """Faults: the provider refusing the API key (401); doctor --llm against a server that answers,
    then against a port nothing listens on; a model string litellm cannot place."""
    cli("add", "Vera keeps bees", "--at", DAY)
    fake.default = {"status": 401}
    failed = cli("dream")
    assert failed.exit_code == 5
    said = [line for line in failed.stderr.splitlines() if "Incorrect API key" in line]
    assert len(said) == 1 and said[0].startswith("memvault: batch ") and "Incorrect API key" not in failed.stdout
    assert f"{DAY}..{DAY}: error" in failed.stdout  # the key, not the batch: never counted

    status = cli("status")
    assert f"failing     batch {DAY}..{DAY}: 1 time(s) since " in status.stdout and "Incorrect API key" in status.stdout
    asked = len(fake.requests)
    checks = {c["name"]: c for c in json.loads(cli("doctor", "--json").stdout)["checks"]}
    assert checks["dream"]["status"] == "warn" and "Incorrect API key" in checks["dream"]["message"]
    assert "never count towards skipping" in checks["dream"]["details"][-1]
    assert checks["LLM"]["status"] == "ok" and "not contacted" in checks["LLM"]["message"]
    assert len(fake.requests) == asked  # doctor alone sends nothing

    fake.default = '{"ok": true}'
    reached = {c["name"]: c for c in json.loads(cli("doctor", "--llm", "--json").stdout)["checks"]}["LLM"]
    assert reached["status"] == "ok" and "answered in" in reached["message"]
    assert fake.requests[-1]["max_tokens"] == 16  # one tiny request
    fake.default = ""  # it answers, with nothing: no clean bill of health
    empty = {c["name"]: c for c in json.loads(cli("doctor", "--llm", "--json").stdout)["checks"]}["LLM"]
    assert empty["status"] == "fail" and "answered with no text" in empty["message"]
    # a reasoning model spends the ping's 16 tokens thinking: no text, stopped at the limit, alive
    thinking = {"id": "x", "object": "chat.completion", "created": 0, "model": "fake-dream",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "length"}],
                "usage": {"prompt_tokens": 20, "completion_tokens": 16, "total_tokens": 36}}
    fake.default = {"body": thinking}
    alive = {c["name"]: c for c in json.loads(cli("doctor", "--llm", "--json").stdout)["checks"]}["LLM"]
    assert alive["status"] == "ok", alive
    monkeypatch.setenv("MEMVAULT_API_BASE", "http://127.0.0.1:9/v1")
    down = cli("doctor", "--llm")
    assert down.exit_code == 1 and "FAIL   LLM: cannot reach http://127.0.0.1:9/v1" in down.stdout
    monkeypatch.setenv("MEMVAULT_MODEL", "foo/bar")
    typo = cli("doctor")
    assert typo.exit_code == 1 and "FAIL   LLM: unknown model string 'foo/bar'" in typo.stdout
    refused = cli("dream")
    assert refused.exit_code == 5 and refused.stderr.count("unknown model string 'foo/bar'") == 1


@pytest.mark.slow
def test_status_shows_a_running_dream_and_never_a_killed_one(vault_dir, fake):
    """Real processes: while a dream waits on its model, `status` and `dream --status` (text and
    JSON) show its batch and step; once it is killed (its progress file left behind), neither does."""
    import os
    import signal

    run_memvault("add", "Uma knits scarves", "--at", DAY, "--vault", str(vault_dir)).check_returncode()
    slow = consolidate_everything("wiki/people/uma.md", "Uma")
    fake.default = lambda body: {"delay": 120, "content": slow(body)}
    dreaming = subprocess.Popen([sys.executable, "-m", "memvault", "dream", "--vault", str(vault_dir)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300  # an upper bound: litellm alone takes 5-7 s to import, far more under load
        while not fake.requests and time.monotonic() < deadline and dreaming.poll() is None:
            time.sleep(0.1)
        assert fake.requests, dreaming.communicate()
        state = json.loads(run_memvault("status", "--json", "--vault", str(vault_dir)).stdout)["dream_running"]
        assert state["pid"] == dreaming.pid and state["step"] == "asking the model"
        assert state["batch"] == f"{DAY}..{DAY}" and state["pending_facts"] == 1 and state["batches_done"] == 0
        text = run_memvault("status", "--vault", str(vault_dir)).stdout
        assert f"dreaming    batch {DAY}..{DAY}: asking the model since " in text
        said = run_memvault("dream", "--status", "--vault", str(vault_dir)).stdout
        assert f"running: batch {DAY}..{DAY}: asking the model" in said
        assert json.loads(run_memvault("dream", "--status", "--json", "--vault", str(vault_dir)).stdout)["running"]
    finally:
        os.kill(dreaming.pid, signal.SIGKILL)
        dreaming.communicate()
    assert (vault_dir / ".memvault" / "dream-run.json").exists()  # a killed run leaves its file...
    status = json.loads(run_memvault("status", "--json", "--vault", str(vault_dir)).stdout)
    assert status["dream_running"] is None  # ...but no lock: it is not running
    assert "dreaming" not in run_memvault("status", "--vault", str(vault_dir)).stdout
    assert json.loads(run_memvault("dream", "--status", "--json", "--vault", str(vault_dir)).stdout)["running"] is None
