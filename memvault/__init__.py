"""memvault: long-term memory made of plain markdown files in a git repository."""

from __future__ import annotations

__version__ = "0.1.0"

from memvault.errors import (  # noqa: E402
    DreamRunning,
    ExitCode,
    InvalidInput,
    InvalidItem,
    LLMError,
    MemvaultError,
    NotAVault,
    NotFound,
    RemoteError,
    SyncConflict,
    VaultBusy,
)
from memvault.facts import Fact  # noqa: E402
from memvault.index.hits import Hit  # noqa: E402
from memvault.tombstones import Tombstone  # noqa: E402
from memvault.vault import FactView, Forgotten, Vault  # noqa: E402

__all__ = [
    "DreamRunning",
    "ExitCode",
    "Fact",
    "FactView",
    "Forgotten",
    "Hit",
    "InvalidInput",
    "InvalidItem",
    "LLMError",
    "MemvaultError",
    "NotAVault",
    "NotFound",
    "RemoteError",
    "SyncConflict",
    "Tombstone",
    "Vault",
    "VaultBusy",
    "__version__",
]
