"""`status` keeps its counts between calls (issue 35): the same numbers as a full recount, after
every kind of change, while reading only the logs that changed."""

from __future__ import annotations

import json
import os
from datetime import datetime

import pytest
from support.cli import run_memvault
from support.dream import dream
from support.fake_llm import FakeLLM, consolidate_everything
from support.sync import shared

from memvault.dream import status as dream_status_module
from memvault.dream.kept_plan import KEPT_FILE
from memvault.health import tally
from memvault.health.tally import TALLY_FILE, full_count
from memvault.storage.factlog import FactLog


def fresh_dream_status(vault) -> dict:
    """What planning from scratch says (the kept answer must equal it, after a JSON round trip)."""
    today = datetime.now(vault.storage.tz).date()
    planned = dream_status_module._work_out(vault.storage, today, every_log=True)
    return json.loads(json.dumps({**planned, "running": None}))  # (no dream runs in these tests)


def assert_same_as_recount(vault) -> dict:
    state = vault.status()
    assert {k: v for k, v in state["facts"].items() if k != "purged"} == full_count(vault.storage)
    assert vault.dream_status() == fresh_dream_status(vault)
    assert state["pending"]["facts"] == fresh_dream_status(vault)["pending_facts"]
    return state


def test_kept_counts_match_a_full_recount_through_every_change(vault):
    facts = [vault.add(f"fact {n} about tea", at=f"2026-10-{1 + n % 20:02d}T09:00:00") for n in range(60)]
    assert assert_same_as_recount(vault)["facts"] == {"total": 60, "live": 60, "forgotten": 0, "purged": 0,
                                                      "unreadable": 0}
    assert (vault.root / TALLY_FILE).exists()

    vault.add("one more, today")
    vault.add("one more, backdated into a day already counted", at="2026-10-03T12:00:00")
    assert assert_same_as_recount(vault)["facts"]["total"] == 62

    vault.forget(facts[0].id, "wrong")
    vault.forget(facts[1].id)
    assert assert_same_as_recount(vault)["facts"] == {"total": 62, "live": 60, "forgotten": 2, "purged": 0,
                                                      "unreadable": 0}

    vault.purge([facts[1].id], confirm=lambda plan: True)
    assert_same_as_recount(vault)

    # A hand edit: a line deleted, then (at once, the same size) an id copied over another one,
    # which makes a repeated id that counts once.
    log = vault.root / "logs" / "2026" / "2026-10-05.md"
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:-1]))
    assert_same_as_recount(vault)
    other = vault.root / "logs" / "2026" / "2026-10-06.md"
    first_id, second_id = [json.loads(line.split("<!-- mv ", 1)[1].split(" -->")[0])["id"]
                           for line in other.read_text().splitlines() if "<!-- mv " in line][:2]
    other.write_text(other.read_text().replace(second_id, first_id))
    state = assert_same_as_recount(vault)
    assert state["facts"]["total"] == 62 - 3  # the purged line is gone, the deleted line, the repeated id

    # A whole log removed by hand, and the kept file damaged: counted again from the logs.
    os.remove(log)
    assert_same_as_recount(vault)
    (vault.root / TALLY_FILE).write_bytes(b"{not json\n1234567")
    assert_same_as_recount(vault)


def test_kept_dream_status_follows_a_dream(vault):
    for n in range(6):
        vault.add(f"Alice note {n}", at=f"2026-11-{10 + n}T09:00:00")
    before = assert_same_as_recount(vault)
    assert before["pending"]["facts"] == 6
    with FakeLLM(default=consolidate_everything()) as fake:
        dream(vault, fake)
    after = assert_same_as_recount(vault)
    assert after["watermark"] is not None and after["pending"]["facts"] < 6


def test_kept_counts_follow_a_sync(tmp_path):
    a, b, _h = shared(tmp_path)
    from memvault import Vault

    vb = Vault.open(b)
    assert assert_same_as_recount(vb)["facts"]["total"] == 2
    for n in range(3):
        assert run_memvault("add", f"from A {n}", "--at", "2026-11-19T10:00:00", "--vault", str(a)).returncode == 0
    assert run_memvault("sync", "--vault", str(a)).returncode == 0
    assert run_memvault("sync", "--vault", str(b)).returncode == 0
    assert assert_same_as_recount(Vault.open(b))["facts"]["total"] == 5


def test_status_reads_only_the_logs_that_changed(vault, monkeypatch):
    for n in range(30):
        vault.add(f"fact {n}", at=f"2026-09-{1 + n % 30:02d}T09:00:00")
    # age the logs past the window in which a second write could keep a log's stat
    for log in (vault.root / "logs").rglob("*.md"):
        os.utime(log, ns=(log.stat().st_atime_ns, log.stat().st_mtime_ns - 10_000_000_000))
    vault.status()
    read = []
    real = FactLog.read_log
    monkeypatch.setattr(FactLog, "read_log", lambda self, path: read.append(path.name) or real(self, path))
    vault.add("today's fact")
    assert vault.status()["facts"]["total"] == 31
    assert len(read) == 1, read  # today's log only: not the 30 others, neither for the counts nor for dream


def test_a_first_status_parses_each_log_once(vault, monkeypatch):
    """On a vault status has not seen (a clone, .memvault deleted), dream's plan and the fact counts
    both read every log: the second reads what the first parsed, and counts as a recount would."""
    for n in range(30):
        vault.add(f"fact {n}", at=f"2026-09-{1 + n % 10:02d}T09:00:00")
    for kept in (TALLY_FILE, KEPT_FILE, ".memvault/dream-status.json"):
        (vault.root / kept).unlink(missing_ok=True)
    parsed = []
    real = FactLog._parse_log
    monkeypatch.setattr(FactLog, "_parse_log", lambda self, path: parsed.append(path.name) or real(self, path))
    state = vault.status()
    assert sorted(parsed) == sorted(log.name for log in (vault.root / "logs").rglob("*.md"))
    assert len(parsed) == 10 and state["facts"]["total"] == 30 and state["pending"]["facts"] == 30
    for kept in (TALLY_FILE, KEPT_FILE, ".memvault/dream-status.json"):
        (vault.root / kept).unlink(missing_ok=True)
    assert assert_same_as_recount(vault) == state


def test_a_log_written_between_two_reads_is_parsed_again(vault):
    vault.add("the first fact of the day", at="2026-09-01T09:00:00")
    log = vault.storage.facts.log_path(datetime(2026, 9, 1).date())
    with vault.storage.facts.reading_once():
        assert [f.text for f in vault.storage.facts.read_log(log)[0]] == ["the first fact of the day"]
        vault.add("a second one", at="2026-09-01T10:00:00")
        assert [f.text for f in vault.storage.facts.read_log(log)[0]] == ["the first fact of the day", "a second one"]


def test_dream_status_after_an_older_day_changes_reads_only_that_log(vault, monkeypatch):
    """A dream, a forget, a backdated add change what dream has left: status plans again. It read
    and parsed every daily log for that (about a minute at a million facts); now only the logs
    that changed, and its answer is the one planning from every log gives."""
    facts = [vault.add(f"fact {n} about tea", at=f"2026-09-{1 + n % 30:02d}T09:00:00") for n in range(60)]
    _age_logs(vault)
    assert_same_as_recount(vault)
    assert (vault.root / KEPT_FILE).exists()
    read = []
    real = FactLog.read_log
    monkeypatch.setattr(FactLog, "read_log", lambda self, path: read.append(path.name) or real(self, path))

    vault.add("backdated into an older day", at="2026-09-07T12:00:00")
    assert vault.status()["pending"]["facts"] == 61
    assert set(read) == {"2026-09-07.md"}, read
    monkeypatch.undo()
    assert_same_as_recount(vault)

    _age_logs(vault)
    vault.forget(facts[3].id)
    assert assert_same_as_recount(vault)["pending"]["facts"] == 60

    # A line no longer parsing on an older day: dream stops before it, kept or not.
    log = vault.root / "logs" / "2026" / "2026-09-12.md"
    log.write_text(log.read_text() + "- a hand-written line with no metadata\n")
    assert assert_same_as_recount(vault)["pending"]["facts"] < 60
    _age_logs(vault)
    vault.forget(facts[5].id)
    assert_same_as_recount(vault)
    read.clear()
    monkeypatch.setattr(FactLog, "read_log", lambda self, path: read.append(path.name) or real(self, path))
    vault.forget(facts[6].id)  # planned again from the kept entries alone: the line is kept as a problem
    assert "2026-09-12" in vault.dream_status()["stopped"] and read == []
    monkeypatch.undo()
    assert_same_as_recount(vault)

    log.write_text(log.read_text().replace("- a hand-written line with no metadata\n", ""))
    with FakeLLM(default=consolidate_everything()) as fake:
        dream(vault, fake)
    assert assert_same_as_recount(vault)["watermark"] is not None

    # Damaged entries, some of them plausible: each such log is read again.
    _age_logs(vault)
    vault.add("and another", at="2026-09-08T12:00:00")
    _age_logs(vault)
    assert_same_as_recount(vault)
    kept = json.loads((vault.root / KEPT_FILE).read_text())
    logs = kept["logs"]
    logs["logs/2026/2026-09-07.md"] = [1, 2]
    logs["logs/2026/2026-09-08.md"] = 5
    logs["logs/2026/2026-09-10.md"][3] = ["x"] * len(logs["logs/2026/2026-09-10.md"][3])
    logs["logs/2026/2026-09-11.md"][2] = 10 ** 30
    logs["logs/2026/2026-09-13.md"][1] += "abc"
    (vault.root / KEPT_FILE).write_text(json.dumps(kept))
    vault.forget(facts[8].id)
    assert_same_as_recount(vault)

    # A log changed while status planned (its kept fact gone from it when read for its size):
    # planned again from the logs as they are.
    vault.add("one more", at="2026-09-09T12:00:00")
    _age_logs(vault)
    assert_same_as_recount(vault)
    kept = json.loads((vault.root / KEPT_FILE).read_text())
    entry = kept["logs"]["logs/2026/2026-09-09.md"]
    entry[1], entry[3][0] = "z" * 16 + entry[1][16:], 0
    (vault.root / KEPT_FILE).write_text(json.dumps(kept))
    vault.forget(facts[9].id)
    assert_same_as_recount(vault)


def test_prompt_sizes_kept_under_one_tokenizer_are_not_used_under_another(vault, monkeypatch):
    """The sizes in plan-logs.json come from the tokenizer in use: counted by bytes (no tiktoken
    encoding on disk), then by cl100k_base, the batches differ. The file names its tokenizer and
    memvault's version, and the dream state is planned again when either differs."""
    from support.git import git

    from memvault.base import tokens
    from memvault.base.config import load_config

    toml = vault.root / "memvault.toml"  # a small window, so that the sizes decide the batches
    toml.write_text(toml.read_text().replace("[llm]\n", "[llm]\ncontext_window = 4096\n", 1))
    git(vault.root, "commit", "-qm", "a small window", "--", "memvault.toml")
    vault.storage.config = load_config(toml)
    for n in range(40):
        vault.add(f"Dana noted the quarterly figures for region {n} were revised upward {'again ' * n}",
                  at=f"2026-09-{1 + n % 4:02d}T09:00:00")
    _age_logs(vault)
    monkeypatch.setenv("MEMVAULT_TOKENIZER", "estimate")
    tokens._encoding.cache_clear()
    estimated = assert_same_as_recount(vault)
    made_by = json.loads((vault.root / KEPT_FILE).read_text())["made_by"]
    assert made_by[-1] == "estimate"
    monkeypatch.delenv("MEMVAULT_TOKENIZER")
    tokens._encoding.cache_clear()
    counted = assert_same_as_recount(vault)  # (the same when no encoding is on disk here)
    if tokens.tokenizer_name() != "estimate":
        assert json.loads((vault.root / KEPT_FILE).read_text())["made_by"][-1] == tokens.tokenizer_name()
    assert counted["pending"]["facts"] == estimated["pending"]["facts"] == 40


def _ids_in(log) -> list[str]:
    return [json.loads(line.split("<!-- mv ", 1)[1].split(" -->")[0])["id"]
            for line in log.read_text().splitlines() if "<!-- mv " in line]


def _age_logs(vault) -> None:
    """As if the logs were written minutes ago: status trusts their stat and reads none again."""
    for log in (vault.root / "logs").rglob("*.md"):
        os.utime(log, ns=(log.stat().st_atime_ns, log.stat().st_mtime_ns - 10_000_000_000))


@pytest.mark.parametrize("one_by_one", [512, 1])
def test_kept_counts_follow_repeated_ids_gained_and_lost(vault, monkeypatch, one_by_one):
    """A changed log's ids are looked up among the kept ones (not all counted again): an id repeated
    in another log counts once, and only when its last copy goes does the total drop. With
    `one_by_one` at 1, every change takes the merge path instead of one insertion at a time."""
    monkeypatch.setattr(tally, "_ONE_BY_ONE", one_by_one)
    for n in range(40):
        vault.add(f"fact {n} about tea", at=f"2026-09-{1 + n % 10:02d}T09:00:00")
    _age_logs(vault)
    assert assert_same_as_recount(vault)["facts"]["total"] == 40
    older = vault.root / "logs" / "2026" / "2026-09-02.md"
    repeated = _ids_in(older)[0]

    today = vault.add("a fact of today").path
    log = vault.root / today
    line = next(line for line in older.read_text().splitlines(keepends=True) if repeated in line)
    log.write_text(log.read_text() + line)  # a hand edit: an older fact copied into today's log
    assert assert_same_as_recount(vault)["facts"]["total"] == 41
    vault.forget(repeated)
    assert assert_same_as_recount(vault)["facts"] == {"total": 41, "live": 40, "forgotten": 1, "purged": 0,
                                                      "unreadable": 0}

    older.write_text("".join(line for line in older.read_text().splitlines(keepends=True) if repeated not in line))
    assert assert_same_as_recount(vault)["facts"]["total"] == 41  # its copy in today's log still counts
    log.write_text("".join(line for line in log.read_text().splitlines(keepends=True) if repeated not in line))
    assert assert_same_as_recount(vault)["facts"] == {"total": 40, "live": 40, "forgotten": 0, "purged": 0,
                                                      "unreadable": 0}

    many = vault.add_many([{"text": f"bulk {n}", "at": "2026-09-20T10:00:00"} for n in range(30)])
    assert assert_same_as_recount(vault)["facts"]["total"] == 70
    vault.forget(many[0].id)
    assert assert_same_as_recount(vault)["facts"]["forgotten"] == 1


def test_counts_kept_by_an_earlier_version_are_counted_again_once(vault, monkeypatch):
    """A tally.bin of version 3 kept no count of unreadable lines: every log is read once more,
    then the counts are kept again."""
    for n in range(20):
        vault.add(f"fact {n}", at=f"2026-08-{1 + n % 20:02d}T09:00:00")
    _age_logs(vault)
    vault.status()
    path = vault.root / TALLY_FILE
    head, _, body = path.read_bytes().partition(b"\n")
    header = json.loads(head)
    path.write_bytes(json.dumps({**header, "version": 3}).encode() + b"\n" + body)
    read = []
    real = FactLog.read_log
    monkeypatch.setattr(FactLog, "read_log", lambda self, path: read.append(path.name) or real(self, path))
    assert vault.status()["facts"]["total"] == 20
    assert len(set(read)) == 20, read
    read.clear()
    assert vault.status()["facts"]["total"] == 20 and read == []
    assert_same_as_recount(vault)


def test_status_counts_the_lines_no_fact_can_be_read_from(vault, tmp_path):
    """A hand edit that breaks a fact's line (or bytes that are not UTF-8) lowered the count with no
    word from status, where search warned and doctor failed: it is counted, and said."""
    for n in range(3):
        vault.add(f"fact {n}", at="2026-08-01T09:00:00")
    log = vault.root / "logs" / "2026" / "2026-08-01.md"
    text = log.read_text()
    log.write_text(text.replace('<!-- mv {"id"', '<!-- mv {"id', 1))  # the metadata no longer JSON
    state = assert_same_as_recount(vault)
    assert (state["facts"]["total"], state["facts"]["unreadable"]) == (2, 1)
    shown = run_memvault("status", "--vault", str(vault.root))
    assert shown.returncode == 0
    assert "1 line(s) in the daily logs are not facts memvault can read" in shown.stdout
    assert "memvault doctor --full" in shown.stdout
    log.write_text(text)
    assert assert_same_as_recount(vault)["facts"]["unreadable"] == 0
    assert "not facts" not in run_memvault("status", "--vault", str(vault.root)).stdout
    # A line of bytes that are not UTF-8 is still read as a fact (doctor names it): not unreadable.
    log.write_bytes(text.replace("fact 0", "caf\xe9 0").encode("latin-1"))
    state = assert_same_as_recount(vault)
    assert (state["facts"]["total"], state["facts"]["unreadable"]) == (3, 0)


def test_a_damaged_sorted_copy_is_counted_again_not_trusted(vault):
    """Fault: with the sorted half of tally.bin zeroed, a line removed from a log made status fail
    (IndexError) where it should count again; a smaller damage would have miscounted silently."""
    for n in range(30):
        vault.add(f"fact {n} about rain", at=f"2026-09-{1 + n % 10:02d}T09:00:00")
    _age_logs(vault)
    assert assert_same_as_recount(vault)["facts"]["total"] == 30
    kept = vault.root / TALLY_FILE
    data = kept.read_bytes()
    kept.write_bytes(data[:len(data) - 8 * 30] + bytes(8 * 30))  # the sorted hashes, zeroed
    older = vault.root / "logs" / "2026" / "2026-09-03.md"
    gone = _ids_in(older)[0]
    older.write_text("".join(line for line in older.read_text().splitlines(keepends=True) if gone not in line))
    assert assert_same_as_recount(vault)["facts"]["total"] == 29
