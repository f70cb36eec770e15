"""The vault: a directory of markdown files under git, and the operations on it.

Every mutation runs under one vault-wide file lock, is journaled before the files change, and ends
as exactly one commit. A process killed midway leaves the journal behind; the next command that
opens the vault repairs the tree from it (see `transaction`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from filelock import FileLock, Timeout

from memvault import facts as factlog
from memvault.config import CONFIG_FILE, Config, load_config
from memvault.dates import parse_at
from memvault.errors import InvalidInput, InvalidItem, NotAVault, NotFound, SyncConflict, VaultBusy
from memvault.facts import Fact, FactDraft, ParseProblem
from memvault.tombstones import TOMBSTONES_FILE, Tombstone, read_tombstones, text_hash

STATE_DIR = ".memvault"
LOGS_DIR = "logs"
WIKI_DIR = "wiki"
JOURNAL_FILE = "journal.json"
_LOG_NAME = re.compile(r"^(\d{4})-(\d{2})-(\d{2})\.md$")
_WATERMARK = re.compile(r"\bwatermark=(\d{4}-\d{2}-\d{2})\b")


@dataclass(frozen=True)
class FactView:
    """A fact as `show` presents it: the fact, and its tombstone if it was forgotten."""

    fact: Fact
    forgotten: Tombstone | None

    def to_dict(self) -> dict[str, Any]:
        data = self.fact.to_dict()
        data["forgotten"] = self.forgotten.to_dict() if self.forgotten else None
        return data


@dataclass(frozen=True)
class Forgotten:
    """What `forget` did: the tombstone, whether it already existed, and the pages citing the fact.

    Those pages keep the statement until the next dream rewrites them; search hides it meanwhile.
    """

    tombstone: Tombstone
    already_forgotten: bool
    cited_by: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.tombstone.id, "already_forgotten": self.already_forgotten,
                "tombstone": self.tombstone.to_dict(), "cited_by": self.cited_by}


def default_vault_path() -> Path:
    from platformdirs import user_data_path

    return user_data_path("memvault", appauthor=False) / "vault"


def is_vault(path: Path) -> bool:
    return (path / CONFIG_FILE).is_file() and (path / ".git").exists()


def template_root() -> Path:
    """The files `init` copies: packaged in a wheel, or vault-template/ of a source checkout."""
    package = Path(__file__).parent
    for candidate in (package / "vault_template", package.parent / "vault-template"):
        if (candidate / CONFIG_FILE).is_file():
            return candidate
    raise FileNotFoundError("memvault's vault template is missing from this installation")


class Vault:
    def __init__(self, root: Path):
        root = Path(root).resolve()
        if not is_vault(root):
            if root.is_file():
                raise NotAVault(f"{root} is a file, not a vault directory")
            raise NotAVault(f"{root} is not a memvault vault (no {CONFIG_FILE} and .git); create one with `memvault init {root}`")
        self.root = root
        self.config: Config = load_config(root)
        self.created = False
        self.recovered: list[str] = []
        from memvault.sync import ensure_merge_driver

        ensure_merge_driver(root)  # a fresh clone lacks it: git config is not pushed

    # -- finding and creating ---------------------------------------------------------------

    @classmethod
    def init(cls, path: os.PathLike[str] | str) -> "Vault":
        """Create a vault from the template, with its own git repository and a first commit."""
        from memvault.gitstore import GitStore

        root = Path(path).expanduser().resolve()
        if is_vault(root):
            return cls(root)  # idempotent: `created` stays False
        if root.exists() and (not root.is_dir() or any(root.iterdir())):
            raise InvalidInput(f"{root} is not empty and is not a vault; choose an empty or new directory")
        root.mkdir(parents=True, exist_ok=True)
        shutil.copytree(template_root(), root, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
        store = GitStore.init(root)
        store.commit(["."], "init: new memvault vault")
        vault = cls(root)
        vault.created = True
        return vault

    @classmethod
    def open(cls, path: os.PathLike[str] | str | None = None, *, create_default: bool = True) -> "Vault":
        """Find the vault: explicit path > MEMVAULT_VAULT > enclosing vault of cwd > default vault."""
        explicit = path or os.environ.get("MEMVAULT_VAULT")
        if explicit:
            vault = cls(Path(explicit).expanduser())
        else:
            found = find_enclosing_vault(Path.cwd())
            if found:
                vault = cls(found)
            else:
                default = default_vault_path()
                if is_vault(default):
                    vault = cls(default)
                elif create_default:
                    vault = cls.init(default)
                else:
                    raise NotAVault(f"no vault here and no default vault at {default}; run `memvault init`")
        vault.recover()
        return vault

    # -- paths ----------------------------------------------------------------------------------

    @property
    def state_dir(self) -> Path:
        path = self.root / STATE_DIR
        path.mkdir(exist_ok=True)
        return path

    @cached_property
    def tz(self):
        return self.config.tz

    @cached_property
    def git(self):
        from memvault.gitstore import GitStore

        return GitStore(self.root)

    def log_path(self, day: date) -> Path:
        return self.root / LOGS_DIR / f"{day.year:04d}" / f"{day.isoformat()}.md"

    def relpath(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def log_files(self) -> list[Path]:
        """Daily logs, oldest day first."""
        found = []
        logs = self.root / LOGS_DIR
        if logs.is_dir():
            for year in logs.iterdir():
                if year.is_dir():
                    found.extend(p for p in year.iterdir() if _LOG_NAME.match(p.name))
        return sorted(found, key=lambda p: p.name)

    @staticmethod
    def day_of(path: Path) -> date:
        return date.fromisoformat(path.stem)

    # -- locking and transactions ------------------------------------------------------------

    def _lock_path(self, name: str) -> Path:
        locks = self.state_dir / "locks"
        locks.mkdir(exist_ok=True)
        return locks / name

    @contextmanager
    def write_lock(self, timeout: float | None = None) -> Iterator[None]:
        """The one vault-wide write lock (an OS lock: it dies with its process)."""
        wait = self.config.lock_timeout if timeout is None else timeout
        lock = FileLock(self._lock_path("write.lock"))
        try:
            lock.acquire(timeout=wait)
        except Timeout:
            raise VaultBusy(
                f"vault busy: another memvault process held the write lock of {self.root} for over {wait:g} s"
            ) from None
        # Who holds it, for `status` and `doctor` (the lock file itself says nothing).
        holder = self._lock_path("write.lock.holder")
        holder.write_text(json.dumps({"pid": os.getpid(), "command": " ".join(sys.argv)[:300],
                                      "since": datetime.now().astimezone().isoformat(timespec="seconds")}))
        try:
            yield
        finally:
            holder.unlink(missing_ok=True)
            lock.release()

    @contextmanager
    def transaction(self, kind: str, paths: Iterable[str], message: str) -> Iterator[None]:
        """Journal a write (call with the write lock held); the journal outlives a killed process.

        kind "append": leftovers are committed by the next command (the data was already durable).
        kind "replace": leftovers are discarded, restoring `paths` from HEAD (all-or-nothing writes).
        """
        if kind not in ("append", "replace"):
            raise ValueError(kind)
        paths = sorted(paths)
        self.refuse_during_merge()  # a merge in progress cannot take a commit of a few paths
        journal = self.state_dir / JOURNAL_FILE
        atomic_write(journal, json.dumps({"kind": kind, "paths": paths, "message": message}))
        try:
            yield
        except (Exception, KeyboardInterrupt):
            if kind == "replace":
                # All-or-nothing: undo the partial write now rather than at the next command.
                self._restore_from_head(paths)
                journal.unlink(missing_ok=True)
            raise  # an "append" keeps its journal: its data is durable and the next command commits it
        journal.unlink(missing_ok=True)

    def recover(self) -> list[str]:
        """Repair what an interrupted command left behind; returns what was done (for a notice)."""
        journal = self.root / STATE_DIR / JOURNAL_FILE
        if not journal.exists():
            return []
        try:
            with self.write_lock(timeout=0):
                self.recovered = self._recover_locked()
        except VaultBusy:
            pass  # a live writer holds the lock; its journal is not a leftover
        return self.recovered

    def _commit_hand_edits(self, paths: list[str], when: str) -> None:
        """Uncommitted hand edits (deletions too) of the files a write appends to get their own
        commit, rather than a silent ride in memvault's."""
        dirty = [line[3:] for line in self.git.status(*paths)]
        if dirty:
            self.git.commit(dirty, f"edit: {', '.join(dirty)} (uncommitted hand edits, committed {when})")

    def refuse_during_merge(self) -> None:
        """A commit of a few paths is impossible mid-merge; refuse before anything is written."""
        if self.git.merge_in_progress():
            raise SyncConflict(
                f"a git merge is in progress in {self.root} (an interrupted sync or a hand merge): resolve it "
                "and `git commit`, or `git merge --abort`, then try again; nothing was written"
            )

    def _recover_locked(self) -> list[str]:
        journal = self.state_dir / JOURNAL_FILE
        if journal.exists() and self.git.merge_in_progress():
            return [f"a leftover change waits in {journal.name} until the merge in progress is finished"]
        try:
            entry = json.loads(journal.read_text(encoding="utf-8"))
            kind, paths, message = entry["kind"], list(entry["paths"]), str(entry["message"])
        except FileNotFoundError:
            return []
        except (ValueError, KeyError, TypeError):
            journal.unlink(missing_ok=True)
            return []
        done: list[str] = []
        if kind == "append":
            sha = self.git.commit(paths, f"recover: {message} (interrupted, committed by the next command)")
            if sha:
                done.append(f"committed the leftover change of an interrupted command: {message}")
        else:
            if self.git.status(*paths):
                self._restore_from_head(paths)
                done.append(f"rolled back the unfinished change of an interrupted command: {message}")
        journal.unlink(missing_ok=True)
        return done

    def _restore_from_head(self, paths: list[str]) -> None:
        tracked = set(self.git.run("ls-tree", "-r", "--name-only", "HEAD", "--", *paths).splitlines())
        if tracked:
            self.git.run("checkout", "HEAD", "--", *sorted(tracked))
        self.git.run("clean", "-fdq", "--", *paths)

    # -- writing facts ------------------------------------------------------------------------

    def add(self, text: str, *, category: str = "fact", tags: Iterable[str] = (), source: str | None = None,
            session: str | None = None, importance: float | None = None,
            at: datetime | str | None = None) -> Fact:
        """Remember one fact: appended to its day's log and committed."""
        draft = FactDraft(text=text, category=category, tags=tuple(tags), source=source, session=session,
                          importance=importance, at=at)
        try:
            return self.add_many([draft])[0]
        except InvalidItem as e:
            raise InvalidInput(e.reason) from None

    def add_many(self, drafts: Iterable[FactDraft | Mapping[str, Any]]) -> list[Fact]:
        """Remember a batch as ONE commit. Everything is validated first; one bad item writes nothing."""
        now = datetime.now(self.tz)
        new: list[Fact] = []
        for number, draft in enumerate(drafts, start=1):
            try:
                new.append(self._materialize(draft, now))
            except InvalidInput as e:
                raise InvalidItem(number, str(e)) from None
        if not new:
            raise InvalidInput("nothing to add: no facts given")
        by_path: dict[str, list[Fact]] = defaultdict(list)
        for fact in new:
            by_path[fact.path].append(fact)
        message = _add_message(new)
        with self.write_lock():
            self._recover_locked()
            self.refuse_during_merge()
            self._commit_hand_edits(sorted(by_path), f"before {message}")
            with self.transaction("append", by_path, message):
                for rel, items in by_path.items():
                    path = self.root / rel
                    path.parent.mkdir(parents=True, exist_ok=True)
                    header = "" if path.exists() else factlog.log_header(items[0].day)
                    factlog.fsync_append(path, header + "".join(factlog.format_item(f) for f in items))
                self.git.commit(sorted(by_path), message)
        return new

    def _materialize(self, draft: FactDraft | Mapping[str, Any], now: datetime) -> Fact:
        if isinstance(draft, Mapping):
            unknown = set(draft) - {"text", "category", "tags", "source", "session", "importance", "at"}
            if unknown:
                raise InvalidInput(f"unknown field(s): {', '.join(sorted(unknown))}")
            draft = FactDraft(
                text=draft.get("text"),  # type: ignore[arg-type]
                category=draft.get("category") or "fact",
                tags=draft.get("tags") or (),
                source=draft.get("source"),
                session=draft.get("session"),
                importance=draft.get("importance"),
                at=draft.get("at"),
            )
        text = factlog.validate_text(draft.text)
        category = factlog.validate_category(draft.category, self.config.categories)
        tags = factlog.validate_tags(list(draft.tags) if isinstance(draft.tags, tuple) else draft.tags)
        source = factlog.validate_label(draft.source, "source")
        session = factlog.validate_label(draft.session, "session")
        importance = factlog.validate_importance(draft.importance)
        if draft.at is None:
            at = now
        elif isinstance(draft.at, datetime):
            at = draft.at.replace(tzinfo=self.tz) if draft.at.tzinfo is None else draft.at.astimezone(self.tz)
        elif isinstance(draft.at, str):
            at = parse_at(draft.at, self.tz, now)
        else:
            raise InvalidInput(f"at must be an ISO 8601 date or datetime, got {draft.at!r}")
        at = at.replace(microsecond=0)
        return Fact(
            id=factlog.new_fact_id(), text=text, at=at, category=category, tags=tags, source=source,
            session=session, importance=importance, path=self.relpath(self.log_path(at.date())),
        )

    def forget(self, fact_id: str, reason: str | None = None) -> "Forgotten":
        """Tombstone a fact (committed); forgetting a forgotten fact changes nothing."""
        from memvault.citations import pages_citing

        if reason is not None:
            reason = reason.strip() or None
            if reason and ("\n" in reason or len(reason) > 500):
                raise InvalidInput("reason must be one line of at most 500 characters")
        fact = self._find(fact_id)
        with self.write_lock():
            self._recover_locked()
            tombstone = self.tombstones().get(fact.id)
            already = tombstone is not None
            if tombstone is None:
                self.refuse_during_merge()
                self._commit_hand_edits([TOMBSTONES_FILE], f"before forget: {fact.id}")
                tombstone = Tombstone(
                    id=fact.id, at=datetime.now(self.tz).replace(microsecond=0).isoformat(), reason=reason,
                    hash=text_hash(fact.text),
                )
                message = f"forget: {fact.id}" + (f" ({reason})" if reason else "")
                with self.transaction("append", [TOMBSTONES_FILE], message):
                    factlog.fsync_append(self.root / TOMBSTONES_FILE, tombstone.to_line())
                    self.git.commit([TOMBSTONES_FILE], message)
        return Forgotten(tombstone, already, sorted(pages_citing(self, [fact.id])))

    # -- reading facts ------------------------------------------------------------------------

    def tombstones(self) -> dict[str, Tombstone]:
        return read_tombstones(self.root / TOMBSTONES_FILE)

    def read_log(self, path: Path) -> tuple[list[Fact], list[ParseProblem]]:
        with open(path, encoding="utf-8", newline="") as f:
            return factlog.parse_log(f.read(), self.relpath(path))

    def iter_facts(self, include_forgotten: bool = False) -> Iterator[Fact]:
        """All facts, oldest day first (file order within a day)."""
        forgotten = set() if include_forgotten else set(self.tombstones())
        for path in self.log_files():
            for fact in self.read_log(path)[0]:
                if fact.id not in forgotten:
                    yield fact

    def problems(self) -> list[ParseProblem]:
        """Lines in the daily logs that look like facts but do not parse (for doctor)."""
        found: list[ParseProblem] = []
        for path in self.log_files():
            found.extend(self.read_log(path)[1])
        return found

    def _find(self, fact_id: str) -> Fact:
        typed = fact_id.strip()
        if not typed:
            raise InvalidInput("fact id is empty")
        normalized = factlog.normalize_id(typed)
        for candidate in dict.fromkeys((typed, normalized)):  # exact first: hand-written ids may be any shape
            found = self._find_exact(candidate)
            if found is not None:
                return found
        raise NotFound(f"no fact with id {typed!r}")

    def _find_exact(self, fact_id: str) -> Fact | None:
        needle = json.dumps({"id": fact_id})[1:-1]  # '"id": "<id>"' without spaces below
        needle = needle.replace(": ", ":")
        for path in reversed(self.log_files()):
            with open(path, encoding="utf-8", newline="") as f:
                content = f.read()
            if needle in content:
                for fact in factlog.parse_log(content, self.relpath(path))[0]:
                    if fact.id == fact_id:
                        return fact
        return None

    def show(self, fact_id: str) -> FactView:
        fact = self._find(fact_id)
        return FactView(fact, self.tombstones().get(fact.id))

    def recent(self, limit: int | None = 20, *, since: datetime | None = None, until: datetime | None = None,
               category: str | None = None, tag: str | None = None, source: str | None = None,
               session: str | None = None, oldest_first: bool | None = None) -> list[Fact]:
        """The newest `limit` facts, forgotten ones left out.

        Newest first, except that one source's or session's facts read as a thread, oldest first
        (`oldest_first` overrides either way).
        """
        if oldest_first is None:
            oldest_first = source is not None or session is not None
        if limit is not None and limit < 1:
            raise InvalidInput("limit must be at least 1")
        if since is not None and until is not None and since > until:
            raise InvalidInput("--since is after --until")
        if category is not None:
            factlog.validate_category(category, self.config.categories)
        forgotten = set(self.tombstones())
        found: list[Fact] = []
        for path in reversed(self.log_files()):
            day = self.day_of(path)
            if until is not None and day > until.date():
                continue
            if since is not None and day < since.date():
                break
            if limit is not None and len(found) >= limit:
                break
            day_facts = [
                f for f in self.read_log(path)[0]
                if f.id not in forgotten
                and (since is None or f.at >= since)
                and (until is None or f.at <= until)
                and (category is None or f.category == category)
                and (tag is None or tag in f.tags)
                and (source is None or f.source == source)
                and (session is None or f.session == session)
            ]
            found.extend(sorted(day_facts, key=lambda f: (f.at, f.id), reverse=True))
        found = found[:limit] if limit is not None else found
        # A thread reads in order: the same newest window, told oldest first.
        return found[::-1] if oldest_first else found

    def sessions(self, *, since: datetime | None = None, until: datetime | None = None,
                 source: str | None = None) -> list:
        """Sources/sessions with fact counts and first/last times, most recently active first."""
        from memvault.sessions import list_sessions

        return list_sessions(self, since=since, until=until, source=source)

    def history(self, fact_id: str) -> list[dict[str, str]]:
        """The commits that touched a fact, oldest first: added, consolidated, forgotten."""
        fact = self._find(fact_id)
        return [c.to_dict() for c in self.git.log("--reverse", f"-S{fact.id}", "--", ".")]

    # -- dream state --------------------------------------------------------------------------

    @property
    def watermark(self) -> date | None:
        """The last day consolidated by dream: the latest `watermark=YYYY-MM-DD` token in log.md."""
        try:
            content = (self.root / "log.md").read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        tokens = _WATERMARK.findall(content)
        return date.fromisoformat(tokens[-1]) if tokens else None

    def dream(self, **options: Any):
        """Consolidate pending days into wiki pages; returns a DreamReport (see memvault.dream)."""
        from memvault.dream.consolidate import run_dream

        return run_dream(self, **options)

    def dream_undo(self) -> dict:
        """Revert the last dream commit with git revert, unless later commits touched its files."""
        from memvault.dream.undo import undo_last_dream

        return undo_last_dream(self)

    def dream_status(self) -> dict:
        """Watermark, pending days and facts, failed attempts, last result (from log.md and logs)."""
        from memvault.dream.status import dream_status

        return dream_status(self)

    # -- search (memvault.index; imported lazily: it pulls in Tantivy and numpy) ----------------

    def search(self, query: str, *, limit: int = 10, category: str | None = None, tag: str | None = None,
               source: str | None = None, since=None, until=None, include_all: bool = False,
               lexical_only: bool = False, explain: bool = False, progress=None) -> list:
        """Hybrid search: wiki pages plus facts after the watermark (`include_all` adds the rest)."""
        from memvault.index.search import search

        return search(self, query, limit=limit, category=category, tag=tag, source=source, since=since,
                      until=until, include_all=include_all, lexical_only=lexical_only, explain=explain,
                      progress=progress)

    def reindex(self, clear: bool = False, progress=None) -> dict:
        """Bring the search index up to date with the files (`clear`: rebuild it aside and swap)."""
        from memvault.index.search import reindex

        return reindex(self, clear=clear, progress=progress)

    def context(self, query: str | None = None, *, budget: int = 2000, recent: int = 20,
                relevant: int = 20):
        """A prompt-ready Bundle of at most `budget` tokens: MEMORY.md, relevant, then recent."""
        from memvault.context import build_context

        return build_context(self, query, budget=budget, recent=recent, relevant=relevant)

    def download_model(self) -> str:
        """Fetch the embedding model into the user cache (raises if the hub is unreachable)."""
        from memvault.errors import RemoteError
        from memvault.index.embedder import ModelUnavailable, download_model
        from memvault.index.search import model_spec

        try:
            return download_model(model_spec(self))
        except ModelUnavailable as e:
            raise RemoteError(str(e)) from None

    def index_status(self) -> dict:
        """Documents indexed, documents without a vector yet, files that differ from the index."""
        from memvault.index.search import index_status

        return index_status(self)

    # -- sync and health (memvault.sync, memvault.health) ----------------------------------------

    @classmethod
    def clone(cls, url: str, path: os.PathLike[str] | str | None = None) -> "Vault":
        """Set up a vault from a remote that holds one (default path: the default vault)."""
        from memvault.sync import clone

        return clone(url, path)

    def set_remote(self, url: str) -> dict:
        from memvault.sync import set_remote

        return set_remote(self, url)

    def remote(self) -> dict | None:
        """The remote, and ahead/behind as of the last sync; None if none is set."""
        from memvault.sync import remote_info

        return remote_info(self)

    def sync(self):
        """Fetch, merge, push; returns a SyncReport. Raises SyncConflict or RemoteError."""
        from memvault.sync import sync

        return sync(self)

    def status(self) -> dict:
        from memvault.health import status

        return status(self)

    def doctor(self, fix: bool = False):
        """Health checks (and safe repairs with `fix`); returns a memvault.health.DoctorReport."""
        from memvault.health import doctor

        return doctor(self, fix=fix)


def find_enclosing_vault(start: Path) -> Path | None:
    for candidate in (start, *start.parents):
        if is_vault(candidate):
            return candidate
    return None


def _add_message(new: list[Fact]) -> str:
    if len(new) == 1:
        fact = new[0]
        words = " ".join(fact.text.split())
        return f"add: {fact.id} {words[:60] + ('…' if len(words) > 60 else '')}"
    return f"add: {len(new)} facts ({new[0].id}..{new[-1].id})"


def atomic_write(path: Path, content: str) -> None:
    """Replace a file so readers see the old or the new content, never a torn one."""
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(content)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
