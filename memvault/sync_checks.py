"""What sync and clone refuse to take from a remote, checked on the fetched commits before a merge.

A shared remote may be written by someone else, so its commits are read as untrusted input:

- a symlink: once checked out, a log or tombstones.jsonl pointing outside the vault would have
  memvault read or append to whatever it names;
- a path under `.memvault/`: that folder is this machine's own state (write queue, journal, locks,
  index), never committed by memvault; a planted queue request would be committed by the next
  `add` without any of add's checks, a planted journal would be "recovered";
- a fact or a forget record removed: logs and tombstones.jsonl are append-only, and a fast-forward
  (or a file changed on the remote side only) would take a removal as it is, un-forgetting a fact
  or dropping one, where memvault's merge driver never drops an item. Edits of an item stay
  allowed, as the driver allows them (a typo fixed by hand on another machine);
- a change of where dream sends the facts (`[llm] model` or `api_base` in memvault.toml): those
  decide which server receives the vault's facts and this machine's API key, so they change only
  by a commit made here too (the same edit on both sides merges as one).

Each check answers a one-line reason, or None.
"""

from __future__ import annotations

import tomllib

from memvault.facts import parse_log
from memvault.gitstore import GitStore
from memvault.storage.layout import CONFIG_FILE, LOGS_DIR, STATE_DIR, TOMBSTONES_FILE
from memvault.tombstones import parse_tombstones

SHOWN = 5
LLM_ENDPOINT_KEYS = ("model", "api_base")


def tree_problem(store: GitStore, rev: str) -> str | None:
    """Symlinks or this machine's state folder in the tree of `rev`."""
    listing = [line for line in store.run("ls-tree", "-r", "-z", "--full-tree", rev).split("\0") if line]
    symlinks = sorted(line.split("\t", 1)[1] for line in listing if line.startswith("120000 "))
    if symlinks:
        return (f"holds symlink(s) ({_shown(symlinks)}); memvault never reads or writes through a symlink; "
                "replace them with regular files")
    state = sorted(path for path in (line.split("\t", 1)[1] for line in listing)
                   if path == STATE_DIR or path.startswith(STATE_DIR + "/"))
    if state:
        return (f"holds files under {STATE_DIR}/ ({_shown(state)}), which is each machine's own local state and "
                "never committed; remove them from the repository (git rm --cached)")
    return None


def history_problem(store: GitStore, head: str, rev: str) -> str | None:
    """Facts or forget records that `rev` removes since its common base with `head`, or a change
    of dream's model or endpoint this side does not have."""
    base = _merge_base(store, head, rev)
    if base is None:
        return None  # unrelated histories (two vaults started apart): nothing was common to remove
    changed = store.run("diff", "--name-only", "-z", "--no-renames", base, rev, "--",
                        LOGS_DIR, TOMBSTONES_FILE, CONFIG_FILE).split("\0")
    removed_facts: list[str] = []
    unforgotten: list[str] = []
    theirs_tombstones = parse_tombstones(_read(store, rev, TOMBSTONES_FILE))
    for path in filter(None, changed):
        if path == TOMBSTONES_FILE:
            unforgotten = sorted(set(parse_tombstones(_read(store, base, path))) - set(theirs_tombstones))
        elif path.startswith(LOGS_DIR + "/"):
            before = _fact_ids(_read(store, base, path), path)
            after = _fact_ids(_read(store, rev, path), path)
            # A purge (adopted before this check) removes a fact's item with a purge record.
            removed_facts += sorted(i for i in before - after
                                    if not (i in theirs_tombstones and theirs_tombstones[i].purged))
    if unforgotten:
        return (f"removes forget record(s) of {_shown(unforgotten)} from {TOMBSTONES_FILE}, which would bring "
                "forgotten facts back; forget records are append-only")
    if removed_facts:
        return (f"removes fact(s) {_shown(removed_facts)} from the daily logs, which are append-only "
                "(`memvault forget` is how a fact goes)")
    if CONFIG_FILE in changed:
        moved = _llm_endpoint_change(store, base, head, rev)
        if moved:
            return (f"changes where dream sends the facts ({moved}) in {CONFIG_FILE}; if that change is yours, "
                    "make the same edit here and commit it, then sync again")
    return None


def _llm_endpoint_change(store: GitStore, base: str, head: str, rev: str) -> str | None:
    settings = [_llm_settings(_read(store, commit, CONFIG_FILE)) for commit in (base, head, rev)]
    old, ours, theirs = settings
    moved = [f"llm.{key}: {ours.get(key)!r} -> {theirs.get(key)!r}" for key in LLM_ENDPOINT_KEYS
             if theirs.get(key) != old.get(key) and theirs.get(key) != ours.get(key)]
    return ", ".join(moved) or None


def _llm_settings(text: str) -> dict:
    try:
        llm = tomllib.loads(text).get("llm", {})
    except tomllib.TOMLDecodeError:
        return {}  # loading the settings reports the file
    return llm if isinstance(llm, dict) else {}


def _fact_ids(text: str, path: str) -> set[str]:
    facts, _problems = parse_log(text, path)
    return {fact.id for fact in facts}


def _read(store: GitStore, rev: str, path: str) -> str:
    """The file at `rev`, "" where it does not exist."""
    import git

    try:
        return store.run("show", f"{rev}:{path}")
    except git.GitCommandError:  # not in that commit (a new day's log, a log the remote deleted)
        return ""


def _merge_base(store: GitStore, head: str, rev: str) -> str | None:
    import git

    try:
        return store.run("merge-base", head, rev)
    except git.GitCommandError:  # exit 1: no common commit
        return None


def _shown(items: list[str]) -> str:
    return ", ".join(items[:SHOWN]) + (f" and {len(items) - SHOWN} more" if len(items) > SHOWN else "")
