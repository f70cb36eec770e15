"""What sync and clone refuse in the tree of a remote's commit, checked before git writes any of it.

A shared remote may be written by someone else, so its trees are read as untrusted input:

- a path git refuses to check out (`..`, `.`, `.git` in any case, at any depth): the merge would
  fail halfway through, after the journal of a merge was written;
- a symlink: once checked out, a log or tombstones.jsonl pointing outside the vault would have
  memvault read or append to whatever it names;
- a submodule, a folder where the vault keeps a file (a daily log, tombstones.jsonl) or a file
  where it keeps a folder (logs/2025): every read of it would fail;
- a daily log named for a day that does not exist (logs/2026/2026-02-30.md): no reader takes it
  for a log, so its facts would be in the vault and read by nothing;
- a .gitattributes in a folder, which would change how git converts and merges the vault's files;
- a path under `.memvault/`: that folder is this machine's own state (write queue, journal, locks,
  index), never committed by memvault; a planted queue request would be committed by the next
  `add` without any of add's checks, a planted journal would be "recovered".

What the remote changed since the common base (facts, forget records, settings) is checked by
memvault.remote.sync_checks. Each check answers a one-line reason, or None.
"""

from __future__ import annotations

import os
import re
import tempfile

from memvault.base.text import shown
from memvault.formats.layout import GITATTRIBUTES, LOGS_DIR, STATE_DIR, is_misdated_log, is_vault_file
from memvault.storage.gitstore import GitStore, execute


def tree_problem(store: GitStore, rev: str) -> str | None:
    """Paths git refuses to check out, symlinks, submodules, folders where the vault's files belong,
    daily logs named for no real day, or this machine's state folder in the tree of `rev`."""
    invalid = _invalid_path(store, rev)
    if invalid is not None:
        return (f"holds a path git refuses to check out ({invalid}): no name in a vault is `.`, `..` or `.git` "
                "(in any case); remove it")
    listing = [line for line in store.run("ls-tree", "-r", "-z", "--full-tree", rev).split("\0") if line]
    for check in (_symlinks, _submodules, _misplaced, _misdated_logs, _nested_attributes, _machine_state):
        problem = check(listing)
        if problem is not None:
            return problem
    return None


def _path(entry: str) -> str:
    """The path of an `ls-tree` entry ("<mode> <type> <sha>\t<path>")."""
    return entry.split("\t", 1)[1]


def _symlinks(listing: list[str]) -> str | None:
    symlinks = sorted(_path(line) for line in listing if line.startswith("120000 "))
    if symlinks:
        return (f"holds symlink(s) ({shown(symlinks)}); memvault never reads or writes through a symlink; "
                "replace them with regular files")
    return None


def _submodules(listing: list[str]) -> str | None:
    submodules = sorted(_path(line) for line in listing if line.startswith("160000 "))
    if submodules:
        return f"holds submodule(s) ({shown(submodules)}), which a vault never has; remove them"
    return None


def _misplaced(listing: list[str]) -> str | None:
    """A folder where the vault keeps a file, or a file where it keeps a folder."""
    paths = [_path(line) for line in listing]
    folders = sorted({folder for path in paths for folder in _parents(path) if is_vault_file(folder)})
    folders += sorted(path for path in paths if _year_folder(path))
    if folders:
        return (f"holds a folder where the vault keeps a file, or a file where it keeps a folder "
                f"({shown(folders)}); memvault would fail on every read of them; put them back as they were")
    return None


def _misdated_logs(listing: list[str]) -> str | None:
    paths = [_path(line) for line in listing]
    misdated = sorted({name for path in paths for name in (*_parents(path), path) if is_misdated_log(name)})
    if misdated:
        return (f"holds daily log(s) named for a day that does not exist ({shown(misdated)}), whose facts no "
                "command would read; rename each to the real day its facts belong to")
    return None


def _nested_attributes(listing: list[str]) -> str | None:
    attributes = sorted(path for path in map(_path, listing) if path.endswith("/" + GITATTRIBUTES))
    if attributes:
        return (f"holds {GITATTRIBUTES} in a folder ({shown(attributes)}), which would change how git converts "
                "and merges the vault's files; remove it")
    return None


def _machine_state(listing: list[str]) -> str | None:
    state = sorted(path for path in map(_path, listing) if path == STATE_DIR or path.startswith(STATE_DIR + "/"))
    if state:
        return (f"holds files under {STATE_DIR}/ ({shown(state)}), which is each machine's own local state and "
                "never committed; remove them from the repository (git rm --cached)")
    return None


def _invalid_path(store: GitStore, rev: str) -> str | None:
    """The first path of `rev`'s tree that git refuses to check out, or None. git itself is asked
    (a read of the tree into a throwaway index): its rules (`..`, `.git` in any case and at any
    depth, core.protectNTFS's `git~1`) vary with its version and settings, and a merge that meets
    such a path fails halfway."""
    with tempfile.TemporaryDirectory(prefix="memvault-check-") as folder:
        command = ["git", "read-tree", rev]
        status, _out, err = execute(command, {**store.env, "GIT_INDEX_FILE": os.path.join(folder, "index")})
    if status == 0:
        return None
    refused = re.search(r"invalid path '(.*)'", err)
    if refused is None:
        raise store.error(command, status, err)
    return refused.group(1)


def _year_folder(path: str) -> bool:
    """Is `path` (a file) where a year folder of the daily logs belongs (logs/2025)?"""
    parts = path.split("/")
    return len(parts) == 2 and parts[0] == LOGS_DIR and re.fullmatch(r"\d{4}", parts[1]) is not None


def _parents(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]
