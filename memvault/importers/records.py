"""What an import reads: records (a fact's fields and where it is) and skips, and the helpers
every format's reader shares (keys, labels, tags, reading notes)."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memvault.errors import InvalidInput
from memvault.formats.drafts import MAX_LABEL_CHARS, MAX_TEXT_BYTES
from memvault.formats.layout import CONFIG_FILE
from memvault.storage.vault_dir import find_enclosing_vault

Progress = Callable[[str, int, int], None]


class Record:
    """One fact to import: a FactDraft's fields with its `key`, and where it is in the source.
    (A plain class: a frozen dataclass took a microsecond more to make, a tenth of a second an import.)"""

    __slots__ = ("fields", "place")

    def __init__(self, fields: dict[str, Any], place: str):
        self.fields = fields
        self.place = place

    @property
    def key(self) -> str:
        return self.fields["key"]


@dataclass(frozen=True)
class Skipped:
    """Something in the source that is not imported, and why (counted by reason)."""

    reason: str
    place: str


@dataclass
class Batch:
    """What a source holds: its records in order, what was skipped, and how the commit names it."""

    format: str
    origin: str
    records: list[Record] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


# A daily log's name: 2026-01-05.md, or with a suffix some tools add (2026-02-20-2107.md).
DAILY = re.compile(r"(\d{4}-\d{2}-\d{2})(?:[-_ .][^/]*)?\.md$", re.I)


# Why a memvault vault inside a source folder is passed over: its logs read as notes come back
# garbled (each fact's metadata as text) and, for the vault being imported into, twice.
VAULT_SKIPPED = "memvault vaults and links into one (shared with `memvault sync` or `memvault clone`, not imported)"


def markdown_files(root: Path, hidden: Iterable[str] = (), vaults: list[Path] | None = None) -> list[Path]:
    """The .md files under `root`, sorted, leaving out hidden folders (.git, .obsidian, ...) but
    those named in `hidden` (".claude"), and memvault vaults and links into one, which are added
    to `vaults`."""
    found: list[Path] = []
    passed: list[Path] = []
    for folder, dirs, files in os.walk(root):
        kept = []
        for name in sorted(dirs):
            if name.startswith(".") and name not in hidden:
                continue
            if (Path(folder) / name / CONFIG_FILE).is_file():
                passed.append(Path(folder) / name)
                continue
            kept.append(name)
        dirs[:] = kept
        for name in files:
            path = Path(folder) / name
            if not name.lower().endswith(".md"):
                continue
            if path.is_symlink() and find_enclosing_vault(path.resolve().parent) is not None:
                passed.append(path)  # a vault's own file, linked in (a daily log, a page)
                continue
            found.append(path)
    if vaults is not None:
        vaults.extend(passed)
    return sorted(found)


def vaults_skipped(vaults: list[Path], base: Path) -> Iterator[Skipped]:
    for vault in vaults:
        yield Skipped(VAULT_SKIPPED, vault.relative_to(base).as_posix())


def holds_nothing(message: str, vaults: list[Path]) -> InvalidInput:
    """A source's "holds no notes" error, saying why where what it holds is memvault vaults."""
    if vaults:
        names = ", ".join(path.name for path in vaults[:3]) + (", ..." if len(vaults) > 3 else "")
        message += f"; what it holds is memvault's own ({names}), shared with `memvault sync`, not imported"
    return InvalidInput(message)


def read_note(path: Path) -> str:
    """A markdown file's text; a byte-order mark dropped, bytes that are not UTF-8 refused by place."""
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise InvalidInput(f"{path}:{line}: not UTF-8 text; save the file as UTF-8") from None


def key_of(fmt: str, *parts: str) -> str:
    """A key for a record its source gives no id to: the format and a hash of what makes it itself
    (its file, its text, which copy of that text it is). 16 hex digits: short enough that a key is
    never taken for a credential, long enough that two records never share one."""
    digest = hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{fmt}:{digest}"


def label(text: str) -> str:
    """A source or session label made from the source's own names: one line, at most 200 characters."""
    flat = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return flat[:MAX_LABEL_CHARS] or "?"


def tag(text: str) -> str | None:
    """A tag made from a label of the source (a category, a type): one word, or None if nothing is left."""
    word = re.sub(r"[\s,#]+", "-", "".join(c for c in text.strip() if c.isprintable())).strip("-")
    return word[:MAX_LABEL_CHARS] if word else None


def file_time(path: Path) -> datetime:
    """When a file without dates of its own was last written: its facts land on that day."""
    return datetime.fromtimestamp(path.stat().st_mtime, UTC)


def unstorable(text: str, noun: str) -> str | None:
    """Why a text found in a source cannot be a fact, as the reason it is skipped for (`noun`: what
    the source calls such a thing, plural: "items", "messages"), or None."""
    if not text.strip():
        return f"empty {noun}"
    if "\x00" in text:
        return f"{noun} holding a NUL character"
    if len(text.encode("utf-8", "surrogatepass")) > MAX_TEXT_BYTES:
        return f"{noun} longer than a fact may be ({MAX_TEXT_BYTES // 1024 // 1024} MiB)"
    return None


class Occurrences:
    """Counts the copies of a text within one file, so that two equal items get two keys."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, ...], int] = {}

    def next(self, *parts: str) -> str:
        count = self.seen.get(parts, 0) + 1
        self.seen[parts] = count
        return str(count)
