"""The shapes of the JSON-ready dicts the facade returns (docs/json.md names the same fields):
what index_status, reindex, dream_status, dream_undo, remote_info and status say, typed.

Values only, no I/O: the packages that build them and the facade that returns them both read
them from here, below every feature.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class ReindexReport(TypedDict):
    """What a reindex did: documents now indexed by kind, vectors computed and reused, documents
    dropped, documents still without a vector, and how long it took."""

    facts: int
    sections: int
    embedded: int
    reused: int
    removed: int
    pending_embeddings: int
    seconds: float


class IndexStatus(TypedDict):
    """The index's counts and drift from the files; None where a missing, damaged or unavailable
    index cannot say (`missing`, `damaged` and `unavailable` say why)."""

    documents: int | None
    pending_embeddings: int | None
    drift: int | None
    model: str
    built_with: str | None
    missing: bool
    damaged: str | None
    unavailable: str | None


class DreamEntry(TypedDict):
    """One run of dream as log.md records it."""

    at: str
    outcome: str
    batch: str | None
    watermark: str | None
    detail: str | None


class DreamStatus(TypedDict):
    """What dream has left (days, facts, pages to scrub, the next batch) and how its runs went;
    `running`: the progress of a dream running now, None when none runs."""

    watermark: str | None
    pending_days: int
    pending_facts: int
    late_facts: int
    stopped: str | None
    scrub_pages: list[str]
    next_batch: str | None
    failed_attempts: int
    failing: dict[str, Any] | None
    max_retries: int
    last_dream: DreamEntry | None
    last_success: DreamEntry | None
    model: str | None
    running: dict[str, Any] | None


class UndoReport(TypedDict):
    """The dream commit reverted, the undo's own commit, the files it restored, and the watermark now."""

    reverted: str
    message: str
    commit: str
    paths: list[str]
    watermark: str | None


class RemoteInfo(TypedDict):
    """The remote and how far this vault is ahead of and behind it as of the last sync (`synced`
    False, and the counts None, before the first sync)."""

    name: str
    url: str
    branch: str
    synced: bool
    ahead: int | None
    behind: int | None


class IndexState(IndexStatus):
    """The index's part of `status` (docs/json.md IndexState): index_status, and whether it is built."""

    built: bool
    rerank: str | None


class VaultContents(TypedDict):
    """What the vault's files say and its dream progress: the part of `status` a past moment has too."""

    facts: dict[str, int]
    days: int
    pages: int
    watermark: str | None
    pending: dict[str, int]
    last_dream: DreamEntry | None
    failed_attempts: int
    failing: dict[str, Any] | None
    stopped: str | None
    dream_running: dict[str, Any] | None


class VaultStatus(VaultContents):
    """What `memvault status` shows (docs/json.md Status). As of a past moment, `as_of` names the
    commit that answered, and the index, remote, lock and git parts are absent."""

    path: str
    as_of: NotRequired[dict[str, Any]]
    index: NotRequired[IndexState]
    remote: NotRequired[RemoteInfo | None]
    lock: NotRequired[dict[str, Any] | None]
    git: NotRequired[dict[str, Any]]
