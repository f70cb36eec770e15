"""The tombstone format: one JSON object a line in tombstones.jsonl, appended and committed.

A forget appends {"id", "at", "reason", "hash"}; a purge (memvault.remote.purge) leaves
{"id", "at", "reason", "hash": "", "purged": true}: no text and no hash of it, and it replaces
the fact's earlier forget line, the one edit this file ever gets (history is rewritten anyway).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Tombstone:
    id: str
    at: str
    reason: str | None
    hash: str
    purged: bool = False  # the fact's text was removed from the logs and the history

    def to_dict(self) -> dict:
        return asdict(self)

    def to_line(self) -> str:
        record = self.to_dict()
        if not self.purged:
            del record["purged"]  # a forget line stays as it always was
        return json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n"


def text_hash(text: str) -> str:
    """sha256 of the forgotten text, so an audit can prove what was forgotten without keeping it."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def unreadable_lines(content: str) -> list[str]:
    """The lines of tombstones.jsonl that hold no forget record parse_tombstones can read."""
    return [line for line in (raw.strip() for raw in content.splitlines()) if line and not parse_tombstones(line)]


def parse_tombstones(content: str) -> dict[str, Tombstone]:
    """Tombstones by fact id; the first record wins (a union merge may bring a duplicate line),
    except that a purge record beats a forget record of the same fact wherever it stands."""
    found: dict[str, Tombstone] = {}
    for line in content.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            record = json.loads(line)
            tombstone = Tombstone(
                id=str(record["id"]),
                at=str(record.get("at", "")),
                reason=record.get("reason"),
                hash=str(record.get("hash", "")),
                purged=record.get("purged") is True,
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            # A torn or hand-mangled line must not resurrect anything else: skip just that line.
            continue
        earlier = found.get(tombstone.id)
        if earlier is None or (tombstone.purged and not earlier.purged):
            found[tombstone.id] = tombstone
    return found
