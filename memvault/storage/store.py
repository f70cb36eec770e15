"""`Storage`: one vault's files and git repository, read and written the safe way.

Every mutation runs under one vault-wide file lock, is journaled before the files change, and ends
as exactly one commit. A process killed midway leaves the journal behind; the next command that
opens the vault repairs the tree from it (`recover`).
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import date, datetime
from functools import cached_property
from pathlib import Path

from memvault import dreamlog
from memvault.config import Config, load_config
from memvault.errors import DreamRunning, InvalidInput, NotFound, SyncConflict, VaultBusy
from memvault.facts import Fact, ParseProblem, format_item, log_header, normalize_id, parse_log
from memvault.storage import lock
from memvault.storage.files import atomic_write, fsync_append, read_text
from memvault.storage.journal import APPEND, REPLACE, Entry, Journal
from memvault.storage.layout import (
    CONFIG_FILE,
    DREAM_LOCK,
    DREAM_LOG,
    JOURNAL_FILE,
    LOCKS_DIR,
    LOGS_DIR,
    STATE_DIR,
    TOMBSTONES_FILE,
    WRITE_LOCK,
    day_of_log,
    is_log_name,
    log_relpath,
)
from memvault.tombstones import Tombstone, parse_tombstones, text_hash

Notify = Callable[[str], None]
_log = logging.getLogger("memvault")


class Storage:
    """The vault directory at `root` (it must already be a vault; see memvault.vault for finding one)."""

    def __init__(self, root: Path, config: Config | None = None, notify: Notify | None = None):
        self.root = Path(root)
        self.config: Config = config or load_config(self.root / CONFIG_FILE)
        # Notices for the person or agent (index rebuilt, model missing): a front end passes a
        # callback that shows them; the library itself never prints.
        self.notify: Notify = notify or _log.info
        # The search engine memvault.index opens on first use, kept here so a long-lived process
        # (the MCP server, the Python API) pays the index opening and model load once.
        self.search_index = None
        self.journal = Journal(self.root / JOURNAL_FILE)

    def close(self) -> None:
        """Release what the storage holds open (the search index), e.g. before deleting the vault."""
        if self.search_index is not None:
            self.search_index.close()
            self.search_index = None

    # -- paths ----------------------------------------------------------------------------------

    @cached_property
    def tz(self):
        return self.config.tz

    @cached_property
    def git(self):
        """The vault's git repository (memvault.gitstore.GitStore; GitPython loads on first use)."""
        from memvault.gitstore import GitStore

        return GitStore(self.root)

    @property
    def state_dir(self) -> Path:
        path = self.root / STATE_DIR
        path.mkdir(exist_ok=True)
        return path

    def lock_path(self, name: str) -> Path:
        return self.root / LOCKS_DIR / name

    def path(self, rel: str) -> Path:
        return self.root / rel

    def relpath(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def read_text(self, rel: str) -> str:
        """A vault file's text exactly as stored; "" when it does not exist."""
        return read_text(self.root / rel)

    def log_path(self, day: date) -> Path:
        return self.root / log_relpath(day)

    def log_files(self) -> list[Path]:
        """Daily logs, oldest day first."""
        found = []
        logs = self.root / LOGS_DIR
        if logs.is_dir():
            for year in logs.iterdir():
                if year.is_dir():
                    found.extend(p for p in year.iterdir() if is_log_name(p.name))
        return sorted(found, key=lambda p: p.name)

    @staticmethod
    def day_of(path: Path) -> date:
        return day_of_log(path.name)

    # -- locking and transactions ------------------------------------------------------------

    @contextmanager
    def write_lock(self, timeout: float | None = None) -> Iterator[None]:
        """The one vault-wide write lock (an OS lock: it dies with its process)."""
        wait = self.config.lock_timeout if timeout is None else timeout
        with lock.hold(self.lock_path(WRITE_LOCK), wait, str(self.root)):
            yield

    @contextmanager
    def dream_lock(self) -> Iterator[None]:
        """One dream at a time per vault; a second one fails at once instead of queueing."""
        with lock.exclusive(self.lock_path(DREAM_LOCK), DreamRunning(
                f"dream already running on {self.root}; try again when it has finished")):
            yield

    def lock_holder(self) -> dict | None:
        """Who holds the write lock right now (None when nobody does)."""
        return lock.holder(self.lock_path(WRITE_LOCK))

    @contextmanager
    def transaction(self, kind: str, paths: Iterable[str], message: str) -> Iterator[None]:
        """Journal a write (call with the write lock held); the journal outlives a killed process.

        kind "append": leftovers are committed by the next command (the data was already durable).
        kind "replace": leftovers are discarded, restoring `paths` from HEAD (all-or-nothing writes).
        """
        paths = sorted(paths)
        self.refuse_during_merge()  # a merge in progress cannot take a commit of a few paths
        self.journal.begin(Entry(kind, paths, message))
        try:
            yield
        except (Exception, KeyboardInterrupt):
            if kind == REPLACE:
                # All-or-nothing: undo the partial write now rather than at the next command.
                self.restore_from_head(paths)
                self.journal.end()
            raise  # an "append" keeps its journal: its data is durable and the next command commits it
        self.journal.end()

    def recover(self) -> list[str]:
        """Repair what an interrupted command left behind; returns what was done (for a notice)."""
        if not self.journal.exists():
            return []
        try:
            with self.write_lock(timeout=0):
                return self.recover_locked()
        except VaultBusy:
            return []  # a live writer holds the lock: its journal is not a leftover

    def recover_locked(self) -> list[str]:
        """`recover` for a caller that already holds the write lock."""
        if self.journal.exists() and self.git.merge_in_progress():
            return [f"a leftover change waits in {JOURNAL_FILE} until the merge in progress is finished"]
        entry = self.journal.read()
        if entry is None:
            return []
        done: list[str] = []
        if entry.kind == APPEND:
            sha = self.git.commit(entry.paths, f"recover: {entry.message} (interrupted, committed by the next command)")
            if sha:
                done.append(f"committed the leftover change of an interrupted command: {entry.message}")
        elif self.git.status(*entry.paths):
            self.restore_from_head(entry.paths)
            done.append(f"rolled back the unfinished change of an interrupted command: {entry.message}")
        self.journal.end()
        return done

    def refuse_during_merge(self) -> None:
        """A commit of a few paths is impossible mid-merge; refuse before anything is written."""
        if self.git.merge_in_progress():
            raise SyncConflict(
                f"a git merge is in progress in {self.root} (an interrupted sync or a hand merge): resolve it "
                "and `git commit`, or `git merge --abort`, then try again; nothing was written"
            )

    def commit_hand_edits(self, paths: list[str], when: str) -> None:
        """Uncommitted hand edits (deletions too) of the files a write appends to get their own
        commit, rather than a silent ride in memvault's."""
        dirty = [line[3:] for line in self.git.status(*paths)]
        if dirty:
            self.git.commit(dirty, f"edit: {', '.join(dirty)} (uncommitted hand edits, committed {when})")

    def restore_from_head(self, paths: list[str]) -> None:
        tracked = set(self.git.run("ls-tree", "-r", "--name-only", "HEAD", "--", *paths).splitlines())
        if tracked:
            self.git.run("checkout", "HEAD", "--", *sorted(tracked))
        self.git.run("clean", "-fdq", "--", *paths)

    def write_files(self, files: Mapping[str, str], message: str, removed: Iterable[str] = ()) -> str | None:
        """Rewrite (and remove) files as one commit, or after a crash not at all. Hold the write lock."""
        removed = list(removed)
        paths = sorted({*files, *removed})
        with self.transaction(REPLACE, paths, message):
            for rel in removed:
                (self.root / rel).unlink(missing_ok=True)
            for rel, content in files.items():
                target = self.root / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(target, content)
            return self.git.commit(paths, message)

    # -- daily logs ---------------------------------------------------------------------------

    def read_log(self, path: Path) -> tuple[list[Fact], list[ParseProblem]]:
        with open(path, encoding="utf-8", newline="") as f:
            return parse_log(f.read(), self.relpath(path))

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
        raise NotFound(f"no fact with id {typed!r}")

    def _find_exact(self, fact_id: str) -> Fact | None:
        needle = json.dumps({"id": fact_id})[1:-1].replace(": ", ":")  # '"id":"<id>"' as the log writes it
        for path in reversed(self.log_files()):
            content = read_text(path)
            if needle in content:
                for fact in parse_log(content, self.relpath(path))[0]:
                    if fact.id == fact_id:
                        return fact
        return None

    def append_facts(self, facts: list[Fact]) -> None:
        """Append facts to their days' logs as ONE commit (facts carry their log path)."""
        by_path: dict[str, list[Fact]] = defaultdict(list)
        for fact in facts:
            by_path[fact.path].append(fact)
        message = _add_message(facts)
        with self.write_lock():
            self.recover_locked()
            self.refuse_during_merge()
            self.commit_hand_edits(sorted(by_path), f"before {message}")
            with self.transaction(APPEND, by_path, message):
                for rel, items in by_path.items():
                    path = self.root / rel
                    path.parent.mkdir(parents=True, exist_ok=True)
                    header = "" if path.exists() else log_header(items[0].day)
                    fsync_append(path, header + "".join(format_item(f) for f in items))
                self.git.commit(sorted(by_path), message)

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
            with self.transaction(APPEND, [TOMBSTONES_FILE], message):
                fsync_append(self.root / TOMBSTONES_FILE, tombstone.to_line())
                self.git.commit([TOMBSTONES_FILE], message)
        return tombstone, False

    # -- dream's journal (log.md) ---------------------------------------------------------------

    def dream_entries(self) -> list[dreamlog.Entry]:
        return dreamlog.parse_journal(self.read_text(DREAM_LOG))

    @property
    def watermark(self) -> date | None:
        """The last day consolidated by dream: the latest `watermark=YYYY-MM-DD` token in log.md."""
        return dreamlog.latest_watermark(self.read_text(DREAM_LOG))


def _add_message(new: list[Fact]) -> str:
    if len(new) == 1:
        fact = new[0]
        if fact.secret:
            return f"add: {fact.id} (text withheld: it holds a credential)"
        words = " ".join(fact.text.split())
        return f"add: {fact.id} {words[:60] + ('…' if len(words) > 60 else '')}"
    return f"add: {len(new)} facts ({new[0].id}..{new[-1].id})"
