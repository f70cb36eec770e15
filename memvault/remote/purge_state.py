"""What this clone knows of purges, in .memvault/purge.json (its own, never committed): the ids
whose text it scrubbed from its history, a purge noted before its rewrite and not yet finished
(Storage.unfinished_purge reads it), and whether the remote still holds the old history."""

from __future__ import annotations

import json
from collections.abc import Iterable

from memvault.formats.layout import PURGE_STATE
from memvault.storage.files import atomic_write
from memvault.storage.store import Storage


def read_state(storage: Storage) -> dict:
    """The file's content; empty when it is missing or unreadable (nothing known yet)."""
    try:
        data = json.loads(storage.read_text(PURGE_STATE) or "{}")
    except ValueError:
        data = {}
    return data if isinstance(data, dict) else {}


def record(storage: Storage, ids: Iterable[str], *, push_owed: bool | None = None,
           pending: list[str] | None = None, before: str | None = None) -> None:
    """Note `ids` as scrubbed here, and (when given) the purge pending and HEAD before it, or a push owed."""
    state = read_state(storage)
    state["clean"] = sorted(set(state.get("clean") or []) | set(ids))
    if pending is not None:
        state["pending"] = sorted(set(pending))
        if pending and before:
            state["before"] = before  # HEAD before the rewrite (Recovery.recover_locked)
        elif not pending:
            state.pop("before", None)
    if push_owed is not None:
        state["push_owed"] = bool(push_owed) or bool(state.get("push_owed"))
    storage.state_dir  # noqa: B018 - creates .memvault/
    atomic_write(storage.root / PURGE_STATE, json.dumps(state, indent=1) + "\n")


def push_owed(storage: Storage) -> bool:
    """Whether a purge made here has not been pushed yet (the remote still holds the old history)."""
    return bool(read_state(storage).get("push_owed"))


def pushed(storage: Storage) -> None:
    state = read_state(storage)
    if state.get("push_owed"):
        state["push_owed"] = False
        atomic_write(storage.root / PURGE_STATE, json.dumps(state, indent=1) + "\n")


def adopted(storage: Storage) -> None:
    """The sync that adopted a purge has pruned the old objects: nothing is left to finish."""
    record(storage, (), pending=[])
