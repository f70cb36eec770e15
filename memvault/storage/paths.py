"""Where a vault path may lead: `inside`, the one gate every vault path passes before it is opened,
and the symlinks doctor names.
"""

from __future__ import annotations

import os
from pathlib import Path

from memvault.errors import UnsafePath
from memvault.formats.layout import STATE_DIR


def inside(root: Path, rel: str) -> Path:
    """`root / rel`, refusing (UnsafePath) a path that leaves the vault or passes a symlink.

    Every vault file memvault opens comes through here: a commit pulled from a shared remote can
    turn any of them into a symlink to a file elsewhere (~/.ssh/id_rsa, /etc/passwd), and reading
    or appending through it would leak or damage that file. Parts that do not exist yet are fine
    (they will be created as plain files and folders).
    """
    parts = rel.replace("\\", "/").split("/")
    if rel.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise UnsafePath(rel, outside=True)
    path = root
    for n, part in enumerate(parts):
        path = path / part
        if os.path.islink(path):
            raise UnsafePath("/".join(parts[:n + 1]), _target(path))
    return path


def symlinks_in(root: Path) -> list[str]:
    """Every symlink in the vault's tree (outside .git and .memvault), vault-relative, sorted."""
    found = []
    for folder, dirs, files in os.walk(root):  # never follows symlinked folders
        here = Path(folder)
        if here == root:
            dirs[:] = [d for d in dirs if d not in (".git", STATE_DIR)]
        for name in dirs + files:
            if os.path.islink(here / name):
                found.append((here / name).relative_to(root).as_posix())
    return sorted(found)


def _target(path: Path) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None
