"""Real processes against one vault: parallel writers, kills at random points, locks, recovery."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest
from conftest import commit_count, git, is_clean, run_memvault
from filelock import FileLock

from memvault import Vault
from memvault.errors import ExitCode
from memvault.facts import Fact, format_item, log_header, new_fact_id


def all_texts(vault_dir) -> list[str]:
    result = run_memvault("recent", "--limit", "100000", "--json", "--vault", str(vault_dir))
    assert result.returncode == 0, result.stderr
    return [f["text"] for f in json.loads(result.stdout)]


def test_eight_processes_adding_25_facts_each_lose_nothing(vault_dir):
    def worker(w: int) -> list[int]:
        return [run_memvault("add", f"worker {w} fact {i}", "--vault", str(vault_dir), timeout=120).returncode
                for i in range(25)]

    with ThreadPoolExecutor(8) as pool:
        codes = [c for result in pool.map(worker, range(8)) for c in result]
    assert codes == [0] * 200
    texts = all_texts(vault_dir)
    assert sorted(texts) == sorted(f"worker {w} fact {i}" for w in range(8) for i in range(25))
    assert len({f.id for f in Vault.open(vault_dir).iter_facts()}) == 200
    adds = git(vault_dir, "log", "--format=%s").splitlines()
    assert sum(1 for m in adds if m.startswith("add: ")) == 200
    assert commit_count(vault_dir) == 201 and is_clean(vault_dir)


def test_sigkill_at_random_points_never_loses_an_acknowledged_fact(vault_dir):
    rng = random.Random(7)
    # Kill points spread over one whole add as measured on this machine, under its current load.
    started = time.monotonic()
    assert run_memvault("add", "warm-up", "--vault", str(vault_dir)).returncode == 0
    window = (time.monotonic() - started) * 1.3
    acknowledged: list[str] = []
    for i in range(50):
        text = f"kill test {i}"
        proc = subprocess.Popen([sys.executable, "-m", "memvault", "add", text, "--vault", str(vault_dir)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(rng.uniform(0.0, window))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if proc.returncode == 0:
            acknowledged.append(text)
    # Orphaned git children of killed processes may still be finishing their commit.
    time.sleep(0.5)
    texts = all_texts(vault_dir)  # the next command, which also repairs leftovers
    assert set(acknowledged) <= set(texts)
    assert 0 < len(acknowledged) < 50, "the kill points should hit both before and after completion"
    committed = git(vault_dir, "log", "-p", "--format=")
    assert all(t in committed for t in acknowledged)
    fsck = subprocess.run(["git", "-C", str(vault_dir), "fsck", "--strict"], capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr
    after = run_memvault("add", "life goes on", "--vault", str(vault_dir))
    assert after.returncode == 0, after.stderr
    assert is_clean(vault_dir)
    assert Vault.open(vault_dir).problems() == []


def test_a_held_lock_makes_add_fail_as_vault_busy(vault_dir):
    lock = FileLock(vault_dir / ".memvault" / "locks" / "write.lock")
    (vault_dir / ".memvault" / "locks").mkdir(parents=True, exist_ok=True)
    with lock:
        result = run_memvault("add", "blocked", "--vault", str(vault_dir), env={"MEMVAULT_LOCK_TIMEOUT": "0.3"})
    assert result.returncode == ExitCode.BUSY
    assert "vault busy" in result.stderr and result.stderr.count("\n") == 1
    assert "blocked" not in all_texts(vault_dir)


def test_a_killed_lock_holder_leaves_no_stale_lock(vault_dir):
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from memvault import Vault; v = Vault.open(sys.argv[1]);"
        "cm = v.storage.write_lock(); cm.__enter__(); print('held', flush=True); time.sleep(60)"), str(vault_dir)],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    result = run_memvault("add", "after the kill", "--vault", str(vault_dir), env={"MEMVAULT_LOCK_TIMEOUT": "2"})
    assert result.returncode == 0, result.stderr


def test_a_live_index_lock_is_waited_for_and_a_stale_one_removed(vault_dir):
    index_lock = vault_dir / ".git" / "index.lock"
    index_lock.write_text("")  # as a live git process would hold it
    proc = subprocess.Popen([sys.executable, "-m", "memvault", "add", "waits for git", "--vault", str(vault_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    assert index_lock.exists(), "a fresh index.lock must never be deleted"
    assert proc.poll() is None
    index_lock.unlink()  # the other git process finishes
    assert proc.wait(timeout=30) == 0, proc.stderr.read()

    index_lock.write_text("")
    old = time.time() - 3600
    os.utime(index_lock, (old, old))  # left behind by a git killed an hour ago
    result = run_memvault("add", "after a stale lock", "--vault", str(vault_dir))
    assert result.returncode == 0, result.stderr
    assert not index_lock.exists()
    assert {"waits for git", "after a stale lock"} <= set(all_texts(vault_dir))


def test_an_interrupted_append_is_committed_by_the_next_command(vault):
    fact = Fact(id=new_fact_id(), text="interrupted fact", at=datetime(2026, 11, 2, tzinfo=UTC))
    path = vault.root / "logs" / "2026" / "2026-11-02.md"
    with vault.storage.write_lock():
        # A process that journaled its write, wrote the fact durably, and died before committing.
        unfinished = vault.storage.transaction("append", ["logs/2026/2026-11-02.md"], "add: abc interrupted fact")
        unfinished.__enter__()
        path.parent.mkdir(parents=True)
        path.write_text(log_header(fact.day) + format_item(fact))
    assert not is_clean(vault.root)
    result = run_memvault("recent", "--json", "--vault", str(vault.root))
    assert result.returncode == 0
    assert "committed the leftover change of an interrupted command" in result.stderr
    assert [f["text"] for f in json.loads(result.stdout)] == ["interrupted fact"]
    assert is_clean(vault.root)
    assert git(vault.root, "log", "-1", "--format=%s").startswith("recover: add: abc interrupted fact")


def test_an_interrupted_replace_is_rolled_back_by_the_next_command(vault):
    page = vault.root / "wiki" / "people" / "alice.md"
    with vault.storage.write_lock():
        unfinished = vault.storage.transaction("replace", ["wiki", "MEMORY.md"], "dream: half applied")
        unfinished.__enter__()  # and never left: the process "dies" here
        page.write_text("half-written page")
        (vault.root / "MEMORY.md").write_text("half-written memory")
    memory_before = git(vault.root, "show", "HEAD:MEMORY.md")
    result = run_memvault("recent", "--vault", str(vault.root))
    assert result.returncode == 0 and "rolled back" in result.stderr
    assert not page.exists()
    assert (vault.root / "MEMORY.md").read_text() == memory_before
    assert is_clean(vault.root)


def test_a_failing_replace_is_rolled_back_at_once(vault):
    page = vault.root / "wiki" / "people" / "bob.md"
    with vault.storage.write_lock(), pytest.raises(RuntimeError):
        with vault.storage.transaction("replace", ["wiki"], "dream: fails midway"):
            page.write_text("partial")
            raise RuntimeError("model answer ran out midway")
    assert not page.exists() and is_clean(vault.root)
    assert not (vault.root / ".memvault" / "journal.json").exists()


def test_a_git_error_about_index_lock_that_is_not_a_held_lock_fails_at_once(vault, monkeypatch):
    """A read-only .git ("Permission denied" creating index.lock) must not be retried for ever."""
    import git as gitpython

    def refuse(self, *args, **kwargs):
        raise gitpython.GitCommandError(["git", "add"], 128,
                                        stderr=f"fatal: Unable to create '{vault.root}/.git/index.lock': "
                                               "Permission denied")

    store = vault.git
    monkeypatch.setattr(gitpython.cmd.Git, "execute", refuse)
    started = time.monotonic()
    with pytest.raises(gitpython.GitCommandError):
        store.run("add", "-A")
    assert time.monotonic() - started < 1
