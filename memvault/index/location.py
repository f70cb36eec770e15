"""Where a vault's search index lives.

In the vault's own `.memvault/` (index/, cache/embeddings.sqlite, locks/index.lock), which git
ignores. A vault this user cannot write — a read-only mount, a backup, another user's folder — can
still be searched: its index is then kept in the user's cache, in a copy named after the vault's
folder and path (`~/.cache/memvault/vaults/<folder>-<hash>/`), and the vault itself is never
written. Each copy notes which vault it stands for (`vault.json`: the path and the vault's first
commits), so that a purge of that vault, by any path, deletes it. Everything there is derived from
the vault's files: either place can be deleted at any time.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from memvault.formats.layout import STATE_CACHE, STATE_DIR, STATE_INDEX, STATE_LOCKS

COPY_NOTE = "vault.json"


def state_dir(vault_root: Path) -> Path:
    """The folder holding the index, its embedding cache and its lock for this vault."""
    own = vault_root / STATE_DIR
    return own if _writable(own) else users_copy(vault_root)


def is_users_copy(state: Path) -> bool:
    """Is this state folder a copy in the user's cache rather than the vault's own .memvault/?"""
    return state.name != STATE_DIR


def users_copy(vault_root: Path) -> Path:
    """Where the index of a vault this user cannot write is kept: one folder per vault path."""
    resolved = vault_root.resolve()
    tag = hashlib.sha256(os.fsencode(str(resolved))).hexdigest()[:16]
    return _copies() / f"{resolved.name}-{tag}"


def note_copy(copy: Path, vault_root: Path, first_commits: Callable[[], list[str]]) -> None:
    """Write which vault a copy stands for, once (before its index is built)."""
    note = copy / COPY_NOTE
    if note.exists():
        return
    copy.mkdir(parents=True, exist_ok=True)
    note.write_text(json.dumps({"path": str(vault_root.resolve()), "first_commits": first_commits()}),
                    encoding="utf-8")


def delete_copies(vault_root: Path, first_commits: list[str]) -> int:
    """Delete this user's copies of the vault: the one for its path, and any other whose note names
    one of the vault's first commits (the same vault under another path, e.g. a read-only mount)."""
    deleted = 0
    try:
        copies = list(_copies().iterdir())
    except OSError:
        return 0
    mine = users_copy(vault_root)
    for copy in copies:
        try:
            noted = json.loads((copy / COPY_NOTE).read_text(encoding="utf-8")).get("first_commits") or []
        except (OSError, ValueError, AttributeError):
            noted = []
        if copy == mine or set(noted) & set(first_commits):
            shutil.rmtree(copy, ignore_errors=True)
            deleted += 1
    return deleted


def _copies() -> Path:
    from platformdirs import user_cache_path

    return user_cache_path("memvault", appauthor=False) / "vaults"


def _writable(own: Path) -> bool:
    # access(2) answers for the file system too (EROFS on a read-only mount), not only for the mode
    # bits. Every folder an index write touches is checked: one left to another account (by sudo,
    # a container) would otherwise fail the search after a false "damaged, rebuilding" notice.
    if not own.exists():
        return os.access(own.parent, os.W_OK)
    return all(not path.exists() or os.access(path, os.W_OK)
               for path in (own, own / STATE_LOCKS, own / STATE_INDEX, own / STATE_CACHE))
