"""Real storage faults: a disk that fills up, a read-only vault, files memvault may not write, a
torn end of a daily log. Each must give one clear line and a documented exit code, tear nothing,
and never commit a failed add later.

The full-disk and read-only tests mount a small tmpfs (root only); elsewhere they are skipped
with the reason.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import Cli, run_memvault
from support.git import assert_fsck_clean, git, is_clean, snapshot
from support.process import compiled_children  # noqa: F401  (fixture)

from memvault import Vault
from memvault.errors import ExitCode


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs mounted for the test: a real file system that fills up and can turn read-only."""
    where = tmp_path / "disk"
    where.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where)],
                              capture_output=True, text=True)
    except FileNotFoundError:
        pytest.skip("no `mount` command here: the full-disk and read-only tests need one (and root)")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.strip() or 'refused'}); these tests need root")
    yield where
    subprocess.run(["umount", "-l", str(where)], capture_output=True)


def fill(disk: Path, leave: int) -> Path:
    """Fill the disk with a filler file until only `leave` bytes are free; returns the filler."""
    filler = disk / "filler"
    stat = os.statvfs(disk)
    free = stat.f_bavail * stat.f_frsize
    with open(filler, "ab") as f:
        f.write(b"\0" * max(free - leave, 0))
    return filler


def one_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def add(vault_dir: Path, text: str, *more: str):
    return run_memvault("add", text, "--vault", str(vault_dir), *more)


def add_stdin(vault_dir: Path, *facts: dict):
    return run_memvault("add", "--stdin", "--vault", str(vault_dir), input="\n".join(json.dumps(f) for f in facts))


def texts(vault_dir: Path) -> list[str]:
    return sorted(f.text for f in Vault.open(vault_dir).iter_facts())


def incompressible(size: int) -> str:
    """Text git cannot compress much (so its object is about as large as the text)."""
    return base64.b64encode(os.urandom(size * 3 // 4)).decode()


def test_disk_full_midway_through_an_append_adds_nothing_and_tears_nothing(small_disk):
    """Fault tried: the disk fills while a 160 KB fact is being appended to an existing day's log."""
    vault_dir = Vault.init(small_disk / "vault").root
    assert add(vault_dir, "first", "--at", "2026-11-02").returncode == 0
    log = vault_dir / "logs/2026/2026-11-02.md"
    before, head = log.read_bytes(), git(vault_dir, "rev-parse", "HEAD")
    filler = fill(small_disk, leave=48 * 1024)

    result = add_stdin(vault_dir, {"text": "big " + "x" * 160_000, "at": "2026-11-02"})

    assert result.returncode == ExitCode.UNWRITABLE
    assert one_line(result.stderr) == "memvault: disk full while writing logs/2026/2026-11-02.md; nothing was added"
    assert log.read_bytes() == before, "the torn part of the append must be cut back"
    assert git(vault_dir, "rev-parse", "HEAD") == head and is_clean(vault_dir)
    assert not (vault_dir / ".memvault" / "journal.json").exists()
    # Reading still works on the full disk.
    assert run_memvault("recent", "--vault", str(vault_dir)).returncode == 0
    filler.unlink()
    assert add(vault_dir, "after", "--at", "2026-11-02").returncode == 0
    assert texts(vault_dir) == ["after", "first"]
    assert "big xxx" not in git(vault_dir, "log", "-p")
    assert_fsck_clean(vault_dir)


def test_git_running_out_of_disk_reads_the_same_and_the_add_is_undone(small_disk):
    """Fault tried: the append fits but git cannot store the object (No space left on device)."""
    vault_dir = Vault.init(small_disk / "vault").root
    assert add(vault_dir, "first", "--at", "2026-11-02").returncode == 0
    log = vault_dir / "logs/2026/2026-11-02.md"
    before, head = log.read_bytes(), git(vault_dir, "rev-parse", "HEAD")
    filler = fill(small_disk, leave=140 * 1024)

    result = add_stdin(vault_dir, {"text": "noise " + incompressible(100_000), "at": "2026-11-02"})

    assert result.returncode == ExitCode.UNWRITABLE, result.stderr
    line = one_line(result.stderr)
    assert line.startswith("memvault: disk full while writing .git") and line.endswith("nothing was added")
    assert log.read_bytes() == before and git(vault_dir, "rev-parse", "HEAD") == head
    filler.unlink()
    assert is_clean(vault_dir)
    assert add(vault_dir, "after", "--at", "2026-11-02").returncode == 0
    assert texts(vault_dir) == ["after", "first"]
    assert_fsck_clean(vault_dir)


def test_a_full_disk_fails_forget_and_a_batch_whole(small_disk):
    """Faults tried: `forget` and a 2,000-fact `add --stdin` over 200 days on a disk with 16 KB free."""
    vault_dir = Vault.init(small_disk / "vault").root
    fact_id = add(vault_dir, "keep me", "--at", "2026-11-02").stdout.strip()
    head = git(vault_dir, "rev-parse", "HEAD")
    filler = fill(small_disk, leave=16 * 1024)

    batch = [{"text": f"batch {i} " + "y" * 200, "at": f"2025-{1 + i % 10:02d}-{1 + i % 20:02d}"} for i in range(2000)]
    result = add_stdin(vault_dir, *batch)
    assert result.returncode == ExitCode.UNWRITABLE
    assert "disk full while writing" in one_line(result.stderr)
    forget = run_memvault("forget", fact_id, "--vault", str(vault_dir))
    assert forget.returncode in (0, ExitCode.UNWRITABLE), forget.stderr
    if forget.returncode:
        assert "disk full while writing" in one_line(forget.stderr)
        assert git(vault_dir, "rev-parse", "HEAD") == head
    filler.unlink()
    assert is_clean(vault_dir) and list((vault_dir / "logs").rglob("2025-*.md")) == []
    assert run_memvault("status", "--vault", str(vault_dir)).returncode == 0
    assert_fsck_clean(vault_dir)


def test_a_disk_filling_up_at_any_step_of_an_add_refuses_it_whole_and_reads_go_on(small_disk):
    """Fault tried: the disk fills up at each step of an add in turn: the append, the journal,
    git's index, its objects, the ref update. Seen at the ref update (add number 77 on a 2 MiB
    disk): "unexpected error: git commit failed: fatal: cannot update ref 'refs/heads/main'",
    exit 1, a journal left behind, and `status`, `doctor` and `search` exited 9 ("disk full while
    writing .git/index.lock") until space was freed: the undo itself needed room for git's index."""
    vault_dir = Vault.init(small_disk / "vault").root
    cli = Cli(vault_dir)
    assert cli("add", "Alice prefers green tea").exit_code == 0
    assert cli("search", "tea", "--lexical").exit_code == 0  # the index exists
    refused = set()
    for blocks in range(24):
        assert cli("add", "with room").exit_code == 0  # (which puts back the room kept for an undo)
        filler = fill(small_disk, leave=blocks * 4096)
        before = snapshot(vault_dir)
        added = cli("add", f"fact number {blocks}")
        if added.exit_code == 0:
            filler.unlink()
            continue
        assert added.exit_code == ExitCode.UNWRITABLE, added.stderr
        line = one_line(added.stderr)
        assert re.fullmatch(r"memvault: disk full while writing \S+; nothing was added", line), line
        refused.add(line)
        # Nothing half done: files and history as before, no journal left (git's index below).
        assert snapshot(vault_dir) == before, line
        assert not (vault_dir / ".memvault" / "journal.json").exists(), line
        # Reading goes on, on the full disk.
        for args in (["recent"], ["status"], ["doctor"], ["history", "x" * 16], ["sessions"]):
            read = cli(*args)
            assert read.exit_code in (0, ExitCode.NOT_FOUND), (line, args, read.stderr)
            assert "disk full" not in read.stderr, (line, args)
        # Search needs some room to open its index (sqlite's shared memory): a refused write gives
        # up the room memvault keeps for undoing one (.memvault/reserve), so it has it.
        search = cli("search", "tea", "--lexical")
        assert search.exit_code == 0 and "Alice" in search.stdout, (line, search.stderr)
        filler.unlink()
        assert is_clean(vault_dir), line  # (git status itself needs room to run)
    assert len(refused) >= 3, refused  # several steps were hit, not one
    assert cli("add", "with room again").exit_code == 0 and is_clean(vault_dir)
    assert_fsck_clean(vault_dir)


def test_a_read_only_vault_reads_and_refuses_writes_in_one_line(small_disk):
    """Fault tried: the vault's file system remounted read-only under it."""
    vault_dir = Vault.init(small_disk / "vault").root
    fact_id = add(vault_dir, "Alice prefers green tea").stdout.strip()
    assert run_memvault("search", "tea", "--vault", str(vault_dir)).returncode == 0  # builds the index
    head = git(vault_dir, "rev-parse", "HEAD")
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    try:
        for args in (["add", "more"], ["forget", fact_id]):
            result = run_memvault(*args, "--vault", str(vault_dir))
            assert result.returncode == ExitCode.UNWRITABLE, (args, result.stderr)
            assert "read-only file system" in one_line(result.stderr), args
            assert "unexpected error" not in result.stderr
        for args in (["recent"], ["show", fact_id], ["status"]):
            result = run_memvault(*args, "--vault", str(vault_dir))
            assert result.returncode == 0, (args, result.stderr)
        # Searched from an index kept in the user's cache (the vault's own cannot even be opened:
        # its sqlite needs to write its WAL); said once, when it is built.
        result = run_memvault("search", "tea", "--json", "--vault", str(vault_dir))
        assert result.returncode == 0 and [hit["id"] for hit in json.loads(result.stdout)] == [fact_id]
        copy = Path(os.environ["HOME"], ".cache", "memvault", "vaults")
        assert f"in {copy}/vault-" in one_line(result.stderr) and "(this user cannot write the vault)" in result.stderr
        again = run_memvault("search", "green tea", "--json", "--vault", str(vault_dir))
        assert again.returncode == 0 and again.stderr == "" and json.loads(again.stdout)[0]["id"] == fact_id
        assert run_memvault("reindex", "--clear", "--vault", str(vault_dir)).returncode == 0  # that copy
        doctor = run_memvault("doctor", "--fix", "--vault", str(vault_dir))  # nothing to mend
        assert doctor.returncode == 0 and f"(kept in {copy}/vault-" in doctor.stdout, doctor.stdout
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(small_disk)], check=True)
    assert git(vault_dir, "rev-parse", "HEAD") == head and is_clean(vault_dir)
    assert add(vault_dir, "writable again").returncode == 0
    assert texts(vault_dir) == ["Alice prefers green tea", "writable again"]


def _without_root_overrides() -> None:
    """In the child, before exec: drop the capabilities that let root write files it may not
    (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), so permission bits apply to it as to anyone."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):
        if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def test_a_vault_the_user_may_not_write_is_searched_without_writing_it(vault_dir):
    """Fault tried: a vault (its .memvault/ included) the user may read but not write: another
    user's, or a backup. Search and context work from an index in the user's cache; the vault is
    not touched; a write is still refused in one line."""
    fact_id = add(vault_dir, "Alice prefers green tea").stdout.strip()
    assert run_memvault("search", "tea", "--vault", str(vault_dir)).returncode == 0  # the vault's own index
    paths = [vault_dir, *vault_dir.rglob("*")]
    modes = {path: path.stat().st_mode for path in paths}
    before = {path: (path.stat().st_mtime_ns, path.stat().st_size) for path in paths}
    for path in paths:
        path.chmod(modes[path] & ~0o222)
    try:
        runs = []
        for args in (["search", "tea", "--json"], ["search", "green tea", "--json"], ["context", "tea"],
                     ["add", "not mine"]):
            command = [sys.executable, "-m", "memvault", *args, "--vault", str(vault_dir)]
            preexec = _without_root_overrides if os.geteuid() == 0 else None
            try:
                runs.append(subprocess.run(command, capture_output=True, text=True, preexec_fn=preexec, timeout=120))
            except subprocess.SubprocessError as e:
                pytest.skip(f"cannot drop root's file-permission override here ({e}); needs CAP_SETPCAP")
    finally:
        for path in paths:
            path.chmod(modes[path])
    first, second, context, refused = runs
    assert first.returncode == 0 and [hit["id"] for hit in json.loads(first.stdout)] == [fact_id]
    assert "(this user cannot write the vault)" in one_line(first.stderr)
    assert second.returncode == 0 and second.stderr == "" and json.loads(second.stdout)[0]["id"] == fact_id
    assert context.returncode == 0 and fact_id in context.stdout, context.stderr
    assert refused.returncode == ExitCode.UNWRITABLE and "permission denied" in one_line(refused.stderr)
    assert {path: (path.stat().st_mtime_ns, path.stat().st_size) for path in paths} == before
    assert list(vault_dir.rglob("*")) == paths[1:] and texts(vault_dir) == ["Alice prefers green tea"]


def test_permission_denied_is_one_clear_line(vault_dir):
    """Fault tried: a vault whose files the user may read but not write."""
    assert add(vault_dir, "mine").returncode == 0
    paths = [vault_dir, *vault_dir.rglob("*")]
    modes = {path: path.stat().st_mode for path in paths}
    for path in paths:
        path.chmod(modes[path] & ~0o222)
    try:
        command = [sys.executable, "-m", "memvault", "add", "not mine", "--vault", str(vault_dir)]
        preexec = _without_root_overrides if os.geteuid() == 0 else None
        try:
            result = subprocess.run(command, capture_output=True, text=True, preexec_fn=preexec, timeout=60)
        except subprocess.SubprocessError as e:
            pytest.skip(f"cannot drop root's file-permission override here ({e}); needs CAP_SETPCAP")
    finally:
        for path in paths:
            path.chmod(modes[path])
    assert result.returncode == ExitCode.UNWRITABLE, result.stderr
    assert one_line(result.stderr).startswith("memvault: permission denied writing .memvault/")
    assert texts(vault_dir) == ["mine"] and is_clean(vault_dir)


def test_a_vault_the_user_may_not_write_and_a_cache_folder_that_cannot_be_made_is_one_clear_line(vault_dir, tmp_path):
    """Fault tried: a vault the user may not write, searched with an XDG_CACHE_HOME under a file
    (a typo in a profile, a dotfile manager's link): its index has nowhere to go."""
    assert add(vault_dir, "Alice prefers green tea").returncode == 0
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    paths = [vault_dir, *vault_dir.rglob("*")]
    modes = {path: path.stat().st_mode for path in paths}
    for path in paths:
        path.chmod(modes[path] & ~0o222)
    try:
        runs = []
        for args in (["search", "tea"], ["status"]):
            command = [sys.executable, "-m", "memvault", *args, "--vault", str(vault_dir)]
            preexec = _without_root_overrides if os.geteuid() == 0 else None
            try:
                runs.append(subprocess.run(command, capture_output=True, text=True, preexec_fn=preexec, timeout=60,
                                           env={**os.environ, "XDG_CACHE_HOME": str(blocked / "cache")}))
            except subprocess.SubprocessError as e:
                pytest.skip(f"cannot drop root's file-permission override here ({e}); needs CAP_SETPCAP")
    finally:
        for path in paths:
            path.chmod(modes[path])
    for result in runs:  # "unexpected error: NotADirectoryError: [Errno 20] Not a directory: ...", exit 1
        assert result.returncode == ExitCode.UNWRITABLE, result.stderr
        assert len(result.stderr.splitlines()) == 1 and str(blocked / "cache") in result.stderr, result.stderr
        assert "unexpected error" not in result.stderr
    assert texts(vault_dir) == ["Alice prefers green tea"] and is_clean(vault_dir)


def test_a_folder_where_a_daily_log_belongs_is_one_clear_line(vault_dir):
    """Fault tried: a folder named like a daily log (made by hand, or by a tool gone wrong): reads
    name it, an add to that day is refused with exit 9, an add to another day still works."""
    assert add(vault_dir, "mine").returncode == 0
    (vault_dir / "logs" / "2026" / "2026-11-22.md").mkdir(parents=True)
    for command in (["recent"], ["status"], ["add", "that day", "--at", "2026-11-22"]):
        result = run_memvault(*command, "--vault", str(vault_dir))
        assert result.returncode != 0 and "logs/2026/2026-11-22.md" in one_line(result.stderr), result.stderr
        assert "unexpected error" not in result.stderr
    assert result.returncode == ExitCode.UNWRITABLE
    assert add(vault_dir, "another day", "--at", "2026-11-23").returncode == 0
    (vault_dir / "logs" / "2026" / "2026-11-22.md").rmdir()
    assert texts(vault_dir) == ["another day", "mine"] and is_clean(vault_dir)


def test_a_log_with_a_torn_or_hand_edited_end_never_glues_the_next_item(vault_dir):
    """Bad inputs tried: a day's log ending mid-line, once after a hand edit that dropped the final
    newline, once with an item torn in the middle of its metadata (as a crashed tool might leave)."""
    assert add(vault_dir, "first", "--at", "2026-11-02").returncode == 0
    log = vault_dir / "logs/2026/2026-11-02.md"
    item = log.read_text().splitlines()[-1]
    log.write_text(log.read_text().rstrip("\n"))  # an editor that saves without a final newline

    assert add(vault_dir, "second", "--at", "2026-11-02").returncode == 0
    vault = Vault.open(vault_dir)
    assert [f.text for f in vault.iter_facts()] == ["first", "second"] and vault.problems() == []

    with open(log, "a") as f:
        f.write(item[: len(item) // 2])  # torn: half an item, no newline
    assert add(vault_dir, "third", "--at", "2026-11-02").returncode == 0
    vault = Vault.open(vault_dir)
    assert [f.text for f in vault.iter_facts()] == ["first", "second", "third"]
    assert len(vault.problems()) == 1  # the torn line is reported by doctor; the new item is whole
    assert is_clean(vault_dir)


def test_a_killed_writers_git_still_committing_is_waited_for_never_undone_under_it(vault_dir, monkeypatch):
    """Fault tried: a writer killed while its git (slow, on a loaded machine) is still at work. The
    next command must not cut the files back under a commit that may yet land: it leaves the
    journal (reading goes on, a write is refused with exit 4), and settles once that git is gone."""
    import memvault.storage.gitstore as gitstore
    from memvault.storage.journal import APPEND, Entry

    vault = Vault.open(vault_dir)
    fact = vault.add("Alice prefers green tea", at="2026-11-01T09:00:00")
    log = vault_dir / fact.path
    size = log.stat().st_size
    with open(log, "a") as f:
        f.write("- half-committed <!-- mv {\"id\":\"bbbbbbbbbbbbbbbb\",\"at\":\"2026-11-01T10:00:00+00:00\"} -->\n")
    dead_writer = 4194000  # a pid no process has: the killed writer
    storage = vault.storage
    storage.journal.begin(Entry(APPEND, [fact.path], "add: half-committed", storage.git.head(),
                                {fact.path: size}, writer=dead_writer))
    # its git, still working in the vault (blocked reading stdin, as a slow commit would be)
    slow_git = subprocess.Popen(["git", "hash-object", "--stdin"], cwd=vault_dir, stdin=subprocess.PIPE,
                                env={**os.environ, gitstore.WRITER_ENV: str(dead_writer)})
    while not gitstore.git_running_in(vault_dir):  # until the child has become git
        pass
    try:
        monkeypatch.setattr(gitstore, "GIT_LOCK_WAIT_SECONDS", 0.3)
        notes = Vault.open(vault_dir).storage.recovery.recover()
        assert any("still committing" in n for n in notes)
        assert "half-committed" in log.read_text() and storage.journal.exists()
        with pytest.raises(Exception, match="still committing"):
            Vault.open(vault_dir).add("Bob drinks coffee")
    finally:
        slow_git.communicate(b"")
    Vault.open(vault_dir)  # the next command settles it: that git has gone, its commit did not land
    assert log.stat().st_size == size and is_clean(vault_dir) and not storage.journal.exists()


def test_ctrl_c_while_python_starts_git_never_undoes_a_write_under_that_git(vault_dir, monkeypatch):
    """Fault tried (found by a stress run under load): SIGTERM landing while Python is starting
    `git commit`, where subprocess neither kills nor waits for the child. The write's own undo must
    wait for that git (a commit landing after a cut-back left HEAD holding a tombstone the file no
    longer had); while it still runs the journal stays, and the next command settles it."""
    import memvault.storage.gitstore as gitstore
    from memvault.storage.journal import APPEND

    vault = Vault.open(vault_dir)
    fact = vault.add("Alice prefers green tea", at="2026-11-01T09:00:00")
    log = vault_dir / fact.path
    size = log.stat().st_size
    storage = vault.storage
    monkeypatch.setattr(gitstore, "GIT_LOCK_WAIT_SECONDS", 0.3)
    our_git = subprocess.Popen(["git", "hash-object", "--stdin"], cwd=vault_dir, stdin=subprocess.PIPE,
                               stdout=subprocess.DEVNULL, env={**os.environ, gitstore.WRITER_ENV: str(os.getpid())})
    while not gitstore.git_running_in(vault_dir):  # until the child has become git
        pass
    try:
        with pytest.raises(KeyboardInterrupt), storage.write_lock(), \
                storage.transaction(APPEND, [fact.path], "add: interrupted"):
            with open(log, "a") as f:
                f.write('- interrupted <!-- mv {"id":"cccccccccccccccc","at":"2026-11-01T10:00:00+00:00"} -->\n')
            raise KeyboardInterrupt
        assert log.stat().st_size > size and storage.journal.exists()  # not undone under a live git
    finally:
        our_git.communicate(b"")
    Vault.open(vault_dir)
    assert log.stat().st_size == size and is_clean(vault_dir) and not storage.journal.exists()


def _vault_files(vault_dir: Path) -> dict[str, bytes]:
    """Every file of the vault and its repository (not .memvault/, whose lock files a command may touch)."""
    return {p.relative_to(vault_dir).as_posix(): p.read_bytes() for p in vault_dir.rglob("*")
            if p.is_file() and ".memvault" not in p.relative_to(vault_dir).parts}


def _fix_refused(vault_dir, files: dict[str, bytes], says: str) -> None:
    """`doctor --fix` on the full disk: exit 9 in one line, every file as before, no .git set aside."""
    result = run_memvault("doctor", "--fix", "--vault", str(vault_dir))
    assert result.returncode == ExitCode.UNWRITABLE, result.stdout + result.stderr
    assert one_line(result.stderr).startswith(f"memvault: {says}")
    assert _vault_files(vault_dir) == files
    assert list((vault_dir / ".memvault").glob("broken-git-*")) == []


def test_on_a_full_disk_status_and_doctor_read_without_writing(small_disk):
    """Fault tried: no byte free under `status`, `doctor` and `doctor --fix` of a healthy vault (git's
    status would write .git/index.lock, and doctor took the failure for a broken repository)."""
    vault_dir = Vault.init(small_disk / "vault").root
    for text in ("Alice prefers green tea", "Bob is on call"):
        assert add(vault_dir, text).returncode == 0
    before = _vault_files(vault_dir)
    filler = fill(small_disk, leave=0)

    for args in (["status"], ["doctor"]):
        result = run_memvault(*args, "--vault", str(vault_dir))
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        assert "is broken" not in result.stdout
    # The one repair due, building the search index, cannot write: exit 9, the repository left alone.
    _fix_refused(vault_dir, before, "disk full while writing .memvault")
    filler.unlink()
    assert add(vault_dir, "after").returncode == 0
    assert texts(vault_dir) == ["Alice prefers green tea", "Bob is on call", "after"]


def test_a_repair_of_a_broken_repository_that_cannot_write_leaves_its_git_in_place(small_disk):
    """Fault tried: `doctor --fix` of a vault whose .git/HEAD is garbage, on a disk with no byte free
    (the new repository cannot be made after the broken .git was moved aside)."""
    vault_dir = Vault.init(small_disk / "vault").root
    for text in ("Alice prefers green tea", "Bob is on call"):
        assert add(vault_dir, text).returncode == 0
    (vault_dir / ".git" / "HEAD").write_text("garbage\n")
    broken = _vault_files(vault_dir)
    filler = fill(small_disk, leave=0)

    # The broken .git is back where it was, as it was, and nothing half-made is left.
    _fix_refused(vault_dir, broken, "disk full while writing")

    filler.unlink()
    assert run_memvault("doctor", "--fix", "--vault", str(vault_dir)).returncode == 0
    assert texts(vault_dir) == ["Alice prefers green tea", "Bob is on call"] and is_clean(vault_dir)
    assert_fsck_clean(vault_dir)


def test_on_a_full_disk_a_built_index_is_not_taken_for_damage(small_disk):
    """Fault tried: no byte free under `search`, `status` and `doctor` of a vault whose index is
    built (sqlite writes its shared-memory file even to read, and says only "disk I/O error"):
    search exits 9 in one line without "rebuilding" a damaged index, no half-built generation
    is left, status and doctor say why it cannot be opened, and the next search after freeing
    space answers from the same index."""
    vault_dir = Vault.init(small_disk / "vault").root
    assert add(vault_dir, "Alice prefers green tea").returncode == 0
    assert run_memvault("search", "tea", "--lexical", "--vault", str(vault_dir)).returncode == 0
    generations = sorted(p.name for p in (vault_dir / ".memvault" / "index").iterdir())
    filler = fill(small_disk, leave=0)

    result = run_memvault("search", "tea", "--lexical", "--vault", str(vault_dir))
    assert result.returncode == ExitCode.UNWRITABLE, result.stdout + result.stderr
    assert one_line(result.stderr).startswith("memvault: disk full while writing .memvault")
    assert "damaged" not in result.stderr
    assert sorted(p.name for p in (vault_dir / ".memvault" / "index").iterdir()) == generations
    status = json.loads(run_memvault("status", "--json", "--vault", str(vault_dir)).stdout)["index"]
    assert status["damaged"] is None and status["unavailable"].startswith("disk full")
    doctor = run_memvault("doctor", "--vault", str(vault_dir))
    assert "cannot be opened: disk full" in doctor.stdout and "damaged" not in doctor.stdout

    filler.unlink()
    result = run_memvault("search", "tea", "--lexical", "--vault", str(vault_dir))
    assert result.returncode == 0 and "Alice prefers green tea" in result.stdout and result.stderr == ""


def test_a_cache_of_the_first_layout_on_a_full_disk_is_dropped_not_an_error_on_every_open(small_disk):
    """Fault tried: an embedding cache in the first layout (vectors inside a WITHOUT ROWID key
    tree) on a disk with no room to copy it into the current one. It is only a cache: dropped with
    one notice (freeing its room), and the cache opened after works, instead of the move failing
    again on every open."""
    import sqlite3

    from memvault.index.embedding_cache import EmbeddingCache

    path = small_disk / "cache" / "embeddings.sqlite"
    path.parent.mkdir()
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE vectors (model TEXT, hash BLOB, vector BLOB, PRIMARY KEY (model, hash)) WITHOUT ROWID")
    rows = [("m", os.urandom(32), os.urandom(1536)) for _ in range(300)]
    db.executemany("INSERT INTO vectors VALUES (?, ?, ?)", rows)
    db.commit()
    db.close()
    fill(small_disk, 64 * 1024)
    told: list[str] = []
    cache = EmbeddingCache(path, "m", notify=told.append)
    assert len(told) == 2 and "moving the embedding cache" in told[0], told
    assert "embedding cache could not be kept (no room on the disk" in told[1], told
    cache.put_many([(b"h" * 32, b"\0" * 1536)])
    assert list(cache.get_many([b"h" * 32])) == [b"h" * 32]
    cache.close()


def test_a_failed_multi_file_write_leaves_no_new_file_behind_even_once_staged(vault_dir):
    """Fault tried: a dream's or purge's write failing after git staged a file it created (a full
    disk during the commit): the undo must remove it too, or doctor and sync find it uncommitted."""
    from memvault.storage.journal import REPLACE

    storage = Vault.open(vault_dir).storage
    with storage.write_lock(), pytest.raises(OSError, match="disk full"):
        with storage.transaction(REPLACE, ["wiki/topics/new.md", "MEMORY.md"], "dream: x"):
            (vault_dir / "wiki" / "topics").mkdir(parents=True, exist_ok=True)
            (vault_dir / "wiki" / "topics" / "new.md").write_text("# New\n")
            (vault_dir / "MEMORY.md").write_text("changed\n")
            git(vault_dir, "add", "wiki/topics/new.md", "MEMORY.md")
            raise OSError(28, "disk full (simulated at the commit)")
    assert not (vault_dir / "wiki" / "topics" / "new.md").exists()
    assert is_clean(vault_dir) and git(vault_dir, "status", "--porcelain") == ""


@pytest.mark.parametrize("leave_kb", [20, 50])
def test_a_purge_on_a_full_disk_is_one_line_and_finished_once_there_is_room(small_disk, leave_kb):
    """Fault tried: `purge` with 20 and 50 KB free (git fast-import dies of it: a broken pipe, an
    OSError). Exit 9 in one line; an add meanwhile does not commit the text again; with room
    again, the same purge finishes and the text is gone from every commit."""
    vault_dir = Vault.init(small_disk / "vault").root
    secret = "the alarm code is 4471-bravo-tango"
    fact_id = add(vault_dir, secret, "--at", "2026-11-02").stdout.strip()
    for i in range(20):
        assert add(vault_dir, f"padding fact {i}", "--at", "2026-11-02").returncode == 0
    filler = fill(small_disk, leave=leave_kb * 1024)
    result = run_memvault("purge", fact_id, "--yes", "--vault", str(vault_dir))
    assert result.returncode == ExitCode.UNWRITABLE, result.stderr
    assert one_line(result.stderr).startswith("memvault: disk full while writing")
    filler.unlink()
    head = git(vault_dir, "rev-parse", "HEAD").strip()
    assert add(vault_dir, "after the full disk", "--at", "2026-11-02").returncode == 0
    assert not [line for line in git(vault_dir, "log", "-p", f"{head}..HEAD").splitlines()
                if line.startswith("+") and secret in line]
    done = run_memvault("purge", fact_id, "--yes", "--vault", str(vault_dir))
    assert done.returncode == 0, done.stderr
    assert secret not in git(vault_dir, "log", "--all", "-p")
    assert "after the full disk" in texts(vault_dir) and is_clean(vault_dir)


def test_a_rebuild_on_a_full_disk_is_exit_9_and_leaves_no_half_built_index(small_disk):
    """Fault tried: `reindex --clear` twice with 128 KB free (Tantivy says only that "an index
    writer was killed"). Each is exit 9 in one line and removes what it half built; with room
    again, search builds the index and finds the facts."""
    vault_dir = Vault.init(small_disk / "vault").root
    batch = [{"text": f"fact number {i} about kiwi and other fruit"} for i in range(50)]
    assert add_stdin(vault_dir, *batch).returncode == 0
    filler = fill(small_disk, leave=128 * 1024)
    for _attempt in range(2):
        result = run_memvault("reindex", "--clear", "--vault", str(vault_dir))
        assert result.returncode == ExitCode.UNWRITABLE, result.stderr
        assert one_line(result.stderr).startswith("memvault: disk full while writing .memvault")
        assert not list((vault_dir / ".memvault" / "index").glob("gen-*"))
    filler.unlink()
    found = run_memvault("search", "kiwi", "--json", "--lexical", "--vault", str(vault_dir))
    assert found.returncode == 0 and len(json.loads(found.stdout)) == 10, found.stderr


def test_without_git_on_path_every_command_says_so_in_one_line_and_init_creates_nothing(vault_dir, tmp_path):
    """Fault tried: git missing from PATH (GitPython then refuses even to import). Writes, sync,
    clone and remote settings say so in one line; reading the files still works; init leaves no
    half-made vault (the template without its repository) behind."""
    assert add(vault_dir, "written while git was there").returncode == 0
    no_git = {"PATH": str(tmp_path / "empty")}
    for command in (["init", str(tmp_path / "new")], ["add", "x"], ["remote", "set", str(tmp_path / "r")],
                    ["sync"], ["clone", str(tmp_path / "r"), str(tmp_path / "c")], ["status"]):
        vault = [] if command[0] in ("init", "clone") else ["--vault", str(vault_dir)]
        result = run_memvault(*command, *vault, env=no_git)
        assert result.returncode == ExitCode.ERROR, (command, result.stderr)
        assert one_line(result.stderr) == ("memvault: git is not installed (no `git` on PATH); memvault keeps each "
                                           "vault in a git repository: install git"), command
    assert not (tmp_path / "new").exists() and not (tmp_path / "c").exists()
    shown = run_memvault("recent", "--vault", str(vault_dir), env=no_git)
    assert shown.returncode == 0 and "written while git was there" in shown.stdout
    assert texts(vault_dir) == ["written while git was there"] and is_clean(vault_dir)


def test_a_purge_deletes_the_copy_made_for_a_read_only_view_of_the_vault(tmp_path):
    """The vault is also seen read-only through a bind mount (another path): searching there makes
    a copy of its index in the user's cache. Purging through the writable path deletes that copy
    too (it names the vault's first commit), not only the copy for its own path."""
    vault_dir = Vault.init(tmp_path / "vault").root
    secret = add(vault_dir, "the cellar code is 4471-OCELOT").stdout.strip()
    add(vault_dir, "Alice prefers green tea")
    view = tmp_path / "view"
    view.mkdir()
    try:
        bound = subprocess.run(["mount", "--bind", str(vault_dir), str(view)], capture_output=True, text=True)
    except FileNotFoundError:
        pytest.skip("no `mount` command here: this test needs a read-only bind mount (and root)")
    if bound.returncode != 0:
        pytest.skip(f"cannot bind-mount here ({bound.stderr.strip() or 'refused'}); this test needs root")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(view)], check=True, capture_output=True)
        found = run_memvault("search", "cellar code", "--json", "--vault", str(view))
        assert found.returncode == 0 and [hit["id"] for hit in json.loads(found.stdout)] == [secret]
        copies = list(Path(os.environ["HOME"], ".cache", "memvault", "vaults").iterdir())
        assert [copy.name.startswith("view-") for copy in copies] == [True]
        assert run_memvault("purge", secret, "--yes", "--vault", str(vault_dir)).returncode == 0
        assert not copies[0].exists()
        again = run_memvault("search", "tea", "--json", "--vault", str(view))
        assert again.returncode == 0 and secret not in again.stdout and "cellar" not in again.stdout
    finally:
        subprocess.run(["umount", "-l", str(view)], capture_output=True)


def test_a_daily_log_with_bytes_that_are_not_utf8_is_still_read(vault_dir):
    """Bad input tried: a log saved in Latin-1 by a hand edit (or received from a remote). Every
    command that reads the logs failed with an unexpected UnicodeDecodeError; now the line reads
    with U+FFFD, doctor names it, and writes go on."""
    assert add(vault_dir, "a café in Lyon").returncode == 0
    log = next((vault_dir / "logs").rglob("*.md"))
    log.write_bytes(log.read_bytes().replace("café".encode(), "café".encode("latin-1")))
    git(vault_dir, "commit", "-qam", "saved in latin-1")
    for args in (["recent"], ["status"], ["context", "Lyon"], ["search", "Lyon", "--lexical"]):
        result = run_memvault(*args, "--vault", str(vault_dir))
        assert result.returncode == 0 and "unexpected error" not in result.stderr, (args, result.stderr)
    assert "caf\ufffd in Lyon" in run_memvault("recent", "--vault", str(vault_dir)).stdout
    doctor = run_memvault("doctor", "--vault", str(vault_dir))
    assert doctor.returncode == 1 and f"{log.relative_to(vault_dir)}:3: holds bytes that are not UTF-8" in doctor.stdout
    assert add(vault_dir, "written after").returncode == 0 and is_clean(vault_dir)


@pytest.mark.parametrize("leave_kb", [8, 24, 48])
def test_a_dream_on_a_full_disk_says_what_became_of_its_files(small_disk, leave_kb):
    """Fault tried: `dream` on a disk with 8, 24 and 48 KB free, the model answering at once. It
    said "nothing was changed" while its pages, MEMORY.md and log.md stayed changed in the work
    tree (its undo needed room too) until the next command, and the journal's temp file stayed
    for good. Now it says the files stay changed until the next command, which puts them back,
    and no temp file is left."""
    from support.dream import MODEL, FakeLLM
    from support.fake_llm import consolidate_everything

    vault = Vault.init(small_disk / "vault")
    vault.add_many([{"text": f"day {day} note {i} " + "z" * 300, "at": f"2026-10-{day:02d}"}
                    for day in range(1, 15) for i in range(3)])
    head = git(vault.root, "rev-parse", "HEAD")
    with FakeLLM(default=consolidate_everything("wiki/topics/journal.md", "Journal")) as fake:
        filler = fill(small_disk, leave=leave_kb * 1024)
        done = run_memvault("dream", "--vault", str(vault.root), env={
            "MEMVAULT_MODEL": MODEL, "MEMVAULT_API_BASE": fake.api_base, "OPENAI_API_KEY": "sk-test"}, timeout=300)
    if done.returncode == 0:
        filler.unlink()
        pytest.skip(f"the dream fitted in {leave_kb} KB")
    assert done.returncode == ExitCode.UNWRITABLE and "disk full while writing" in done.stderr.splitlines()[-1]
    changed = git(vault.root, "status", "--porcelain").strip()
    said = done.stderr.splitlines()[-1]
    assert ("the next memvault command" in said) if changed else ("nothing was changed" in said), (said, changed)
    assert git(vault.root, "rev-parse", "HEAD") == head
    filler.unlink()
    assert run_memvault("status", "--vault", str(vault.root)).returncode == 0
    assert is_clean(vault.root) and not list(vault.root.rglob("*.tmp"))
    assert_fsck_clean(vault.root)
