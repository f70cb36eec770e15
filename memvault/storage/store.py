"""`Storage`: one vault's files and git repository, read and written the safe way.

Every mutation runs under one vault-wide file lock, is journaled before the files change, and ends
as exactly one commit, or not at all: a write that fails (disk full, Ctrl-C) is undone at once,
and one whose process was killed is undone by the next command (`recover`). Adds that find the
lock taken are queued and group-committed by its next holder (storage/queue.py).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import replace
from datetime import date, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from memvault.base.config import Config, load_config
from memvault.errors import (
    DreamRunning,
    InvalidInput,
    MemvaultError,
    NotFound,
    SyncConflict,
    VaultBusy,
    VaultUnwritable,
    unwritable,
)
from memvault.formats import dreamlog
from memvault.formats.facts import Fact, ParseProblem, id_length_hint, log_header, normalize_id, parse_log, stored_id
from memvault.formats.layout import (
    CONFIG_FILE,
    DREAM_LOCK,
    DREAM_LOG,
    JOURNAL_FILE,
    KEYS_DB,
    LOCKS_DIR,
    LOGS_DIR,
    PURGE_STATE,
    QUEUE_DIR,
    RESERVE_FILE,
    STATE_DIR,
    TOMBSTONES_FILE,
    WRITE_LOCK,
    day_of_log,
    in_work_tree,
    is_log_name,
    is_temp_file,
    is_vault_file,
    log_relpath,
)
from memvault.formats.tombstones import Tombstone, parse_tombstones, text_hash
from memvault.storage import lock, reserve
from memvault.storage.files import (
    atomic_write,
    cut_back,
    ends_mid_line,
    fsync_append,
    fsync_appends,
    read_bytes,
    read_text,
    remove_temp_files,
    size_of,
    writing,
)
from memvault.storage.journal import APPEND, MERGE, REPLACE, Entry, Journal
from memvault.storage.keys import APPENDED_LINE, Keyed, KeyIndex, stamp
from memvault.storage.paths import inside
from memvault.storage.queue import CLAIMED, DONE, PENDING, REJECTED, Queue, QueuedFact, Request, commit_message

Notify = Callable[[str], None]
_log = logging.getLogger("memvault")
# A queued writer says it is waiting once it has waited this long.
WAIT_NOTICE_SECONDS = 1.0
QUEUE_POLL_SECONDS = 0.02
# What a failed write says when even its undo failed (the disk still full): the files stay changed.
UNDO_PENDING = ("nothing was committed; the files stay changed until the next memvault command, with room, "
                "puts them back")


class Storage:
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
        self.pasts = None
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
    def git(self):
        """The vault's git repository (memvault.storage.gitstore.GitStore; GitPython loads on first use)."""
        from memvault.storage.gitstore import GitStore

        return GitStore(self.root)

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

    def log_path(self, day: date) -> Path:
        return inside(self.root, log_relpath(day))

    def log_files(self) -> list[Path]:
        """Daily logs, oldest day first; UnsafePath if a log, a year folder or logs/ is a symlink,
        MemvaultError if a folder stands where a log belongs."""
        return [Path(path) for path in self._log_paths()]

    def _log_paths(self) -> list[str]:
        """`log_files` as strings: making 2,000 Path objects took most of the listing's time, which
        a lookup that opens each log only to search its bytes need not spend."""
        found = []
        logs = inside(self.root, LOGS_DIR)
        for year in _entries(logs):  # os.scandir: the symlink test costs no system call
            if year.is_symlink():
                inside(self.root, f"{LOGS_DIR}/{year.name}")  # raises, naming it
            if year.is_dir():
                for entry in _entries(Path(year.path)):
                    if is_log_name(entry.name):
                        if entry.is_symlink():
                            inside(self.root, f"{LOGS_DIR}/{year.name}/{entry.name}")
                        if entry.is_dir():
                            raise MemvaultError(f"{LOGS_DIR}/{year.name}/{entry.name} is a folder where a daily log "
                                                "belongs; move it out of the vault; nothing was read or written")
                        found.append((entry.name, entry.path))
        return [path for _name, path in sorted(found, key=lambda named: named[0])]

    @staticmethod
    def day_of(path: Path) -> date:
        return day_of_log(path.name)

    # -- locking and transactions ------------------------------------------------------------

    @contextmanager
    def write_lock(self, timeout: float | None = None) -> Iterator[None]:
        """The one vault-wide write lock (an OS lock: it dies with its process)."""
        wait = self.config.lock_timeout if timeout is None else timeout
        held = lock.OsLock(self.lock_path(WRITE_LOCK))
        with writing(f"{LOCKS_DIR}/{WRITE_LOCK}", "nothing was changed"):
            got_it = held.wait(min(wait, WAIT_NOTICE_SECONDS))
            if not got_it and wait > WAIT_NOTICE_SECONDS:
                self._tell_waiting("")
                got_it = held.wait(wait - WAIT_NOTICE_SECONDS)
        if not got_it:
            raise VaultBusy(lock.busy_message(held.path, wait, str(self.root)))
        try:
            yield
        finally:
            held.release()

    @contextmanager
    def dream_lock(self) -> Iterator[None]:
        """One dream at a time per vault; a second one fails at once instead of queueing."""
        with lock.exclusive(self.lock_path(DREAM_LOCK), DreamRunning(
                f"dream already running on {self.root}; try again when it has finished")):
            yield

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
                raise unwritable(IsADirectoryError(errno.EISDIR, "Is a directory"), rel, "nothing was changed")
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
                self._settle(entry, discard=own)
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

    def _settle(self, entry: Entry, discard: str | None = None) -> str | None:
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
        write_lock = lock.OsLock(self.lock_path(WRITE_LOCK))
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
                note = self._settle(entry)
            except VaultUnwritable:
                if not reserve.release(self.root / RESERVE_FILE):
                    raise
                note = self._settle(entry)  # again, with the room the reserve gave back
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

    def refuse_during_merge(self) -> None:
        """A commit of a few paths is impossible mid-merge; refuse before anything is written."""
        if self.git.merge_in_progress():
            raise SyncConflict(
                f"a git merge is in progress in {self.root} (an interrupted sync or a hand merge): resolve it "
                "and `git commit`, or `git merge --abort`, then try again; nothing was written"
            )

    def commit_hand_edits(self, paths: list[str], when: str) -> None:
        """Uncommitted hand edits of the files a write appends to get their own commit, rather than
        a silent ride in memvault's; one that drops a committed fact is refused (refuse_lost_facts)."""
        for rel in paths:
            inside(self.root, rel)  # a log turned into a symlink is refused, never committed as one
        dirty = [line[3:] for line in self.git.status(*paths)]
        if dirty:
            self.refuse_lost_facts(dirty)
            self.git.commit(dirty, f"edit: {', '.join(dirty)} (uncommitted hand edits, committed {when})")

    def refuse_lost_facts(self, dirty: list[str]) -> None:
        """A hand edit may reword or add facts, never make one disappear or a forgotten one
        come back: the logs and the forget records are append-only (a fact goes by `memvault
        forget`), and every other clone's sync refuses a history that drops one. So such an edit
        is not committed with the next write (an `rm` of today's log took the day's facts out of
        HEAD, silently), and the write is refused until the file is restored or the fact forgotten."""
        lost: list[str] = []
        for rel in dirty:
            if rel == TOMBSTONES_FILE:
                before = set(parse_tombstones(self._at_head(rel)))
                lost += sorted(before - set(parse_tombstones(self.read_text(rel))))
            elif rel.startswith(LOGS_DIR + "/"):
                before = {f.id for f in parse_log(self._at_head(rel), rel)[0]}
                lost += sorted(before - {f.id for f in parse_log(self.read_text(rel), rel)[0]})
        if lost:
            shown = ", ".join(lost[:3]) + (" …" if len(lost) > 3 else "")
            raise InvalidInput(f"uncommitted edits to {', '.join(dirty[:3])} remove {len(lost)} committed "
                               f"fact(s) or forget record(s) ({shown}); nothing was written: restore the file "
                               f"(`git -C {self.root} checkout -- {' '.join(dirty[:3])}`), and use "
                               "`memvault forget` to drop a fact")

    def _at_head(self, rel: str) -> str:
        """The file as HEAD holds it, "" when HEAD does not."""
        from git import GitCommandError

        try:
            return self.git.run("show", f"HEAD:{rel}")
        except GitCommandError:
            return ""

    def uncommitted(self) -> tuple[list[str], list[str], list[str]]:
        """Uncommitted paths, sorted into the vault's own files (never a symlink: memvault does not
        commit one), temp files a killed process left (safe to delete), and anything else (not
        memvault's to commit: a note, an editor's backup)."""
        ours, temp, foreign = [], [], []
        for rel in self.git.changed_paths():
            if is_temp_file(rel):
                temp.append(rel)
            elif is_vault_file(rel) and not os.path.islink(self.root / rel):
                ours.append(rel)
            else:
                foreign.append(rel)
        return ours, temp, foreign

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

    def write_files(self, files: Mapping[str, str], message: str, removed: Iterable[str] = ()) -> str | None:
        """Rewrite (and remove) files as one commit, or after a crash not at all. Hold the write lock."""
        removed = list(removed)
        paths = sorted({*files, *removed})
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

    # -- daily logs ---------------------------------------------------------------------------

    def read_log(self, path: Path) -> tuple[list[Fact], list[ParseProblem]]:
        rel = self.relpath(path)
        raw = path.read_bytes()
        try:
            text, problems = raw.decode("utf-8"), []
        except UnicodeDecodeError:
            # Read all the same (as the index does), each such line named (doctor lists them).
            text = raw.decode("utf-8", "replace")
            message = "holds bytes that are not UTF-8 (read as \ufffd): save the file as UTF-8"
            problems = [ParseProblem(rel, number, message)
                        for number, line in enumerate(text.splitlines(), 1) if "\ufffd" in line]
        facts, more = parse_log(text, rel)
        return facts, problems + more

    def iter_facts(self, include_forgotten: bool = False) -> Iterator[Fact]:
        """All facts, oldest day first (file order within a day). An id a hand edit or a bad merge
        repeated counts once: its first copy (the rule search and dream follow; doctor reports it)."""
        forgotten = set() if include_forgotten else set(self.tombstones())
        seen: set[str] = set()
        for path in self.log_files():
            for fact in self.read_log(path)[0]:
                if fact.id not in seen and fact.id not in forgotten:
                    yield fact
                seen.add(fact.id)

    def duplicate_ids(self) -> list[ParseProblem]:
        """Later copies of a fact id (first copy: oldest day, then file order), each with where the
        counted copy is."""
        first: dict[str, tuple[str, int]] = {}
        found: list[ParseProblem] = []
        for path in self.log_files():
            for fact in self.read_log(path)[0]:
                where = first.setdefault(fact.id, (fact.path, fact.line))
                if where != (fact.path, fact.line):
                    found.append(ParseProblem(fact.path, fact.line, f"fact id {fact.id} again: only its first "
                                                                    f"copy ({where[0]}:{where[1]}) counts"))
        return found

    def problems(self) -> list[ParseProblem]:
        """Lines in the daily logs that look like facts but do not parse (for doctor)."""
        found: list[ParseProblem] = []
        for path in self.log_files():
            found.extend(self.read_log(path)[1])
        return found

    def find_fact(self, fact_id: str) -> Fact:
        """The fact with this id, forgotten or not; its id read as typed first, then as Crockford."""
        typed = fact_id.strip()
        if not typed:
            raise InvalidInput("fact id is empty")
        for candidate in dict.fromkeys((typed, normalize_id(typed))):  # hand-written ids may be any shape
            found = self._find_exact(candidate)
            if found is not None:
                return found
        raise NotFound(f"no fact with id {typed!r}{id_length_hint(typed)}")

    def _find_exact(self, fact_id: str) -> Fact | None:
        needle = stored_id(fact_id)
        # Oldest log first: an id a hand edit repeated counts as its first copy, as for search,
        # dream and doctor (from the newest log, `show` gave a later copy's text). No log can be
        # passed over for the id's time: a backdated fact sits in a log older than its id, and a
        # hand copy in any log. What is saved is decoding: the bytes are searched, and only a log
        # holding the id is read as text. The id's UTF-8 is in the bytes exactly when the id is in
        # the text, since a byte that is not UTF-8 reads as U+FFFD alone, never taking a character
        # of the id with it; an id holding U+FFFD itself could match such a byte, so it is looked
        # for in the text, and one holding a lone surrogate is in no log read as UTF-8.
        try:
            raw = None if "\ufffd" in needle else needle.encode("utf-8")
        except UnicodeEncodeError:
            return None
        for name in self._log_paths():
            if (needle in read_text(Path(name))) if raw is None else (raw in read_bytes(name)):
                path = Path(name)
                for fact in parse_log(read_text(path), self.relpath(path))[0]:
                    if fact.id == fact_id:
                        return fact
        return None

    def append_facts(self, facts: list[Fact], origin: str | None = None) -> dict[str, Keyed]:
        """Append facts to their days' logs and commit them: all of them, or (on an error) none.

        A writer that finds the write lock taken queues its facts and waits: the lock's next holder
        commits every queued batch in one commit, so concurrent writers are not refused. Facts
        still queued after `lock_timeout` seconds are withdrawn (never committed) and VaultBusy
        is raised. A fact whose key is already stored (or taken by an earlier fact of the same
        commit) is left out, under the lock: returns {key: the stored fact} for those.
        `origin` names what an import read, for the commit message.
        """
        request = Request.of(facts, origin)
        write_lock = lock.OsLock(self.lock_path(WRITE_LOCK))
        with writing(f"{LOCKS_DIR}/{WRITE_LOCK}", "nothing was added"):
            got_it = write_lock.acquire()
        if got_it:
            try:
                return self._commit_queue(own=request)
            finally:
                write_lock.release()
        with writing(QUEUE_DIR, "nothing was added"):
            name = self.queue.submit(request)
        try:
            self._wait_for(name, write_lock)
        except BaseException:
            with suppress(OSError):
                self.queue.withdraw(name)  # still pending: it must never be committed now
            raise
        # Committed by whoever held the lock, less any fact whose key was stored meanwhile.
        keyed = [fact for fact in facts if fact.key is not None]
        stored = self.keys.lookup(fact.key for fact in keyed) if keyed else {}
        return {fact.key: stored[fact.key] for fact in keyed if fact.key in stored and stored[fact.key].id != fact.id}

    def stored_keys(self, keys: Iterable[str]) -> dict[str, Keyed]:
        """Where the facts stored under these keys are (the first copy of each); see storage/keys.py."""
        return self.keys.lookup(keys)

    @cached_property
    def keys(self) -> KeyIndex:
        return KeyIndex(self.root, self.root / KEYS_DB, self._log_paths)

    def _wait_for(self, name: str, write_lock: lock.OsLock) -> None:
        """Wait until the queued request `name` is committed, committing the queue if the lock frees.

        Gives up (VaultBusy) only when one holder keeps the lock for `lock_timeout` seconds while
        the request is still pending: a busy queue whose holders keep changing is progress.
        """
        started = progress = time.monotonic()
        holder = self._holder_identity()
        told = False
        timeout = self.config.lock_timeout
        while True:
            state = self.queue.state(name)
            if state == DONE:
                return
            if state == REJECTED:
                self.queue.withdraw(name)
                raise VaultBusy(f"the queued facts in {QUEUE_DIR} could not be read back; nothing was added; try again")
            if write_lock.acquire():
                try:
                    if self.queue.state(name) in (PENDING, CLAIMED):
                        self._commit_queue(own_name=name)
                finally:
                    write_lock.release()
                continue
            now = time.monotonic()
            if not told and now - started >= WAIT_NOTICE_SECONDS:
                told = True
                self._tell_waiting("; the facts are queued and will be committed as soon as it is free")
            if state == PENDING and now - progress >= timeout:
                current = self._holder_identity()
                if current == holder and self.queue.withdraw(name):
                    raise VaultBusy(lock.busy_message(self.lock_path(WRITE_LOCK), timeout, str(self.root))
                                    + "; nothing was added")
                holder, progress = current, now  # another holder since: the queue moves
            time.sleep(QUEUE_POLL_SECONDS)

    def _tell_waiting(self, then: str) -> None:
        who = self.lock_holder() or {}
        by = f" (pid {who['pid']}: {who.get('command')})" if who.get("pid") else ""
        self.notify(f"waiting for the write lock of {self.root}{by}{then}")

    def _holder_identity(self) -> tuple | None:
        who = self.lock_holder()
        return (who.get("pid"), who.get("since")) if who else None

    def _commit_queue(self, own: Request | None = None, own_name: str | None = None) -> dict[str, Keyed]:
        """With the write lock held: append `own` and every queued request as ONE commit, less the
        facts whose key is already stored; returns {key: the stored fact} for those of `own`."""
        self.recover_locked()
        self.refuse_during_merge()
        claimed = self.queue.claim()
        requests = ([own] if own is not None else []) + [request for _name, request in claimed]
        names = [name for name, _request in claimed]
        requests, stored = self._without_stored_keys(requests)
        if not requests:
            for name in names:  # every fact of theirs was stored already: done, with nothing to commit
                self.queue.finish(name)
            return {f.key: stored[f.key] for f in (own.facts if own else ()) if f.key in stored}
        by_path: dict[str, list[str]] = defaultdict(list)
        for request in requests:
            for fact in request.facts:
                by_path[fact.path].append(fact.item)
        message = commit_message(requests)
        try:
            with writing(".git", "nothing was added"):
                self.commit_hand_edits(sorted(by_path), f"before {message.splitlines()[0]}")
        except BaseException:
            for name in names:
                self.queue.discard(name) if name == own_name else self.queue.give_back(name)
            raise
        keyed = [fact for request in requests for fact in request.facts if fact.key is not None]
        before = {path: stamp(str(self.root / path)) for path in {fact.path for fact in keyed}}
        with self.transaction(APPEND, by_path, message, claims=names, own=own_name, outcome="nothing was added"):
            self._append({rel: "".join(items) for rel, items in by_path.items()})
            with writing(".git", "nothing was added"):
                self.git.commit(sorted(by_path), message)
        if keyed:
            self.keys.note_appended(before, keyed)
        return {f.key: stored[f.key] for f in (own.facts if own else ()) if f.key in stored}

    def _without_stored_keys(self, requests: list[Request]) -> tuple[list[Request], dict[str, Keyed]]:
        """The requests less their facts whose key is stored already or taken by an earlier fact of
        this commit (a retried add racing its first try), and where each such key's fact is."""
        keys = [fact.key for request in requests for fact in request.facts if fact.key is not None]
        if not keys:
            return requests, {}
        stored = self.keys.lookup(keys)
        if not stored and len(set(keys)) == len(keys):
            return requests, {}  # (an import's common case: every key new, none given twice)
        taken: dict[str, QueuedFact | None] = dict.fromkeys(stored)  # None: stored before this commit
        kept = []
        for request in requests:
            facts = []
            for fact in request.facts:
                if fact.key is None or fact.key not in taken:
                    facts.append(fact)
                    if fact.key is not None:
                        taken[fact.key] = fact
                elif (first := taken[fact.key]) is not None:
                    stored[fact.key] = Keyed(first.id, first.path, APPENDED_LINE)
            if facts:
                kept.append(request if len(facts) == len(request.facts) else replace(request, facts=tuple(facts)))
        return kept, stored

    def _append(self, items: dict[str, str]) -> None:
        """Append log items to daily logs (a new log's header first), durably, all flushed at once."""
        appends: dict[Path, str] = {}
        for rel, text in items.items():
            with writing(rel, "nothing was added"):
                path = inside(self.root, rel)
                path.parent.mkdir(parents=True, exist_ok=True)
                if size_of(path) is None:
                    text = log_header(day_of_log(rel)) + text
                elif ends_mid_line(path):
                    text = "\n" + text  # a torn or hand-edited end: never glue an item onto its last line
            appends[path] = text
        try:
            fsync_appends(appends)
        except OSError as e:
            failed = self.relpath(Path(e.filename)) if e.filename else next(iter(items))
            with writing(failed, "nothing was added"):
                raise

    # -- tombstones ---------------------------------------------------------------------------

    def tombstones(self) -> dict[str, Tombstone]:
        return parse_tombstones(self.read_text(TOMBSTONES_FILE))

    def add_tombstone(self, fact: Fact, reason: str | None) -> tuple[Tombstone, bool]:
        """Tombstone a fact (one commit); returns the tombstone and whether it already existed."""
        with self.write_lock():
            self.recover_locked()
            existing = self.tombstones().get(fact.id)
            if existing is not None:
                return existing, True
            self.refuse_during_merge()
            self.commit_hand_edits([TOMBSTONES_FILE], f"before forget: {fact.id}")
            tombstone = Tombstone(id=fact.id, at=datetime.now(self.tz).replace(microsecond=0).isoformat(),
                                  reason=reason, hash=text_hash(fact.text))
            message = f"forget: {fact.id}" + (f" ({reason})" if reason else "")
            with self.transaction(APPEND, [TOMBSTONES_FILE], message, outcome="nothing was forgotten"):
                path = inside(self.root, TOMBSTONES_FILE)
                with writing(TOMBSTONES_FILE, "nothing was forgotten"):
                    fsync_append(path, ("\n" if ends_mid_line(path) else "") + tombstone.to_line())
                with writing(".git", "nothing was forgotten"):
                    self.git.commit([TOMBSTONES_FILE], message)
        return tombstone, False

    # -- dream's journal (log.md) ---------------------------------------------------------------

    def dream_entries(self) -> list[dreamlog.Entry]:
        return dreamlog.parse_journal(self.read_text(DREAM_LOG))

    @property
    def watermark(self) -> date | None:
        """The last day consolidated by dream: the latest `watermark=YYYY-MM-DD` token in log.md."""
        return dreamlog.latest_watermark(self.read_text(DREAM_LOG))


def _entries(folder: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as listing:
            return list(listing)
    except (FileNotFoundError, NotADirectoryError):
        return []
