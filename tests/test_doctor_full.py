"""`doctor` on a large vault (issue 35): the checks that read every daily log are left out of the
default run where they would be slow, which doctor says with what they would take; `--full` runs
them, telling the estimate first and drawing progress on a terminal (never into a pipe or --json).

A vault of a million facts takes minutes to build, so "large" is had here by lowering the number
of seconds the default run allows the full checks (memvault.health.doctor.FULL_IN_DEFAULT_SECONDS);
bench/scale.py measures doctor on the real 1M vault."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

from support.git import git

from memvault.health import doctor as doctor_module

FULL = ["daily logs", "fact counts", "fact ids", "citations", "credentials", "cache rows", "index rows"]


def _break_a_log_line(vault) -> None:
    log = next((vault.root / "logs").rglob("*.md"))
    log.write_text(log.read_text() + "- a fact whose marker is cut <!-- mv {\"id\": \n")
    git(vault.root, "commit", "-qam", "a hand edit")


def test_a_large_vault_leaves_the_full_checks_to_full_and_says_what_they_take(cli, vault, monkeypatch):
    for n in range(20):
        vault.add(f"fact {n} about green tea", at=f"2026-10-{1 + n % 10:02d}T09:00:00")
    _break_a_log_line(vault)
    vault.search("green tea")  # an index and an embedding cache to read whole
    logs = list((vault.root / "logs").rglob("*.md"))
    monkeypatch.setattr(doctor_module, "FULL_IN_DEFAULT_SECONDS", -1.0)

    quick = cli("doctor")
    assert quick.exit_code == 0, quick.stdout  # the broken line is found only by a full check
    assert "  daily logs:" not in quick.stdout and "  credentials:" not in quick.stdout
    skip = next(line for line in quick.stdout.splitlines() if line.startswith("skip"))
    assert skip.startswith(f"skip   {', '.join(FULL)}: they read every daily log and the whole search index "
                           f"({len(logs)} daily log(s), ")
    assert " kB of search index: about 1 s here" in skip and skip.endswith("`memvault doctor --full` runs them")
    assert "  search index:" in quick.stdout and "  embedding cache:" in quick.stdout  # their quick checks

    report = json.loads(cli("doctor", "--json").stdout)
    assert report["skipped"] == FULL and report["full"]["ran"] is False
    assert report["full"]["estimate"]["logs"] == len(logs)
    assert report["full"]["estimate"]["log_bytes"] == sum(log.stat().st_size for log in logs)
    index = vault.root / ".memvault" / "index"
    read_whole = [*(index / (index / "current").read_text()).glob("vectors-*.f32"),
                  index / (index / "current").read_text() / "catalog.sqlite",
                  vault.root / ".memvault" / "cache" / "embeddings.sqlite"]
    assert report["full"]["estimate"]["data_bytes"] == sum(path.stat().st_size for path in read_whole)
    assert not {c["name"] for c in report["checks"]} & set(FULL)
    assert set(report) >= {"path", "ok", "checks", "fixed"}  # what scripts read stays as it was

    monkeypatch.setattr(doctor_module, "TELL_SECONDS", 0.0)  # as if they took minutes: told first
    full = cli("doctor", "--full")
    assert full.exit_code == 1
    assert "FAIL   daily logs: 1 line(s) in the daily logs do not parse" in full.stdout
    assert "skip" not in full.stdout
    assert full.stderr.startswith(f"memvault: the full checks read every daily log and the whole search index "
                                  f"({len(logs)} daily log(s), ")
    ran = json.loads(cli("doctor", "--full", "--json").stdout)
    assert ran["skipped"] == [] and ran["full"]["ran"] is True
    assert [c["name"] for c in ran["checks"] if c["name"] in FULL] == FULL


def test_the_quick_index_check_still_finds_a_missing_or_short_vector_file(cli, vault, monkeypatch):
    """On a large vault the rows are a full check, but a vector file gone or cut short is one stat
    away: the default run said "up to date" there, and the next search found it damaged."""
    vault.add_many([f"note {n} about green tea" for n in range(30)])
    vault.search("green tea")
    monkeypatch.setattr(doctor_module, "FULL_IN_DEFAULT_SECONDS", -1.0)
    index = vault.root / ".memvault" / "index"
    for cut_short in (True, False):
        vectors = next((index / (index / "current").read_text()).glob("vectors-*.f32"))
        os.truncate(vectors, 1000) if cut_short else vectors.unlink()
        found = {c["name"]: c for c in json.loads(cli("doctor", "--json").stdout)["checks"]}["search index"]
        assert found["status"] == "warn" and "damaged" in found["message"] and vectors.name in found["message"]
        assert cli("doctor", "--fix").exit_code == 0


def test_a_small_vault_runs_every_check_by_default(cli, vault):
    vault.add("Alice prefers green tea")
    _break_a_log_line(vault)
    result = cli("doctor", "--json")
    report = json.loads(result.stdout)
    assert result.exit_code == 1 and report["skipped"] == [] and report["full"]["ran"] is True
    assert {c["name"]: c["status"] for c in report["checks"]}["daily logs"] == "fail"
    assert result.stderr == ""  # a second's work is not worth a line


def _on_a_terminal(*args: str) -> bytes:
    """What `memvault ARGS` writes to stderr when stderr is a terminal (stdout piped)."""
    env = {**os.environ, "COLUMNS": "100", "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    main, secondary = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "memvault", *args], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=secondary, env=env)
        os.close(secondary)
        drawn = b""
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the process closed the terminal
                break
            if not chunk:
                break
            drawn += chunk
        proc.communicate(timeout=300)
    finally:
        os.close(main)
    return drawn


def test_progress_is_drawn_on_a_terminal_and_never_into_a_pipe_or_json(vault):
    vault.add_many([f"note {n} about green tea" for n in range(50)])
    where = ["--vault", str(vault.root)]
    drawn = _on_a_terminal("doctor", "--full", *where)
    assert b"full checks: reading every daily log" in drawn and "━".encode() in drawn
    assert b"\xe2\x94\x81" not in _on_a_terminal("doctor", "--full", "--json", *where)
    piped = subprocess.run([sys.executable, "-m", "memvault", "doctor", "--full", *where], capture_output=True,
                           text=True, timeout=300)
    assert "━" not in piped.stderr and "full checks" not in piped.stderr
