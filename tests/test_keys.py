"""`add --key`: a retried add with a key already stored adds nothing and answers with the first fact."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from filelock import FileLock
from support.cli import run_memvault
from support.git import commit_count, git, is_clean, snapshot
from support.process import compiled_children  # noqa: F401  (fixture)

from memvault import Vault
from memvault.errors import ExitCode


def items(vault_dir) -> list[str]:
    """Every fact item line of every daily log."""
    return [line for path in sorted((vault_dir / "logs").rglob("*.md"))
            for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("- ")]


def test_a_second_add_with_the_same_key_prints_the_first_id_and_writes_nothing(cli, vault_dir):
    first = cli("add", "Alice prefers green tea", "--key", "turn-17")
    assert first.exit_code == 0 and first.stderr == ""
    commits = commit_count(vault_dir)
    again = cli("add", "Alice prefers green tea", "--key", "turn-17")
    assert again.exit_code == 0
    assert again.stdout == first.stdout
    fact_id = first.stdout.strip()
    assert again.stderr == f"memvault: key 'turn-17' (fact {fact_id}) is already stored; nothing was added\n"
    assert commit_count(vault_dir) == commits and is_clean(vault_dir)
    assert len(items(vault_dir)) == 1
    shown = json.loads(cli("show", first.stdout.strip(), "--json").stdout)
    assert shown["key"] == "turn-17"
    # The key lives in the log item's metadata: the file stays the truth.
    assert '"key":"turn-17"' in items(vault_dir)[0]


def test_the_same_key_with_another_text_names_the_stored_fact_and_adds_nothing(cli, vault_dir):
    first = cli("add", "Deploys happen on Tuesdays", "--key", "k1", "--json")
    again = cli("add", "Deploys happen on Fridays", "--key", "k1", "--json")
    assert again.exit_code == 0
    assert json.loads(again.stdout) == json.loads(first.stdout)
    assert "with another text" in again.stderr and "nothing was added" in again.stderr
    assert [line.split(" <!--")[0] for line in items(vault_dir)] == ["- Deploys happen on Tuesdays"]


def test_stdin_records_carry_keys_and_a_rerun_adds_nothing(cli, vault_dir):
    lines = "\n".join([json.dumps({"text": "Alice leads billing", "key": "a"}),
                       json.dumps({"text": "Bob is on call", "key": "b"}),
                       json.dumps({"text": "Bob is on call (sent twice)", "key": "b"}),
                       "a plain line without a key"]) + "\n"
    first = cli("add", "--stdin", input=lines)
    assert first.exit_code == 0, first.stderr
    ids = first.stdout.split()
    assert len(ids) == 4 and ids[1] == ids[2] and len(set(ids)) == 3
    assert "1 of 4 facts have a key already stored or given earlier in the batch" in first.stderr
    commits = commit_count(vault_dir)
    keyed_only = "\n".join(lines.splitlines()[:3]) + "\n"
    again = cli("add", "--stdin", input=keyed_only)
    assert again.exit_code == 0
    assert again.stdout.split() == ids[:3]
    assert commit_count(vault_dir) == commits and len(items(vault_dir)) == 3


def test_a_forgotten_facts_key_still_counts(cli, vault_dir):
    fact_id = cli("add", "A wrong fact", "--key", "w").stdout.strip()
    assert cli("forget", fact_id).exit_code == 0
    again = cli("add", "A wrong fact", "--key", "w")
    assert again.exit_code == 0 and again.stdout.strip() == fact_id
    assert len(items(vault_dir)) == 1


def test_a_purged_facts_key_is_gone_with_it_and_the_lookup_forgets_it_at_once(cli, vault_dir):
    fact_id = cli("add", "Ivan's home address is 12 Elm Street", "--key", "ivan-address").stdout.strip()
    lookup = vault_dir / ".memvault" / "keys.sqlite"
    assert b"ivan-address" in lookup.read_bytes()
    assert cli("purge", fact_id, "--yes").exit_code == 0
    assert not lookup.exists() or b"ivan-address" not in lookup.read_bytes()
    again = cli("add", "Ivan moved", "--key", "ivan-address")
    assert again.exit_code == 0 and again.stdout.strip() != fact_id and again.stderr == ""


@pytest.mark.parametrize(("key", "message"), [
    ("", "key must be a non-empty string"),
    ("two\nlines", "key must be one line"),
    ("x" * 201, "key must be one line of at most 200 characters"),
    ("AKIAIOSFODNN7EXAMPLE", "the key holds a credential"),
])
def test_a_bad_key_is_refused_with_one_line_and_nothing_is_stored(cli, vault_dir, key, message):
    before = snapshot(vault_dir)
    result = cli("add", "Some fact", "--key", key)
    assert result.exit_code == ExitCode.USAGE
    assert len(result.stderr.splitlines()) == 1 and message in result.stderr
    assert snapshot(vault_dir) == before


def test_key_and_stdin_together_are_refused(cli, vault_dir):
    result = cli("add", "--stdin", "--key", "k", input="a fact\n")
    assert result.exit_code == ExitCode.USAGE and "--key names one fact" in result.stderr


def test_the_lookup_is_derived_rebuilt_when_missing_or_damaged_and_never_stale(cli, vault_dir):
    first = cli("add", "Carol joined the team", "--key", "carol").stdout.strip()
    lookup = vault_dir / ".memvault" / "keys.sqlite"
    assert lookup.is_file()
    lookup.unlink()
    assert cli("add", "Carol joined the team", "--key", "carol").stdout.strip() == first
    lookup.write_bytes(b"this is not a database" * 100)
    assert cli("add", "Carol joined the team", "--key", "carol").stdout.strip() == first
    # A keyed item that reached the log without memvault (a hand edit, a sync) is seen at once.
    log = next((vault_dir / "logs").rglob("*.md"))
    hand = ('- Dan moved to Oslo <!-- mv {"id":"1k0w82bqgrc6ntb7","at":"2026-01-02T10:00:00+00:00",'
            '"category":"event","key":"dan"} -->\n')
    log.write_text(log.read_text(encoding="utf-8") + hand, encoding="utf-8")
    git(vault_dir, "commit", "-qam", "a hand edit")
    again = cli("add", "Dan moved to Oslo", "--key", "dan")
    assert again.exit_code == 0 and again.stdout.strip() == "1k0w82bqgrc6ntb7"
    assert len(items(vault_dir)) == 2


def test_a_plain_add_never_opens_the_key_lookup(cli, vault_dir):
    assert cli("add", "No key here").exit_code == 0
    assert not (vault_dir / ".memvault" / "keys.sqlite").exists()


def test_the_python_api_returns_the_stored_fact_and_finds_it_by_key(vault_dir):
    notices: list[str] = []
    vault = Vault.open(vault_dir, notify=notices.append)
    first = vault.add("Erin prefers mornings", key="erin")
    again = vault.add("Erin prefers mornings", key="erin")
    assert (again.id, again.text, again.at, again.key) == (first.id, first.text, first.at, "erin")
    assert notices == [f"key 'erin' (fact {first.id}) is already stored; nothing was added"]
    assert vault.fact_by_key("erin").to_dict() == first.to_dict()
    assert vault.fact_by_key("nobody") is None


def test_two_retries_racing_in_the_queue_store_the_fact_once(vault_dir):
    """Fault tried: the write lock is held while three processes add with the same key, so all three
    queue; whoever commits the queue keeps the first and leaves out the others, and each prints
    the id of the one stored."""
    locks = vault_dir / ".memvault" / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with FileLock(locks / "write.lock"):
        procs = [subprocess.Popen([sys.executable, "-m", "memvault", "add", f"Frank takes the late shift ({n})",
                                   "--key", "frank-shift", "--vault", str(vault_dir)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
                 for n in range(3)]
        deadline = time.monotonic() + 60
        while len(list((vault_dir / ".memvault" / "queue").glob("*.req"))) < 3:
            assert time.monotonic() < deadline, "the adds never queued"
            time.sleep(0.02)
    results = [(proc.wait(timeout=60), proc.stdout.read().strip(), proc.stderr.read()) for proc in procs]
    assert [code for code, _out, _err in results] == [0, 0, 0]
    assert len({out for _code, out, _err in results}) == 1
    assert len(items(vault_dir)) == 1 and is_clean(vault_dir)
    assert sum("is already stored" in err for _code, _out, err in results) == 2


def test_a_retry_of_a_committed_add_through_a_new_process_adds_nothing(vault_dir):
    """What the issue describes: the client crashed right after an add and tried again."""
    first = run_memvault("add", "Gina's birthday is on 3 May", "--key", "msg-881", "--vault", str(vault_dir))
    again = run_memvault("add", "Gina's birthday is on 3 May", "--key", "msg-881", "--vault", str(vault_dir))
    assert (first.returncode, again.returncode) == (0, 0)
    assert again.stdout == first.stdout and len(items(vault_dir)) == 1
