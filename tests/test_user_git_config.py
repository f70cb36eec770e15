"""A developer's global git config (hooks, signing, merge policy) meets memvault's own git calls.

memvault commits, merges and pushes for itself: the user's hooks never run and nothing is signed,
whatever `~/.gitconfig` says (docs/sync.md, "Your git config"). Each test writes the global
config the hermetic environment points GIT_CONFIG_GLOBAL at.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from support.cli import run_memvault
from support.git import commit_count, git, is_clean

HOOKS = ("pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "pre-merge-commit", "post-merge",
         "post-checkout", "reference-transaction", "pre-push", "post-rewrite", "pre-auto-gc")


def global_config(*settings: tuple[str, str]) -> None:
    for key, value in settings:
        subprocess.run(["git", "config", "--global", key, value], check=True)


def failing_hooks(folder: Path) -> Path:
    """A hooks folder whose every hook prints on stdout and stderr, leaves a mark and fails."""
    folder.mkdir()
    for name in HOOKS:
        hook = folder / name
        hook.write_text(f"#!/bin/sh\necho 'hook {name} says hello'\necho 'hook {name}' >&2\n"
                        f"echo {name} >> '{folder}/ran'\nexit 1\n")
        hook.chmod(0o755)
    return folder


def bare_remote(path: Path) -> Path:
    # The remote's own hooks are its owner's business (a server's hook may refuse a push): none here.
    subprocess.run(["git", "-c", f"core.hooksPath={os.devnull}", "init", "-q", "--bare", "-b", "main", str(path)],
                   check=True)
    git(path, "config", "core.hooksPath", os.devnull)
    return path


def test_a_global_hooks_path_runs_no_hook_in_memvault_commands(tmp_path):
    hooks = failing_hooks(tmp_path / "hooks")
    global_config(("core.hooksPath", str(hooks)))
    vault, clone, remote = tmp_path / "vault", tmp_path / "clone", bare_remote(tmp_path / "remote.git")

    assert run_memvault("init", str(vault)).returncode == 0  # prepare-commit-msg failed it
    added = run_memvault("add", "Alice drinks green tea", "--json", "--vault", str(vault))
    assert added.returncode == 0, added.stderr
    fact = json.loads(added.stdout)["id"]  # no hook's words on stdout
    done = run_memvault("add", "--stdin", "--vault", str(vault), input="Bob fixed the tap\nCarol sings\n")
    assert done.returncode == 0, done.stderr
    assert run_memvault("forget", fact, "--vault", str(vault)).returncode == 0
    assert run_memvault("remote", "set", str(remote), "--vault", str(vault)).returncode == 0
    done = run_memvault("sync", "--vault", str(vault))
    assert done.returncode == 0, done.stderr  # pre-push and reference-transaction failed it
    assert run_memvault("clone", str(remote), str(clone)).returncode == 0
    for where, text in ((clone, "Dan on the clone"), (vault, "Erin on the vault")):
        assert run_memvault("add", text, "--vault", str(where)).returncode == 0
    assert run_memvault("sync", "--vault", str(clone)).returncode == 0
    done = run_memvault("sync", "--json", "--vault", str(vault))  # a merge commit
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["received"] == 1

    assert not (hooks / "ran").exists()
    assert commit_count(vault) == 7 and is_clean(vault)  # init, 2 adds, forget, add, add, merge
    assert "Dan on the clone" in run_memvault("recent", "--vault", str(vault)).stdout


def test_global_commit_signing_without_a_key_in_a_vault_made_by_git_clone(tmp_path):
    vault, remote = tmp_path / "vault", bare_remote(tmp_path / "remote.git")
    assert run_memvault("init", str(vault)).returncode == 0
    assert run_memvault("remote", "set", str(remote), "--vault", str(vault)).returncode == 0
    assert run_memvault("sync", "--vault", str(vault)).returncode == 0
    # gpg.program `false`: signing fails, as it does with no key or no pinentry in cron.
    global_config(("commit.gpgSign", "true"), ("push.gpgSign", "true"), ("user.signingKey", "DEADBEEF"),
                  ("gpg.program", "false"))
    plain = tmp_path / "plain"
    subprocess.run(["git", "clone", "-q", str(remote), str(plain)], check=True)  # its config says nothing of signing

    added = run_memvault("add", "Alice drinks green tea", "--vault", str(plain))
    assert added.returncode == 0, added.stderr  # "unexpected error: GitCommandError", exit 1
    assert commit_count(plain) == 2 and is_clean(plain)
    done = run_memvault("sync", "--vault", str(plain))
    assert done.returncode == 0, done.stderr  # the remote takes no signed push
    assert git(remote, "log", "-1", "--format=%s").startswith("add: ")


def test_a_global_merge_policy_of_fast_forward_only_and_signed_commits_still_merges(tmp_path):
    global_config(("merge.ff", "only"), ("merge.verifySignatures", "true"), ("pull.rebase", "true"))
    a, b, remote = tmp_path / "a", tmp_path / "b", bare_remote(tmp_path / "remote.git")
    assert run_memvault("init", str(a)).returncode == 0
    assert run_memvault("remote", "set", str(remote), "--vault", str(a)).returncode == 0
    assert run_memvault("sync", "--vault", str(a)).returncode == 0
    assert run_memvault("clone", str(remote), str(b)).returncode == 0
    for where, text in ((a, "Alice on machine a"), (b, "Bob on machine b")):
        assert run_memvault("add", text, "--vault", str(where)).returncode == 0
    assert run_memvault("sync", "--vault", str(b)).returncode == 0

    done = run_memvault("sync", "--vault", str(a))
    # "git could not merge origin/main: fatal: Not possible to fast-forward, aborting" (or "Commit
    # ... does not have a GPG signature"), exit 1: two machines that both added never synced again
    assert done.returncode == 0, done.stderr
    assert "merged" in done.stdout
    assert run_memvault("sync", "--vault", str(b)).returncode == 0
    for where in (a, b):
        listed = run_memvault("recent", "--vault", str(where)).stdout
        assert "Alice on machine a" in listed and "Bob on machine b" in listed


def test_a_global_excludes_file_ignoring_markdown_leaves_no_template_file_out_of_the_first_commit(tmp_path):
    """~/.gitignore_global often names `logs/` or `*.md`: init's commit passed over MEMORY.md,
    index.md, log.md, schema.md and logs/.gitkeep, which then never reached the remote or a clone."""
    excludes = tmp_path / "gitignore_global"
    excludes.write_text("logs/\n*.md\n*.jsonl\n")
    global_config(("core.excludesFile", str(excludes)))
    vault = tmp_path / "vault"
    assert run_memvault("init", str(vault)).returncode == 0
    committed = set(git(vault, "ls-files").split())
    assert {"MEMORY.md", "index.md", "log.md", "schema.md", "logs/.gitkeep", "memvault.toml"} <= committed
    assert git(vault, "status", "--porcelain", "--ignored", "--untracked-files=all") == ""

    (vault / ".git").rename(tmp_path / "old-git")  # adopt: the same first commit, from the files
    assert run_memvault("init", "--adopt", str(vault)).returncode == 0
    assert {"MEMORY.md", "index.md", "log.md", "schema.md", "logs/.gitkeep"} <= set(git(vault, "ls-files").split())


def test_a_git_config_that_fails_every_commit_is_named_in_one_line_and_nothing_is_added(tmp_path):
    vault = tmp_path / "vault"
    assert run_memvault("init", str(vault)).returncode == 0
    head = git(vault, "rev-parse", "HEAD")
    global_config(("commit.cleanup", "nonsense"))  # a typo in ~/.gitconfig: git fails every commit

    done = run_memvault("add", "Alice drinks green tea", "--vault", str(vault))
    assert done.returncode == 1
    # it said "unexpected error: GitCommandError: Cmd('git') failed due to: exit code(128)"
    assert done.stderr.splitlines() == [
        "memvault: unexpected error: git commit failed: fatal: Invalid cleanup mode nonsense "
        "(set MEMVAULT_DEBUG=1 for details)"], done.stderr
    assert git(vault, "rev-parse", "HEAD") == head and is_clean(vault)
    assert run_memvault("recent", "--vault", str(vault)).returncode == 0


def test_a_global_commit_and_log_encoding_other_than_utf8_neither_mislabels_nor_garbles_messages(tmp_path):
    """i18n.commitEncoding = ISO-8859-1 labelled memvault's UTF-8 messages Latin-1 for good (every
    clone's `git log` and `memvault history` then showed "thÃ© Ã  NoÃ«l"); i18n.logOutputEncoding
    made history print Latin-1 bytes, invalid UTF-8 in its --json."""
    vault = tmp_path / "vault"
    assert run_memvault("init", str(vault)).returncode == 0
    global_config(("i18n.commitEncoding", "ISO-8859-1"), ("i18n.logOutputEncoding", "ISO-8859-1"))
    fact = run_memvault("add", "thé à Noël", "--vault", str(vault)).stdout.strip()
    assert "encoding " not in git(vault, "cat-file", "commit", "HEAD")

    done = subprocess.run([sys.executable, "-m", "memvault", "history", fact, "--json", "--vault", str(vault)],
                          capture_output=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.decode("utf-8"))[-1]["message"] == f"add: {fact} thé à Noël"


def test_an_init_whose_first_commit_fails_leaves_nothing_behind(tmp_path):
    """It left the template and a .git without a commit: `init` again said "already a vault",
    every add committed beside 14 staged files, and sync refused them as uncommitted changes."""
    global_config(("commit.cleanup", "nonsense"))
    new, empty = tmp_path / "new", tmp_path / "empty"
    empty.mkdir()
    for target in (new, empty):
        done = run_memvault("init", str(target))
        assert done.returncode == 1 and "Invalid cleanup mode" in done.stderr, done.stderr
    assert not new.exists() and list(empty.iterdir()) == []

    subprocess.run(["git", "config", "--global", "--unset", "commit.cleanup"], check=True)
    assert run_memvault("init", str(empty)).returncode == 0
    assert commit_count(empty) == 1 and is_clean(empty)


def test_a_clone_made_under_a_global_autocrlf_keeps_its_files_byte_for_byte_and_syncs(tmp_path):
    """core.autocrlf = true (Windows habits, or a dotfile repository shared with one): `memvault
    clone` turned it off only after checking the files out with CRLF, so every file read as changed
    and each sync of the clone refused them as uncommitted changes (exit 2)."""
    a, b, remote = tmp_path / "a", tmp_path / "b", bare_remote(tmp_path / "remote.git")
    assert run_memvault("init", str(a)).returncode == 0
    assert run_memvault("add", "Alice drinks green tea", "--vault", str(a)).returncode == 0
    assert run_memvault("remote", "set", str(remote), "--vault", str(a)).returncode == 0
    assert run_memvault("sync", "--vault", str(a)).returncode == 0
    global_config(("core.autocrlf", "true"))

    assert run_memvault("clone", str(remote), str(b)).returncode == 0
    assert is_clean(b)
    assert not any(b"\r\n" in path.read_bytes() for path in b.rglob("*.md") if ".git" not in path.parts)
    assert run_memvault("add", "Bob on machine b", "--vault", str(b)).returncode == 0
    done = run_memvault("sync", "--vault", str(b))
    assert done.returncode == 0, done.stderr
    assert run_memvault("sync", "--vault", str(a)).returncode == 0
    assert "Bob on machine b" in run_memvault("recent", "--vault", str(a)).stdout
