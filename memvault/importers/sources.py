"""Which format a source is in, and its records: `read_source`, what `memvault import` runs."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from memvault.base.config import CATEGORIES
from memvault.errors import InvalidInput
from memvault.importers.records import DAILY, Batch, Progress, Record, Skipped, markdown_files
from memvault.storage.vault_dir import find_enclosing_vault

Reader = Callable[[Path, Progress, tuple[str, ...]], Iterator[Record | Skipped]]

FORMATS = ("memory-dir", "claude-code", "chatgpt", "basic-memory", "mem0", "jsonl")


def read_source(source: os.PathLike[str] | str, fmt: str | None = None, progress: Progress | None = None, *,
                categories: Iterable[str] = ()) -> Batch:
    """Every record of `source` in format `fmt` (guessed from the source when None); InvalidInput,
    naming the place, for a source or a record that cannot be read. `categories`: the vault's, for
    the formats whose records name a category of their own."""
    path = Path(source).expanduser()
    if not path.exists():
        raise InvalidInput(f"{source}: no such file or folder")
    vault = find_enclosing_vault(path.resolve() if path.is_dir() else path.resolve().parent)
    if vault is not None:
        where = "is a memvault vault" if vault == path.resolve() else f"is inside the memvault vault {vault}"
        raise InvalidInput(f"{source} {where}: a vault's facts are shared with `memvault sync` or "
                           "`memvault clone`, not imported")
    fmt = guess_format(path) if fmt is None else fmt
    if fmt not in FORMATS:
        raise InvalidInput(f"unknown import format {fmt!r}; use one of: {', '.join(FORMATS)}")
    reader = _reader(fmt)
    batch = Batch(fmt, f"{path.name or path} as {fmt}")
    try:
        for found in reader(path, progress or (lambda _phase, _done, _total: None), tuple(categories) or CATEGORIES):
            if isinstance(found, Skipped):
                batch.skip(found.reason)
            else:
                batch.records.append(found)
    except OSError as e:
        raise InvalidInput(f"{e.filename or path}: cannot be read ({e.strerror or e})") from None
    return batch


def _reader(fmt: str) -> Reader:
    # (each reader imported when its format is read: chatgpt's and mem0's pull in JSON parsing only they need)
    if fmt == "memory-dir":
        from memvault.importers.memory_dir import read as memory_dir
        return memory_dir
    if fmt == "claude-code":
        from memvault.importers.claude_code import read as claude_code
        return claude_code
    if fmt == "chatgpt":
        from memvault.importers.chatgpt import read as chatgpt
        return chatgpt
    if fmt == "basic-memory":
        from memvault.importers.basic_memory import read as basic_memory
        return basic_memory
    if fmt == "mem0":
        from memvault.importers.mem0 import read as mem0
        return mem0
    from memvault.importers.jsonl import read as jsonl
    return jsonl


def guess_format(path: Path) -> str:
    """The format of a source that plainly shows it; InvalidInput asking for --format otherwise."""
    name = path.name.lower()
    if path.is_file():
        if name.endswith((".jsonl", ".ndjson")):
            return "jsonl"
        if name == "conversations.json" or name.endswith(".zip"):
            return "chatgpt"
        if name.endswith(".json"):
            head = _head(path)
            if re.match(r'\s*\[\s*\{.*?"(title|mapping|conversation_id)"', head, re.S):
                return "chatgpt"
            if re.search(r'"memory"\s*:', head):
                return "mem0"
        if name in ("claude.md", "claude.local.md"):
            return "claude-code"
    elif path.is_dir():
        if (path / "conversations.json").is_file():
            return "chatgpt"
        if any((path / name).is_file() for name in ("CLAUDE.md", "CLAUDE.local.md", ".claude/CLAUDE.md")):
            return "claude-code"
        if path.name == "memory" and path.parent.parent.name == "projects" and (path / "MEMORY.md").is_file():
            return "claude-code"  # Claude Code's auto memory: ~/.claude/projects/<project>/memory/
        if any(DAILY.match(p.name) for p in markdown_files(path)):
            return "memory-dir"
    raise InvalidInput(f"cannot tell the format of {path}; give --format ({', '.join(FORMATS)})")


def _head(path: Path, size: int = 4096) -> str:
    with open(path, "rb") as f:
        return f.read(size).decode("utf-8", "replace")


