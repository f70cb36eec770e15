"""The checks `doctor` runs: each package brings its own (memvault.health.doctor.Probe)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memvault.health.doctor import Probe


def doctor_probes() -> list[Probe]:
    """Every check doctor runs, each from the package it checks, in the order they are shown and
    repaired: leftovers are committed before the index is rebuilt from the files."""
    from memvault.dream import probes as dream
    from memvault.health import checks as vault
    from memvault.index import probes as index
    from memvault.remote import probes as remote

    return [vault.LOCKS, vault.SYMLINKS, remote.PURGE, vault.WORKTREE, remote.MERGE_DRIVER, remote.IGNORED,
            vault.IDENTITY, vault.SETTINGS, vault.LOG_LINES, vault.FORGET_RECORDS, vault.FACT_COUNTS,
            vault.LOG_NAMES, vault.FACT_IDS, vault.CITATIONS, vault.FORGOTTEN_CITATIONS, vault.CREDENTIALS,
            index.EMBEDDING_CACHE, index.CACHE_ROWS,
            index.INDEX_ROWS, index.INDEX, index.EMBEDDING_MODEL, index.RERANK_MODEL, dream.DREAM, dream.LLM]
