"""Helpers for the tests of what sync takes from a shared remote: machines A and B, and a
"hostile" clone H that pushes with plain git whatever it likes."""

from __future__ import annotations

import subprocess
from pathlib import Path

from memvault.errors import ExitCode
from support.cli import run_memvault
from support.git import git, is_clean

HOSTILE = ("-c", "user.name=h", "-c", "user.email=h@example.test")


def shared(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Machine A publishes a vault, B clones it with memvault, H clones it with plain git."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    a, b, h = tmp_path / "a", tmp_path / "b", tmp_path / "h"
    assert run_memvault("init", str(a)).returncode == 0
    for text in ("Alice drinks green tea", "Bob fixed the kitchen tap"):
        assert run_memvault("add", text, "--at", "2026-11-20T10:00:00", "--vault", str(a)).returncode == 0
    assert run_memvault("remote", "set", str(remote), "--vault", str(a)).returncode == 0
    assert run_memvault("sync", "--vault", str(a)).returncode == 0
    assert run_memvault("clone", str(remote), str(b)).returncode == 0
    subprocess.run(["git", "clone", "-q", "-b", "main", str(remote), str(h)], check=True)
    return a, b, h


def push(h: Path, message: str = "tidy") -> None:
    """H commits everything in its tree (ignored files too) and pushes it."""
    git(h, "add", "-A", "-f")
    git(h, *HOSTILE, "commit", "-qm", message)
    git(h, "push", "-q", "origin", "HEAD:main")


def snapshot(root: Path) -> dict[str, bytes]:
    return {p: (root / p).read_bytes() for p in git(root, "ls-files", "-z").split("\0") if p}


def refused(b: Path, *words: str) -> str:
    """sync stops with exit 7 and one line holding `words`; nothing in b changed, b still works."""
    head, files = git(b, "rev-parse", "HEAD"), snapshot(b)
    done = run_memvault("sync", "--vault", str(b))
    assert done.returncode == ExitCode.SYNC_CONFLICT, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "nothing was merged" in done.stderr and all(word in done.stderr for word in words), done.stderr
    assert git(b, "rev-parse", "HEAD") == head and snapshot(b) == files
    assert is_clean(b) and not (b / ".memvault" / "journal.json").exists()
    assert run_memvault("add", "Erin reads poetry", "--vault", str(b)).returncode == 0  # b keeps working
    return done.stderr
