"""The vault's own git repository, driven through the git binary.

memvault never touches an enclosing repository: every call runs in the environment of
storage/gitenv.py, which pins GIT_DIR and GIT_WORK_TREE to the vault and drops variables
(GIT_INDEX_FILE, ...) that a parent hook environment could leak in.

Commands run through `subprocess` (GitPython costs ~100 ms to import, a third of an `add`); a
failure raises GitPython's `GitCommandError`, imported only then, so callers catch one type.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from memvault.errors import MemvaultError, VaultBusy, no_room, unwritable
from memvault.formats.layout import GIT_LOCKS_LOCK, LOCKS_DIR, STATE_DIR, is_vault_file
from memvault.storage.gitenv import outside_env, vault_env
from memvault.storage.gitprocesses import WRITER_ENV, git_of_writer, git_running_in

FALLBACK_NAME = "memvault"
# How long a command waits for another live git process to let go of one of git's lock files.
GIT_LOCK_WAIT_SECONDS = 15.0
# A lock file younger than this is left for the next look (file times are clock ticks, not exact).
STALE_MARGIN_SECONDS = 0.05
# git's message when one of its lock files exists: another git holds it, or a killed one left it.
_HELD_LOCK = re.compile(r"Unable to create '([^']+\.lock)': File exists")
# A git failure on a file system with no more room than this is taken for a full disk.
FULL_DISK_MARGIN = 64 * 1024
# The git commands memvault runs that write the repository (a failure of any other, such as
# `config --get` of a missing key, is an answer, whatever room the disk has).
_WRITING = frozenset({"add", "commit", "reset", "checkout", "merge", "revert", "rm", "clean", "update-ref",
                      "update-index", "read-tree", "write-tree", "commit-tree", "fetch", "pull", "init", "clone"})
# git's words for an OSError, mapped back to the errno (see errors.UNWRITABLE_ERRNOS).
_GIT_OS_ERRORS = {
    "No space left on device": errno.ENOSPC,
    "Out of diskspace": errno.ENOSPC,
    "Disk quota exceeded": errno.EDQUOT,
    "Read-only file system": errno.EROFS,
    "Permission denied": errno.EACCES,
    "insufficient permission": errno.EACCES,
}


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
        self.env = vault_env(root)
        self.env[WRITER_ENV] = str(os.getpid())
        self._identity: Identity | None = None

    @classmethod
    def init(cls, root: Path) -> GitStore:
        status, _out, err = execute(["git", "init", "-q", "-b", "main", str(root)], outside_env())
        store = cls(root)
        if status:
            raise store.error(["git", "init"], status, err)  # a full disk is exit 9, as for any write
        store.configure()
        return store

    @classmethod
    def clone(cls, url: str, root: Path, *, remote: str, timeout: float) -> GitStore:
        """Clone `url` into `root` without checking out any file (raises git.GitCommandError)."""
        env = outside_env()
        env["GIT_TERMINAL_PROMPT"] = "0"
        command = ["git", "clone", "--quiet", "--no-checkout", "--origin", remote, "--", url, str(root)]
        status, _out, err = execute(command, env, timeout=timeout)
        if status:
            raise command_error(command, status, err)
        return cls(root)

    def configure(self) -> None:
        """The vault's own git settings: no signing prompt in cron, files stored byte for byte."""
        self.run("config", "commit.gpgsign", "false")
        self.run("config", "core.autocrlf", "false")

    def run(self, *args: str, kill_after_timeout: float | None = None, input: str | None = None) -> str:
        """Run one git command in the vault and return its output (without the final newline).

        Another live git process's lock (index.lock, HEAD.lock, ...) is waited for; one left by a
        killed git is removed at once. A full disk or a read-only vault raises VaultUnwritable;
        any other failure git.GitCommandError.
        """
        deadline = time.monotonic() + GIT_LOCK_WAIT_SECONDS
        command = ["git", *args]
        while True:
            status, out, err = execute(command, self.env, timeout=kill_after_timeout, input=input)
            if status == 0:
                return out
            held = _HELD_LOCK.search(err)
            if held is None:
                raise self.error(command, status, err, out)
            if self.clear_stale_locks():
                continue
            if time.monotonic() >= deadline:
                raise VaultBusy(f"git's {self.relpath(held.group(1))} in {self.root} is held by another git "
                                "process; try again") from None
            time.sleep(0.05)

    def error(self, command: list[str], status: int, err: str, out: str = "") -> Exception:
        """The exception for a failed git command: VaultUnwritable when git could not write here."""
        for line in err.splitlines():
            if line.startswith("remote:"):
                continue  # the remote's trouble is the caller's to report (RemoteError)
            for words, code in _GIT_OS_ERRORS.items():
                if words not in line:
                    continue
                where = self._named_path(line)
                # "Permission denied" also comes from ssh (publickey): only a vault path makes it ours.
                if code == errno.EACCES and where is None:
                    continue
                return unwritable(OSError(code, words), where or ".git")  # type: ignore[return-value]
        # Some of git's failures on a full disk name no cause ("fatal: cannot update ref
        # 'refs/heads/main'"): for a command that writes, a disk with next to no room left is it.
        verb = next((arg for arg in command[1:] if not arg.startswith("-")), "")
        full = no_room(self.root, margin=FULL_DISK_MARGIN) if verb in _WRITING else None
        if full is not None:
            return unwritable(OSError(full, os.strerror(full)), ".git")  # type: ignore[return-value]
        return command_error(command, status, err, out)

    def _named_path(self, line: str) -> str | None:
        """The vault file a git error line names (vault-relative), or None."""
        for quoted in re.findall(r"'([^']+)'", line) + re.findall(r"database (\S+)", line):
            if quoted.startswith((str(self.root), ".git")):
                return self.relpath(quoted)
        return None

    def relpath(self, path: str) -> str:
        try:
            return Path(path).relative_to(self.root).as_posix()
        except ValueError:
            return path

    def merge_in_progress(self) -> bool:
        return (self.git_dir / "MERGE_HEAD").exists()

    def identity(self) -> Identity:
        """The user's git identity if one is configured, else memvault's fallback."""
        if self._identity is None:
            name = os.environ.get("GIT_AUTHOR_NAME")
            email = os.environ.get("GIT_AUTHOR_EMAIL")
            if not (name and email):
                _status, out, _err = execute(["git", "config", "--get-regexp", r"^user\.(name|email)$"], self.env)
                values = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
                name = name or values.get("user.name")
                email = email or values.get("user.email")
            if name and email:
                self._identity = Identity(name, email, fallback=False)
            else:
                self._identity = Identity(
                    name or FALLBACK_NAME, email or f"{FALLBACK_NAME}@{socket.gethostname() or 'localhost'}", True
                )
                self.env.update(
                    GIT_AUTHOR_NAME=self._identity.name,
                    GIT_AUTHOR_EMAIL=self._identity.email,
                    GIT_COMMITTER_NAME=os.environ.get("GIT_COMMITTER_NAME") or self._identity.name,
                    GIT_COMMITTER_EMAIL=os.environ.get("GIT_COMMITTER_EMAIL") or self._identity.email,
                )
        return self._identity

    def commit(self, paths: Sequence[str], message: str) -> str | None:
        """Stage exactly `paths` and commit them; None when nothing changed.

        The vault's own files are staged even when a .gitignore ignores them (a hand edit, or one
        synced in before sync refused it): git would refuse them and the write would fail.
        """
        self.identity()
        if "." in paths:  # the whole tree (init, adopt): the vault's own files by name too, ignored or not
            paths = [*paths, *_own_files_in(self.root)]
        own = [path for path in paths if is_vault_file(path)]
        other = [path for path in paths if not is_vault_file(path)]  # "." at init: ignored files stay out
        if own:
            self.run("add", "-A", "-f", "--", *own)
        if other:
            self.run("add", "-A", "--", *other)
        try:
            self.run("commit", "-q", "--no-verify", "-m", message, "--", *paths)
        except Exception as e:
            if getattr(e, "status", None) == 1 and not str(getattr(e, "stderr", "x")).strip():
                return None  # nothing to commit: git says so on stdout with status 1
            raise
        return self.head()

    def head(self) -> str | None:
        status, out, _err = execute(["git", "rev-parse", "--verify", "-q", "HEAD"], self.env)
        return out if status == 0 and out else None

    def status(self, *paths: str) -> list[str]:
        """Porcelain status lines (untracked included) for the given paths, or the whole tree."""
        out = self.run("status", "--porcelain", "--untracked-files=all", "--", *(paths or (".",)))
        return [line for line in out.splitlines() if line]

    def changed_paths(self) -> list[str]:
        """Every path with an uncommitted change (untracked included; both sides of a rename), exactly
        as named in the tree: -z, so unusual names are neither quoted nor split."""
        fields = self.run("status", "--porcelain", "-z", "--untracked-files=all").split("\0")
        paths: list[str] = []
        i = 0
        while i < len(fields):
            entry = fields[i]
            i += 1
            if len(entry) < 4:
                continue
            paths.append(entry[3:])
            if entry[0] in "RC":  # a rename or copy: its source follows as a field of its own
                paths.append(fields[i])
                i += 1
        return sorted(set(paths))

    def untracked_present(self, paths: list[str]) -> list[str]:
        """Those of `paths` on disk that HEAD does not hold (a file or folder of the user's, or ignored)."""
        on_disk = [rel for rel in paths if os.path.lexists(self.root / rel)]
        if not on_disk:
            return []
        tracked = set(self.run("ls-tree", "-r", "-z", "--name-only", "HEAD", "--", *on_disk).split("\0"))
        return [rel for rel in on_disk if rel not in tracked]

    def log(self, *args: str) -> list[Commit]:
        out = self.run("log", "--format=%H%x1f%aI%x1f%s", *args)
        commits = []
        for line in out.splitlines():
            sha, at, message = line.split("\x1f", 2)
            commits.append(Commit(sha, at, message))
        return commits

    def wait_for_children_of(self, pid: int, timeout: float | None = None) -> bool:
        """Wait (at most `timeout` s) until no git started by memvault process `pid` works in the
        vault: killing a writer does not kill its git, which may still be making its commit.
        False if one still does (a loaded machine: its commit may yet land)."""
        mark = f"{WRITER_ENV}={pid}\0".encode()
        deadline = time.monotonic() + (GIT_LOCK_WAIT_SECONDS if timeout is None else timeout)
        while Path("/proc").is_dir():
            # (the background gc a commit may start can outlive it by minutes: it moves neither HEAD
            # nor the index, so a settlement need not wait for it)
            if not git_of_writer(self.root, mark, pid):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    def stale_locks(self) -> list[Path]:
        """git's lock files in the vault (index.lock, HEAD.lock, refs/**.lock, packed-refs.lock,
        config.lock, a partial commit's next-index-*.lock); stale only if no git process is alive."""
        found: list[Path] = []
        try:
            with os.scandir(self.git_dir) as entries:
                found.extend(Path(e.path) for e in entries if e.name.endswith(".lock") and e.is_file())
        except OSError:
            return []
        for folder, _dirs, files in os.walk(self.git_dir / "refs"):
            found.extend(Path(folder) / name for name in files if name.endswith(".lock"))
        return found

    def clear_stale_locks(self) -> list[str]:
        """Remove git lock files left by killed git processes; returns the ones removed (vault-relative).

        A lock is removed only when no git process works in the vault and the file is the one seen
        before that check (same inode and times) and older than it: while a stale lock exists no git
        can create it anew, so what is removed is never a live git's lock.
        """
        seen = self._lock_identities()
        if not seen:
            return []
        # One clearer at a time: two could otherwise both pass the checks and the second remove
        # a lock a new git made in between.
        try:
            (self.root / LOCKS_DIR).mkdir(parents=True, exist_ok=True)
            mutex = os.open(self.root / LOCKS_DIR / GIT_LOCKS_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return []  # a read-only vault: nothing can be removed anyway
        try:
            fcntl.flock(mutex, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(mutex)
            return []  # another process is clearing them right now
        try:
            scanned = time.time()
            if git_running_in(self.root):
                return []
            removed = []
            for path in _unchanged_since(seen, scanned):
                try:
                    path.unlink()
                except OSError:
                    continue  # gone meanwhile: nothing to do
                removed.append(self.relpath(str(path)))
            return removed
        finally:
            os.close(mutex)

    def abandoned_locks(self) -> list[Path]:
        """The lock files killed git processes left, judged as clear_stale_locks judges them but
        removing nothing (doctor): a lock seen just before its git finished is gone, or another
        file, by the time no git is found working in the vault, so it is no killed git's."""
        seen = self._lock_identities()
        if not seen:
            return []
        scanned = time.time()
        if git_running_in(self.root):
            return []
        return _unchanged_since(seen, scanned)

    def _lock_identities(self) -> dict[Path, tuple[int, int, int, int]]:
        seen = {}
        for path in self.stale_locks():
            try:
                seen[path] = _identity_of(path.stat())
            except OSError:
                continue
        return seen


def _own_files_in(root: Path) -> list[str]:
    """The vault's own files on disk (vault-relative), never through a symlink: a global excludes
    file naming `*.md` or `logs/` (core.excludesFile) would keep them out of a commit of "."."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in (".git", STATE_DIR) and not os.path.islink(os.path.join(folder, d))]
        for name in files:
            rel = os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")
            if is_vault_file(rel) and not os.path.islink(os.path.join(folder, name)):
                found.append(rel)
    return sorted(found)


def _identity_of(stat: os.stat_result) -> tuple[int, int, int, int]:
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def _unchanged_since(seen: dict[Path, tuple[int, int, int, int]], scanned: float) -> list[Path]:
    """The locks still there as they were seen, and made before the scan for git processes began:
    never one a git created after the scan found no git (file times are coarse, hence the margin)."""
    kept = []
    for path, before in seen.items():
        try:
            stat = path.stat()
        except OSError:
            continue  # gone meanwhile: its git finished
        if _identity_of(stat) == before and stat.st_mtime <= scanned - STALE_MARGIN_SECONDS:
            kept.append(path)
    return kept


def execute(command: list[str], env: dict[str, str], *, timeout: float | None = None,
            input: str | None = None) -> tuple[int, str, str]:
    """Run a git command: (status, stdout without its final newline, stderr).

    An interrupt (Ctrl-C, SIGTERM) kills and reaps the child before it propagates, so the caller's
    clean-up never races a git process still writing.
    """
    try:
        # Never the caller's stdin: `add --stdin` reads it, and git must not wait on a terminal.
        data = input.encode("utf-8") if input is not None else None
        done = subprocess.run(command, env=env, capture_output=True, timeout=timeout, input=data,
                              stdin=subprocess.DEVNULL if data is None else None)
    except subprocess.TimeoutExpired as e:
        raise command_error(command, -9, f"Timeout: git ran for more than {timeout:g} seconds") from e
    except FileNotFoundError:
        raise MemvaultError(GIT_MISSING) from None  # (GitPython itself cannot even be imported then)
    out = done.stdout.decode("utf-8", "surrogateescape")
    return done.returncode, out[:-1] if out.endswith("\n") else out, done.stderr.decode("utf-8", "surrogateescape")


def git_reason(error: Exception) -> str:
    """git's own reason, in one line: its first error, with the files it lists after it and what
    ssh said before it ("Could not read from remote repository" alone does not say why)."""
    text = str(getattr(error, "stderr", "") or error).replace("stderr:", " ")
    lines = [line.rstrip("\r '\"") for line in text.splitlines()]
    refusal = _remote_refusal(lines)
    if refusal:
        return refusal
    for n, line in enumerate(lines):
        said = line.strip(" '\"")
        if said.lower().startswith(("fatal:", "error:")):
            cause = [before.strip(" '\"") for before in lines[:n] if before.strip(" '\"").startswith("ssh:")]
            listed = []
            for after in lines[n + 1:] if said.endswith(":") else ():
                if not after.startswith("\t"):  # git lists the files it names one per line, tab-indented
                    break
                listed.append(after.strip())
            if listed:
                said += " " + ", ".join(listed[:5]) + (f" (and {len(listed) - 5} more)" if len(listed) > 5 else "")
            return "; ".join(part.rstrip(".") for part in [*cause, said])
    remaining = [line.strip(" '\"") for line in lines if line.strip(" '\"")]
    return remaining[0] if remaining else "git failed"


def _remote_refusal(lines: list[str]) -> str | None:
    """What a remote that refused a push said, before git's own "failed to push some refs" line."""
    refused = next((line.strip(" '\"")[len("remote: "):] for line in lines
                    if line.strip(" '\"").startswith(("remote: error:", "remote: fatal:"))), None)
    rejected = next((line.strip(" '\"!") for line in lines if "[remote rejected]" in line), None)
    return "; ".join(part for part in (refused, rejected) if part) or None


def failure_detail(error: Exception) -> str:
    """An error no caller expected, in one line: `git <command> failed: <git's reason>` for a failed
    git command (a user's git config that fails every commit still says what git said), else its
    type and first line."""
    from git import GitCommandError

    if isinstance(error, GitCommandError):
        command = [str(part) for part in error.command] if isinstance(error.command, list) else []
        name = next((part for part in command[1:] if not part.startswith("-")), "")
        return f"git {name} failed: {git_reason(error)}".replace("  ", " ")
    return f"{type(error).__name__}: {error}".splitlines()[0] if str(error) else type(error).__name__


GIT_MISSING = "git is not installed (no `git` on PATH); memvault keeps each vault in a git repository: install git"


def require_git() -> None:
    """MemvaultError when there is no git to run, before anything is created that would need it."""
    if shutil.which("git") is None:
        raise MemvaultError(GIT_MISSING)


def command_error(command: Sequence[str], status: int, stderr: str, stdout: str = "") -> Exception:
    """GitPython's GitCommandError, the one type callers catch for a failed git command."""
    from git import GitCommandError

    return GitCommandError(list(command), status, stderr.rstrip("\n"), stdout)
