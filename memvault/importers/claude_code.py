"""Claude Code's memory files (`--format claude-code`): CLAUDE.md files and the auto memory folder.

As code.claude.com/docs/en/memory describes them: instructions in `CLAUDE.md`, `CLAUDE.local.md`,
`.claude/CLAUDE.md` and `.claude/rules/*.md` (of a project, or of `~/.claude`), and Claude's own
notes in `~/.claude/projects/<project>/memory/`: an index `MEMORY.md` whose lines point to topic
files, each topic file one memory with frontmatter `name`, `description` and `type` (user,
feedback, project, reference). Each item or paragraph of an instruction file is a fact
(category principle); a topic file is one fact, its type a tag; MEMORY.md's lines that only point
to a topic file are left out (the topic file is the memory). None of these files holds dates:
their facts land on the day each file was last written.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from memvault.errors import InvalidInput
from memvault.importers import markdown as md
from memvault.importers.markdown import Block
from memvault.importers.notes import records_of
from memvault.importers.records import (
    Progress,
    Record,
    Skipped,
    file_time,
    holds_nothing,
    key_of,
    label,
    markdown_files,
    read_note,
    unstorable,
    vaults_skipped,
)

FORMAT = "claude-code"
# Claude Code's memory types, as memvault categories: who the user is; how to work (corrections
# and confirmed approaches); the work under way; where things are.
TYPES = {"user": "entity", "feedback": "principle", "project": "fact", "reference": "fact"}
_INSTRUCTIONS = re.compile(r"(?:^|/)(?:CLAUDE(?:\.local)?\.md|rules/.+\.md)$", re.I)
_IMPORT_LINE = re.compile(r"@\S+$")
_INDEX_LINE = re.compile(r"\[[^\]]*\]\(([^)\s]+\.md)\)")


def read(root: Path, progress: Progress, _categories: tuple[str, ...] = ()) -> Iterator[Record | Skipped]:
    vaults: list[Path] = []
    files = [root] if root.is_file() else markdown_files(root, hidden=(".claude",), vaults=vaults)
    base = root.parent if root.is_file() else root
    if not files:
        raise holds_nothing(f"{root}: holds no CLAUDE.md, rules or memory files", vaults)
    yield from vaults_skipped(vaults, base)
    for done, path in enumerate(files, start=1):
        rel = path.relative_to(base).as_posix()
        yield from _file(path, rel)
        progress("reading", done, len(files))


def _file(path: Path, rel: str) -> Iterator[Record | Skipped]:
    text = read_note(path)
    written = file_time(path)
    front = _frontmatter(text, rel)
    if front.get("type") in TYPES or (front and path.parent.name == "memory" and path.name != "MEMORY.md"):
        yield from _topic(rel, text, front, written)
    elif path.name == "MEMORY.md":
        topics = {p.name for p in path.parent.glob("*.md")}
        yield from records_of(rel, text, FORMAT, lambda _clock: written, skip=lambda block: _index_line(block, topics))
    elif _INSTRUCTIONS.search(rel) or path.name.upper() == "CLAUDE.MD":
        yield from records_of(rel, text, FORMAT, lambda _clock: written, category="principle", skip=_import_line)
    else:
        yield Skipped("files that are not CLAUDE.md, a rule or a memory file", rel)


def _topic(rel: str, text: str, front: dict, written) -> Iterator[Record | Skipped]:
    """A topic file of the auto memory folder: one memory, its body (or its description)."""
    _raw, body, offset = md.split_frontmatter(text)
    memory = body.strip() or str(front.get("description") or "").strip()
    reason = unstorable(memory, "memory files")
    if reason:
        yield Skipped(reason, rel)
        return
    kind = str(front.get("type") or "").strip().lower()
    fields = {"text": memory, "at": written, "category": TYPES.get(kind, "fact"),
              "tags": [kind] if kind in TYPES else [], "source": label(f"{FORMAT}:{rel}"),
              "key": key_of(FORMAT, rel, memory, "1")}
    yield Record(fields, f"{rel}:{offset + 1}")


def _frontmatter(text: str, rel: str) -> dict:
    raw, _body, _offset = md.split_frontmatter(text)
    if not raw.strip():
        return {}
    import yaml

    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{rel}:{mark.line + 2}" if mark is not None else rel
        raise InvalidInput(f"{where}: the frontmatter is not valid YAML ({getattr(e, 'problem', None) or e})") from None
    return data if isinstance(data, dict) else {}


def _index_line(block: Block, topics: set[str]) -> str | None:
    """MEMORY.md's line that only points to a topic file of the folder is no memory of its own."""
    linked = _INDEX_LINE.search(block.text)
    if block.kind == md.ITEM and linked and Path(linked.group(1)).name in topics:
        return "index lines of MEMORY.md (their topic files are imported)"
    return None


def _import_line(block: Block) -> str | None:
    if block.kind == md.PARAGRAPH and all(_IMPORT_LINE.match(line.strip()) for line in block.text.splitlines()):
        return "@import lines (import the files they name on their own)"
    return None
