"""Real processes against one vault: parallel writers, the add queue, kills, locks, recovery."""

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
from pathlib import Path

import pytest
from filelock import FileLock
from support.cli import run_memvault
from support.git import assert_fsck_clean, commit_count, git, is_clean
from support.process import compiled_children  # noqa: F401  (fixture)

from memvault import Vault
from memvault.errors import ExitCode
from memvault.formats.facts import Fact, format_item, log_header, new_fact_id


def all_texts(vault_dir) -> list[str]:
    result = run_memvault("recent", "--limit", "100000", "--json", "--vault", str(vault_dir))
    assert result.returncode == 0, result.stderr
    return [f["text"] for f in json.loads(result.stdout)]


def start_add(vault_dir, text: str, env: dict | None = None) -> subprocess.Popen:
    # A child inherits an ignored SIGINT (as a shell's background job does, and as the suite's worker
    # may have it after another test), and Python then ignores Ctrl-C: give it the terminal's default.
    return subprocess.Popen([sys.executable, "-m", "memvault", "add", text, "--vault", str(vault_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def queued(vault_dir) -> list[str]:
    folder = vault_dir / ".memvault" / "queue"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def wait_until(condition, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


@pytest.mark.slow
def test_eight_processes_adding_25_facts_each_lose_nothing(vault_dir):
    """Fault tried: 8 writers at once, so most adds find the lock taken and are group-committed."""
    def worker(w: int) -> list[int]:
        return [run_memvault("add", f"worker {w} fact {i}", "--vault", str(vault_dir), timeout=120).returncode
                for i in range(25)]

    with ThreadPoolExecutor(8) as pool:
        codes = [c for result in pool.map(worker, range(8)) for c in result]
    assert codes == [0] * 200
    texts = all_texts(vault_dir)
    assert sorted(texts) == sorted(f"worker {w} fact {i}" for w in range(8) for i in range(25))
    facts = list(Vault.open(vault_dir).iter_facts())
    assert len({f.id for f in facts}) == 200
    # Fewer commits than adds (grouped), and every commit message names each fact it holds.
    assert commit_count(vault_dir) <= 201
    messages = git(vault_dir, "log", "--format=%B")
    assert all(f.id in messages for f in facts)
    sample = random.Random(3).sample(facts, 3)
    for fact in sample:
        history = json.loads(run_memvault("history", fact.id, "--json", "--vault", str(vault_dir)).stdout)
        assert history and fact.id in git(vault_dir, "show", "-s", "--format=%B", history[0]["commit"])
    assert is_clean(vault_dir) and queued(vault_dir) == []
    assert_fsck_clean(vault_dir)


@pytest.mark.slow
def test_sigkill_at_random_points_never_loses_an_acknowledged_fact(vault_dir):
    """Fault tried: SIGKILL of `add` at 50 seeded random moments across its whole run."""
    rng = random.Random(7)
    # Kill points spread over twice the slowest of three adds timed on this machine under its
    # current load. That is only a start: an add after a kill first recovers what the killed one
    # left, and the other test worker's load comes and goes, so an add may take several times a
    # warm-up (a fixed window once killed all 50 before they finished). After each ten kills the
    # window doubles if none of them let its add finish, and halves if all did.
    took = []
    for n in range(3):
        started = time.monotonic()
        assert run_memvault("add", f"warm-up {n}", "--vault", str(vault_dir)).returncode == 0
        took.append(time.monotonic() - started)
    window = max(took) * 2
    acknowledged: list[str] = []
    finished: list[bool] = []
    for i in range(50):
        text = f"kill test {i}"
        proc = start_add(vault_dir, text)
        time.sleep(rng.uniform(0.0, window))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        finished.append(proc.returncode == 0)
        if finished[-1]:
            acknowledged.append(text)
        if i % 10 == 9 and not any(finished[-10:]):
            window *= 2
        elif i % 10 == 9 and all(finished[-10:]):
            window /= 2
    # Orphaned git children of killed processes may still be finishing their commit.
    time.sleep(0.5)
    texts = all_texts(vault_dir)  # the next command, which also repairs leftovers
    assert set(acknowledged) <= set(texts)
    assert len(texts) == len(set(texts)), "a fact was committed twice"
    assert 0 < len(acknowledged) < 50, (f"the kill points should hit both before and after completion "
                                        f"({len(acknowledged)} of 50 acknowledged, window {window:.2f} s)")
    committed = git(vault_dir, "log", "-p", "--format=")
    assert all(t in committed for t in acknowledged)
    assert_fsck_clean(vault_dir)
    after = run_memvault("add", "life goes on", "--vault", str(vault_dir))
    assert after.returncode == 0, after.stderr
    assert is_clean(vault_dir)
    assert Vault.open(vault_dir).problems() == []


def test_a_held_lock_queues_the_add_says_so_and_withdraws_it_on_timeout(vault_dir):
    """Fault tried: another process holds the write lock past MEMVAULT_LOCK_TIMEOUT."""
    lock = FileLock(vault_dir / ".memvault" / "locks" / "write.lock")
    (vault_dir / ".memvault" / "locks").mkdir(parents=True, exist_ok=True)
    with lock:
        started = time.monotonic()
        result = run_memvault("add", "blocked", "--vault", str(vault_dir), env={"MEMVAULT_LOCK_TIMEOUT": "1.5"})
        waited = time.monotonic() - started
    assert result.returncode == ExitCode.BUSY
    notice, error = result.stderr.splitlines()
    assert "waiting for the write lock" in notice and "queued" in notice
    assert error.startswith("memvault: vault busy") and "nothing was added" in error
    assert 1.5 <= waited < 15
    assert queued(vault_dir) == []  # withdrawn: a later committer cannot pick it up
    assert run_memvault("add", "after", "--vault", str(vault_dir)).returncode == 0
    assert all_texts(vault_dir) == ["after"]


def test_queued_writers_that_give_up_or_die_are_never_committed(vault_dir):
    """Faults tried: while six adds wait in the queue, one gets SIGINT, one SIGTERM, one SIGKILL."""
    lock = FileLock(vault_dir / ".memvault" / "locks" / "write.lock")
    (vault_dir / ".memvault" / "locks").mkdir(parents=True, exist_ok=True)
    # Seen under load: the waiters' own 10 s ran out while the others started, and they withdrew
    # before any signal came. How long a waiter waits is not what this test is about.
    patient = {"MEMVAULT_LOCK_TIMEOUT": "600"}
    with lock:
        names = ("int", "term", "kill", "a", "b", "c")
        procs = {name: start_add(vault_dir, f"queued {name}", patient) for name in names}
        wait_until(lambda: len(queued(vault_dir)) == 6, timeout=300)
        for name, sig in (("int", signal.SIGINT), ("term", signal.SIGTERM), ("kill", signal.SIGKILL)):
            procs[name].send_signal(sig)
            procs[name].wait(timeout=180)  # an upper bound: a machine at load 25 took over 30 s
        # Ctrl-C and SIGTERM withdraw their request at once; SIGKILL cannot, its owner is dead.
        assert len(queued(vault_dir)) == 4
    results = {name: (proc.wait(timeout=180), proc.stderr.read()) for name, proc in procs.items()}
    assert results["int"][0] == ExitCode.INTERRUPTED and "interrupted" in results["int"][1]
    assert results["term"][0] == ExitCode.TERMINATED and "terminated" in results["term"][1]
    assert results["kill"][0] == -signal.SIGKILL
    assert [results[n][0] for n in ("a", "b", "c")] == [0, 0, 0]
    assert run_memvault("add", "later", "--vault", str(vault_dir)).returncode == 0
    assert sorted(all_texts(vault_dir)) == ["later", "queued a", "queued b", "queued c"]
    assert queued(vault_dir) == [] and is_clean(vault_dir)


def test_any_writer_that_waits_says_so_once(vault_dir):
    """Fault tried: `forget` (not queued like an add) while another process holds the lock until
    the forget has said it waits (held for 2.5 s, it was free again before a forget started under
    load, and the test saw no wait)."""
    fact_id = run_memvault("add", "to forget", "--vault", str(vault_dir)).stdout.strip()
    release = vault_dir.parent / "release"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import os, sys, time; from memvault import Vault; v = Vault.open(sys.argv[1]);"
        "cm = v.storage.write_lock(); cm.__enter__(); print('held', flush=True)\n"
        "while not os.path.exists(sys.argv[2]): time.sleep(0.02)"), str(vault_dir), str(release)],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    forget = subprocess.Popen([sys.executable, "-m", "memvault", "forget", fact_id, "--vault", str(vault_dir)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "MEMVAULT_LOCK_TIMEOUT": "600"})
    said = forget.stderr.readline()
    release.touch()
    holder.wait(timeout=60)
    out, rest = forget.communicate(timeout=120)
    assert forget.returncode == 0, said + rest
    assert "waiting for the write lock" in said and "waiting" not in rest
    assert "waiting" not in out and fact_id in Vault.open(vault_dir).tombstones()


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


def _git_holding_index_lock(vault_dir: Path, seconds: float | None) -> subprocess.Popen:
    """A real git process in the vault that holds .git/index.lock (a partial commit whose editor
    takes `seconds`, or waits until a file `release` appears beside the vault; it then aborts for
    an empty message)."""
    schema = vault_dir / "schema.md"
    schema.write_text(schema.read_text() + "\nedited by hand\n")
    release = vault_dir.parent / "release"
    editor = f"sleep {seconds};:" if seconds is not None else f"while [ ! -e '{release}' ]; do sleep 0.05; done;:"
    env = {**os.environ, "GIT_EDITOR": editor}
    proc = subprocess.Popen(["git", "commit", "-q", "--", "schema.md"], cwd=vault_dir, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # A partial commit takes index.lock, then a next-index-<pid>.lock; both are held while the
    # editor runs.
    wait_until(lambda: (vault_dir / ".git" / "index.lock").exists()
               and any((vault_dir / ".git").glob("next-index-*.lock")), timeout=10)
    return proc


def test_a_live_git_lock_is_waited_for(vault_dir):
    """Fault tried: a live git process holds index.lock while memvault adds (it must wait, not delete)."""
    index_lock = vault_dir / ".git" / "index.lock"
    git_proc = _git_holding_index_lock(vault_dir, None)
    add = start_add(vault_dir, "waits for git")
    # Its fact is in the log: it is at git's lock now, and waits there (not for a set time: seen
    # under load, a sleep of 1 s outlasted git's editor of 2 s).
    wait_until(lambda: any((vault_dir / "logs").rglob("*.md")), timeout=300)
    assert index_lock.exists() and add.poll() is None, "a live git's lock must never be deleted"
    (vault_dir.parent / "release").touch()
    git_proc.wait(timeout=30)
    assert add.wait(timeout=60) == 0, add.stderr.read()
    git(vault_dir, "checkout", "--", "schema.md")
    assert all_texts(vault_dir) == ["waits for git"] and is_clean(vault_dir)


@pytest.mark.parametrize("lock_name", ["index.lock", "HEAD.lock", "refs/heads/main.lock", "packed-refs.lock",
                                       "config.lock"])
def test_a_stale_git_lock_is_cleared_at_once_by_the_next_command(vault_dir, lock_name):
    """Fault tried: a lock file left by a killed git (just made, so no age rule can help)."""
    lock = vault_dir / ".git" / lock_name
    lock.write_text("")
    started = time.monotonic()
    result = run_memvault("add", "after a stale lock", "--vault", str(vault_dir))
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 8  # no 10 s wait for the lock to age
    assert f".git/{lock_name}" in result.stderr and "killed git process" in result.stderr
    assert not lock.exists() and all_texts(vault_dir) == ["after a stale lock"] and is_clean(vault_dir)


def test_the_locks_of_a_killed_git_commit_are_cleared_by_every_command(vault_dir):
    """Fault tried: SIGKILL of a real git commit that holds index.lock and its next-index-*.lock."""
    git_proc = _git_holding_index_lock(vault_dir, 30)
    git_proc.kill()
    git_proc.wait()
    left = sorted(p.name for p in (vault_dir / ".git").glob("*.lock"))
    assert "index.lock" in left and any(name.startswith("next-index-") for name in left)
    status = run_memvault("status", "--json", "--vault", str(vault_dir))
    assert status.returncode == 0, status.stderr
    assert list((vault_dir / ".git").glob("*.lock")) == []
    git(vault_dir, "checkout", "--", "schema.md")
    assert run_memvault("add", "fine", "--vault", str(vault_dir)).returncode == 0
    assert is_clean(vault_dir)


def _unfinished_append(vault, texts_by_day: dict[str, str]):
    """Journal and append facts the way a writer does, and stop there: the process "died".

    Returns the unfinished transaction: the caller keeps it referenced, since a collected
    generator would run its clean-up."""
    facts = [Fact(id=new_fact_id(), text=text, at=datetime.fromisoformat(f"{day}T10:00:00+00:00"),
                  path=f"logs/{day[:4]}/{day}.md") for day, text in texts_by_day.items()]
    unfinished = vault.storage.transaction("append", [f.path for f in facts], f"add: {len(facts)} facts")
    unfinished.__enter__()  # and never left
    for fact in facts:
        path = vault.root / fact.path
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:
            f.write(("" if path.exists() else log_header(fact.day)) + format_item(fact))
    return unfinished


def test_an_interrupted_append_is_rolled_back_by_the_next_command(vault):
    """Fault tried: a writer killed after appending, before committing (never acknowledged)."""
    vault.add("already there", at="2026-11-02T08:00:00")
    before = (vault.root / "logs/2026/2026-11-02.md").read_bytes()
    path = vault.root / "logs/2026/2026-11-02.md"
    with vault.storage.write_lock():
        unfinished = _unfinished_append(vault, {"2026-11-02": "interrupted fact", "2026-11-03": "on a new day"})
    assert not is_clean(vault.root) and unfinished
    result = run_memvault("recent", "--json", "--vault", str(vault.root))
    assert result.returncode == 0
    assert "rolled back the unfinished change of an interrupted command" in result.stderr
    assert [f["text"] for f in json.loads(result.stdout)] == ["already there"]
    assert path.read_bytes() == before and not (vault.root / "logs/2026/2026-11-03.md").exists()
    assert is_clean(vault.root) and not (vault.root / ".memvault" / "journal.json").exists()


def test_an_append_whose_commit_landed_before_the_kill_is_kept(vault):
    """Fault tried: a writer killed after its commit, before it removed its journal."""
    with vault.storage.write_lock():
        unfinished = _unfinished_append(vault, {"2026-11-02": "committed just in time"})
        vault.git.commit(["logs/2026/2026-11-02.md"], "add: committed just in time")
    assert unfinished
    commits = commit_count(vault.root)
    result = run_memvault("recent", "--json", "--vault", str(vault.root))
    assert result.returncode == 0 and "rolled back" not in result.stderr
    assert [f["text"] for f in json.loads(result.stdout)] == ["committed just in time"]
    assert commit_count(vault.root) == commits and is_clean(vault.root)


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


def test_a_journal_from_an_older_memvault_is_rolled_back_too(vault):
    """Fault tried: a leftover append journal without sizes (written before sizes were recorded)."""
    path = vault.root / "logs/2026/2026-11-05.md"
    path.parent.mkdir(parents=True)
    fact = Fact(id=new_fact_id(), text="old journal", at=datetime(2026, 11, 5, tzinfo=UTC))
    path.write_text(log_header(fact.day) + format_item(fact))
    journal = vault.root / ".memvault" / "journal.json"
    journal.parent.mkdir(exist_ok=True)
    journal.write_text(json.dumps({"kind": "append", "paths": [f"logs/2026/2026-11-{d:02d}.md" for d in range(1, 30)],
                                   "message": "add: 2 facts"}))
    result = run_memvault("status", "--vault", str(vault.root))
    assert result.returncode == 0, result.stderr
    assert not path.exists() and not journal.exists() and is_clean(vault.root)


def test_doctor_never_calls_stale_the_lock_of_a_git_that_finished_while_it_looked(vault_dir, monkeypatch):
    """Concurrency tried: `doctor` beside a writer. A git lock is stale when no git process works
    in the vault; doctor listed the lock files, then looked for git processes, so a git that
    finished in between (its lock gone with it) was taken for a killed one: "stale git lock
    file(s) left by a killed git process: .git/index.lock", exit 1, 43 times in 16,800 checks
    beside one writer adding in a loop. Here a real git holds index.lock and ends just before the
    look; only a lock still there, the same file, is called stale."""
    from memvault.health import checks as health
    from memvault.storage import gitstore

    vault = Vault.open(vault_dir)
    git_proc = _git_holding_index_lock(vault_dir, 1)
    looks = []

    def git_ends_first(root):
        if not looks:
            git_proc.wait(timeout=30)  # the editor's time is up: git aborts and removes its locks
            assert not (vault_dir / ".git" / "index.lock").exists()
        looks.append(root)
        return gitstore.git_running_in.__wrapped__(root)

    git_ends_first.__wrapped__ = gitstore.git_running_in
    monkeypatch.setattr(gitstore, "git_running_in", git_ends_first)
    monkeypatch.setattr(health, "git_running_in", git_ends_first, raising=False)
    check = health.check_locks(vault.storage)
    assert looks, "the check never looked for git processes"
    assert check.status == "ok", check.message
    # A lock nobody holds is still named.
    (vault_dir / ".git" / "index.lock").write_text("")
    time.sleep(0.2)  # (older than the margin for coarse file times)
    monkeypatch.undo()
    check = health.check_locks(vault.storage)
    assert check.status == "fail" and ".git/index.lock" in check.message
    vault.close()


def _holding_tantivys_writer_lock(vault_dir: Path, release: Path) -> subprocess.Popen:
    """Another program with the search index's Tantivy open for writing (it takes Tantivy's own
    writer lock, not memvault's), until the file `release` appears."""
    lexical = next((vault_dir / ".memvault" / "index").glob("*/lexical"))
    holder = subprocess.Popen([sys.executable, "-c", (
        "import os, sys, time, tantivy; writer = tantivy.Index.open(sys.argv[1]).writer(15_000_000, 1);"
        "print('held', flush=True)\nwhile not os.path.exists(sys.argv[2]): time.sleep(0.02)"),
        str(lexical), str(release)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_search_waits_while_another_process_holds_tantivys_writer_lock(vault_dir, tmp_path, monkeypatch):
    """Fault tried: another process holds Tantivy's writer lock while a search must add a new fact
    to the index. Seen: "unexpected error: ValueError: Failed to acquire Lockfile: LockBusy",
    exit 1. It waits, as for memvault's own index lock, and answers once the lock is free."""
    from memvault.index import lexical

    vault = Vault.open(vault_dir)
    vault.add("Alice prefers green tea")
    assert vault.search("tea", lexical_only=True)  # the index exists
    holder = _holding_tantivys_writer_lock(vault_dir, tmp_path / "release")
    waiting, sleep = [], time.sleep

    def pause(seconds):  # the search is waiting: let the other process go
        waiting.append(seconds)
        (tmp_path / "release").touch()
        while holder.poll() is None:
            sleep(0.01)

    monkeypatch.setattr(lexical.time, "sleep", pause)
    bob = vault.add("Bob prefers strong coffee")
    assert [hit.id for hit in vault.search("coffee", lexical_only=True)] == [bob.id]
    assert waiting, "the search never met the lock"
    vault.close()


def test_a_search_gives_up_on_tantivys_writer_lock_in_one_line(vault_dir, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from memvault.cli.app import app
    from memvault.index import lexical

    assert run_memvault("add", "Alice prefers green tea", "--vault", str(vault_dir)).returncode == 0
    assert run_memvault("search", "tea", "--lexical", "--vault", str(vault_dir)).returncode == 0
    holder = _holding_tantivys_writer_lock(vault_dir, tmp_path / "release")
    try:
        assert run_memvault("add", "Bob prefers strong coffee", "--vault", str(vault_dir)).returncode == 0
        monkeypatch.setattr(lexical, "WRITER_WAIT", 0.5)
        result = CliRunner().invoke(app, ["search", "coffee", "--vault", str(vault_dir)])
    finally:
        (tmp_path / "release").touch()
        holder.wait(timeout=60)
    assert result.exit_code == ExitCode.BUSY
    assert result.stderr.startswith("memvault: search index busy: another process held Tantivy's writer lock (")
    assert result.stderr.endswith(".tantivy-writer.lock) for over 0.5 s\n") and result.stderr.count("\n") == 1
