"""`status`: what the vault holds and where it stands, as one JSON-ready dict. Only reads.

The dream, index and remote parts come from their packages, through the Vault facade.
"""

from __future__ import annotations

from memvault.storage.store import Storage
from memvault.storage.wiki import list_pages


def status(storage: Storage, *, dream: dict, index: dict, remote: dict | None) -> dict:
    """Everything `memvault status` shows, as one JSON-ready dict; `dream`, `index` and `remote` are
    what dream_status, index_status and remote_info say."""
    tombstones = storage.tombstones()
    total = forgotten = 0
    for fact in storage.iter_facts(include_forgotten=True):
        total += 1
        forgotten += fact.id in tombstones
    clean = storage.git.status()
    return {
        "path": str(storage.root),
        # a purged fact's text is gone from the logs: only its tombstone counts it
        "facts": {"total": total, "live": total - forgotten, "forgotten": forgotten,
                  "purged": sum(1 for tombstone in tombstones.values() if tombstone.purged)},
        "days": len(storage.log_files()),
        "pages": len(list_pages(storage.root)),
        **_dream_state(dream),
        "index": _index_state(index),
        "remote": remote,
        "lock": storage.lock_holder(),
        "git": {"head": storage.git.head(), "uncommitted": len(clean)},
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
    }


def _index_state(state: dict) -> dict:
    """The index's counts; a missing or damaged index is reported as it is, never built here."""
    return {"built": not state["missing"], **state}
