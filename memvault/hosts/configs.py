"""Agent hosts' own config files, edited in place: read (a malformed file refused in one line),
changed, and written back in the file's own format, after a backup.

JSON files (Claude Code, Claude Desktop, Cursor) keep their key order, their indentation and their
final newline; TOML files (Codex) are edited with tomlkit, which keeps every comment and the
layout of what it does not touch.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from memvault.errors import InvalidInput, unwritable

REFUSED = "nothing was changed: fix or move it, then run the command again"


def read_text(path: Path) -> str | None:
    """The file's text; None when it does not exist."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise InvalidInput(f"{path} is not UTF-8 text; {REFUSED}") from None
    except IsADirectoryError:
        raise InvalidInput(f"{path} is a folder, not a config file; {REFUSED}") from None
    except NotADirectoryError:
        blocker = next((p for p in path.parents if p.is_file()), path.parent)
        raise InvalidInput(f"{blocker} is a file where the folder of {path.name} belongs; {REFUSED}") from None


def load_json(path: Path, text: str | None) -> dict[str, Any]:
    """The JSON object a config file holds ({} for a missing or empty file)."""
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        where = f"line {e.lineno}, column {e.colno}"
        raise InvalidInput(f"{path} is not valid JSON ({where}: {e.msg}); {REFUSED}") from None
    except RecursionError:
        raise InvalidInput(f"{path} is not valid JSON (nested too deeply); {REFUSED}") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{path} holds JSON that is not an object; {REFUSED}")
    return data


def dump_json(data: dict[str, Any], like: str | None) -> str:
    """`data` as the file `like` was written: its indentation (two spaces by default), and a final
    newline if it had one (or it is new)."""
    indent: int | str | None = 2
    if like:
        found = re.search(r"\n([ \t]+)\S", like)
        if found:
            lead = found.group(1)
            indent = lead if "\t" in lead else len(lead)
        elif like.strip() and "\n" not in like.strip():
            indent = None  # a file written on one line stays on one line
    text = json.dumps(data, indent=indent, ensure_ascii=False)
    return text + "\n" if like is None or like.endswith("\n") else text


def load_toml(path: Path, text: str | None):
    """The tomlkit document a TOML config file holds (an empty one for a missing file)."""
    import tomlkit
    from tomlkit.exceptions import ParseError

    try:
        return tomlkit.parse(text or "")
    except ParseError as e:
        raise InvalidInput(f"{path} is not valid TOML (line {e.line}, column {e.col}); {REFUSED}") from None


def dump_toml(document) -> str:
    import tomlkit

    return tomlkit.dumps(document)


def backup(path: Path) -> Path:
    """Copy the file aside, beside it, before it is changed: `<name>.bak-<date>-<time>`."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.bak-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.bak-{stamp}-{n}")
    try:
        shutil.copy2(path, target)
    except OSError as e:
        raise unwritable(e, target, "nothing was changed") or e from None
    return target


def write(path: Path, text: str) -> None:
    """Replace the file at once (a temporary file renamed over it), keeping its permissions; its
    folder is made when the host has not made it yet."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = path.stat().st_mode & 0o7777 if path.exists() else None
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            if mode is not None:
                os.chmod(tmp, mode)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as e:
        raise unwritable(e, path, "nothing was changed") or e from None
