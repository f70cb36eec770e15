"""What sync refuses from a remote tree that would break every later command, and how the vault's
readers and writers cope when such a file is there anyway (a hand edit, or a sync before the check).

Faults tried, each pushed with plain git by a "hostile" clone (trees built with `git mktree` where
git itself would not make them), then `memvault sync` run on another machine: a daily log named
for a day that does not exist (2026-02-30.md, 2026-13-45.md); a tree entry git refuses to check out
(`..`, `.`, `.git`, `.GIT`, `.Git` deep in a folder, a `logs/../x` path); a .gitignore ignoring the
vault's own files (logs/, tombstones.jsonl, `*.md`, a `*` in logs/.gitignore); a memvault.toml
holding a value out of range (lock_timeout = -1, a zone named `..`, an unknown timezone) or a TOML
syntax error. Each stops with exit 7 and one line naming the path, or the key and the value, the
vault exactly as before and still usable. Also tried by hand in one vault: a misdated log typed
there (no command crashes; doctor names it), and a .gitignore ignoring logs/ and tombstones.jsonl
(add and forget still commit; doctor warns). Allowed on purpose: a .gitignore of unrelated files.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from support.cli import run_memvault
from support.git import git, is_clean
from support.sync import HOSTILE, push, refused, shared

from memvault.errors import ExitCode

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


def _with_entry(h: Path, tree: str, parts: list[str], blob: str) -> str:
    """`tree` with a file at `parts` (each a tree entry's name, as git mktree takes any name)."""
    entries = [line for line in git(h, "ls-tree", tree).splitlines() if line.split("\t", 1)[1] != parts[0]]
    if len(parts) == 1:
        entries.append(f"100644 blob {blob}\t{parts[0]}")
    else:
        below = next((line.split()[2] for line in git(h, "ls-tree", tree).splitlines()
                      if line.split("\t", 1)[1] == parts[0] and line.split()[1] == "tree"), EMPTY_TREE)
        entries.append(f"040000 tree {_with_entry(h, below, parts[1:], blob)}\t{parts[0]}")
    return subprocess.run(["git", "-C", str(h), "mktree"], input="\n".join(entries) + "\n", check=True,
                          capture_output=True, text=True).stdout.strip()


def _push_entry(h: Path, path: str) -> None:
    """A commit on top of the remote's main whose tree holds a file at `path`, force-pushed."""
    blob = subprocess.run(["git", "-C", str(h), "hash-object", "-w", "--stdin"], input="evil\n", check=True,
                          capture_output=True, text=True).stdout.strip()
    tree = _with_entry(h, git(h, "rev-parse", "HEAD^{tree}").strip(), path.split("/"), blob)
    commit = git(h, *HOSTILE, "commit-tree", tree, "-p", "HEAD", "-m", f"plant {path}").strip()
    git(h, "push", "-q", "-f", "origin", f"{commit}:main")


@pytest.mark.parametrize("day", ["2026-02-30", "2026-13-45"])
def test_a_log_named_for_a_day_that_does_not_exist_is_refused_by_sync_and_clone(tmp_path, day):
    """Taken, it made recent, status, context and doctor fail with "ValueError: day is out of
    range for month" on every clone."""
    _a, b, h = shared(tmp_path)
    path = f"logs/2026/{day}.md"
    (h / path).write_text(f'# {day}\n\n- Bob moved to Rome <!-- mv {{"id":"1k0yyt0000000009",'
                          f'"at":"2026-11-20T10:00:00+00:00"}} -->\n')
    push(h, "a log for a day that never was")
    refused(b, path, "a day that does not exist")
    c = tmp_path / "c"
    done = run_memvault("clone", str(tmp_path / "remote.git"), str(c))
    assert done.returncode == ExitCode.SYNC_CONFLICT and path in done.stderr, done.stderr
    assert not c.exists()


@pytest.mark.slow
def test_a_log_misdated_by_hand_crashes_no_command_and_doctor_names_it(tmp_path):
    """A typo in a log's name made here (uncommitted, then committed with plain git): every reader
    passes over it, as over any file that is no daily log, and doctor names it with what to do."""
    _a, b, _h = shared(tmp_path)
    (b / "logs" / "2026" / "2026-02-30.md").write_text(
        '# 2026-02-30\n\n- Bob moved to Rome <!-- mv {"id":"1k0yyt0000000009","at":"2026-11-20T10:00:00+00:00"} -->\n')
    for committed in (False, True):
        if committed:
            git(b, *HOSTILE, "add", "logs/2026/2026-02-30.md")
            git(b, *HOSTILE, "commit", "-qm", "a typo")
        for command in (["recent"], ["status"], ["context"], ["search", "Alice"], ["add", "Carol sings"]):
            done = run_memvault(*command, "--vault", str(b))
            assert done.returncode == 0, (command, done.stderr)
        done = run_memvault("doctor", "--vault", str(b))
        assert "unexpected error" not in done.stderr, done.stderr
        line = next(line for line in done.stdout.splitlines() if "log names" in line)
        assert line.startswith("FAIL") and "rename" in line, done.stdout
        assert "logs/2026/2026-02-30.md" in done.stdout
        assert "Bob moved to Rome" not in run_memvault("recent", "--vault", str(b)).stdout


@pytest.mark.slow
def test_paths_git_refuses_to_check_out_are_refused_before_any_merge(tmp_path):
    """`..` made the merge fail halfway ("invalid path '..'") and left a journal that stopped every
    later command; `.git` (any case, any depth) and `logs/../x` ended as exit 1 "could not merge"."""
    _a, b, h = shared(tmp_path)
    for path in ["..", ".", ".git", ".GIT", "wiki/people/.Git", "logs/../x"]:
        _push_entry(h, path)
        refused(b, path, "git refuses to check out")


@pytest.mark.parametrize("path", ["..", ".git", "logs/../x"])
def test_a_clone_of_a_tree_git_refuses_to_check_out_is_refused_and_leaves_nothing(tmp_path, path):
    """git's own checkout of such a tree failed first: "unexpected error: GitCommandError", exit 1
    (exit 8 for `..` with git's message), where it is the remote's tree that is refused."""
    _a, _b, h = shared(tmp_path)
    _push_entry(h, path)
    c = tmp_path / "c"
    done = run_memvault("clone", str(tmp_path / "remote.git"), str(c))
    assert done.returncode == ExitCode.SYNC_CONFLICT, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "git refuses to check out" in done.stderr, done.stderr
    assert not c.exists()


@pytest.mark.parametrize(("path", "rules"), [
    (".gitignore", "logs/\ntombstones.jsonl\n.memvault/\n"),
    (".gitignore", "*.md\n"),
    ("logs/.gitignore", "*\n"),
])
def test_a_gitignore_that_ignores_the_vaults_own_files_is_refused(tmp_path, path, rules):
    """Taken, it made the next `add --at` a new day and the first `forget` fail in git ("paths are
    ignored"), while doctor said all was well."""
    _a, b, h = shared(tmp_path)
    (h / path).write_text(rules)
    push(h, "ignore")
    said = refused(b, path, "ignores the vault's own files")
    assert ("logs/2026/2026-11-20.md" in said) == ("*" in rules or "logs/" in rules), said
    assert ("tombstones.jsonl" in said) == ("tombstones.jsonl" in rules), said


def test_a_gitignore_of_other_files_is_taken(tmp_path):
    _a, b, h = shared(tmp_path)
    (h / ".gitignore").write_text((h / ".gitignore").read_text() + "*.tmp\n.DS_Store\n")
    push(h, "ignore editor files")
    done = run_memvault("sync", "--vault", str(b))
    assert done.returncode == 0, done.stderr
    assert "*.tmp" in (b / ".gitignore").read_text()


def test_memvault_commits_its_own_files_where_a_gitignore_ignores_them_and_doctor_warns(tmp_path):
    """A .gitignore edited here by hand to ignore logs/ and tombstones.jsonl: add on a new day and
    forget still commit their files (they failed with "paths are ignored"); doctor warns."""
    _a, b, _h = shared(tmp_path)
    (b / ".gitignore").write_text(".memvault/\nlogs/\ntombstones.jsonl\n")
    git(b, *HOSTILE, "commit", "-qam", "ignore")
    done = run_memvault("add", "Dan plays chess", "--at", "2026-11-25T09:00:00", "--vault", str(b))
    assert done.returncode == 0, done.stderr
    fact = done.stdout.strip()
    assert "Dan plays chess" in git(b, "show", "HEAD:logs/2026/2026-11-25.md")
    done = run_memvault("forget", fact, "--vault", str(b))
    assert done.returncode == 0, done.stderr
    assert fact in git(b, "show", "HEAD:tombstones.jsonl") and is_clean(b)
    done = run_memvault("doctor", "--vault", str(b))
    line = next(line for line in done.stdout.splitlines() if "ignored files" in line)
    assert line.startswith("warn"), done.stdout
    assert "tombstones.jsonl" in done.stdout and "logs/2026/2026-11-25.md" in done.stdout
    assert "memvault.toml" not in done.stdout.split("ignored files", 1)[1].split("\n", 1)[0]


@pytest.mark.parametrize(("old", "new", "words"), [
    ("lock_timeout = 10", "lock_timeout = -1", ["vault.lock_timeout", "-1"]),
    ('zones = ["0_Inbox",', 'zones = ["..",', ["dream.zones", "'..'"]),
    ('timezone = "local"', 'timezone = "Mars/Olympus"', ["Mars/Olympus"]),
    ('model = ""', 'model = "', ["does not parse as TOML", "line 17"]),
])
def test_a_memvault_toml_no_clone_could_load_is_refused(tmp_path, old, new, words):
    """Taken, every command on every clone exited 2, `sync` and `doctor --fix` included, until the
    file was edited by hand on each. A syntax error was blamed on the endpoint (`llm.model: '' -> None`)."""
    _a, b, h = shared(tmp_path)
    config = h / "memvault.toml"
    assert old in config.read_text()
    config.write_text(config.read_text().replace(old, new))
    push(h, "settings")
    said = refused(b, "memvault.toml", *words)
    assert "llm.model" not in said
    done = run_memvault("doctor", "--fix", "--vault", str(b))
    assert "unexpected error" not in done.stderr and done.returncode != ExitCode.USAGE, done.stderr


@pytest.mark.parametrize(("old", "new", "words"), [
    ('timezone = "local"', 'timezone = "Mars/Olympus"', ["Mars/Olympus"]),
    ('timezone = "local"', 'timezone = "America"', ["unknown timezone 'America'"]),  # a folder of zones
    ("lock_timeout = 10", "lock_timeout = -1", ["vault.lock_timeout", "-1"]),
])
def test_a_clone_of_settings_no_command_could_load_is_refused_and_leaves_nothing(tmp_path, old, new, words):
    """The clone was made (exit 0 for a bad zone), and every command in it then exited 2: memvault
    refused to merge that file into an existing clone, yet set up a new one on it."""
    _a, _b, h = shared(tmp_path)
    config = h / "memvault.toml"
    config.write_text(config.read_text().replace(old, new))
    push(h, "settings")
    c = tmp_path / "c"
    done = run_memvault("clone", str(tmp_path / "remote.git"), str(c))
    assert done.returncode == ExitCode.SYNC_CONFLICT, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "nothing was cloned" in done.stderr, done.stderr
    assert all(word in done.stderr for word in words), done.stderr
    assert not c.exists()


def test_settings_no_command_can_load_stop_every_command_before_it_changes_anything(tmp_path):
    """A zone no command can use was checked only where a day was needed: `purge` rewrote history
    and then failed writing its tombstone (exit 2, the text gone, no tombstone, a purge left
    pending), `doctor --fix` committed the file as a leftover while failing it, `sync` pushed it.
    Now every command refuses in one line, and doctor names it without touching anything."""
    a, _b, _h = shared(tmp_path)
    secret = run_memvault("add", "The gate code is 4417", "--vault", str(a)).stdout.strip()
    assert run_memvault("sync", "--vault", str(a)).returncode == 0
    config = a / "memvault.toml"
    config.write_text(config.read_text().replace('timezone = "local"', 'timezone = "Europe/Pariss"'))
    head, remote_head = git(a, "rev-parse", "HEAD"), git(tmp_path / "remote.git", "rev-parse", "main")
    for args in (["purge", secret, "--yes"], ["sync"], ["add", "x"], ["show", secret], ["context"]):
        done = run_memvault(*args, "--vault", str(a))
        assert done.returncode == ExitCode.USAGE, (args, done.stderr)
        assert done.stderr.count("\n") == 1 and "unknown timezone 'Europe/Pariss'" in done.stderr, done.stderr
    assert "4417" in git(a, "log", "-p") and not (a / ".memvault" / "purge.json").exists()
    for fix in ([], ["--fix"]):
        doctor = run_memvault("doctor", *fix, "--json", "--vault", str(a))
        assert doctor.returncode == 1, doctor.stderr
        checks = json.loads(doctor.stdout)["checks"]
        assert [(c["name"], c["status"]) for c in checks] == [("git repository", "ok"), ("settings", "fail")]
        assert "Europe/Pariss" in checks[1]["message"]
    assert git(a, "rev-parse", "HEAD") == head and git(a, "status", "--short").strip() == "M memvault.toml"
    assert git(tmp_path / "remote.git", "rev-parse", "main") == remote_head
    config.write_bytes(b"\xff\xfe[vault]\n")  # saved in another encoding
    done = run_memvault("status", "--vault", str(a))
    assert done.returncode == ExitCode.USAGE and done.stderr.count("\n") == 1 and "not UTF-8" in done.stderr
    # Zones the zone database holds as folders, or no file system can name: the same one line.
    for zone in ("Europe", "America/Argentina", "A" * 300):
        config.write_text(f'[vault]\ntimezone = "{zone}"\n')
        done = run_memvault("status", "--vault", str(a))
        assert done.returncode == ExitCode.USAGE and done.stderr.count("\n") == 1, (zone, done.stderr)
        assert "unknown timezone" in done.stderr, done.stderr
    # No repository either: doctor says both, and --fix makes nothing until the settings load.
    shutil.rmtree(a / ".git")
    for fix in ([], ["--fix"]):
        doctor = run_memvault("doctor", *fix, "--json", "--vault", str(a))
        assert doctor.returncode == 1, doctor.stderr
        assert [(c["name"], c["status"]) for c in json.loads(doctor.stdout)["checks"]] == [
            ("git repository", "fail"), ("settings", "fail")]
        assert not (a / ".git").exists()
    config.write_bytes(b"\xef\xbb\xbf" + b'[vault]\ntimezone = "UTC"\n')  # UTF-8 with a byte-order mark
    assert run_memvault("doctor", "--fix", "--vault", str(a)).returncode in (0, 1)
    done = run_memvault("status", "--vault", str(a))
    assert done.returncode == 0, done.stderr


def _project(tmp_path: Path, branch: str) -> Path:
    """A bare repository holding a software project, not a vault: what a wrong URL points at."""
    remote, work = tmp_path / "project.git", tmp_path / "project"
    subprocess.run(["git", "init", "-q", "--bare", "-b", branch, str(remote)], check=True)
    subprocess.run(["git", "init", "-q", "-b", branch, str(work)], check=True)
    (work / "src").mkdir()
    (work / "README.md").write_text("# a project\n")
    (work / "src" / "app.py").write_text("print(1)\n")
    git(work, "add", "-A")
    git(work, *HOSTILE, "commit", "-qm", "project")
    git(work, "push", "-q", str(remote), branch)
    return remote


@pytest.mark.parametrize("branch", ["main", "master"])
def test_sync_to_a_repository_that_holds_no_vault_merges_and_sends_nothing(tmp_path, branch):
    """A wrong URL (a project's repository) took the project's files into the vault and pushed every
    fact to the project, exit 0; clone of the same URL already refused it."""
    remote = _project(tmp_path, branch)
    refs = git(remote, "for-each-ref")
    vault = tmp_path / "vault"
    assert run_memvault("init", str(vault)).returncode == 0
    assert run_memvault("add", "my private diary entry", "--vault", str(vault)).returncode == 0
    assert run_memvault("remote", "set", str(remote), "--vault", str(vault)).returncode == 0
    head = git(vault, "rev-parse", "HEAD")
    done = run_memvault("sync", "--vault", str(vault))
    assert done.returncode == ExitCode.SYNC_CONFLICT, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "holds no memvault vault" in done.stderr, done.stderr
    assert "nothing was merged or sent" in done.stderr
    assert git(vault, "rev-parse", "HEAD") == head and not (vault / "src").exists() and is_clean(vault)
    assert git(remote, "for-each-ref") == refs  # no branch moved or made there
    assert "diary" not in git(remote, "log", "--all", "-p")


def test_a_remote_whose_settings_file_was_deleted_is_no_vault_to_merge(tmp_path):
    _a, b, h = shared(tmp_path)
    git(h, "rm", "-q", "memvault.toml")
    push(h)
    refused(b, "holds no memvault vault", "memvault.toml")
