"""The tombstone format: one JSON object a line in tombstones.jsonl, appended and committed, never edited."""

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

    def to_dict(self) -> dict:
        return asdict(self)

    def to_line(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, sort_keys=True) + "\n"


def text_hash(text: str) -> str:
    """sha256 of the forgotten text, so an audit can prove what was forgotten without keeping it."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def parse_tombstones(content: str) -> dict[str, Tombstone]:
    """Tombstones by fact id; the first record wins (a union merge may bring a duplicate line)."""
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
            )
        except (ValueError, KeyError, TypeError):
            # A torn or hand-mangled line must not resurrect anything else: skip just that line.
            continue
        found.setdefault(tombstone.id, tombstone)
    return found
