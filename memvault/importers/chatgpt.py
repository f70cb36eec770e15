"""A ChatGPT data export (`--format chatgpt`): the user's messages of `conversations.json`.

The export (Settings > Data controls > Export data) is a .zip holding `conversations.json`: a
list of conversations, each with `title`, `create_time`, `conversation_id` (or `id`), `mapping`
(message id -> node: `message`, `parent`, `children`) and `current_node`, the last message of the
branch shown. A message has `author.role` (user, assistant, system, tool), `create_time` (Unix
seconds), `content` (`content_type` text or multimodal_text with string `parts`) and `metadata`.
The user's messages on the shown branch become facts at their own times, the conversation their
session (`title (first 8 of its id)`), the source `chatgpt`, the key `chatgpt:<message id>`.
Everything else is skipped and counted: the assistant's, system and tool messages, messages of
branches left behind by an edit or a regeneration, hidden ones, and parts that are not text.
"""

from __future__ import annotations

import json
import math
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memvault.errors import InvalidInput
from memvault.importers.records import Progress, Record, Skipped, label, unstorable

FORMAT = "chatgpt"
CONVERSATIONS = "conversations.json"


def read(path: Path, progress: Progress, _categories: tuple[str, ...] = ()) -> Iterator[Record | Skipped]:
    name, conversations = _load(path)
    if not isinstance(conversations, list):
        raise InvalidInput(f"{name}: not a ChatGPT conversations.json (expected a list of conversations)")
    for number, conversation in enumerate(conversations, start=1):
        yield from _conversation(conversation, f"{name}: conversation {number}")
        progress("reading", number, len(conversations))


def _load(path: Path) -> tuple[str, Any]:
    """The file's name as places name it, and its JSON."""
    if path.is_dir():
        path = path / CONVERSATIONS
        if not path.is_file():
            raise InvalidInput(f"{path.parent}: holds no {CONVERSATIONS}")
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            inside = [n for n in archive.namelist() if n.rsplit("/", 1)[-1] == CONVERSATIONS]
            if not inside:
                raise InvalidInput(f"{path}: the archive holds no {CONVERSATIONS}")
            return f"{path.name}/{inside[0]}", _parse(archive.read(inside[0]), f"{path.name}/{inside[0]}")
    return path.name, _parse(path.read_bytes(), path.name)


def _parse(raw: bytes, name: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        raise InvalidInput(f"{name}:{e.lineno}: not valid JSON ({e.msg} at column {e.colno})") from None
    except (UnicodeDecodeError, RecursionError, ValueError) as e:
        raise InvalidInput(f"{name}: not valid JSON ({e.__class__.__name__})") from None


def _conversation(conversation: Any, where: str) -> Iterator[Record | Skipped]:
    if not isinstance(conversation, dict):
        raise InvalidInput(f"{where}: not an object")
    conversation_id = str(conversation.get("conversation_id") or conversation.get("id") or "")
    title = conversation.get("title") if isinstance(conversation.get("title"), str) else ""
    where = f"{where} ({title!r})" if title else where
    mapping = conversation.get("mapping")
    if not isinstance(mapping, dict):
        raise InvalidInput(f"{where}: no \"mapping\" of its messages")
    session = label(f"{title or 'untitled'} ({conversation_id[:8]})" if conversation_id else title or "untitled")
    shown = _shown_branch(mapping, conversation.get("current_node"), where)
    fallback = _time(conversation.get("create_time"), f"{where}: create_time")
    records = []
    for node_id, node in mapping.items():
        if not isinstance(node, dict):
            raise InvalidInput(f"{where}, message {node_id}: not an object")
        message = node.get("message")
        if message is None:
            continue  # the tree's root: no message
        place = f"{where}, message {node_id}"
        if not isinstance(message, dict):
            raise InvalidInput(f"{place}: \"message\" is not an object")
        found = _message(message, node_id, place, session, fallback, node_id in shown)
        if isinstance(found, Skipped):
            yield found
        else:
            records.append(found)
    yield from sorted(records, key=lambda record: record.fields["at"])  # the mapping need not be in order


def _shown_branch(mapping: dict, current: Any, where: str) -> set[str]:
    """The messages of the branch the conversation shows (current_node up to the root); every
    message when the export names no current node."""
    if not isinstance(current, str) or current not in mapping:
        return set(mapping)
    branch: set[str] = set()
    node_id: Any = current
    while isinstance(node_id, str) and node_id in mapping and node_id not in branch:
        branch.add(node_id)
        node = mapping[node_id]
        if not isinstance(node, dict):
            raise InvalidInput(f"{where}, message {node_id}: not an object")
        node_id = node.get("parent")
    return branch


def _message(message: dict, node_id: str, place: str, session: str, fallback: datetime | None,
             shown: bool) -> Record | Skipped:
    author = message.get("author")
    role = author.get("role") if isinstance(author, dict) else None
    if not isinstance(role, str):
        raise InvalidInput(f"{place}: no author role")
    if role != "user":
        return Skipped(f"{role} messages", place)
    if not shown:
        return Skipped("messages of a branch left by an edit or a regeneration", place)
    metadata = message.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    if metadata.get("is_visually_hidden_from_conversation"):
        return Skipped("hidden messages", place)
    content = message.get("content")
    if not isinstance(content, dict):
        raise InvalidInput(f"{place}: no \"content\"")
    kind = content.get("content_type")
    if kind not in ("text", "multimodal_text"):
        return Skipped(f"messages of content type {kind}", place)
    parts = content.get("parts")
    if not isinstance(parts, list):
        raise InvalidInput(f"{place}: content without \"parts\"")
    text = "\n".join(part for part in parts if isinstance(part, str))
    reason = unstorable(text, "messages")
    if reason:
        return Skipped(reason, place)
    at = _time(message.get("create_time"), f"{place}: create_time") or fallback
    if at is None:
        raise InvalidInput(f"{place}: no create_time, nor one of its conversation")
    message_id = str(message.get("id") or node_id)
    return Record({"text": text, "at": at, "source": FORMAT, "session": session, "key": f"{FORMAT}:{message_id}"},
                  place)


def _time(value: Any, where: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidInput(f"{where} is not a time in seconds: {value!r}")
    try:
        return datetime.fromtimestamp(value, UTC)
    except (OverflowError, OSError, ValueError):
        raise InvalidInput(f"{where} is not a time in seconds: {value!r}") from None
