"""A markdown memory folder: daily `YYYY-MM-DD.md` logs plus a `MEMORY.md` (`--format memory-dir`).

The shape of OpenClaw's memory-core workspace (`MEMORY.md` and `memory/YYYY-MM-DD.md`, see
docs.openclaw.ai/concepts/memory) and of the tools that copy it. Every list item, paragraph or
quote of a daily log is a fact of that day, at the time of the `## HH:MM` heading above it if
there is one, else at midnight; MEMORY.md's are facts of the day the file was last written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import date, datetime
from functools import partial
from pathlib import Path

from memvault.errors import InvalidInput
from memvault.importers.notes import Clock, records_of
from memvault.importers.records import (
    DAILY,
    Progress,
    Record,
    Skipped,
    file_time,
    holds_nothing,
    markdown_files,
    read_note,
    vaults_skipped,
)

FORMAT = "memory-dir"


def read(root: Path, progress: Progress, _categories: tuple[str, ...] = ()) -> Iterator[Record | Skipped]:
    vaults: list[Path] = []
    files = [root] if root.is_file() else markdown_files(root, vaults=vaults)
    if not any(DAILY.match(p.name) or p.name.lower() == "memory.md" for p in files):
        raise holds_nothing(f"{root}: holds no daily log (YYYY-MM-DD.md) and no MEMORY.md; is it the memory folder?",
                            vaults)
    base = root.parent if root.is_file() else root
    yield from vaults_skipped(vaults, base)
    for done, path in enumerate(files, start=1):
        rel = path.relative_to(base).as_posix()
        daily = DAILY.match(path.name)
        if daily:
            day = _day(daily.group(1), rel)
            yield from records_of(rel, read_note(path), FORMAT, partial(_at, day))
        elif path.name.lower() == "memory.md":
            written = file_time(path)
            yield from records_of(rel, read_note(path), FORMAT, _always(written))
        else:
            yield Skipped("files that are neither a daily log nor MEMORY.md", rel)
        progress("reading", done, len(files))


def _day(text: str, rel: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise InvalidInput(f"{rel}: named for a day that does not exist ({text})") from None


def _always(written: datetime) -> Callable[[Clock], datetime]:
    """Every block of MEMORY.md is timed by the file's own time, whatever clock it names."""
    return lambda _clock: written


def _at(day: date, clock: Clock) -> str:
    return day.isoformat() if clock is None else f"{day.isoformat()}T{clock[0]:02d}:{clock[1]:02d}"
