"""Errors raised by memvault, each carrying the exit code the CLI returns for it."""

from __future__ import annotations

import errno
import os
import re
from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes; documented in the README and stable for scripts."""

    OK = 0
    ERROR = 1
    USAGE = 2
    NOT_FOUND = 3
    BUSY = 4
    LLM = 5
    DREAM_RUNNING = 6
    SYNC_CONFLICT = 7
    REMOTE = 8
    UNWRITABLE = 9
    INTERRUPTED = 130
    TERMINATED = 143


# The error types scripts may match on, as docs/json.md lists them (ErrorDetail.type). UndoRefused
# lives in dream/undo.py; the others are below.
PUBLIC_TYPES = ("InvalidInput", "NotFound", "NotAVault", "VaultBusy", "VaultUnwritable", "LLMError",
                "DreamRunning", "UndoRefused", "SyncConflict", "RemoteError", "UnsafePath", "LogLinesUnreadable",
                "UsageError", "Interrupted", "Terminated", "InternalError", "MemvaultError")


class MemvaultError(Exception):
    """Base class: a one-line message meant for the user, and an exit code."""

    exit_code = ExitCode.ERROR

    @property
    def kind(self) -> str:
        """The `type` of `{"error": ...}` (--json, MCP): the nearest class docs/json.md names.

        Subclasses kept for the code's own use (ProviderUnavailable, BrokenRepository, ...) are
        not part of that contract: a script matching "LLMError" or "NotAVault" must see it.
        """
        return next(c.__name__ for c in type(self).__mro__ if c.__name__ in PUBLIC_TYPES)


class InvalidInput(MemvaultError):
    """The user (or agent) gave a value memvault cannot accept; nothing was written."""

    exit_code = ExitCode.USAGE


class InvalidItem(InvalidInput):
    """One item of a batch is invalid; the batch writes nothing. `item` counts from 1."""

    def __init__(self, item: int, reason: str):
        super().__init__(f"item {item}: {reason}")
        self.item = item
        self.reason = reason


def check_count(name: str, value: object, least: int, most: int | None = None) -> int:
    """`value` as a count (a limit, a number of batches) from `least` to `most`, else InvalidInput.

    Every count option is checked here rather than by the CLI framework, so the CLI, --json, the
    Python API and MCP refuse a bad one with the same one-line message and exit code 2.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < least or (most is not None and value > most):
        bounds = f"from {least} to {most}" if most is not None else f"of at least {least}"
        raise InvalidInput(f"{name} must be a whole number {bounds}")
    return value


class NotFound(MemvaultError):
    exit_code = ExitCode.NOT_FOUND


class FactForgotten(NotFound):
    """A forgotten fact asked for where only live facts are shown (`show`): says when and why."""

    def __init__(self, fact_id: str, at: str, reason: str | None = None):
        super().__init__(f"fact {fact_id} was forgotten at {at}" + (f" ({reason})" if reason else ""))
        self.fact_id, self.at, self.reason = fact_id, at, reason


class NotAVault(NotFound):
    """A path was given (or discovered) that holds no memvault vault."""


class BrokenRepository(NotAVault):
    """A vault (memvault.toml is there) whose git repository is missing or unreadable."""

    def __init__(self, root: object, problem: str):
        super().__init__(f"{root}: {problem}; `memvault doctor` explains, `memvault doctor --fix` re-creates "
                         "the repository from the vault's files")
        self.root = root
        self.problem = problem


class VaultBusy(MemvaultError):
    """Another process held the vault lock for longer than we were willing to wait."""

    exit_code = ExitCode.BUSY


class LLMError(MemvaultError):
    exit_code = ExitCode.LLM


class DreamRunning(MemvaultError):
    exit_code = ExitCode.DREAM_RUNNING


class UnsafePath(MemvaultError):
    """A vault file (or a folder on its way) is a symlink or leads outside the vault: memvault
    neither reads nor writes through it (a synced commit could point it anywhere)."""

    def __init__(self, rel: str, target: str | None = None, *, outside: bool = False):
        if outside:
            message = f"{rel!r} is not a path inside the vault; nothing was read or written"
        else:
            to = f" (to {target})" if target else ""
            message = (f"{rel} is a symlink{to}; memvault never reads or writes through a symlink: replace it "
                       "with a regular file (`memvault doctor` lists every one)")
        super().__init__(message)
        self.rel = rel


class SyncConflict(MemvaultError):
    exit_code = ExitCode.SYNC_CONFLICT


class RemoteError(MemvaultError):
    exit_code = ExitCode.REMOTE


class VaultUnwritable(MemvaultError):
    """The disk is full, or the vault is read-only or not ours to write; nothing was changed."""

    exit_code = ExitCode.UNWRITABLE

    def __init__(self, reason: str, where: str, outcome: str = ""):
        super().__init__(f"{reason} {where}" + (f"; {outcome}" if outcome else ""))
        self.reason, self.where, self.outcome = reason, where, outcome

    def saying(self, outcome: str) -> VaultUnwritable:
        """The same error, told what became of the change (unless it already says)."""
        return self if self.outcome else VaultUnwritable(self.reason, self.where, outcome)


# errno -> how the one-line message names it, "<reason> <path>".
UNWRITABLE_ERRNOS = {
    errno.ENOSPC: "disk full while writing",
    errno.EDQUOT: "disk quota exceeded while writing",
    errno.EROFS: "read-only file system: cannot write",
    errno.EACCES: "permission denied writing",
    errno.EPERM: "permission denied writing",
    errno.EISDIR: "a folder stands where memvault writes the file",
    # (a file in the way of a folder memvault makes: an XDG_CACHE_HOME pointing under a file)
    errno.ENOTDIR: "a file stands in the way of the folder memvault writes:",
}


def unwritable(error: OSError, path: os.PathLike[str] | str | None = None, outcome: str = "") -> VaultUnwritable | None:
    """The clear error for an OSError that means "cannot write here" (None for any other error).

    `path` names what was being written (vault-relative where possible); `outcome` says what
    became of the change, e.g. "nothing was added".
    """
    reason = UNWRITABLE_ERRNOS.get(error.errno or 0)
    if reason is None:
        return None
    where = os.fspath(path) if path is not None else (error.filename or "the vault")
    return VaultUnwritable(reason, str(where), outcome)


def no_room(path: os.PathLike[str] | str, margin: int = 0) -> int | None:
    """EROFS or ENOSPC when the file system holding `path` is read-only or has at most `margin`
    bytes free, else None: what a library that failed without an errno most likely ran into."""
    try:
        disk = os.statvfs(path)
    except OSError:
        return None
    if disk.f_flag & os.ST_RDONLY:
        return errno.EROFS
    return errno.ENOSPC if disk.f_bavail * disk.f_frsize <= margin else None


# How libraries below memvault (Tantivy's Rust I/O, sqlite) word the same OSErrors.
_WORDED = ((re.compile(r"\(os error (\d+)\)"), None), (re.compile(r"database or disk is full"), errno.ENOSPC),
           (re.compile(r"readonly database"), errno.EROFS))


# How a failure inside the search index or the embedding cache names where it happened.
INDEX_FILES = ".memvault (the search index or its cache)"


def unwritable_in(error: BaseException) -> VaultUnwritable | None:
    """`unwritable` for any exception: an OSError, or a library error that words one (the search
    index's Tantivy and sqlite do not raise OSError)."""
    if isinstance(error, OSError):
        return unwritable(error)
    text = str(error)
    for pattern, code in _WORDED:
        found = pattern.search(text)
        if found:
            number = code if code is not None else int(found.group(1))
            return unwritable(OSError(number, text), INDEX_FILES)
    return None


class LogLinesUnreadable(MemvaultError):
    """A dream stopped before a day whose log has a line that does not parse (the days before it
    were consolidated)."""


class UsageError(MemvaultError):
    """A command line the CLI cannot parse (an unknown option, a missing argument)."""

    exit_code = ExitCode.USAGE


class Interrupted(MemvaultError):
    """Ctrl-C: the command stopped, and its unfinished write was undone."""

    exit_code = ExitCode.INTERRUPTED

    def __init__(self, message: str = "interrupted"):
        super().__init__(message)


class InternalError(MemvaultError):
    """A failure memvault did not foresee (a bug): told in one line, with MEMVAULT_DEBUG=1 for more."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that every clean-up path runs (see memvault.cli)."""

    kind = "Terminated"
    exit_code = ExitCode.TERMINATED

    def __str__(self) -> str:
        return "terminated"


def error_detail(error: MemvaultError | Terminated, message: str | None = None) -> dict[str, object]:
    """The ErrorDetail of docs/json.md: the error's type, its one-line message (or `message`) and
    exit code. The one place it is built, for --json on stderr, a --stdin line and MCP alike."""
    return {"type": error.kind, "message": one_line(str(error) if message is None else message),
            "exit_code": int(error.exit_code)}


def error_json(error: MemvaultError | Terminated) -> dict[str, object]:
    """What a failed command prints with --json (and an MCP tool error carries): `{"error": ...}`."""
    return {"error": error_detail(error)}


def worded(error: BaseException) -> str:
    """A failure in words for a notice: "disk full while writing …" when it is one of those, else
    its type and message."""
    clear = unwritable_in(error)
    return str(clear) if clear is not None else f"{type(error).__name__}: {error}"


# An error quotes what it was given (an id, a category, a date): 100 KB typed as an id made a
# 100 KB error line. Its start says what went wrong and its end what to do, so the middle goes.
MESSAGE_MAX_CHARS = 1000
_KEPT_HEAD, _KEPT_TAIL = 500, 200


def one_line(message: str) -> str:
    """An error message as it is shown: on one line, and at most MESSAGE_MAX_CHARS characters."""
    message = " ".join(message.split()) if "\n" in message else message
    if len(message) <= MESSAGE_MAX_CHARS:
        return message
    left_out = len(message) - _KEPT_HEAD - _KEPT_TAIL
    return f"{message[:_KEPT_HEAD]} … ({left_out:,} characters left out) … {message[-_KEPT_TAIL:]}"
