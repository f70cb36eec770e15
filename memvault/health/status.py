"""`status`: what the vault holds and where it stands, as one JSON-ready dict. Only reads.

The dream, index and remote parts come from their packages, through the Vault facade.
"""

from __future__ import annotations

from memvault.health.tally import fact_counts
from memvault.storage.store import Storage
from memvault.storage.wiki import list_pages


def status(storage: Storage, *, dream: dict, index: dict, remote: dict | None) -> dict:
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


def contents(storage: Storage, dream: dict) -> dict:
    """What the vault's files say (facts, days, pages) and its dream progress (`dream`: what
    dream_status says): the part of `status` a past moment has too (memvault.recall.asof)."""
    return {
        # a purged fact's text is gone from the logs: only its tombstone counts it
        "facts": {**fact_counts(storage),
                  "purged": sum(1 for tombstone in storage.tombstone_log.tombstones().values() if tombstone.purged)},
        "days": len(storage.facts.log_files()),
        "pages": len(list_pages(storage.root)),
        **_dream_state(dream),
    }


def _dream_state(state: dict) -> dict:
    return {
        "watermark": state.get("watermark"),
        "pending": {"days": state.get("pending_days", 0), "facts": state.get("pending_facts", 0),
                    "scrub_pages": len(state.get("scrub_pages", []))},
        "last_dream": state.get("last_dream"),
        "failed_attempts": state.get("failed_attempts", 0),
        "failing": state.get("failing"),
        "stopped": state.get("stopped"),
        "dream_running": state.get("running"),
    }


def _index_state(state: dict, storage: Storage) -> dict:
    """The index's counts; a missing or damaged index is reported as it is, never built here."""
    rerank = storage.config.rerank
    return {"built": not state["missing"], **state, "rerank": rerank.model if rerank.enabled else None}
