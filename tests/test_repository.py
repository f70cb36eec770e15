"""A vault whose .git is missing or broken: every command says so, doctor explains, and
`doctor --fix` or `init --adopt` re-create the repository from the files in one commit."""

from __future__ import annotations

import json
import shutil

import pytest
from support.cli import Cli, run_memvault
from support.git import commit_count, git, is_clean

from memvault.errors import ExitCode


def files(vault_dir) -> dict[str, bytes]:
    return {p.relative_to(vault_dir).as_posix(): p.read_bytes() for p in vault_dir.rglob("*")
            if p.is_file() and ".git" not in p.parts and ".memvault" not in p.parts}


def _delete_git(root):
    shutil.rmtree(root / ".git")


def _garbage_head(root):
    (root / ".git" / "HEAD").write_text("garbage\n")


def _lose_objects(root):
    for folder in (root / ".git" / "objects").iterdir():
        if folder.name not in ("info", "pack"):
            shutil.rmtree(folder)


def _empty_git_dir(root):
    shutil.rmtree(root / ".git")
    (root / ".git").mkdir()


def _garbage_git_file(root):
    shutil.rmtree(root / ".git")
    (root / ".git").write_text("garbage\n")


BREAKAGES = {"deleted": _delete_git, "garbage HEAD": _garbage_head, "objects lost": _lose_objects,
             "empty .git directory": _empty_git_dir, "garbage .git file": _garbage_git_file}


@pytest.fixture
def broken(cli, vault_dir, request):
    for text in ("Alice prefers green tea", "Bob is on call"):
        assert cli("add", text).exit_code == 0
    before = files(vault_dir)
    BREAKAGES[request.param](vault_dir)
    return before


@pytest.mark.parametrize("broken", ["deleted", "garbage HEAD"], indirect=True)
def test_commands_say_the_repository_is_broken_and_point_to_doctor(cli, vault_dir, broken, monkeypatch):
    """Faults tried: .git deleted, .git/HEAD overwritten; run with --vault and from inside the vault."""
    for args in (("recent",), ("add", "one more")):
        result = cli(*args)
        assert result.exit_code == ExitCode.NOT_FOUND and result.stderr.count("\n") == 1
        assert "git repository (.git) is" in result.stderr and "`memvault doctor --fix`" in result.stderr
    # From inside the vault it is reported too, not passed over for the default vault.
    monkeypatch.chdir(vault_dir / "logs")
    inside = Cli(None)("recent", vault=False)
    assert inside.exit_code == ExitCode.NOT_FOUND and str(vault_dir) in inside.stderr
    assert files(vault_dir) == broken


@pytest.mark.parametrize("broken", ["deleted", "garbage HEAD", "objects lost", "empty .git directory",
                                    "garbage .git file"], indirect=True)
def test_doctor_explains_and_fix_recreates_the_repository_in_one_commit(cli, vault_dir, broken):
    """Faults tried: .git deleted, HEAD garbage, every loose object lost."""
    report = cli("doctor", "--json")
    assert report.exit_code == ExitCode.ERROR
    (check,) = json.loads(report.stdout)["checks"]
    assert check["name"] == "git repository" and check["status"] == "fail" and check["fix"]
    assert files(vault_dir) == broken  # doctor without --fix changes nothing

    fixed = cli("doctor", "--fix", "--json")
    assert fixed.exit_code == 0, fixed.stdout
    first = json.loads(fixed.stdout)["checks"][0]
    assert first["name"] == "git repository" and first["status"] == "fixed"
    assert "re-created the git repository" in first["message"]
    assert commit_count(vault_dir) == 1 and is_clean(vault_dir)
    assert git(vault_dir, "log", "--format=%s").strip() == "adopt: re-create the repository from the vault's files"
    assert files(vault_dir) == broken
    assert [f["text"] for f in json.loads(cli("recent", "--json").stdout)] == ["Bob is on call",
                                                                             "Alice prefers green tea"]
    assert cli("add", "works again").exit_code == 0 and commit_count(vault_dir) == 2
    assert cli("doctor", "--json").exit_code == 0


@pytest.mark.parametrize("broken", ["empty .git directory", "garbage .git file"], indirect=True)
def test_a_git_that_is_no_repository_at_all_is_reported_as_broken(vault_dir, broken):
    """Faults tried: .git replaced by an empty directory, .git replaced by a file of garbage; `add`,
    `recent`, `status` and `doctor --fix` run as real processes."""
    kind = "dir" if (vault_dir / ".git").is_dir() else "file"
    for args in (("add", "one more"), ("recent",), ("status",)):
        result = run_memvault(*args, "--vault", str(vault_dir))
        assert result.returncode == ExitCode.NOT_FOUND, (args, result.stderr)
        (line,) = result.stderr.splitlines()
        assert "its git repository (.git) is broken" in line and "`memvault doctor --fix`" in line, line
        assert "unexpected error" not in line
    assert files(vault_dir) == broken

    fixed = run_memvault("doctor", "--fix", "--vault", str(vault_dir))
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    (kept,) = (vault_dir / ".memvault").glob("broken-git-*")
    assert (kept.is_dir() and not any(kept.iterdir())) if kind == "dir" else kept.read_text() == "garbage\n"
    assert run_memvault("add", "works again", "--vault", str(vault_dir)).returncode == 0
    assert commit_count(vault_dir) == 2 and files(vault_dir).keys() >= broken.keys()


@pytest.mark.parametrize("broken", ["garbage HEAD"], indirect=True)
def test_init_adopt_keeps_the_broken_git_and_restores_lost_template_files(cli, vault_dir, broken):
    """Faults tried: a broken .git and a deleted .gitignore (the index must not be committed)."""
    (vault_dir / ".gitignore").unlink()
    assert cli("search", "tea", "--lexical").exit_code == ExitCode.NOT_FOUND
    refused = Cli(None)("init", str(vault_dir), vault=False)
    assert refused.exit_code == ExitCode.USAGE and "memvault init --adopt" in refused.stderr

    result = Cli(None)("init", "--adopt", str(vault_dir), vault=False)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == str(vault_dir)
    (kept,) = (vault_dir / ".memvault").glob("broken-git-*")
    assert (kept / "HEAD").read_text() == "garbage\n"
    assert (vault_dir / ".gitignore").is_file() and is_clean(vault_dir)
    assert ".memvault" not in git(vault_dir, "ls-files")
    assert files(vault_dir) == {**broken}


def test_adopt_leaves_a_healthy_vault_alone_and_refuses_a_directory_that_is_no_vault(cli, vault_dir, tmp_path):
    """Bad input tried: --adopt on a healthy vault (a no-op), on a plain directory with files."""
    head = git(vault_dir, "rev-parse", "HEAD")
    result = Cli(None)("init", "--adopt", str(vault_dir), "--json", vault=False)
    assert result.exit_code == 0 and json.loads(result.stdout)["created"] is False
    assert git(vault_dir, "rev-parse", "HEAD") == head

    plain = tmp_path / "notes"
    plain.mkdir()
    (plain / "todo.md").write_text("- milk\n")
    refused = Cli(None)("init", "--adopt", str(plain), vault=False)
    assert refused.exit_code == ExitCode.NOT_FOUND and "no memvault.toml" in refused.stderr
    assert sorted(p.name for p in plain.iterdir()) == ["todo.md"]
