"""The vault as it stood at a moment (`--as-of WHEN`), answered from git alone.

WHEN is a date or a time, in any form `--since`/`--until` take (a date means the end of that
day), a commit (7 to 64 hex digits that do not read as a date), or HEAD~N: N commits back on
the branch's first-parent line (HEAD~1: before the last change). The commit in force then
(memvault.storage.history) is written out, once, into `.memvault/asof/<commit>/`; the usual
readers (search, context, recent, show, status) then run on that folder as on a vault, with
the vault's own settings, and search builds that folder's own index, borrowing the vault's
embedding cache so no text is embedded twice. The live index and the working tree are never
touched. So a fact counts from the commit that added it, not from its `at`; a forget from its
tombstone's commit; pages and MEMORY.md are as that commit has them; and a purge, which
rewrote the history, took the text from every moment.

Each moment's index starts as a copy of the vault's own (memvault.index.seed), then reads only
the files that differ. The folder keeps at most MAX_SNAPSHOTS moments and MAX_BYTES, the least
recently used going first (never one a process is reading: each holds a shared lock on
`<commit>.lock`). A purge deletes them all (memvault.index.search.purge_index), and so does any
reader that finds the vault knowing a purge they were made without (a clone that took a purge
with plain git).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime, time
from pathlib import Path
from typing import Any

from memvault.base.dates import parse_bound
from memvault.errors import InvalidInput
from memvault.formats.facts import stored_id
from memvault.formats.layout import (
    LOGS_DIR,
    STATE_ASOF,
    STATE_DIR,
    STATE_EMBEDDING_CACHE,
    STATE_INDEX,
    TOMBSTONES_FILE,
)
from memvault.formats.tombstones import parse_tombstones
from memvault.index import location
from memvault.index.seed import copy_index
from memvault.storage.files import read_text
from memvault.storage.history import (
    COMMIT_NAME,
    Commit,
    commit_at,
    first_parent_line,
    head,
    named_commit,
    tree_sizes,
    write_tree,
)
from memvault.storage.owner import Owner
from memvault.storage.store import Storage

MAX_SNAPSHOTS = 8
MAX_BYTES = 2 * 1024 ** 3
KEPT_OPEN = 4  # past vaults a long-lived process keeps open (their search index stays warm)
PURGED_NOTE = "purged.json"


# HEAD~N: N commits back on the branch (git's own spelling, in any case; HEAD alone is HEAD~0; no
# other revision syntax). Any N: one past the history is told how far back it goes.
BACK = re.compile(r"HEAD(?:~(\d+))?", re.IGNORECASE)


@dataclass(frozen=True)
class Moment:
    """What was asked, the moment it means, and the commit that answers for it."""

    asked: str
    when: datetime
    commit: Commit

    def to_dict(self) -> dict[str, Any]:
        return {"asked": self.asked, "commit": self.commit.sha, "at": self.commit.at,
                "message": self.commit.message}

    def describe(self) -> str:
        """One line for people: which commit answered, and when it was made."""
        return f"as of {self.asked}: commit {self.commit.sha[:10]} of {self.commit.at} ({self.commit.message})"


def moment(storage: Storage, when: Moment | str | datetime | date) -> Moment:
    """The commit that answers for `when` (InvalidInput when there is none)."""
    if isinstance(when, Moment):
        return when
    if isinstance(when, datetime):
        if when.tzinfo is None:
            when = when.replace(tzinfo=storage.tz)
        return _at(storage, when.isoformat(), when)
    if isinstance(when, date):
        return _at(storage, when.isoformat(), datetime.combine(when, time.max, storage.tz))
    if not isinstance(when, str) or not when.strip():
        raise InvalidInput("as_of must be a date, a time or a commit")
    back = BACK.fullmatch(when.strip())
    if back:
        digits = back.group(1) or "0"
        return _back(storage, when.strip(), int(digits) if len(digits) <= 18 else 10**18)  # (int() stops at 4,300)
    try:
        moment_ = parse_bound(when, storage.tz, end=True, option="as_of")
    except InvalidInput:
        if not COMMIT_NAME.match(when.strip()):
            raise InvalidInput(f"as_of {when!r} is neither a date or time (2026-06-01, 2026-06-01T09:30, "
                               "yesterday, 7d, 12h) nor a commit (7 to 64 hex digits, or HEAD~N)") from None
        commit = named_commit(storage.git, when.strip())
        return Moment(when.strip(), commit.moment, commit)
    return _at(storage, when.strip(), moment_)


def _back(storage: Storage, asked: str, steps: int) -> Moment:
    """HEAD~N: the commit N steps back on the line `commit_at` searches (newest first)."""
    line = _kept(storage).line(storage)
    if steps >= len(line):
        named = asked if len(asked) <= 40 else f"{asked[:24]}…"
        raise InvalidInput(f"as_of {named!r}: the vault has {len(line)} commit(s), so HEAD~{len(line) - 1} at most")
    commit = line[steps]
    return Moment(asked, commit.moment, commit)


def _at(storage: Storage, asked: str, when: datetime) -> Moment:
    line = _kept(storage).line(storage)
    commit = commit_at(line, when)
    if commit is None:
        since = f" (its first commit is of {line[-1].at})" if line else ""
        raise InvalidInput(f"as_of {asked!r}: the vault had no commit yet then{since}")
    return Moment(asked, when, commit)


class Pasts:
    """What a long-lived process keeps of the past between questions (on `Storage.pasts`): the
    branch's first-parent line while HEAD stays, and the last KEPT_OPEN moments, open."""

    def __init__(self) -> None:
        self.head: str | None = None
        self.commits: list[Commit] = []
        self.opened: dict[str, Storage] = {}  # by commit, the most recently used last

    def line(self, storage: Storage) -> list[Commit]:
        now = head(storage.git)
        if now is None or now != self.head:
            self.commits, self.head = first_parent_line(storage.git), now
        return self.commits

    def close(self) -> None:
        while self.opened:
            self.opened.popitem()[1].close()


def _kept(storage: Storage) -> Pasts:
    if not isinstance(storage.pasts, Pasts):
        storage.pasts = Pasts()
    return storage.pasts


@contextmanager
def past(storage: Storage, when: Moment | str | datetime | date) -> Iterator[Storage]:
    """The vault as of `when`, as a read-only Storage, for the length of the block."""
    found = moment(storage, when)
    sha = found.commit.sha
    cache = location.state_dir(storage.root) / STATE_ASOF
    kept = _kept(storage)
    _forget_if_purged(storage, cache)
    with _in_use(cache, sha):
        root = cache / sha
        opened = kept.opened.pop(sha, None)
        if opened is None and root.is_dir() and not _intact(storage, root, sha):
            storage.notify(f"as of commit {sha[:10]}: its copy in {STATE_ASOF}/ was changed since it was made; "
                           "made again from the commit")
            damaged = cache / f".trash-{sha}-{os.getpid()}-{secrets.token_hex(4)}"
            os.rename(root, damaged)
            _remove(damaged)
        if not root.is_dir():
            if opened is not None:
                opened.close()  # its folder went (evicted by another process): made again below
                opened = None
            _make(storage, cache, sha)
        if opened is None:
            opened = Storage(root, config=storage.config,
                             notify=lambda text: storage.notify(f"as of commit {sha[:10]}: {text}"))
            opened.embedding_cache = location.state_dir(storage.root) / STATE_EMBEDDING_CACHE
        kept.opened[sha] = opened
        while len(kept.opened) > KEPT_OPEN:
            kept.opened.pop(next(iter(kept.opened))).close()
        yield opened


def status_at(live: Storage, storage: Storage, found: Moment) -> dict:
    """`status` of the vault as of a moment: its facts, pages and dream progress then."""
    from memvault.dream.status import dream_status
    from memvault.health.status import contents

    today = found.when.astimezone(storage.tz).date()  # days pending dream count up to then
    return {"path": str(live.root), "as_of": found.to_dict(), **contents(storage, dream_status(storage, today=today))}


# -- the folder of past moments -------------------------------------------------------------------

@contextmanager
def _in_use(cache: Path, sha: str) -> Iterator[None]:
    """A shared lock on the moment's lock file (eviction takes it exclusively), and its time of use."""
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"{sha}.lock"
    while True:
        handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(handle, fcntl.LOCK_SH)
        try:
            same = os.fstat(handle).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(handle)  # an eviction removed that lock file meanwhile: take the new one
    try:
        os.utime(handle)
        yield
    finally:
        os.close(handle)


def _intact(storage: Storage, root: Path, sha: str) -> bool:
    """Whether the moment's files are all there, each of its size in the commit: the copy is trusted
    from then on, so a file emptied or removed by hand answered "nothing to show" (the first use in
    a process looks, one git call)."""
    for path, size in tree_sizes(storage.git, sha).items():
        try:
            if (root / path).stat().st_size != size:
                return False
        except OSError:
            return False
    return True


def _make(storage: Storage, cache: Path, sha: str) -> None:
    """Write the commit's files into `cache/sha` with a copy of the vault's index to start its own
    from (aside first, so it is whole or absent), then make room."""
    aside = cache / f".build-{sha}-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        write_tree(storage.git, sha, aside)
        _seed(storage, aside)
        try:
            os.rename(aside, cache / sha)
        except OSError as e:
            if e.errno not in (errno.ENOTEMPTY, errno.EEXIST) or not (cache / sha).is_dir():
                raise
            # another process wrote the same moment meanwhile: its copy serves
    finally:
        _remove(aside)
    _evict(cache, keep=sha)


def _seed(storage: Storage, root: Path) -> None:
    """Start the moment's index from a copy of the vault's: the facts forgotten since were dropped
    from that one, so their logs are read again."""
    from memvault.index.search import engine

    forgotten = set(storage.tombstone_log.tombstones()) - set(parse_tombstones(read_text(root / TOMBSTONES_FILE)))
    needles = [stored_id(fact_id).encode("utf-8", "surrogateescape") for fact_id in forgotten]
    logs = [path for path in (root / LOGS_DIR).glob("*/*.md") if needles and _holds(path.read_bytes(), needles)]
    with storage.index_turn:
        copy_index(engine(storage), root / STATE_DIR / STATE_INDEX, [p.relative_to(root).as_posix() for p in logs])


def _holds(content: bytes, needles: list[bytes]) -> bool:
    return any(needle in content for needle in needles)


def _evict(cache: Path, keep: str) -> None:
    """Least recently used moments go beyond MAX_SNAPSHOTS or MAX_BYTES (never `keep`, nor one in use)."""
    def used(folder: Path) -> float:
        try:
            return (cache / f"{folder.name}.lock").stat().st_mtime
        except FileNotFoundError:
            return 0.0

    folders = []
    for entry in cache.iterdir():
        if entry.name.startswith((".build-", ".trash-")) and not _builder_alive(entry.name):
            _remove(entry)  # left by a killed process
        elif entry.is_dir() and not entry.name.startswith("."):
            folders.append(entry)
    kept = total = 0
    for folder in sorted(folders, key=lambda f: (f.name != keep, -used(f))):
        size = _size(folder)
        if folder.name == keep or (kept < MAX_SNAPSHOTS and total + size <= MAX_BYTES):
            kept += 1
            total += size
        else:
            _evict_one(cache, folder)


def _evict_one(cache: Path, folder: Path) -> None:
    lock = cache / f"{folder.name}.lock"
    handle = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # a process is reading it: it goes next time
        trash = cache / f".trash-{folder.name}-{os.getpid()}-{secrets.token_hex(4)}"
        os.rename(folder, trash)
        lock.unlink(missing_ok=True)
    finally:
        os.close(handle)
    _remove(trash)


def _forget_if_purged(storage: Storage, cache: Path) -> None:
    """Delete every moment when the vault knows of a purge they were made without."""
    purged = sorted(fact_id for fact_id, tombstone in storage.tombstone_log.tombstones().items() if tombstone.purged)
    note = cache / PURGED_NOTE
    try:
        known = set(json.loads(note.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        known = None
    if known is not None and known >= set(purged):
        return
    if known is not None or (cache.is_dir() and any(cache.iterdir())):
        _kept(storage).close()
        _remove(cache)
    cache.mkdir(parents=True, exist_ok=True)
    note.write_text(json.dumps(purged), encoding="utf-8")


def _builder_alive(name: str) -> bool:
    """Is the process named in a `.build-<sha>-<pid>-<tag>` or `.trash-…` folder still running?"""
    pid = name.rsplit("-", 2)[-2]
    return pid.isdigit() and Owner(int(pid)).alive()


def _size(folder: Path) -> int:
    total = 0
    for parent, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(parent, name)).st_size
            except OSError:
                continue
    return total


def _remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
