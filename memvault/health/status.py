"""`status`: what the vault holds and where it stands, as one JSON-ready dict. Only reads.

The dream, index and remote parts come from their packages, through the Vault facade.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memvault.formats.reports import IndexState, IndexStatus, RemoteInfo, VaultContents, VaultStatus
from memvault.health.tally import fact_counts
from memvault.storage.store import Storage
from memvault.storage.wiki import list_pages


def status(storage: Storage, *, dream: Mapping[str, Any], index: IndexStatus,
           remote: RemoteInfo | None) -> VaultStatus:
    """Everything `memvault status` shows, as one JSON-ready dict; `dream`, `index` and `remote` are
    what dream_status, index_status and remote_info say."""
    clean = storage.git.status()
    return {
        "path": str(storage.root),
        **contents(storage, dream),
        "index": _index_state(index, storage),
        "remote": remote,
        "lock": storage.lock_holder(),
        "git": {"head": storage.git.head(), "uncommitted": len(clean)},
    }


def contents(storage: Storage, dream: Mapping[str, Any]) -> VaultContents:
    """What the vault's files say (facts, days, pages) and its dream progress (`dream`: what
    dream_status says): the part of `status` a past moment has too (memvault.recall.asof)."""
    return {
        # a purged fact's text is gone from the logs: only its tombstone counts it
        "facts": {**fact_counts(storage),
                  "purged": sum(1 for tombstone in storage.tombstone_log.tombstones().values() if tombstone.purged)},
        "days": len(storage.facts.log_files()),
        "pages": len(list_pages(storage.root)),
        "watermark": dream.get("watermark"),
        "pending": {"days": dream.get("pending_days", 0), "facts": dream.get("pending_facts", 0),
                    "scrub_pages": len(dream.get("scrub_pages", []))},
        "last_dream": dream.get("last_dream"),
        "failed_attempts": dream.get("failed_attempts", 0),
        "failing": dream.get("failing"),
        "stopped": dream.get("stopped"),
        "dream_running": dream.get("running"),
    }


def _index_state(state: IndexStatus, storage: Storage) -> IndexState:
    """The index's counts; a missing or damaged index is reported as it is, never built here."""
    rerank = storage.config.rerank
    return {"built": not state["missing"], **state, "rerank": rerank.model if rerank.enabled else None}
