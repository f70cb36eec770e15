"""`FactLog`: the daily logs (logs/YYYY/YYYY-MM-DD.md), the vault's facts: read, found, appended.

Appends go through the unit of work (storage/work.py): under the write lock, journaled, one
commit. A writer that finds the lock taken queues its facts (storage/queue.py) and the lock's next
holder commits every queued request as one group commit.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import replace
from datetime import date
from functools import cached_property
from pathlib import Path

from memvault.errors import InvalidInput, MemvaultError, NotFound, VaultBusy
from memvault.formats.facts import Fact, ParseProblem, id_length_hint, log_header, normalize_id, parse_log, stored_id
from memvault.formats.layout import (
    KEYS_DB,
    LOCKS_DIR,
    LOGS_DIR,
    QUEUE_DIR,
    WRITE_LOCK,
    day_of_log,
    is_log_name,
    log_relpath,
)
from memvault.storage import lock
from memvault.storage.files import ends_mid_line, fsync_appends, read_bytes, read_text, size_of, stat_key, writing
from memvault.storage.journal import APPEND
from memvault.storage.keys import APPENDED_LINE, Keyed, KeyIndex, stamp
from memvault.storage.paths import inside
from memvault.storage.queue import CLAIMED, DONE, PENDING, REJECTED, QueuedFact, Request, commit_message
from memvault.storage.tombstone_log import TombstoneLog
from memvault.storage.work import WAIT_NOTICE_SECONDS, UnitOfWork

QUEUE_POLL_SECONDS = 0.02


class FactLog:
    """The daily logs of a vault, read and appended through its unit of work."""

    def __init__(self, work: UnitOfWork, tombstone_log: TombstoneLog):
        self.work = work
        self.root = work.root
        self.tombstone_log = tombstone_log
        self._once: dict[str, tuple] | None = None  # see reading_once

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

    @contextmanager
    def reading_once(self) -> Iterator[None]:
        """Within it, a log read a second time with the same stat is not parsed again: `status`
        plans dream and then counts facts, and on a vault it has not seen (a clone) each reads every
        log. A parse is kept until its second reader takes it, so it lives no longer than the
        first reader's own copy would have (planning holds what it read)."""
        self._once = {}
        try:
            yield
        finally:
            self._once = None

    def read_log(self, path: Path) -> tuple[list[Fact], list[ParseProblem]]:
        if self._once is None:
            return self._parse_log(path)
        key = stat_key(path)
        kept = self._once.pop(str(path), None)
        if kept is not None and key is not None and kept[0] == key:
            return list(kept[1]), list(kept[2])
        facts, problems = self._parse_log(path)
        if key is not None:
            self._once[str(path)] = (key, facts, problems)
        return facts, problems

    def _parse_log(self, path: Path) -> tuple[list[Fact], list[ParseProblem]]:
        rel = self.work.relpath(path)
        raw = path.read_bytes()
        try:
            text, problems = raw.decode("utf-8"), []
        except UnicodeDecodeError:
            # Read all the same (as the index does), each such line named (doctor lists them).
            text = raw.decode("utf-8", "replace")
            message = "holds bytes that are not UTF-8 (read as \ufffd): save the file as UTF-8"
            problems = [ParseProblem(rel, number, message, read=True)
                        for number, line in enumerate(text.splitlines(), 1) if "\ufffd" in line]
        facts, more = parse_log(text, rel)
        return facts, problems + more

    def iter_facts(self, include_forgotten: bool = False) -> Iterator[Fact]:
        """All facts, oldest day first (file order within a day). An id a hand edit or a bad merge
        repeated counts once: its first copy (the rule search and dream follow; doctor reports it)."""
        forgotten = set() if include_forgotten else set(self.tombstone_log.tombstones())
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
                for fact in parse_log(read_text(path), self.work.relpath(path))[0]:
                    if fact.id == fact_id:
                        return fact
        return None

    def append_facts(self, facts: list[Fact], origin: str | None = None, *, locked: bool = False) -> dict[str, Keyed]:
        """Append facts to their days' logs and commit them: all of them, or (on an error) none.
        `locked`: the caller holds the write lock (Storage.write_lock), having checked under it what
        another writer could change meanwhile.

        A writer that finds the write lock taken queues its facts and waits: the lock's next holder
        commits every queued batch in one commit, so concurrent writers are not refused. Facts
        still queued after `lock_timeout` seconds are withdrawn (never committed) and VaultBusy
        is raised. A fact whose key is already stored (or taken by an earlier fact of the same
        commit) is left out, under the lock: returns {key: the stored fact} for those.
        `origin` names what an import read, for the commit message.
        """
        request = Request.of(facts, origin)
        if locked:
            return self._commit_queue(own=request)
        write_lock = lock.OsLock(self.work.lock_path(WRITE_LOCK))
        with writing(f"{LOCKS_DIR}/{WRITE_LOCK}", "nothing was added"):
            got_it = write_lock.acquire()
        if got_it:
            try:
                return self._commit_queue(own=request)
            finally:
                write_lock.release()
        with writing(QUEUE_DIR, "nothing was added"):
            name = self.work.queue.submit(request)
        try:
            self._wait_for(name, write_lock)
        except BaseException:
            with suppress(OSError):
                self.work.queue.withdraw(name)  # still pending: it must never be committed now
            raise
        # Committed by whoever held the lock, less any fact whose key was stored meanwhile.
        keys = [fact.key for fact in facts if fact.key is not None]
        stored = self.keys.lookup(keys) if keys else {}
        return {fact.key: stored[fact.key] for fact in facts
                if fact.key is not None and fact.key in stored and stored[fact.key].id != fact.id}

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
        timeout = self.work.config.lock_timeout
        while True:
            state = self.work.queue.state(name)
            if state == DONE:
                return
            if state == REJECTED:
                self.work.queue.withdraw(name)
                raise VaultBusy(f"the queued facts in {QUEUE_DIR} could not be read back; nothing was added; try again")
            if write_lock.acquire():
                try:
                    if self.work.queue.state(name) in (PENDING, CLAIMED):
                        self._commit_queue(own_name=name)
                finally:
                    write_lock.release()
                continue
            now = time.monotonic()
            if not told and now - started >= WAIT_NOTICE_SECONDS:
                told = True
                self._say_waiting("; the facts are queued and will be committed as soon as it is free")
            if state == PENDING and now - progress >= timeout:
                current = self._holder_identity()
                if current == holder and self.work.queue.withdraw(name):
                    raise VaultBusy(lock.busy_message(self.work.lock_path(WRITE_LOCK), timeout, str(self.root))
                                    + "; nothing was added")
                holder, progress = current, now  # another holder since: the queue moves
            time.sleep(QUEUE_POLL_SECONDS)

    def _say_waiting(self, then: str) -> None:
        self.work.notify(lock.waiting_notice(self.work.lock_holder(), self.root, then))

    def _holder_identity(self) -> tuple | None:
        who = self.work.lock_holder()
        return (who.get("pid"), who.get("since")) if who else None

    def _commit_queue(self, own: Request | None = None, own_name: str | None = None) -> dict[str, Keyed]:
        """With the write lock held: append `own` and every queued request as ONE commit, less the
        facts whose key is already stored; returns {key: the stored fact} for those of `own`."""
        self.work.recovery.recover_locked()
        self.work.refuse_during_merge()
        claimed = self.work.queue.claim()
        requests = ([own] if own is not None else []) + [request for _name, request in claimed]
        names = [name for name, _request in claimed]
        requests, stored = self._without_stored_keys(requests)
        if requests:
            self._commit_requests(requests, names, own_name)
        else:
            for name in names:  # every fact of theirs was stored already: done, with nothing to commit
                self.work.queue.finish(name)
        return {f.key: stored[f.key] for f in (own.facts if own else ()) if f.key is not None and f.key in stored}

    def _commit_requests(self, requests: list[Request], names: list[str], own_name: str | None) -> None:
        """Append the requests' facts to their logs and commit them as one commit (claims: `names`)."""
        by_path: dict[str, list[str]] = defaultdict(list)
        for request in requests:
            for fact in request.facts:
                by_path[fact.path].append(fact.item)
        message = commit_message(requests)
        self._commit_hand_edits_first(sorted(by_path), message, names, own_name)
        keyed = [fact for request in requests for fact in request.facts if fact.key is not None]
        before = {path: stamp(str(self.root / path)) for path in {fact.path for fact in keyed}}
        with self.work.transaction(APPEND, by_path, message, claims=names, own=own_name, outcome="nothing was added"):
            self._append({rel: "".join(items) for rel, items in by_path.items()})
            with writing(".git", "nothing was added"):
                self.work.git.commit(sorted(by_path), message)
        if keyed:
            self.keys.note_appended(before, keyed)

    def _commit_hand_edits_first(self, paths: list[str], message: str, names: list[str],
                                 own_name: str | None) -> None:
        """Hand edits of the logs get their own commit; if that fails, the claims go back to the queue."""
        try:
            with writing(".git", "nothing was added"):
                self.work.hand_edits.commit_hand_edits(paths, f"before {message.splitlines()[0]}")
        except BaseException:
            for name in names:
                self.work.queue.discard(name) if name == own_name else self.work.queue.give_back(name)
            raise

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
            failed = self.work.relpath(Path(e.filename)) if e.filename else next(iter(items))
            with writing(failed, "nothing was added"):
                raise


def _entries(folder: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as listing:
            return list(listing)
    except (FileNotFoundError, NotADirectoryError):
        return []
