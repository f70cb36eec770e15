"""Sync a vault with a git remote: fetch, merge (never rebase: pushed commits stay as they are), push.

Daily logs and tombstones.jsonl merge item by item (memvault.remote.union_merge), so two machines adding
facts on the same day both keep everything. Anything else changed on both sides (a wiki page two
dreams rewrote) is a real conflict: the merge is aborted and the vault is left exactly as before.

The one exception to "never rewritten" is a purge (memvault.remote.purge). After fetching, a clone whose
history (or the fetched one) still holds a purged fact's text rewrites every ref with the same
filter first: old commits become the very commits the purging clone made, so the fetched history
merges as usual and unpushed facts are kept. When the remote still holds the old history, the
push replaces it with `--force-with-lease` against the sha just fetched (a remote that moved
meanwhile refuses it, and the sync fetches, rewrites and merges again). Then the old objects are
pruned here too.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

from memvault.base.text import shown
from memvault.errors import InvalidInput, MemvaultError, RemoteError, SyncConflict, VaultBusy, worded
from memvault.formats.layout import CONFIG_FILE, LOGS_DIR, SYNC_LOCK, TOMBSTONES_FILE, in_work_tree
from memvault.remote import purge_adoption, purge_history, purge_state
from memvault.remote.origin import (
    NETWORK_TIMEOUT_SECONDS,
    REMOTE,
    current_branch,
    fetched_branches,
    ref_exists,
    remote_url,
    vault_branches,
)
from memvault.remote.revisions import common_base, merge_base
from memvault.remote.sync_checks import FIX_AT_SOURCE, RemoteChanges, remote_changes
from memvault.remote.tree_checks import tree_problem
from memvault.storage import lock
from memvault.storage.gitstore import git_reason, require_git
from memvault.storage.journal import MERGE
from memvault.storage.store import Storage

PUSH_ATTEMPTS = 3
# A sync fetches and pushes up to PUSH_ATTEMPTS times, each git call killed after its timeout.
SYNC_WAIT_SECONDS = PUSH_ATTEMPTS * 2 * NETWORK_TIMEOUT_SECONDS


@dataclass
class SyncReport:
    remote: str
    url: str
    branch: str
    received: int = 0          # commits merged in from the remote
    sent: int = 0              # commits pushed
    merged: bool = False       # a merge commit was made (both sides had new commits)
    changed: list[str] = field(default_factory=list)   # files the merge changed here
    index: dict | None = None  # what the search index did afterwards (reindex report), if anything
    purged: list[str] = field(default_factory=list)    # ids purged on another clone whose text this sync removed here
    rewritten: bool = False    # the remote's old history was replaced by the purged one (with a lease)
    edited: list[str] = field(default_factory=list)    # facts whose stored text or fields the remote changed
    forgotten: list[str] = field(default_factory=list)  # facts the remote forgot (its forget records, taken)

    def to_dict(self) -> dict:
        return asdict(self)



def sync(storage: Storage) -> SyncReport:
    """Fetch, merge the remote branch into this one under the write lock, push; retry if raced."""
    require_git()
    url = remote_url(storage)
    if url is None:
        raise RemoteError("no remote set for this vault; run `memvault remote set URL` first")
    with _one_sync_at_a_time(storage):
        return _sync(storage, url)


@contextmanager
def _one_sync_at_a_time(storage: Storage) -> Iterator[None]:
    """Two syncs of one clone at once (cron and a person) raced on its refs: git refused one's
    fetch or push, said as an unreachable remote. The second waits for the first, then runs: its
    own fetch may bring what arrived meanwhile. Every sync ends within its network timeouts."""
    held = lock.OsLock(storage.lock_path(SYNC_LOCK))
    if not held.acquire():
        who = lock.holder(held.path) or {}
        by = f" (pid {who['pid']}: {who.get('command')})" if who.get("pid") else ""
        storage.notify(f"waiting for another sync of {storage.root}{by} to finish")
        if not held.wait(SYNC_WAIT_SECONDS):
            raise VaultBusy(f"another sync of {storage.root}{by} has run for over {SYNC_WAIT_SECONDS} s; "
                            "nothing changed")
    try:
        yield
    finally:
        held.release()


def _sync(storage: Storage, url: str) -> SyncReport:
    branch = current_branch(storage)
    report = SyncReport(remote=REMOTE, url=url, branch=branch)
    with storage.write_lock():  # an add in flight has written but not yet committed: wait for it
        storage.recovery.recover_locked()
        _refuse_unfinished_purge(storage)
        _refuse_uncommitted(storage)
    before = storage.git.head()
    owed = purge_state.push_owed(storage)
    # This clone's own purges are applied to the fetched commits too (the remote still holds the
    # old history until the push): only the others are reported as adopted.
    own = purge_adoption.purged_ids_at(storage, None)
    adopted: set[str] = set()
    try:
        for attempt in range(1, PUSH_ATTEMPTS + 1):
            _fetch(storage, url)
            _refuse_foreign(storage, url, branch)
            fetched = _sha(storage, f"refs/remotes/{REMOTE}/{branch}")
            adopted.update(_adopt_purges(storage, branch))
            report.purged = sorted(adopted - own)
            received, changed = _merge(storage, branch, report)
            report.received += received
            report.changed = sorted(set(report.changed) | set(changed))
            try:
                report.sent, rewritten = _push(storage, url, branch, fetched)
                report.rewritten = report.rewritten or rewritten
                break
            except _PushRejected:
                if attempt == PUSH_ATTEMPTS:
                    raise RemoteError(
                        f"{url} kept receiving new commits while this vault pushed; run `memvault sync` again"
                    ) from None
        if owed or report.rewritten:
            purge_state.pushed(storage)
    finally:
        if owed or adopted or report.rewritten:
            # The fetch brought the old commits back (FETCH_HEAD, the tracking ref's reflog): prune them.
            with storage.write_lock():
                purge_history.clean_repository(storage)
                if adopted:
                    purge_state.adopted(storage)
    if storage.git.head() != before and report.changed:
        report.index = _catch_up_index(storage)
    return report


def _sha(storage: Storage, ref: str) -> str | None:
    return storage.git.run("rev-parse", "--verify", "-q", ref) if ref_exists(storage, ref) else None


def _adopt_purges(storage: Storage, branch: str) -> list[str]:
    """Rewrite this clone's history for purges it has not applied (see the module docstring)."""
    ref = f"refs/remotes/{REMOTE}/{branch}"
    tracking = ref if ref_exists(storage, ref) else None
    if not purge_adoption.needs_scrub(storage, tracking):
        return []
    with storage.dream_lock(), storage.write_lock():
        storage.recovery.recover_locked()
        storage.refuse_during_merge()
        return purge_adoption.adopt_purges(storage, tracking)


def _refuse_unfinished_purge(storage: Storage) -> None:
    pending = storage.recovery.unfinished_purge()
    if pending:  # the history may still hold the text, or be half rewritten: never pushed like that
        raise InvalidInput(f"a purge of {shown(pending)} was interrupted; finish it with `memvault purge "
                           f"{' '.join(pending)} --yes`, then sync; nothing was synced")


def _refuse_uncommitted(storage: Storage) -> None:
    # files not memvault's are never synced: no reason to stop
    dirty, _temp, _foreign = storage.hand_edits.uncommitted()
    if dirty:
        paths = shown(dirty)
        raise InvalidInput(
            f"uncommitted changes in the vault ({paths}) would not be synced; commit them "
            "(`memvault doctor --fix`) and sync again"
        )


def _fetch(storage: Storage, url: str) -> None:
    import git

    try:
        # --prune: a branch gone from the remote must not look merged and pushed here.
        storage.git.run("fetch", "--quiet", "--no-tags", "--prune", REMOTE, kill_after_timeout=NETWORK_TIMEOUT_SECONDS)
    except git.GitCommandError as e:
        raise RemoteError(f"cannot fetch from {url}: {git_reason(e)}; nothing changed") from None


def _refuse_foreign(storage: Storage, url: str, branch: str) -> None:
    """Stop when the remote holds branches but no vault there (a wrong URL: a project's repository):
    the merge would bring its files into the vault and the push would hand it every fact. An
    empty remote is filled by the push; a vault on another of its branches leaves this one to it."""
    names = fetched_branches(storage.git)
    if not names:
        return
    vaults = vault_branches(storage.git, names)
    if branch in vaults or (branch not in names and vaults):
        return
    where = (f"{REMOTE}/{branch} has no {CONFIG_FILE}" if branch in names
             else f"none of its branches ({shown(names)}) holds one")
    raise SyncConflict(f"sync stopped: {url} holds no memvault vault ({where}); nothing was merged or sent. Check "
                       "the URL (`memvault remote set URL`); to publish this vault, sync it to an empty repository")


def _merge(storage: Storage, branch: str, report: SyncReport) -> tuple[int, list[str]]:
    """Merge the fetched branch (under the write lock); returns (commits received, files changed)."""
    import git

    tracking = f"refs/remotes/{REMOTE}/{branch}"
    if not ref_exists(storage, tracking):
        return 0, []  # an empty remote: nothing to merge, the push will fill it
    with storage.write_lock():
        storage.recovery.recover_locked()
        if storage.git.merge_in_progress():
            raise SyncConflict(
                f"a merge is already in progress in {storage.root}: finish it (`git commit`) or abandon it "
                "(`git merge --abort`), then run `memvault sync` again"
            )
        _refuse_uncommitted(storage)
        before = storage.git.head()
        received = int(storage.git.run("rev-list", "--count", f"HEAD..{tracking}"))
        if received == 0:
            return 0, []
        taken = _refuse_untrusted(storage, tracking, f"{REMOTE}/{branch}")
        storage.git.identity()  # the merge commit needs an author even on a machine with no identity
        message = f"sync: merge {received} commit{'s' if received != 1 else ''} from {REMOTE}/{branch}"
        touched = _names(storage, "diff", "--name-only", "-z", "--no-renames",
                         common_base(storage.git, "HEAD", tracking), tracking)
        _refuse_files_in_the_way(storage, tracking, f"{REMOTE}/{branch}", touched)
        # Journaled: a sync killed mid-merge is aborted by the next command, not left half-merged.
        with storage.transaction(MERGE, touched, message):
            try:
                # --ff and --no-verify-signatures over the user's merge.ff=only (two machines that
                # both added could never sync) and merge.verifySignatures (memvault signs nothing).
                storage.git.run("merge", "--no-edit", "--no-verify", "--ff", "--no-verify-signatures",
                                "--allow-unrelated-histories", "-m", message, tracking)
            except git.GitCommandError as e:
                conflicts = _names(storage, "diff", "--name-only", "-z", "--diff-filter=U")
                if storage.git.merge_in_progress() or conflicts:
                    storage.git.run("merge", "--abort")
                if storage.git.head() != before:  # cannot happen after --abort; never report success then
                    raise MemvaultError(f"sync left {storage.root} at an unexpected commit; check `git log`") from None
                if conflicts:
                    raise _conflict(storage, conflicts, branch) from None
                raise MemvaultError(
                    f"git could not merge {REMOTE}/{branch}: {git_reason(e)}; nothing changed") from None
        # a vault with no commit yet took every file of the remote: git's empty tree is its "before"
        changed = _names(storage, "diff", "--name-only", "-z", before or EMPTY_TREE, "HEAD")
        report.merged = report.merged or len(storage.git.run("rev-list", "--parents", "-n1", "HEAD").split()) > 2
        report.edited = sorted(set(report.edited) | set(taken.edited))
        report.forgotten = sorted(set(report.forgotten) | set(taken.forgotten))
        return received, changed


def _refuse_untrusted(storage: Storage, rev: str, name: str) -> RemoteChanges:
    """Stop before merging what memvault never takes from a remote (memvault.remote.sync_checks); else
    what the merge takes that a user should hear of: facts the remote edited, or forgot."""
    problem = tree_problem(storage.git, rev)  # first: nothing else of such a tree is read
    changes = remote_changes(storage.git, "HEAD", rev) if problem is None else RemoteChanges()
    refusal = (problem, FIX_AT_SOURCE) if problem else changes.refusal()
    if refusal:
        raise SyncConflict(f"sync stopped: {name} {refusal[0]}; nothing was merged and the vault is as before; "
                           f"{refusal[1]}")
    if changes.edited_both:
        logs = sorted(changes.edited_logs)
        raise SyncConflict(
            f"sync stopped: fact(s) {shown(changes.edited_both)} edited differently here and on {name}; nothing "
            f"was merged and the vault is as before. To resolve: in {storage.root} run `git merge {name}` (it keeps "
            f"this side's items), edit each item to the text to keep (the remote's: `git show {name}:{logs[0]}`), "
            f"`git commit -a`, and `memvault sync`{_identity_first(storage)}")
    return changes


EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


def _names(storage: Storage, *args: str) -> list[str]:
    """The paths a `-z` git listing names, exactly as in the tree (never quoted: `réunion.md`)."""
    return [path for path in storage.git.run(*args).split("\0") if path]


def _refuse_files_in_the_way(storage: Storage, rev: str, name: str, touched: list[str]) -> None:
    """Stop when the remote brings a file where this clone has one git does not hold (a note of
    yours), or a folder where it has such a file (`notes` for `notes/a.md`): git would refuse to
    overwrite it, or overwrite or delete it silently if it is ignored."""
    paths = in_work_tree(touched)
    brought = _names(storage, "ls-tree", "-r", "-z", "--name-only", rev, "--", *paths) if paths else []
    folders = {"/".join(parts[:n]) for parts in (path.split("/") for path in brought) for n in range(1, len(parts))}
    wanted = set(brought) | {folder for folder in folders if os.path.islink(storage.root / folder)
                             or os.path.isfile(storage.root / folder)}
    in_the_way = storage.git.untracked_present(sorted(wanted))
    if in_the_way:
        raise SyncConflict(f"sync stopped: {name} adds {shown(in_the_way)}, here a file git does not hold (not the "
                           "vault's); nothing was merged and the vault is as before; move or rename it, then run "
                           "`memvault sync` again")


def _identity_first(storage: Storage) -> str:
    """The git commands a conflict's advice names need an identity, which memvault's own commits do not."""
    if not storage.git.identity().fallback:
        return ""
    return (" (git has no identity on this machine, and `git merge` and `git commit` need one: first run "
            "`git config --global user.name NAME` and `git config --global user.email EMAIL`)")


def _conflict(storage: Storage, paths: list[str], branch: str) -> SyncConflict:
    named = shown(paths, 10)
    if any(p.startswith(LOGS_DIR + "/") or p == TOMBSTONES_FILE for p in paths):
        # these merge by union unless the driver is broken (a moved Python, say)
        named += " (append-only files: run `memvault doctor --fix` to repair the merge driver, then sync)"
    tracking = f"refs/remotes/{REMOTE}/{branch}"
    # two vaults started apart: git merges them only when told to
    unrelated = "" if merge_base(storage.git, "HEAD", tracking) else " --allow-unrelated-histories"
    pages = "files" if CONFIG_FILE in paths else "pages"
    error = SyncConflict(
        f"sync stopped: {named} changed differently here and on {REMOTE}/{branch}; nothing was merged and "
        f"the vault is as before. To resolve: let only one machine run `memvault dream`; then in {storage.root} "
        f"run `git merge{unrelated} {REMOTE}/{branch}`, edit the conflicting {pages}, `git commit -a`, and "
        f"`memvault sync` (or keep the remote's: `git checkout {REMOTE}/{branch} -- <path>`, commit, sync)"
        f"{_identity_first(storage)}"
    )
    error.paths = paths  # type: ignore[attr-defined]
    return error


class _PushRejected(Exception):
    pass


def _push(storage: Storage, url: str, branch: str, fetched: str | None) -> tuple[int, bool]:
    """Push HEAD; returns (commits sent, whether the remote's history was replaced).

    When the remote's branch (`fetched`, as just fetched) is not in HEAD's history, a purge
    rewrote it: HEAD replaces it, with a lease on exactly that sha.
    """
    import git

    tracking = f"refs/remotes/{REMOTE}/{branch}"
    replace = fetched is not None and not _is_ancestor(storage, fetched, "HEAD")
    base = fetched if replace else (tracking if ref_exists(storage, tracking) else None)
    ahead = int(storage.git.run("rev-list", "--count", f"{base}..HEAD" if base else "HEAD"))
    if ahead == 0 and not replace:
        return 0, False
    lease = [f"--force-with-lease=refs/heads/{branch}:{fetched}"] if replace else []
    try:
        storage.git.run("push", "--quiet", "--set-upstream", *lease, REMOTE, f"HEAD:refs/heads/{branch}",
                        kill_after_timeout=NETWORK_TIMEOUT_SECONDS)
    except git.GitCommandError as e:
        reason = str(e.stderr)
        # (Another clone pushing at the same moment: refused as behind, or the remote's branch moved
        # by that push while this one held its old value: "cannot lock ref …: is at X but expected Y".)
        if "[rejected]" in reason or "non-fast-forward" in reason or "fetch first" in reason \
                or "stale info" in reason or "but expected" in reason:
            raise _PushRejected() from None
        raise RemoteError(f"cannot push to {url}: {git_reason(e)}; what this sync merged here stays, and the next "
                          "sync sends it") from None
    return ahead, replace


def _is_ancestor(storage: Storage, commit: str, of: str) -> bool:
    import git

    try:
        storage.git.run("merge-base", "--is-ancestor", commit, of)
    except git.GitCommandError:
        return False
    return True


def _catch_up_index(storage: Storage) -> dict | None:
    """Let the search index re-read the changed files now (by content hash), if it was ever built."""
    from memvault.index.search import index_built, reindex

    if not index_built(storage):
        return None
    try:
        result = reindex(storage)
    except Exception as e:  # noqa: BLE001 - the sync itself succeeded; search catches up later
        return {"error": f"{worded(e)}; the next search catches up"}
    return result if isinstance(result, dict) else {}
