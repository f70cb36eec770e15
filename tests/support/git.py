"""A vault's git repository as the tests look at it: commits, a clean tree, fsck, a snapshot."""

from __future__ import annotations

import subprocess
from pathlib import Path

IDENTITY = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.test",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.test",
}


def git(vault_dir: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(vault_dir), *args], check=True, capture_output=True,
                          text=True).stdout


def commit_count(vault_dir: Path) -> int:
    return int(git(vault_dir, "rev-list", "--count", "HEAD").strip())


def is_clean(vault_dir: Path) -> bool:
    return git(vault_dir, "status", "--porcelain", "--untracked-files=all") == ""


def snapshot(vault_dir: Path):
    """Everything a bad command must leave untouched: files and history."""
    files = {p.relative_to(vault_dir).as_posix(): p.read_bytes() for p in vault_dir.rglob("*")
             if p.is_file() and ".git" not in p.parts and ".memvault" not in p.parts}
    return files, git(vault_dir, "rev-parse", "HEAD")


def assert_fsck_clean(vault_dir: Path) -> None:
    fsck = subprocess.run(["git", "-C", str(vault_dir), "fsck", "--strict"], capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stdout[-2000:] + fsck.stderr
