"""The write journal: what an unfinished write was doing, so that it can be undone.

One JSON file (`.memvault/journal.json`), written and fsynced before the files change and removed
once the commit is made. A process killed in between leaves it behind, and the next command that
takes the write lock settles it: a write whose commit landed is kept, any other is rolled back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from memvault.storage.files import atomic_write, fsync_dir

APPEND = "append"     # facts or tombstones appended: files are cut back to their recorded sizes
REPLACE = "replace"   # several files rewritten (dream): restored from HEAD
MERGE = "merge"       # a git merge (sync): aborted, and the files it touches restored from HEAD
KINDS = (APPEND, REPLACE, MERGE)


@dataclass(frozen=True)
class Entry:
    kind: str
    paths: list[str]
    message: str
    head: str | None = None
    # APPEND: each file's size before the write (None: the file did not exist). None for a journal
    # written by an older memvault, which recorded no sizes.
    sizes: dict[str, int | None] | None = None
    # Queued requests (.memvault/queue/) this write claimed: committed with it, or given back.
    claims: list[str] = field(default_factory=list)
    # The process that wrote: its git children may outlive it and must finish before recovery.
    writer: int | None = None
    # MERGE: paths the merge touches that were already on disk, untracked, before it (a note of the
    # user's where the remote adds a file): git never overwrites them, so the undo must not delete them.
    kept: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps({"kind": self.kind, "paths": self.paths, "message": self.message, "head": self.head,
                           "sizes": self.sizes, "claims": self.claims, "writer": self.writer, "kept": self.kept})


class Journal:
    def __init__(self, path: Path):
        self.path = path

    def begin(self, entry: Entry) -> None:
        if entry.kind not in KINDS:
            raise ValueError(entry.kind)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, entry.to_json())
        # After a power cut the journal must still be there, or the appended data it guards would
        # look like a hand edit and be committed by the next add.
        fsync_dir(self.path.parent)

    def end(self) -> None:
        self.path.unlink(missing_ok=True)

    def exists(self) -> bool:
        return self.path.exists()

    def read(self) -> Entry | None:
        """The leftover entry; None when there is none, or when it is unreadable (then it is dropped)."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            sizes = data.get("sizes")
            entry = Entry(
                str(data["kind"]), [str(p) for p in data["paths"]], str(data["message"]),
                head=data.get("head") if isinstance(data.get("head"), str) else None,
                sizes={str(k): (int(v) if v is not None else None) for k, v in sizes.items()}
                if isinstance(sizes, dict) else None,
                claims=[str(c) for c in data.get("claims") or []],
                writer=data.get("writer") if isinstance(data.get("writer"), int) else None,
                kept=[str(k) for k in data.get("kept") or []],
            )
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError, AttributeError):
            self.end()
            return None
        if entry.kind not in KINDS:
            self.end()
            return None
        return entry
