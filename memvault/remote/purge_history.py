"""Rewriting the history for a purge: the filter (memvault.remote.purge_filter, run by
git-filter-repo) over every ref, noted first so that a killed rewrite is finished by running it
again; then the old objects pruned, and the search index and embedding cache rid of the texts."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from collections.abc import Iterable
from contextlib import suppress

from memvault.errors import InvalidInput, MemvaultError, no_room, unwritable, worded
from memvault.formats.facts import parse_log
from memvault.formats.layout import LOGS_DIR
from memvault.remote.purge_filter import needles_of
from memvault.remote.purge_state import record
from memvault.storage.files import writing
from memvault.storage.store import Storage


def refuse_uncommitted(storage: Storage, what: str) -> None:
    ours, _temp, _foreign = storage.hand_edits.uncommitted()
    # the rewrite resets tracked files; untracked files that are not the vault's survive it
    tracked = [line[3:] for line in storage.git.status() if not line.startswith("??")]
    dirty = sorted(set(ours) | set(tracked))
    if dirty:
        paths = ", ".join(dirty[:5]) + (" …" if len(dirty) > 5 else "")
        raise InvalidInput(f"uncommitted changes in the vault ({paths}): commit them (`memvault doctor --fix`) "
                           f"before a {what}, which rewrites the history; nothing changed")


def rewrite_history(storage: Storage, ids: list[str], texts: list[str]) -> int:
    """Run the purge filter over every ref (hold the write lock); returns how many commits changed."""
    if storage.git.head() is None:
        return 0
    metadata = storage.git.git_dir / "filter-repo"
    _remove_tree(metadata)  # a leftover "already_ran" would make filter-repo ask a question
    spec = json.dumps({"ids": sorted(ids), "needles": needles_of(texts)}, ensure_ascii=False)
    env = dict(storage.git.env)
    for name in ("GIT_DIR", "GIT_WORK_TREE"):
        env.pop(name, None)  # filter-repo works in its current directory (GIT_CEILING_DIRECTORIES stays)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    with writing(".git", "the history may be partly rewritten; run the purge again"):
        done = subprocess.run([sys.executable, "-m", "memvault.remote.purge_filter"], cwd=storage.root, env=env,
                              input=spec.encode("utf-8"), capture_output=True, preexec_fn=_die_with_parent)
    try:
        if done.returncode != 0:
            lines = [line for line in done.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
            reason = lines[-1] if lines else f"exit status {done.returncode}"
            full = unwritable(OSError(errno.ENOSPC, reason), ".git",
                              "the history may be partly rewritten; free some space and run the purge again")
            if full is not None and _disk_full(storage, "\n".join(lines)):  # fast-import died of it: a broken pipe
                raise full
            raise MemvaultError(f"rewriting the history failed: {reason}")
        changed = 0
        with suppress(OSError):
            for line in (metadata / "commit-map").read_text(encoding="utf-8").splitlines()[1:]:
                old, new = (line.split() + ["", ""])[:2]
                changed += old != new
        return changed
    finally:
        _remove_tree(metadata)


def _disk_full(storage: Storage, stderr: str) -> bool:
    """Did the filter fail for want of room? git fast-import says so, or dies of it (a broken pipe)
    with under a MiB left."""
    if "No space left on device" in stderr or "[Errno 28]" in stderr:
        return True
    return no_room(storage.root, 1024 * 1024) is not None


def noted_rewrite(storage: Storage, purges: list[tuple[list[str], list[str]]]) -> int:
    """rewrite_history for each (ids, texts) in turn, noted first (the ids, never the texts, and
    HEAD before it): a purge killed from here on is named by doctor and sync, the next commands
    put back only the files it left half checked out (Recovery.recover_locked), and running it
    again finishes it. A rewrite that fails before moving any ref has changed nothing: the note
    goes again. Returns how many commits changed."""
    refs = storage.git.run("for-each-ref", "--format=%(objectname) %(refname)")
    record(storage, (), pending=[i for ids, _texts in purges for i in ids], before=storage.git.head())
    try:
        return sum(rewrite_history(storage, ids, texts) for ids, texts in purges)
    except BaseException:
        with suppress(Exception):
            if storage.git.run("for-each-ref", "--format=%(objectname) %(refname)") == refs:
                record(storage, (), pending=[])
        raise


def _die_with_parent() -> None:
    """In the filter's process, before it runs: be killed when the purge is (Linux). Left running
    without the purge's locks, it would move the branch under the writes that come next."""
    import ctypes
    import signal

    with suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def clean_repository(storage: Storage) -> None:
    """Make the old commits unreachable and delete them: reflogs, ORIG_HEAD and the like, then gc."""
    for name in ("ORIG_HEAD", "FETCH_HEAD", "COMMIT_EDITMSG", "MERGE_MSG", "SQUASH_MSG"):
        with suppress(FileNotFoundError):
            (storage.git.git_dir / name).unlink()
    _remove_tree(storage.git.git_dir / "filter-repo")
    with writing(".git", "old objects may remain until the next purge or sync"):
        storage.git.run("reflog", "expire", "--expire=now", "--expire-unreachable=now", "--all")
        storage.git.run("gc", "--quiet", "--prune=now")


def _remove_tree(path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def purge_derived(storage: Storage, texts: list[str], progress=None) -> dict:
    """The index and the embedding cache, rid of the texts (a failure is reported, not raised:
    the history is already clean, and `memvault reindex --clear` can finish the job)."""
    from memvault.index.search import purge_index

    try:
        return purge_index(storage, texts, progress=progress)
    except Exception as e:  # noqa: BLE001 - the purge itself is done
        storage.notify(f"search index not rebuilt after the purge ({worded(e)}); run `memvault reindex --clear`")
        return {"error": worded(e)}


def texts_of(storage: Storage, ids: set[str], refs: Iterable[str]) -> dict[str, str]:
    """Id -> the text of each of these facts as this clone knows it: its daily logs, then the logs
    of `refs`."""
    found: dict[str, str] = {f.id: f.text for f in storage.facts.iter_facts(include_forgotten=True) if f.id in ids}
    import git

    for ref in refs:
        missing = sorted(ids - set(found))
        if not missing:
            break
        patterns = "".join(f"{fact_id}\n" for fact_id in missing)
        try:
            hits = storage.git.run("grep", "-l", "-F", "-f", "-", ref, "--", LOGS_DIR, input=patterns).splitlines()
        except git.GitCommandError:
            continue  # (git grep exits 1 when nothing matches)
        for hit in hits:
            rel = hit.split(":", 1)[1]
            for fact in parse_log(storage.git.run("show", hit), rel)[0]:
                if fact.id in ids:
                    found.setdefault(fact.id, fact.text)
    return found
