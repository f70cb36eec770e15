"""memvault: long-term memory made of plain markdown files in a git repository."""

from __future__ import annotations

__version__ = "0.1.0"

from memvault.errors import (
    DreamRunning,
    ExitCode,
    FactForgotten,
    InvalidInput,
    InvalidItem,
    LLMError,
    MemvaultError,
    NotAVault,
    NotFound,
    RemoteError,
    SyncConflict,
    VaultBusy,
    VaultUnwritable,
)
from memvault.formats.facts import Fact
from memvault.formats.tombstones import Tombstone
from memvault.index.hits import Hit
from memvault.index.query import SearchQuery
from memvault.recall.forgetting import Forgotten
from memvault.recall.lookup import FactView
from memvault.recall.timeline import RecentQuery
from memvault.vault import Vault

__all__ = [
    "DreamRunning",
    "ExitCode",
    "Fact",
    "FactForgotten",
    "FactView",
    "Forgotten",
    "Hit",
    "InvalidInput",
    "InvalidItem",
    "LLMError",
    "MemvaultError",
    "NotAVault",
    "NotFound",
    "RecentQuery",
    "RemoteError",
    "SearchQuery",
    "SyncConflict",
    "Tombstone",
    "Vault",
    "VaultBusy",
    "VaultUnwritable",
    "__version__",
]
