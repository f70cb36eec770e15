"""Recovery: what an interrupted command left behind is settled by the next one.

A write journaled by the unit of work (storage/work.py) that did not finish is kept if its commit
landed, else undone; requests a killed committer claimed go back to the queue; a purge killed
midway leaves no file half checked out. See docs/faults.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from memvault.errors import VaultBusy, VaultUnwritable
from memvault.formats.layout import JOURNAL_FILE, PURGE_STATE, RESERVE_FILE, in_work_tree
from memvault.storage import lock, reserve
from memvault.storage.files import cut_back, remove_temp_files
from memvault.storage.journal import APPEND, MERGE, Entry, Journal
from memvault.storage.queue import Queue

if TYPE_CHECKING:
    from memvault.storage.gitstore import GitStore


class Recovery:
    """Settles the journal, the queue's claims and an unfinished purge of the vault at `root`."""

    def __init__(self, root: Path, git: GitStore, journal: Journal, queue: Queue, write_lock: Path):
        self.root = root
        self.git = git
        self.journal = journal
        self.queue = queue
        self.write_lock = write_lock

    def settle(self, entry: Entry, discard: str | None = None) -> str | None:
        """Finish an interrupted write: keep it if its commit landed, else undo it. Hold the lock."""
        if entry.writer is not None:
            # The writer's git may still be making its commit: let it land (or fail) first. A
            # killed writer's git outlives it; so may our own, when Ctrl-C or SIGTERM lands while
            # Python is starting it (subprocess then neither kills nor waits for the child).
            # Undoing the write under a commit that lands afterwards would leave HEAD holding
            # facts the files no longer do, so while it runs the journal stays for later.
            if not self.git.wait_for_children_of(entry.writer):
                raise VaultBusy(f"a git process of a killed memvault command (pid {entry.writer}) is still "
                                f"committing in {self.root}; nothing was changed; try again in a moment")
        # (A journal of an earlier version may name `..`, from a remote's tree: git refuses such names.)
        paths = in_work_tree(entry.paths)
        if entry.kind == MERGE:
            # A merge killed midway: git's temp files for the merge driver, and its MERGE_HEAD.
            for tmp in self.root.glob(".merge_file_*"):
                tmp.unlink(missing_ok=True)
            if self.git.merge_in_progress():
                self.git.run("merge", "--abort")
        # (A journal of an older memvault recorded no HEAD: undo its write, as if the commit had not landed.)
        if entry.head is not None and self.git.head() != entry.head:
            # The commit landed. git may have been killed between moving HEAD and writing its
            # index: bring the index of these paths back in step with HEAD.
            if paths:
                self.git.run("reset", "-q", "--", *paths)
            for name in entry.claims:
                self.queue.finish(name)
            self.journal.end()
            return None
        if entry.kind == APPEND and entry.sizes is not None:
            for rel, size in entry.sizes.items():
                cut_back(self.root / rel, size)
            if paths:
                self.git.run("reset", "-q", "--", *paths)  # unstage what `git add` may have staged
        elif paths:
            self.restore_from_head(paths, keep=entry.kept)
            for rel in paths:  # atomic_write's temp files of a write killed midway
                remove_temp_files(self.root / rel)
        for name in entry.claims:
            if name == discard:
                self.queue.discard(name)
            else:
                self.queue.give_back(name)
        self.journal.end()
        return f"rolled back the unfinished change of an interrupted command: {entry.message.splitlines()[0]}"

    def recover(self) -> list[str]:
        """Repair what an interrupted command left behind; returns what was done (for a notice)."""
        done = [f"removed {rel}, left behind by a killed git process" for rel in self.git.clear_stale_locks()]
        if not self.journal.exists() and not self.queue.has_claims() and not self.unfinished_purge():
            return done
        write_lock = lock.OsLock(self.write_lock)
        try:
            if not write_lock.acquire():
                return done  # a live writer holds the lock: what it left is not a leftover
        except OSError:
            return done  # a read-only vault: nothing can be repaired, reading still works
        try:
            return done + self.recover_locked()
        except VaultBusy as e:
            return [*done, str(e)]  # reading goes on; the next command settles the change
        except VaultUnwritable as e:
            # Reading goes on from the files, which the undo puts back first (a cut-back append
            # needs no room); git's index waits for a command with room.
            return [*done, f"the unfinished change of an interrupted command waits to be undone ({e}); "
                           "reading goes on"]
        finally:
            write_lock.release()

    def recover_locked(self) -> list[str]:
        """`recover` for a caller that already holds the write lock."""
        entry = self.journal.read()
        if entry is not None and entry.kind != MERGE and self.git.merge_in_progress():
            return [f"a leftover change waits in {JOURNAL_FILE} until the merge in progress is finished"]
        done: list[str] = []
        if entry is not None:
            try:
                note = self.settle(entry)
            except VaultUnwritable:
                if not reserve.release(self.root / RESERVE_FILE):
                    raise
                note = self.settle(entry)  # again, with the room the reserve gave back
            if note:
                done.append(note)
        # Claimed without a journal: their committer died before writing anything.
        for name in self.queue.claimed():
            self.queue.give_back(name)
        pending = self.unfinished_purge()
        if pending:
            half = self._half_purged()
            if half:
                self.restore_from_head(half)
                done.append(f"put back the files an interrupted purge left half checked out ({', '.join(half[:3])}"
                            f"{' …' if len(half) > 3 else ''}); run `memvault purge {' '.join(pending)} --yes` "
                            "to finish it")
        remove_temp_files(self.journal.path)  # a journal whose writer was killed while writing it
        return done

    def _half_purged(self) -> list[str]:
        """The files a purge killed midway left as they were before it, under a rewritten HEAD:
        git's index and the file still hold the old text, which the next write would commit
        again (and sync push). Only files still exactly as before the purge: a hand edit since
        is not touched."""
        import git

        before = self._purge_state().get("before")
        if not isinstance(before, str) or self.git.head() in (None, before):
            return []  # the rewrite never moved HEAD: nothing is half done
        try:
            changed = [p for p in self.git.run("diff", "--name-only", "-z", before, "HEAD").split("\0") if p]
            listing = self.git.run("ls-tree", "-z", before, "--", *changed).split("\0") if changed else []
        except git.GitCommandError:
            return []  # the old commit is pruned: the purge got past its checkout
        old = {line.split("\t", 1)[1]: line.split()[2] for line in listing if line}
        on_disk = [p for p in old if (self.root / p).is_file() and not (self.root / p).is_symlink()]
        hashed = self.git.run("hash-object", "--", *(str(self.root / p) for p in on_disk)).split() if on_disk else []
        disk = dict(zip(on_disk, hashed, strict=True))
        # as before the purge: the old blob on disk, or still absent when the purge's HEAD adds it
        return sorted(p for p in changed if (disk.get(p) == old[p] if p in old else not (self.root / p).exists()))

    def _purge_state(self) -> dict:
        try:
            state = json.loads((self.root / PURGE_STATE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return state if isinstance(state, dict) else {}

    def unfinished_purge(self) -> list[str]:
        """Ids of a purge that was interrupted (killed, a full disk) before it finished: running
        `purge` with them again finishes it."""
        pending = self._purge_state().get("pending")
        return [str(i) for i in pending] if isinstance(pending, list) else []

    def restore_from_head(self, paths: list[str], keep: Iterable[str] = ()) -> None:
        """Put `paths` back as HEAD has them, deleting those HEAD lacks, except the untracked `keep`."""
        if not paths:
            return  # (no pathspec would mean the whole tree)
        self.git.run("reset", "-q", "--", *paths)  # unstaged first: `git clean` leaves a staged new file
        tracked = {path for path in self.git.run("ls-tree", "-r", "-z", "--name-only", "HEAD", "--", *paths).split("\0")
                   if path}
        if tracked:
            self.git.run("checkout", "HEAD", "--", *sorted(tracked))
        keep = set(keep)
        new = [rel for rel in paths if rel not in keep]
        if new:
            self.git.run("clean", "-fdq", "--", *new)

