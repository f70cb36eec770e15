"""memvault never reads or writes through a symlink: real symlinks, real git repositories, real clones.

Tried: today's log, a year folder, tombstones.jsonl, log.md, MEMORY.md and a wiki page turned
into symlinks to a file outside the vault (by hand, and pulled by `sync` from a shared remote);
`memvault clone` of a remote whose tree holds one. Each time: a one-line error naming the path, a
non-zero exit, the outside file unchanged and never shown, and doctor listing the symlink.
"""

from __future__ import annotations

import os
import subprocess
from datetime import date
from pathlib import Path

import pytest
from support.cli import run_memvault
from support.git import git

from memvault.errors import ExitCode

SECRET = "ssh-private-material-do-not-leak"


def _outside(tmp_path: Path) -> Path:
    target = tmp_path / "outside" / "id_rsa"
    target.parent.mkdir()
    target.write_text(SECRET + "\n")
    return target


def _vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    assert run_memvault("init", str(root)).returncode == 0
    assert run_memvault("add", "Alice prefers green tea", "--vault", str(root)).returncode == 0
    return root


def _link(root: Path, rel: str, target: Path) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    path.symlink_to(target)


def _assert_refused(done, rel: str) -> None:
    assert done.returncode != 0
    # (notices such as "building the index" may come first; the error is its own last line)
    assert done.stderr.strip().splitlines()[-1].startswith(f"memvault: {rel} is a symlink"), done.stderr
    assert SECRET not in done.stdout + done.stderr


def _today_log(root: Path) -> str:
    today = date.today()
    return f"logs/{today.year}/{today.isoformat()}.md"


@pytest.mark.parametrize("rel", ["today", "tombstones.jsonl", "log.md", "MEMORY.md"])
def test_no_command_reads_or_writes_through_a_symlinked_vault_file(tmp_path, rel):
    root = _vault(tmp_path)
    fact_id = run_memvault("add", "Bob drinks coffee", "--vault", str(root)).stdout.strip()
    rel = _today_log(root) if rel == "today" else rel
    target = _outside(tmp_path)
    _link(root, rel, target)
    commands = [
        ("add", "Carol likes rain", "--vault", str(root)),
        ("forget", fact_id, "--vault", str(root)),
        ("search", "tea", "--vault", str(root)),
        ("context", "--vault", str(root)),
        ("recent", "--vault", str(root)),
    ]
    refused = 0
    for command in commands:
        done = run_memvault(*command)
        assert SECRET not in done.stdout + done.stderr, command
        if done.returncode != 0:
            _assert_refused(done, rel)
            refused += 1
    assert refused, "no command noticed the symlink"
    assert target.read_text() == SECRET + "\n"  # never appended to
    report = run_memvault("doctor", "--vault", str(root))
    assert report.returncode != 0
    assert f"{rel} -> {target}" in report.stdout
    assert SECRET not in report.stdout + report.stderr
    # doctor --fix never commits the symlink, and git never recorded it
    run_memvault("doctor", "--fix", "--vault", str(root))
    assert "120000" not in git(root, "ls-files", "-s")
    assert "120000" not in git(root, "ls-tree", "-r", "HEAD")


def test_add_refuses_a_symlinked_year_folder(tmp_path):
    root = _vault(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    year = str(date.today().year)
    os.rename(root / "logs" / year, elsewhere / year)
    (root / "logs" / year).symlink_to(elsewhere / year)
    before = sorted(p.read_text() for p in (elsewhere / year).iterdir())
    done = run_memvault("add", "Dave plays chess", "--vault", str(root))
    _assert_refused(done, f"logs/{year}")
    assert sorted(p.read_text() for p in (elsewhere / year).iterdir()) == before


def test_a_symlinked_page_is_never_read(tmp_path):
    root = _vault(tmp_path)
    _link(root, "wiki/people/alice.md", _outside(tmp_path))
    done = run_memvault("search", SECRET, "--vault", str(root), "--json")
    assert SECRET not in done.stdout
    report = run_memvault("doctor", "--vault", str(root))
    assert "wiki/people/alice.md ->" in report.stdout


def _shared(tmp_path: Path) -> tuple[Path, Path, Path]:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    a = _vault(tmp_path)
    assert run_memvault("remote", "set", str(remote), "--vault", str(a)).returncode == 0
    assert run_memvault("sync", "--vault", str(a)).returncode == 0
    b = tmp_path / "b"
    assert run_memvault("clone", str(remote), str(b)).returncode == 0
    return remote, a, b


def _push_symlink(machine: Path, rel: str, target: Path) -> None:
    """What a hostile (or careless) machine sharing the remote does with plain git."""
    _link(machine, rel, target)
    git(machine, "add", "-A", rel)
    git(machine, "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-qm", "edit", "--", rel)
    git(machine, "push", "-q", "origin", "HEAD:main")


@pytest.mark.parametrize("rel", ["today", "tombstones.jsonl", "log.md", "index.md"])
def test_sync_refuses_a_commit_that_brings_a_symlink(tmp_path, rel):
    _remote_path, a, b = _shared(tmp_path)
    rel = _today_log(a) if rel == "today" else rel
    _push_symlink(a, rel, Path("/etc/hostname"))
    head = git(b, "rev-parse", "HEAD").strip()
    before = {p: (b / p).read_bytes() for p in git(b, "ls-files").split() if (b / p).is_file()}
    done = run_memvault("sync", "--vault", str(b))
    assert done.returncode == ExitCode.SYNC_CONFLICT, done.stderr
    assert "symlink" in done.stderr and rel in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert git(b, "rev-parse", "HEAD").strip() == head
    assert not (b / rel).is_symlink()
    assert {p: (b / p).read_bytes() for p in before} == before
    assert git(b, "status", "--porcelain").strip() == ""
    # b keeps working
    assert run_memvault("add", "Erin reads poetry", "--vault", str(b)).returncode == 0


def test_clone_refuses_a_remote_holding_a_symlink(tmp_path):
    remote, a, _b = _shared(tmp_path)
    _push_symlink(a, "MEMORY.md", Path("/etc/hostname"))
    c = tmp_path / "c"
    done = run_memvault("clone", str(remote), str(c))
    assert done.returncode == ExitCode.SYNC_CONFLICT
    assert "MEMORY.md" in done.stderr and "symlink" in done.stderr
    assert not c.exists()
