"""The vault's own git repository, driven through the git binary (GitPython's `repo.git`).

memvault never touches an enclosing repository: every call pins GIT_DIR and GIT_WORK_TREE to the
vault and drops variables (GIT_INDEX_FILE, ...) that a parent hook environment could leak in.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import git

from memvault.errors import VaultBusy

FALLBACK_NAME = "memvault"
_LEAKY_VARS = (
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_COMMON_DIR",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
)
# A live git process holds index.lock for milliseconds; one older than this with no git process
# left in the vault was orphaned by a kill.
STALE_INDEX_LOCK_SECONDS = 10.0
INDEX_LOCK_WAIT_SECONDS = 15.0


@dataclass(frozen=True)
class Identity:
    name: str
    email: str
    fallback: bool


@dataclass(frozen=True)
class Commit:
    sha: str
    at: str
    message: str

    def to_dict(self) -> dict:
        return {"commit": self.sha, "at": self.at, "message": self.message}


class GitStore:
    def __init__(self, root: Path):
        self.root = root
        self.git_dir = root / ".git"
        self.repo = git.Repo(root, search_parent_directories=False)
        # GitPython layers its variables over os.environ and cannot unset one, so drop the
        # variables a parent repository's hook may have exported from this process.
        for name in _LEAKY_VARS:
            os.environ.pop(name, None)
        env = dict(
            GIT_DIR=str(self.git_dir),
            GIT_WORK_TREE=str(root),
            GIT_CEILING_DIRECTORIES=str(root.parent),
            GIT_TERMINAL_PROMPT="0",
        )
        if not (os.environ.get("GIT_SSH_COMMAND") or os.environ.get("GIT_SSH")):
            # memvault runs unattended (cron, agents): an ssh passphrase prompt would hang it.
            env["GIT_SSH_COMMAND"] = "ssh -o BatchMode=yes"
        self.repo.git.update_environment(**env)
        self._identity: Identity | None = None

    @classmethod
    def init(cls, root: Path) -> GitStore:
        git.Git(str(root)).execute(["git", "init", "-q", "-b", "main", str(root)], env=outside_env())
        store = cls(root)
        store.configure()
        return store

    @classmethod
    def clone(cls, url: str, root: Path, *, remote: str, timeout: float) -> GitStore:
        """Clone `url` into `root` (raises git.GitCommandError)."""
        env = outside_env()
        env["GIT_TERMINAL_PROMPT"] = "0"
        git.Git().execute(["git", "clone", "--quiet", "--origin", remote, "--", url, str(root)], env=env,
                          kill_after_timeout=timeout)
        return cls(root)

    def configure(self) -> None:
        """The vault's own git settings: no signing prompt in cron, files stored byte for byte."""
        self.run("config", "commit.gpgsign", "false")
        self.run("config", "core.autocrlf", "false")

    def run(self, *args: str, **kwargs) -> str:
        """Run one git command in the vault, waiting out another git process's index.lock."""
        deadline = time.monotonic() + INDEX_LOCK_WAIT_SECONDS
        while True:
            try:
                return self.repo.git.execute(["git", *args], **kwargs)
            except git.GitCommandError as e:
                # Only "File exists" means another git holds the lock; "Permission denied" and the
                # like are real errors and must not be retried.
                if "index.lock" not in str(e.stderr) or "File exists" not in str(e.stderr):
                    raise
                if not self.remove_stale_index_lock() and time.monotonic() >= deadline:
                    raise VaultBusy(
                        f"git's index.lock in {self.git_dir} is held by another git process; try again"
                    ) from None
                time.sleep(0.05)

    def merge_in_progress(self) -> bool:
        return (self.git_dir / "MERGE_HEAD").exists()

    def identity(self) -> Identity:
        """The user's git identity if one is configured, else memvault's fallback."""
        if self._identity is None:
            name = os.environ.get("GIT_AUTHOR_NAME")
            email = os.environ.get("GIT_AUTHOR_EMAIL")
            if not (name and email):
                try:
                    out = self.repo.git.execute(
                        ["git", "config", "--get-regexp", r"^user\.(name|email)$"]
                    )
                except git.GitCommandError:
                    out = ""
                values = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
                name = name or values.get("user.name")
                email = email or values.get("user.email")
            if name and email:
                self._identity = Identity(name, email, fallback=False)
            else:
                self._identity = Identity(
                    name or FALLBACK_NAME, email or f"{FALLBACK_NAME}@{socket.gethostname() or 'localhost'}", True
                )
                if self._identity.fallback:
                    self.repo.git.update_environment(
                        GIT_AUTHOR_NAME=self._identity.name,
                        GIT_AUTHOR_EMAIL=self._identity.email,
                        GIT_COMMITTER_NAME=os.environ.get("GIT_COMMITTER_NAME") or self._identity.name,
                        GIT_COMMITTER_EMAIL=os.environ.get("GIT_COMMITTER_EMAIL") or self._identity.email,
                    )
        return self._identity

    def commit(self, paths: Sequence[str], message: str) -> str | None:
        """Stage exactly `paths` and commit them; None when nothing changed."""
        self.identity()
        self.run("add", "-A", "--", *paths)
        try:
            self.run("commit", "-q", "--no-verify", "-m", message, "--", *paths)
        except git.GitCommandError as e:
            if e.status == 1 and not e.stderr.strip():
                return None  # nothing to commit: git says so on stdout with status 1
            raise
        return self.head()

    def head(self) -> str | None:
        try:
            return self.run("rev-parse", "--verify", "-q", "HEAD")
        except git.GitCommandError:
            return None

    def status(self, *paths: str) -> list[str]:
        """Porcelain status lines (untracked included) for the given paths, or the whole tree."""
        out = self.run("status", "--porcelain", "--untracked-files=all", "--", *(paths or (".",)))
        return [line for line in out.splitlines() if line]

    def log(self, *args: str) -> list[Commit]:
        out = self.run("log", "--format=%H%x1f%aI%x1f%s", *args)
        commits = []
        for line in out.splitlines():
            sha, at, message = line.split("\x1f", 2)
            commits.append(Commit(sha, at, message))
        return commits

    def remove_stale_index_lock(self) -> bool:
        lock = self.git_dir / "index.lock"
        try:
            age = time.time() - lock.stat().st_mtime
        except FileNotFoundError:
            return False  # nothing to remove; the caller retries until its deadline
        if age < STALE_INDEX_LOCK_SECONDS or git_running_in(self.root):
            return False
        try:
            lock.unlink()
        except FileNotFoundError:
            pass
        return True


def outside_env() -> dict[str, str]:
    """The environment for a git command that has no vault yet (init, clone): nothing inherited
    from a parent repository's hook environment."""
    return {k: v for k, v in os.environ.items() if k not in _LEAKY_VARS and k not in ("GIT_DIR", "GIT_WORK_TREE")}


def git_running_in(root: Path) -> bool:
    """Is any git process working in this vault? Unknown (no /proc) counts as yes."""
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    target = str(root.resolve())
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            if not cmdline or not os.path.basename(cmdline[0]).startswith(b"git"):
                continue
            cwd = os.readlink(entry / "cwd")
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if cwd == target or cwd.startswith(target + os.sep) or f"GIT_DIR={target}".encode() in environ:
            return True
    return False
