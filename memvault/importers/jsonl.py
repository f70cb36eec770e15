"""memvault's own JSONL (`--format jsonl`): what `add --stdin` takes, one fact a line.

Each line is plain text, a JSON string, or a JSON object with the fields of a fact (`text`,
`category`, `tags`, `source`, `session`, `importance`, `at`, `supersedes`, `key`). A line without
a `key` gets one made from the line as written and which copy of it this is, so the same file
imported twice adds nothing the second time, while a line given twice in the file is two facts,
as with `add`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from memvault.errors import InvalidInput
from memvault.formats.drafts import read_fact_lines
from memvault.importers.records import Occurrences, Progress, Record, key_of

FORMAT = "jsonl"


def read(path: Path, progress: Progress, _categories: tuple[str, ...] = ()) -> Iterator[Record]:
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise InvalidInput(f"{path.name}:{line}: not UTF-8 text; save the file as UTF-8") from None
    if not text.strip():
        return
    try:
        drafts, numbers = read_fact_lines(text)
    except InvalidInput as e:  # "line N: ..." names the line; the file is named too
        raise InvalidInput(f"{path.name}: {e}") from None
    lines = text.split("\n")
    copies = Occurrences()
    for done, (draft, number) in enumerate(zip(drafts, numbers, strict=True), start=1):
        if draft.get("key") is None:
            line = lines[number - 1].strip()
            draft["key"] = key_of(FORMAT, line, copies.next(line))
        yield Record(draft, f"{path.name}:{number}")
        if done % 10_000 == 0:
            progress("reading", done, len(drafts))
    progress("reading", len(drafts), len(drafts))
