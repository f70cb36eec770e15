"""Errors raised by memvault, each carrying the exit code the CLI returns for it."""

from __future__ import annotations

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
    INTERRUPTED = 130


class MemvaultError(Exception):
    """Base class: a one-line message meant for the user, and an exit code."""

    exit_code = ExitCode.ERROR


class InvalidInput(MemvaultError):
    """The user (or agent) gave a value memvault cannot accept; nothing was written."""

    exit_code = ExitCode.USAGE


class InvalidItem(InvalidInput):
    """One item of a batch is invalid; the batch writes nothing. `item` counts from 1."""

    def __init__(self, item: int, reason: str):
        super().__init__(f"item {item}: {reason}")
        self.item = item
        self.reason = reason


class NotFound(MemvaultError):
    exit_code = ExitCode.NOT_FOUND


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


class SyncConflict(MemvaultError):
    exit_code = ExitCode.SYNC_CONFLICT


class RemoteError(MemvaultError):
    exit_code = ExitCode.REMOTE
