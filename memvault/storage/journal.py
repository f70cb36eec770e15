"""The write journal: what an unfinished write was doing, so the next command can repair it.

One JSON file (`.memvault/journal.json`), written and fsynced before the files change and removed
once the commit is made. A process killed in between leaves it behind.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from memvault.storage.files import atomic_write

APPEND = "append"     # facts or tombstones appended: the data was durable before the commit
REPLACE = "replace"   # several files rewritten (dream): all-or-nothing
KINDS = (APPEND, REPLACE)


@dataclass(frozen=True)
class Entry:
    kind: str
    paths: list[str]
    message: str


class Journal:
    def __init__(self, path: Path):
        self.path = path

    def begin(self, entry: Entry) -> None:
        if entry.kind not in KINDS:
            raise ValueError(entry.kind)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps({"kind": entry.kind, "paths": entry.paths, "message": entry.message}))

    def end(self) -> None:
        self.path.unlink(missing_ok=True)

    def exists(self) -> bool:
        return self.path.exists()

    def read(self) -> Entry | None:
        """The leftover entry; None when there is none, or when it is unreadable (then it is dropped)."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            entry = Entry(str(data["kind"]), [str(p) for p in data["paths"]], str(data["message"]))
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError):
            self.end()
            return None
        if entry.kind not in KINDS:
            self.end()
            return None
        return entry
