"""The unit of work every write of a vault goes through: its paths, the one write lock, the
journaled transaction (a write ends as exactly one commit, or is undone), recovery and hand edits.

The logs themselves are read and written by the repositories beside it (storage/factlog.py,
tombstone_log.py, dream_log.py), which `Storage` (storage/store.py) composes with it.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memvault.base.config import Config, load_config
from memvault.errors import UNWRITABLE_ERRNOS, DreamRunning, SyncConflict, VaultBusy, VaultUnwritable
from memvault.formats.layout import (
    CONFIG_FILE,
    DREAM_LOCK,
    JOURNAL_FILE,
    LOCKS_DIR,
    QUEUE_DIR,
    RESERVE_FILE,
    STATE_DIR,
    WRITE_LOCK,
    in_work_tree,
)
from memvault.storage import lock, reserve
from memvault.storage.files import atomic_write, read_text, size_of, writing
from memvault.storage.hand_edits import HandEdits
from memvault.storage.journal import APPEND, MERGE, REPLACE, Entry, Journal
from memvault.storage.paths import inside
from memvault.storage.queue import Queue
from memvault.storage.recovery import Recovery

if TYPE_CHECKING:
    from memvault.storage.gitstore import GitStore

Notify = Callable[[str], None]
_log = logging.getLogger("memvault")
# A writer waiting for the lock says so once it has waited this long.
WAIT_NOTICE_SECONDS = 1.0
# What a failed write says when even its undo failed (the disk still full): the files stay changed.
UNDO_PENDING = ("nothing was committed; the files stay changed until the next memvault command, with room, "
                "puts them back")


class UnitOfWork:
    """The vault directory at `root` (it must already be a vault; see memvault.vault for finding one)."""

    def __init__(self, root: Path, config: Config | None = None, notify: Notify | None = None):
        self.root = Path(root)
        self.config: Config = config or load_config(inside(self.root, CONFIG_FILE))
        # Notices for the person or agent (index rebuilt, model missing): a front end passes a
        # callback that shows them; the library itself never prints.
        self.notify: Notify = notify or _log.info
        # The search engine memvault.index opens on first use, kept here so a long-lived process
        # (the MCP server, the Python API) pays the index opening and model load once.
        self.search_index: Any = None  # a SearchIndex: storage may not import the index layer above it
        # Its calls take turns: a Vault may be shared by a program's threads, and the open index
        # (its generation, folder watch, embedding cache connection) serves one call at a time.
        self.index_turn = threading.RLock()
        self.journal = Journal(self.root / JOURNAL_FILE)
        self.queue = Queue(self.root / QUEUE_DIR)
        # What memvault.recall.asof keeps between questions about the past (the vault as of a few
        # commits, open); each of those borrows its vault's embedding cache (`embedding_cache`).
        self.pasts: Any = None  # a recall.asof.Pasts: a feature's type, which storage may not import
        self.embedding_cache: Path | None = None
        # Which log items supersede which, by log and its (mtime, size) (memvault.recall.succession).
        self.links_memo: dict[str, tuple] = {}

    def close(self) -> None:
        """Release what the storage holds open (the search index), e.g. before deleting the vault."""
        with self.index_turn:  # never under another thread's search
            if self.search_index is not None:
                self.search_index.close()
                self.search_index = None
            if self.pasts is not None:
                self.pasts.close()

    # -- paths ----------------------------------------------------------------------------------

    @cached_property
    def tz(self):
        return self.config.tz

    @cached_property
    def git(self) -> GitStore:
        """The vault's git repository (memvault.storage.gitstore.GitStore; GitPython loads on first use)."""
        from memvault.storage.gitstore import GitStore

        return GitStore(self.root)

    @cached_property
    def recovery(self) -> Recovery:
        """What repairs an interrupted write (storage/recovery.py)."""
        return Recovery(self.root, self.git, self.journal, self.queue, self.lock_path(WRITE_LOCK))

    @cached_property
    def hand_edits(self) -> HandEdits:
        """Uncommitted edits of the vault's files (storage/hand_edits.py)."""
        return HandEdits(self.root, self.git)

    @property
    def state_dir(self) -> Path:
        path = self.root / STATE_DIR
        path.mkdir(exist_ok=True)
        return path

    def lock_path(self, name: str) -> Path:
        return self.root / LOCKS_DIR / name

    def path(self, rel: str) -> Path:
        """The vault file at `rel`; UnsafePath if it (or a folder on its way) is a symlink."""
        return inside(self.root, rel)

    def relpath(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def read_text(self, rel: str) -> str:
        """A vault file's text exactly as stored; "" when it does not exist."""
        return read_text(inside(self.root, rel))

    # -- locking and transactions ------------------------------------------------------------

    @contextmanager
    def write_lock(self, timeout: float | None = None) -> Iterator[None]:
        """The one vault-wide write lock (an OS lock: it dies with its process)."""
        wait = self.config.lock_timeout if timeout is None else timeout
        held = lock.OsLock(self.lock_path(WRITE_LOCK))
        with writing(f"{LOCKS_DIR}/{WRITE_LOCK}", "nothing was changed"):
            got_it = held.wait(min(wait, WAIT_NOTICE_SECONDS))
            if not got_it and wait > WAIT_NOTICE_SECONDS:
                self.notify(lock.waiting_notice(self.lock_holder(), self.root, ""))
                got_it = held.wait(wait - WAIT_NOTICE_SECONDS)
        if not got_it:
            raise VaultBusy(lock.busy_message(held.path, wait, str(self.root)))
        try:
            yield
        finally:
            held.release()

    @contextmanager
    def dream_lock(self) -> Iterator[None]:
        """One dream, purge or history rewrite at a time per vault; a second one fails at once
        instead of queueing, naming the command that holds the lock (a second purge was told a
        dream was running)."""
        path = self.lock_path(DREAM_LOCK)
        held = lock.OsLock(path)
        if not held.acquire():
            command = (lock.holder(path) or {}).get("command") or ""
            other = next((f"a {verb} is" for verb in ("purge", "sync") if f" {verb} " in f" {command} "), "dream")
            raise DreamRunning(f"{other} already running on {self.root}; try again when it has finished")
        try:
            yield
        finally:
            held.release()

    def lock_holder(self) -> dict | None:
        """Who holds the write lock right now (None when nobody does)."""
        return lock.holder(self.lock_path(WRITE_LOCK))

    def being_written(self) -> tuple[set[str], dict | None]:
        """The paths a write under way may have changed without committing them yet (its journal
        names them), and who writes (the write lock's holder); (empty, None) when nobody does.
        Reads only: unlike the recovery, an unreadable journal is left alone (its writer lives)."""
        holder = self.lock_holder()
        if holder is None:
            return set(), None
        try:
            data = json.loads(self.journal.path.read_text(encoding="utf-8"))
            return {str(p) for p in data.get("paths") or []}, holder
        except (OSError, ValueError, AttributeError, TypeError):
            return set(), holder

    @contextmanager
    def transaction(self, kind: str, paths: Iterable[str], message: str, *, claims: Iterable[str] = (),
                    own: str | None = None, outcome: str = "nothing was changed") -> Iterator[None]:
        """Journal a write (call with the write lock held): it ends committed, or it is undone.

        kind "append": the files are cut back to their sizes before the write.
        kind "replace": `paths` are restored from HEAD (all-or-nothing multi-file writes).
        kind "merge": a git merge of `paths` (call it inside): aborted and restored from HEAD.
        `claims` are the queued requests the write commits; if it fails they go back to the queue,
        except `own` (the caller's, reported failed to its owner), which is discarded. `outcome`
        is what a refusal for want of room says became of the change.
        """
        paths = sorted(paths)
        self.refuse_during_merge()  # a merge in progress cannot take a commit of a few paths
        for rel in paths if kind == APPEND else ():
            if (self.root / rel).is_dir():  # (a journal would record a folder's size to cut back to)
                raise VaultUnwritable(UNWRITABLE_ERRNOS[errno.EISDIR], rel, "nothing was changed")
        sizes = {rel: size_of(self.root / rel) for rel in paths} if kind == APPEND else None
        paths = in_work_tree(paths)  # a remote's tree entry `..` must not make the undo fail for good
        kept = self.git.untracked_present(paths) if kind == MERGE else []
        entry = Entry(kind, paths, message, self.git.head(), sizes, list(claims), writer=os.getpid(), kept=kept)
        try:
            with writing(RESERVE_FILE, outcome):
                reserve.ensure(self.root / RESERVE_FILE, self.git.git_dir / "index")
            with writing(JOURNAL_FILE, outcome):
                self.journal.begin(entry)
        except VaultUnwritable:
            reserve.release(self.root / RESERVE_FILE)  # room to go on reading (search opens its index)
            raise
        try:
            yield
        except BaseException as failure:
            if isinstance(failure, VaultUnwritable):
                reserve.release(self.root / RESERVE_FILE)  # the room the undo needs
            # Undo now rather than at the next command; if even that fails (the disk is still
            # full), the journal stays and the next command finishes the job.
            try:
                self.recovery.settle(entry, discard=own)
            except Exception:  # noqa: BLE001 - the write's own failure is the one to report
                # It said "nothing was changed": no longer true if the undo stopped short of the files.
                left = [rel for rel in entry.paths if rel not in entry.kept]  # (not the user's own files)
                if isinstance(failure, VaultUnwritable) and self._still_changed(left):
                    raise VaultUnwritable(failure.reason, failure.where, UNDO_PENDING) from None
            raise
        for name in entry.claims:
            self.queue.finish(name)
        self.journal.end()

    def _still_changed(self, paths: list[str]) -> bool:
        try:
            return bool(paths) and bool(self.git.status(*in_work_tree(paths)))
        except Exception:  # noqa: BLE001 - (git cannot even read: say the files may be changed)
            return True

    def refuse_during_merge(self) -> None:
        """A commit of a few paths is impossible mid-merge; refuse before anything is written."""
        if self.git.merge_in_progress():
            raise SyncConflict(
                f"a git merge is in progress in {self.root} (an interrupted sync or a hand merge): resolve it "
                "and `git commit`, or `git merge --abort`, then try again; nothing was written"
            )

    def write_files(self, files: Mapping[str, str], message: str, removed: Iterable[str] = ()) -> str | None:
        """Rewrite (and remove) files as one commit, or after a crash not at all. Hold the write lock."""
        removed = list(removed)
        paths = sorted({*files, *removed})
        # A person's uncommitted edits of these files get a commit of their own first: memvault's
        # commit holds only its change (a dream undone later takes nothing of theirs with it).
        self.hand_edits.commit_hand_edits(paths, f"before {message.splitlines()[0]}")
        with self.transaction(REPLACE, paths, message):
            for rel in removed:
                inside(self.root, rel).unlink(missing_ok=True)
            for rel, content in files.items():
                target = inside(self.root, rel)
                with writing(rel, "nothing was changed"):
                    target.parent.mkdir(parents=True, exist_ok=True)
                    atomic_write(target, content)
            with writing(".git", "nothing was changed"):
                return self.git.commit(paths, message)

