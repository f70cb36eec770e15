"""Sync between machines over a git remote: a bare repository on local disk and real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import run_memvault
from support.git import IDENTITY, git, is_clean

from memvault import Vault
from memvault.errors import ExitCode, InvalidInput
from memvault.remote.union_merge import merge


def _remote(tmp_path: Path) -> Path:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    return remote


def _machines(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Machine A publishes a new vault; machine B clones it with `memvault clone`."""
    remote = _remote(tmp_path)
    a = tmp_path / "a"
    assert run_memvault("init", str(a)).returncode == 0
    assert run_memvault("remote", "set", str(remote), "--vault", str(a)).returncode == 0
    done = run_memvault("sync", "--vault", str(a), "--json")
    assert done.returncode == 0, done.stderr
    b = tmp_path / "b"
    cloned = run_memvault("clone", str(remote), str(b))
    assert cloned.returncode == 0, cloned.stderr
    return remote, a, b


def _facts(vault_dir: Path) -> dict[str, str]:
    return {f.id: f.text for f in Vault(vault_dir).iter_facts()}


def _add_all(vault_dir: Path, texts: list[str]) -> list[subprocess.Popen]:
    return [
        subprocess.Popen([sys.executable, "-m", "memvault", "add", text, "--at", "2026-11-20T10:00:00",
                          "--vault", str(vault_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for text in texts
    ]


def _ids(procs: list[subprocess.Popen]) -> set[str]:
    ids = set()
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        ids.add(out.strip())
    return ids


def test_union_driver_keeps_multiline_facts_whole():
    """git's line union gives a shared last line to only one item; the item-aware driver keeps both."""
    base = "# 2026-11-20\n\n"
    ours = base + '- a <!-- mv {"id":"aaaaaaaaaaaaaaaa"} -->\n  same\n'
    theirs = base + '- c <!-- mv {"id":"cccccccccccccccc"} -->\n  same\n'
    merged = merge(base, ours, theirs, "logs/2026/2026-11-20.md")
    assert merged == ours + '- c <!-- mv {"id":"cccccccccccccccc"} -->\n  same\n'
    # both sides created the day's log (no base): one header, both items
    assert merge("", ours, theirs, "logs/2026/2026-11-20.md") == merged
    # a hand fix on their side only wins; an item both have is not duplicated
    fixed = theirs.replace("- c", "- C")
    assert merge(theirs, theirs, fixed, "logs/x.md") == fixed
    lines = '{"id": "x"}\n'
    assert merge("", lines, lines + '{"id": "y"}\n', "tombstones.jsonl") == lines + '{"id": "y"}\n'


def test_a_merge_driver_outliving_its_killed_git_never_brings_back_a_temp_file(tmp_path, monkeypatch):
    """Seen under load: after a signal during sync the vault held an untracked `.merge_file_bfl3qJ`.
    git killed mid-merge leaves its driver running; the sync's clean-up removed git's temp files,
    and the driver, still merging, then wrote its result to a new file of the same name. Here the
    clean-up lands while the driver merges: it writes nothing and the file stays gone."""
    from memvault.remote import union_merge

    base, ours, theirs = (tmp_path / f".merge_file_{side}" for side in ("base", "ours", "them"))
    for path, text in ((base, ""), (ours, "# 2026-11-20\n"), (theirs, "# 2026-11-20\n")):
        path.write_text(text)

    def merged_while_cleaned_up(*args):
        for path in (base, ours, theirs):
            path.unlink()  # what Storage._settle does to `.merge_file_*` once git is gone
        return merge(*args)

    monkeypatch.setattr(union_merge, "merge", merged_while_cleaned_up)
    assert union_merge.main([str(base), str(ours), str(theirs), "logs/2026/2026-11-20.md"]) == 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_two_machines_add_concurrently_and_sync_to_the_same_facts(tmp_path):
    """Adds run in parallel on both machines (one sync races the adds on A); after syncing both
    hold the union of every fact, once each, multi-line texts intact, no conflict markers, and
    the commits A had pushed are still in the history (merge, never rebase)."""
    remote, a, b = _machines(tmp_path)
    pushed = git(a, "rev-parse", "HEAD").strip()
    # the same last line on every fact: git's plain line union would split these items
    texts_a = [f"from a {i}\nshared last line" for i in range(4)]
    texts_b = [f"from b {i}\nshared last line" for i in range(4)]
    procs_a = _add_all(a, texts_a)
    procs_b = _add_all(b, texts_b)
    racing = subprocess.Popen([sys.executable, "-m", "memvault", "sync", "--vault", str(a)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ids = _ids(procs_a) | _ids(procs_b)
    racing.communicate(timeout=60)
    assert racing.returncode == 0
    for vault_dir in (a, b, a):
        done = run_memvault("sync", "--vault", str(vault_dir))
        assert done.returncode == 0, done.stderr
    facts_a, facts_b = _facts(a), _facts(b)
    assert len(ids) == 8
    assert facts_a == facts_b
    assert set(facts_a) == ids
    assert sorted(facts_a.values()) == sorted(texts_a + texts_b)
    log = (a / "logs" / "2026" / "2026-11-20.md").read_text()
    assert "<<<<<<<" not in log and ">>>>>>>" not in log
    assert log.count("# 2026-11-20") == 1
    assert is_clean(a) and is_clean(b)
    assert git(a, "rev-parse", "HEAD") == git(b, "rev-parse", "HEAD")
    assert subprocess.run(["git", "-C", str(a), "merge-base", "--is-ancestor", pushed, "HEAD"]).returncode == 0
    status = json.loads(run_memvault("status", "--json", "--vault", str(b)).stdout)
    assert status["remote"]["ahead"] == 0 and status["remote"]["behind"] == 0


@pytest.mark.slow
def test_two_syncs_of_one_clone_at_once_both_succeed(tmp_path):
    """Fault tried: a cron sync and a person's sync of one clone at once, while the other machine
    keeps pushing. git refused one's fetch ("cannot lock ref 'refs/remotes/origin/main'") or push,
    and that sync failed with exit 8 as if the remote were unreachable (4 of 8 rounds in one
    run). The second now waits for the first, saying so, then syncs."""
    _remote_dir, a, b = _machines(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys; from memvault.storage import lock; from memvault.vault import Vault; "
        "held = lock.OsLock(Vault(sys.argv[1]).storage.lock_path('sync.lock')); held.acquire(); "
        "print('held', flush=True); sys.stdin.read()"), str(b)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        Vault(a).add("Alice sent this while B was syncing")
        assert run_memvault("sync", "--vault", str(a)).returncode == 0
        waiting = subprocess.Popen([sys.executable, "-m", "memvault", "sync", "--vault", str(b)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # It waits for the sync under way, and says so: the lock is let go only once it has said
        # it (seen under load: let go after a fixed 2 s, before the second sync had even started).
        said = waiting.stderr.readline()
        assert waiting.poll() is None, said
        holder.stdin.close()
        _out, err = waiting.communicate(timeout=60)
    finally:
        holder.kill()
        holder.wait()
    assert waiting.returncode == 0, said + err
    assert said.startswith("memvault: waiting for another sync of") and "pid" in said
    assert "Alice sent this while B was syncing" in _facts(b).values()

    for round_ in range(4):  # the race itself: two syncs of B while A pushes
        Vault(a).add(f"round {round_} from A")
        Vault(b).add(f"round {round_} from B")
        pushing = subprocess.Popen([sys.executable, "-m", "memvault", "sync", "--vault", str(a)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        both = [subprocess.Popen([sys.executable, "-m", "memvault", "sync", "--vault", str(b)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        for proc in [pushing, *both]:
            _out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0 or (proc is pushing and proc.returncode == ExitCode.REMOTE), err
    assert run_memvault("sync", "--vault", str(a)).returncode == 0
    assert run_memvault("sync", "--vault", str(b)).returncode == 0
    assert _facts(a) == _facts(b) and is_clean(a) and is_clean(b)


def test_pages_changed_on_both_machines_stop_the_sync_and_change_nothing(tmp_path):
    """Two dreams rewrote the same page: exit 7, the page named, B exactly as before the sync."""
    remote, a, b = _machines(tmp_path)
    for vault_dir, words, fact in ((a, "Alice lives in Lyon.", "a's fact"), (b, "Alice lives in Paris.", "b's fact")):
        vault = Vault(vault_dir)
        vault.add(fact, at="2026-11-20T09:00:00")
        page = vault_dir / "wiki" / "people" / "alice.md"
        page.write_text(f"---\ntitle: Alice\n---\n# Alice\n\n{words}\n")
        vault.git.commit(["wiki/people/alice.md"], "dream: 2026-11-20..2026-11-20 — 1 created")
    assert run_memvault("sync", "--vault", str(a)).returncode == 0
    head, log = git(b, "rev-parse", "HEAD"), (b / "logs" / "2026" / "2026-11-20.md").read_text()

    done = run_memvault("sync", "--vault", str(b))

    assert done.returncode == ExitCode.SYNC_CONFLICT
    assert "wiki/people/alice.md" in done.stderr and "dream" in done.stderr
    assert done.stderr.count("\n") == 1
    assert git(b, "rev-parse", "HEAD") == head
    assert is_clean(b) and not (b / ".git" / "MERGE_HEAD").exists()
    assert (b / "wiki" / "people" / "alice.md").read_text().endswith("Alice lives in Paris.\n")
    assert (b / "logs" / "2026" / "2026-11-20.md").read_text() == log
    assert list(_facts(b).values()) == ["b's fact"]
    assert "no identity" not in done.stderr
    # On a machine with no git identity (memvault's own commits need none), the advice's `git merge`
    # would fail: it says to set one first, and with one set the merge goes ahead as advised.
    anonymous = {k: v for k, v in os.environ.items() if k not in IDENTITY}
    done = subprocess.run([sys.executable, "-m", "memvault", "sync", "--vault", str(b)], env=anonymous,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == ExitCode.SYNC_CONFLICT and done.stderr.count("\n") == 1
    assert "`git config --global user.email EMAIL`" in done.stderr and git(b, "rev-parse", "HEAD") == head
    assert subprocess.run(["git", "-C", str(b), "merge", "origin/main"], env=anonymous,
                          capture_output=True).returncode == 128  # "Committer identity unknown"
    subprocess.run(["git", "config", "--global", "user.name", "B"], env=anonymous, check=True)
    subprocess.run(["git", "config", "--global", "user.email", "b@example.test"], env=anonymous, check=True)
    merging = subprocess.run(["git", "-C", str(b), "merge", "origin/main"], env=anonymous, capture_output=True,
                             text=True)
    assert merging.returncode == 1 and "CONFLICT" in merging.stdout  # now the page to edit, as advised
    git(b, "merge", "--abort")
    # the library raises SyncConflict with the paths
    from memvault.errors import SyncConflict

    with pytest.raises(SyncConflict) as info:
        Vault(b).sync()
    assert info.value.paths == ["wiki/people/alice.md"]


def test_unreachable_remote_is_a_clear_error_and_changes_nothing(tmp_path, vault_dir):
    """Bad inputs tried: a remote path that does not exist (sync and clone), sync with no remote,
    an empty URL, a URL starting with '-', a non-empty clone target, a remote holding no vault."""
    done = run_memvault("sync", "--vault", str(vault_dir))
    assert done.returncode == ExitCode.REMOTE and "memvault remote set" in done.stderr
    for bad in ("", "--upload-pack=touch /tmp/x"):
        result = run_memvault("remote", "set", bad, "--vault", str(vault_dir))
        assert result.returncode == ExitCode.USAGE, result.stderr
    unset = run_memvault("remote", "--vault", str(vault_dir))  # bare `remote` shows it, as `remote show`
    assert unset.returncode == 0 and "no remote set" in unset.stderr
    missing = tmp_path / "nowhere" / "remote.git"
    assert run_memvault("remote", "set", str(missing), "--vault", str(vault_dir)).returncode == 0
    shown = run_memvault("remote", "--json", "--vault", str(vault_dir))
    assert shown.returncode == 0 and json.loads(shown.stdout)["url"] == str(missing)
    misplaced = run_memvault("remote", "--vault", str(tmp_path), "set", "/elsewhere.git", cwd=vault_dir)
    assert misplaced.returncode == ExitCode.USAGE and "after `remote set`" in misplaced.stderr
    assert json.loads(run_memvault("remote", "show", "--json", "--vault", str(vault_dir)).stdout)["url"] == str(missing)
    Vault(vault_dir).add("kept locally")
    head = git(vault_dir, "rev-parse", "HEAD")
    refs = git(vault_dir, "for-each-ref")

    done = run_memvault("sync", "--json", "--vault", str(vault_dir))

    assert done.returncode == ExitCode.REMOTE
    error = json.loads(done.stderr)["error"]
    assert error["type"] == "RemoteError" and str(missing) in error["message"]
    assert git(vault_dir, "rev-parse", "HEAD") == head and git(vault_dir, "for-each-ref") == refs
    assert is_clean(vault_dir)

    target = tmp_path / "clone-target"
    done = run_memvault("clone", str(missing), str(target))
    assert done.returncode == ExitCode.REMOTE and not target.exists()
    done = run_memvault("clone", str(_remote(tmp_path)), str(target))
    assert done.returncode == ExitCode.USAGE and "no memvault vault" in done.stderr and not target.exists()
    done = run_memvault("clone", str(missing), str(vault_dir))
    assert done.returncode == ExitCode.USAGE and "not empty" in done.stderr
    afile = tmp_path / "afile"
    afile.write_text("x")  # a file where a folder of the path should be: bad input, not a crash
    done = run_memvault("clone", str(vault_dir), str(afile / "sub"))
    assert done.returncode == ExitCode.USAGE and done.stderr.count("\n") == 1, done.stderr
    assert f"{afile} is not a directory" in done.stderr and afile.read_text() == "x"


def test_a_remote_with_vaults_on_branches_its_head_does_not_name_says_which(tmp_path, vault_dir):
    """Bad input tried: a bare remote (HEAD master, never pushed) holding a vault on two branches,
    neither named main: clone said it held no vault at all. With one vault branch beside a main
    that holds none, clone checked out main and said the same."""
    remote = _remote(tmp_path)
    Vault(vault_dir).add("Alice drinks green tea")
    git(vault_dir, "push", "-q", str(remote), "main:work", "main:home")
    target = tmp_path / "clone-target"
    done = run_memvault("clone", str(remote), str(target))
    assert done.returncode == ExitCode.USAGE and not target.exists(), done.stderr
    assert "several branches (home, work)" in done.stderr and "git clone -b home" in done.stderr, done.stderr
    git(tmp_path, "clone", "-q", "-b", "home", str(remote), str(target))
    assert "Alice drinks green tea" in run_memvault("recent", "--vault", str(target)).stdout

    # One branch holding a vault among others (a main without one): clone takes that branch.
    other = _remote(tmp_path / "other")
    git(vault_dir, "push", "-q", str(other), "main:work")
    readme = tmp_path / "readme"
    git(tmp_path, "init", "-q", "-b", "main", str(readme))
    (readme / "README").write_text("not a vault\n")
    git(readme, "add", "README")
    git(readme, "commit", "-qm", "readme")
    git(readme, "push", "-q", str(other), "main:main", "main:notes")
    third = tmp_path / "third"
    done = run_memvault("clone", str(other), str(third))
    assert done.returncode == 0, done.stderr
    assert git(third, "rev-parse", "--abbrev-ref", "HEAD").strip() == "work"
    assert "Alice drinks green tea" in run_memvault("recent", "--vault", str(third)).stdout


def test_a_plain_git_clone_gets_the_merge_driver_on_first_open(tmp_path):
    """git config is not pushed: opening a vault installs the driver; `sync` with nothing new is a no-op."""
    remote, a, _ = _machines(tmp_path)
    plain = tmp_path / "plain"
    subprocess.run(["git", "clone", "-q", "-b", "main", str(remote), str(plain)], check=True)
    assert "memvault.remote.union_merge" not in (plain / ".git" / "config").read_text()
    done = run_memvault("sync", "--vault", str(plain))
    assert done.returncode == 0 and "up to date" in done.stdout
    assert "memvault.remote.union_merge" in git(plain, "config", "--get", "merge.union.driver")


def test_a_merge_driver_naming_its_former_module_is_rewritten_on_open(tmp_path):
    """A vault set up before the driver moved to memvault.remote has `-m memvault.union_merge` in
    its git config, a module that is gone: opening it installs the driver where it is now, so the
    next sync still merges two machines' adds to one daily log item by item."""
    _remote_dir, a, b = _machines(tmp_path)
    for machine in (a, b):
        driver = git(machine, "config", "--get", "merge.union.driver").strip()
        git(machine, "config", "merge.union.driver", driver.replace(".remote.union_merge", ".union_merge"))
    for machine, text in ((a, "Alice drinks green tea"), (b, "Bob drinks coffee")):
        added = run_memvault("add", text, "--at", "2026-11-01T09:00", "--vault", str(machine))
        assert added.returncode == 0, added.stderr
    assert run_memvault("sync", "--vault", str(a)).returncode == 0

    done = run_memvault("sync", "--vault", str(b))

    assert done.returncode == 0, done.stderr
    assert " -m memvault.remote.union_merge " in git(b, "config", "--get", "merge.union.driver")
    listed = run_memvault("recent", "--vault", str(b)).stdout
    assert "Alice drinks green tea" in listed and "Bob drinks coffee" in listed and is_clean(b)


def test_uncommitted_hand_edits_block_the_sync(tmp_path, vault_dir):
    """Bad input tried: a hand-edited tracked file left uncommitted; the sync refuses before merging."""
    remote = _remote(tmp_path)
    Vault(vault_dir).set_remote(str(remote))
    (vault_dir / "MEMORY.md").write_text("edited by hand\n")
    done = run_memvault("sync", "--vault", str(vault_dir))
    assert done.returncode == ExitCode.USAGE and "MEMORY.md" in done.stderr and "doctor --fix" in done.stderr
    assert (vault_dir / "MEMORY.md").read_text() == "edited by hand\n"


def test_after_a_sync_the_index_catches_up_with_only_the_changed_files(tmp_path):
    remote = _remote(tmp_path)
    a = Vault.init(tmp_path / "a")
    a.set_remote(str(remote))
    for i in range(5):
        a.add(f"older fact number {i} about the garden", at="2026-11-01T09:00:00")
    a.sync()
    b = Vault.clone(str(remote), tmp_path / "b")
    assert a.sync().index is None  # nothing came in, and no index was ever built
    a.reindex()
    b.add("Dana adopted a grey cat named Pixel", at="2026-11-02T09:00:00")
    b.sync()

    report = a.sync()

    assert report.received == 1 and report.changed == ["logs/2026/2026-11-02.md"]
    # the new fact only; a rebuild would have reused the cached vectors of the five older facts
    assert (report.index["embedded"], report.index["reused"]) == (1, 0)
    assert a.index_status()["drift"] == 0
    assert any("Pixel" in hit.text for hit in a.search("grey cat", limit=3))


def test_switching_to_a_new_empty_remote_pushes_the_whole_history(tmp_path, vault_dir):
    first, second = _remote(tmp_path / "a"), _remote(tmp_path / "b")
    vault = Vault.open(vault_dir)
    vault.add("synced to the first remote")
    vault.set_remote(str(first))
    vault.sync()
    info = vault.set_remote(str(second))
    assert info["synced"] is False and info["ahead"] is None  # nothing known of the new remote yet
    report = vault.sync()
    assert report.sent == int(git(vault_dir, "rev-list", "--count", "HEAD"))
    assert git(second, "rev-parse", "main") == git(vault_dir, "rev-parse", "HEAD")
    with pytest.raises(InvalidInput, match="empty"):
        vault.set_remote("  ")


def test_sync_neither_stops_for_nor_pushes_files_that_are_not_the_vaults(tmp_path):
    """A note kept in the vault folder and a merge temp file left by a killed sync: sync goes on
    and the remote never receives them."""
    remote, a, _b = _machines(tmp_path)
    (a / "notes.txt").write_text("mine\n")
    (a / ".merge_file_x1Y2z3").write_text("temp\n")
    assert run_memvault("add", "Alice prefers green tea", "--vault", str(a)).returncode == 0
    done = run_memvault("sync", "--vault", str(a))
    assert done.returncode == 0, done.stderr
    pushed = subprocess.run(["git", "-C", str(remote), "ls-tree", "-r", "--name-only", "main"],
                            capture_output=True, text=True, check=True).stdout.split()
    assert "notes.txt" not in pushed and not any(".merge_file" in p for p in pushed)
    assert any(p.startswith("logs/") for p in pushed)
    # a hand edit of the vault's own files still stops it
    with open(a / "MEMORY.md", "a") as f:
        f.write("- edited by hand\n")
    stopped = run_memvault("sync", "--vault", str(a))
    assert stopped.returncode == ExitCode.USAGE and "MEMORY.md" in stopped.stderr


def test_two_vaults_created_apart_merge_through_one_remote(tmp_path):
    """Unrelated histories: A publishes, B (a separate `memvault init` with its own facts) syncs
    with the same remote and gets A's facts; A's next sync gets B's. Nothing is lost either way."""
    remote = _remote(tmp_path)
    a, b = tmp_path / "a", tmp_path / "b"
    for root, text in ((a, "from A: Alice drinks green tea"), (b, "from B: Bob fixed the kitchen tap")):
        # created on different days: two first commits that are not the same commit
        when = "2026-11-01T09:00:00" if root == a else "2026-11-02T09:00:00"
        dates = {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
        assert run_memvault("init", str(root), env=dates).returncode == 0
        assert run_memvault("add", text, "--at", "2026-11-20T10:00:00", "--vault", str(root)).returncode == 0
        assert run_memvault("remote", "set", str(remote), "--vault", str(root)).returncode == 0
    assert run_memvault("sync", "--vault", str(a)).returncode == 0
    done = run_memvault("sync", "--vault", str(b))
    assert done.returncode == 0, done.stderr
    assert run_memvault("sync", "--vault", str(a)).returncode == 0
    assert len(git(a, "rev-list", "--max-parents=0", "HEAD").split()) == 2  # the two histories, joined
    for root in (a, b):
        assert sorted(_facts(root).values()) == ["from A: Alice drinks green tea", "from B: Bob fixed the kitchen tap"]
        assert is_clean(root)


def test_two_vaults_apart_with_different_settings_stop_with_advice_that_works(tmp_path):
    """Unrelated histories whose memvault.toml differ: exit 7, nothing merged, and the advice
    names the git flag such a merge needs (plain `git merge` refuses unrelated histories)."""
    remote = _remote(tmp_path)
    a, b = tmp_path / "a", tmp_path / "b"
    for root, when in ((a, "2026-11-01T09:00:00"), (b, "2026-11-02T09:00:00")):
        dates = {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
        assert run_memvault("init", str(root), env=dates).returncode == 0
        assert run_memvault("remote", "set", str(remote), "--vault", str(root)).returncode == 0
    config = b / "memvault.toml"
    config.write_text(config.read_text().replace("max_days = 14", "max_days = 7"))
    git(b, "commit", "-qam", "shorter batches")
    assert run_memvault("sync", "--vault", str(a)).returncode == 0
    head = git(b, "rev-parse", "HEAD")
    done = run_memvault("sync", "--vault", str(b))
    assert done.returncode == ExitCode.SYNC_CONFLICT, done.stderr
    assert "memvault.toml" in done.stderr and "git merge --allow-unrelated-histories origin/main" in done.stderr
    assert git(b, "rev-parse", "HEAD") == head and is_clean(b)


def test_a_push_the_remote_refuses_says_the_remotes_reason(tmp_path):
    """A remote that is a working copy with main checked out refuses the push: the error was cut
    at git's "failed to push some refs to '…" and said "merged locally" when nothing was merged."""
    work = tmp_path / "work"
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    vault = tmp_path / "v"
    assert run_memvault("init", str(vault)).returncode == 0
    assert run_memvault("remote", "set", str(work), "--vault", str(vault)).returncode == 0
    done = run_memvault("sync", "--vault", str(vault))
    assert done.returncode == ExitCode.REMOTE, done.stderr
    line = done.stderr.strip()
    assert "\n" not in line and "refusing to update checked out branch" in line and "remote rejected" in line, line
    assert "merged locally" not in line
