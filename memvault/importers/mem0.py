"""A mem0 export (`--format mem0`): memories as `get_all` returns them, saved as JSON.

As mem0's API reference (memory/get-memories) and its open-source `Memory.get_all` give them: a
list of memories, or an object holding it under `results` (the paginated envelope, with `count`,
`next`, `previous`) or `memories`. A memory is an object with `id`, `memory` (the text),
`created_at` and `updated_at` (ISO 8601), and optionally `metadata` (an object), `categories`
(the platform's list of names), `user_id`, `agent_id`, `app_id` and `run_id`. Each becomes a fact
on its `created_at` (else `updated_at`), keyed `mem0:<id>`: its categories and metadata are tags
(`type:professional`), its metadata's `category` or `type` its category when the vault has one of
that name, its `run_id` its session and its agent its source (`mem0:<agent_id>`, else `mem0`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from memvault.errors import InvalidInput
from memvault.importers.records import Occurrences, Progress, Record, Skipped, key_of, label, tag, unstorable

FORMAT = "mem0"
# A metadata value longer than this is no tag (a note, a document): it is left out.
TAG_VALUE_CHARS = 60


def read(path: Path, progress: Progress, categories: Iterable[str] = ()) -> Iterator[Record | Skipped]:
    memories = _memories(path)
    names = {name.casefold(): name for name in categories}
    copies = Occurrences()
    for number, memory in enumerate(memories, start=1):
        place = f"{path.name}: memory {number}"
        if not isinstance(memory, dict):
            raise InvalidInput(f"{place}: not an object")
        text = memory.get("memory", memory.get("text"))
        if not isinstance(text, str):
            raise InvalidInput(f"{place}: no \"memory\" text")
        reason = unstorable(text, "memories")
        if reason:
            yield Skipped(reason, place)
            continue
        yield Record(_fields(memory, text, names, place, copies), place)
        progress("reading", number, len(memories))


def _memories(path: Path) -> list:
    try:
        data = json.loads(path.read_bytes())
    except json.JSONDecodeError as e:
        raise InvalidInput(f"{path.name}:{e.lineno}: not valid JSON ({e.msg} at column {e.colno})") from None
    except (UnicodeDecodeError, RecursionError, ValueError) as e:
        raise InvalidInput(f"{path.name}: not valid JSON ({e.__class__.__name__})") from None
    if isinstance(data, dict):
        data = data.get("results", data.get("memories"))
    if not isinstance(data, list):
        raise InvalidInput(f"{path.name}: not a mem0 export (a list of memories, or an object with \"results\")")
    return data


def _fields(memory: dict, text: str, categories: dict[str, str], place: str, copies: Occurrences) -> dict[str, Any]:
    metadata = memory.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    at = memory.get("created_at") or memory.get("updated_at")
    if at is not None and not isinstance(at, str):
        raise InvalidInput(f"{place}: created_at is not an ISO 8601 time: {at!r}")
    agent, run = memory.get("agent_id"), memory.get("run_id")
    return {"text": text, "at": at, "category": _category(metadata, categories), "tags": _tags(memory, metadata),
            "source": label(f"{FORMAT}:{agent}" if isinstance(agent, str) and agent else FORMAT),
            "session": label(run) if isinstance(run, str) and run.strip() else None,
            "key": _key(memory, text, at, copies)}


def _category(metadata: dict, categories: dict[str, str]) -> str:
    """The vault's category named by the metadata's `category` or `type`, else "fact"."""
    return next((categories[str(metadata[name]).casefold()] for name in ("category", "type")
                 if isinstance(metadata.get(name), str) and metadata[name].casefold() in categories), "fact")


def _tags(memory: dict, metadata: dict) -> list[str]:
    """mem0's categories, short metadata values and user/app ids, as tags (each once)."""
    tags = [tag(name) for name in _strings(memory.get("categories"))]
    tags += [tag(f"{name}:{value}") for name, value in metadata.items() if _short(value)]
    tags += [tag(f"{name.removesuffix('_id')}:{memory[name]}") for name in ("user_id", "app_id")
             if isinstance(memory.get(name), str) and len(memory[name]) <= TAG_VALUE_CHARS]
    return list(dict.fromkeys(t for t in tags if t))


def _key(memory: dict, text: str, at: str | None, copies: Occurrences) -> str:
    """mem0's own id as the key; without one, the text and time (and which copy of them it is)."""
    identity = memory.get("id")
    if isinstance(identity, (str, int)) and str(identity):
        return f"{FORMAT}:{identity}"
    return key_of(FORMAT, text, str(at), copies.next(text, str(at)))


def _short(value: Any) -> bool:
    """Is this metadata value a word or a number short enough to be a tag?"""
    return isinstance(value, (str, int, float)) and not isinstance(value, bool) and len(str(value)) <= TAG_VALUE_CHARS


def _strings(value: Any) -> list[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []
