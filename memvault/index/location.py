"""Where a vault's search index lives.

In the vault's own `.memvault/` (index/, cache/embeddings.sqlite, locks/index.lock), which git
ignores. A vault this user cannot write — a read-only mount, a backup, another user's folder — can
still be searched: its index is then kept in the user's cache, under a folder named after the vault's
path, and the vault itself is never written. Everything there is derived from the vault's files,
so either place can be deleted at any time.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from memvault.storage import layout
from memvault.storage.layout import STATE_DIR

# The same names as in a vault's .memvault/, relative to the folder returned by state_dir.
INDEX = layout.INDEX_DIR.removeprefix(STATE_DIR + "/")
LOCKS = layout.LOCKS_DIR.removeprefix(STATE_DIR + "/")
EMBEDDING_CACHE = layout.EMBEDDING_CACHE.removeprefix(STATE_DIR + "/")


def state_dir(vault_root: Path) -> Path:
    """The folder holding the index, its embedding cache and its lock for this vault."""
    own = vault_root / STATE_DIR
    return own if _writable(own) else user_state_dir(vault_root)


def user_state_dir(vault_root: Path) -> Path:
    """Where the index of a vault this user cannot write is kept: one folder per vault path."""
    from platformdirs import user_cache_path

    resolved = str(vault_root.resolve())
    tag = hashlib.sha256(os.fsencode(resolved)).hexdigest()[:16]
    return user_cache_path("memvault", appauthor=False) / "vaults" / f"{vault_root.resolve().name}-{tag}"


def _writable(own: Path) -> bool:
    # access(2) answers for the file system too (EROFS on a read-only mount), not only for the
    # mode bits; the locks folder is checked as well since every index write takes its lock there.
    if not own.exists():
        return os.access(own.parent, os.W_OK)
    locks = own / LOCKS
    return os.access(own, os.W_OK) and (not locks.exists() or os.access(locks, os.W_OK))
