"""One generation of the index: a directory holding the catalog, the Tantivy index and the vector
file, opened together, checked when opened and re-read when another process wrote to it.

A generation still being filled holds a BUILDING marker naming its builder; `current` (POINTER)
names the live one (see memvault.index.indexer).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

from memvault.errors import INDEX_FILES, no_room, unwritable
from memvault.index.catalog import Catalog, FileState
from memvault.index.embedding_cache import is_damage
from memvault.index.lexical import LexicalIndex
from memvault.index.vectors import VectorFile
from memvault.storage.owner import Owner

POINTER = "current"
BUILDING = "building"


def pid_of(name: str) -> int:
    """The pid at the end of a generation or temp file name (gen-<ns>-<pid>, .current.<pid>)."""
    tail = name.rsplit("-" if name.startswith("gen-") else ".", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def builder_alive(generation: Path) -> bool:
    """Is the process building this generation still running? (Its marker names it.)"""
    try:
        owner = Owner.from_json(json.loads((generation / BUILDING).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        owner = None  # a marker from an older memvault: the pid in the name is all there is
    return (owner or Owner(pid_of(generation.name))).alive()


def clean_of_generation(generation: Path) -> set[str]:
    """The purged ids a generation was built knowing (see PurgeRecord.clean_of); none if unreadable."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{generation / 'catalog.sqlite'}?mode=ro", uri=True)) as db:
            row = db.execute("SELECT value FROM meta WHERE name = 'clean_of'").fetchone()
        return set(json.loads(row[0])) if row else set()
    except (sqlite3.Error, ValueError, TypeError):
        return set()


class IndexDamaged(Exception):
    """The index on disk cannot be trusted; the caller rebuilds it from the files."""


def lexical_damage(exc: Exception) -> Exception:
    """IndexDamaged for Tantivy's "Data corrupted" (a file of it damaged while this process had it
    open: an MCP server, a `search --stdin`), the error itself for anything else."""
    if isinstance(exc, ValueError) and str(exc).startswith("Data corrupted"):
        return IndexDamaged(str(exc))
    return exc


def damage_or_no_room(exc: Exception, path: Path) -> Exception:
    """IndexDamaged, unless the index could not be opened for want of room or write access: sqlite
    must write its shared-memory file even to read, and says only "disk I/O error" when the disk is
    full. Rebuilding would fail the same way and leave a half-built generation behind, so that is
    VaultUnwritable (exit 9), the index left as it is."""
    if not (isinstance(exc, sqlite3.Error) and is_damage(exc)):
        number = no_room(path)
        if number is not None:
            return unwritable(OSError(number, str(exc)), INDEX_FILES) or IndexDamaged(str(exc))
    return IndexDamaged(str(exc))


class Generation:
    """One complete index directory."""

    def __init__(self, path: Path, create: bool = False):
        self.path = path
        if create:
            path.mkdir(parents=True)
        elif not path.is_dir():
            raise IndexDamaged(f"{path.name} is missing")
        try:
            self.catalog = Catalog(path / "catalog.sqlite")
            self.lexical = LexicalIndex(path / "lexical")
            name, rows, crc = self.catalog.slots.record()
            self.vectors = VectorFile(path / name, rows, crc)
        except (sqlite3.Error, ValueError, OSError) as exc:
            raise damage_or_no_room(exc, path) from exc
        self.version = -1
        self.fresh = create  # filled by no refresh yet: the purges it knows of are recorded by the first
        self.manifest: dict[str, FileState] = {}
        self.purge_todo: list[bytes] | None = None  # see PurgeRecord.to_clear
        self.memo: dict = {}  # per-version results a warm process may reuse (see dense.dense_half)

    def check(self) -> None:
        """Cheap consistency checks run when a generation is opened (the vector rows are verified
        against their checksum when first scored, see index/vectors.py)."""
        try:
            docs = self.catalog.count()
            if self.lexical.count() != docs:
                raise IndexDamaged(f"lexical index holds {self.lexical.count()} documents, catalog {docs}")
            top = self.catalog.db.execute("SELECT max(slot) FROM docs").fetchone()[0]
            if top is not None and top >= self.vectors.rows:
                raise IndexDamaged("the catalog gives out vector slots past the recorded rows")
        except sqlite3.Error as exc:
            raise damage_or_no_room(exc, self.path) from exc

    def load_state(self) -> bool:
        """Re-read manifest and reopen readers if another process wrote; True when something changed."""
        version = self.catalog.version
        if version == self.version:
            return False
        self.manifest = self.catalog.manifest.files()
        name, rows, crc = self.catalog.slots.record()
        if self.vectors.path.name != name:
            self.vectors = VectorFile(self.path / name, rows, crc)
        else:
            self.vectors.expect(rows, crc)
        try:
            self.lexical.reload()
        except ValueError as exc:
            raise lexical_damage(exc) from exc
        self.purge_todo = self.catalog.purges.to_clear()
        self.version = version
        return True

    def close(self) -> None:
        self.catalog.close()
