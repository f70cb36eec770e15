"""`Vault`, the public API: find or create a vault, then remember, recall, consolidate, sync.

A facade over the layers below (see docs/architecture.md): it opens the storage and hands it to
the feature that does the work. Features are imported when first used, so `import memvault` stays
light (search pulls in Tantivy and numpy, dream litellm).
"""

from __future__ import annotations

import errno
import os
import re
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memvault.base.arguments import checked
from memvault.base.dates import Bound
from memvault.errors import (
    BrokenRepository,
    FactForgotten,
    InvalidInput,
    InvalidItem,
    MemvaultError,
    NotAVault,
    unwritable,
)
from memvault.formats import dreamlog
from memvault.formats.facts import Fact, FactDraft, ParseProblem, check_one_line, make_fact, stored_id
from memvault.formats.layout import CONFIG_FILE
from memvault.formats.tombstones import Tombstone
from memvault.index.query import SearchQuery
from memvault.recall.timeline import RecentQuery
from memvault.storage.paths import template_root
from memvault.storage.store import Storage

if TYPE_CHECKING:
    from memvault.importers.run import ImportReport

Notify = Callable[[str], None]
Progress = Callable[..., None]  # what each long task tells of its stages (see the task's docs)


@dataclass(frozen=True)
class FactView:
    """A fact as `show` presents it: the fact, its tombstone if it was forgotten, the fact that
    replaces it if one does, and its chain of supersedes links (oldest first, itself included)."""

    fact: Fact
    forgotten: Tombstone | None
    superseded_by: str | None = None
    chain: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = self.fact.to_dict()
        data["forgotten"] = self.forgotten.to_dict() if self.forgotten else None
        data["superseded_by"] = self.superseded_by
        data["chain"] = list(self.chain or (self.fact.id,))
        return data

    def live(self) -> Fact:
        """The fact, unless it was forgotten: then FactForgotten (a NotFound) says when and why."""
        if self.forgotten:
            raise FactForgotten(self.forgotten.id, self.forgotten.at, self.forgotten.reason)
        return self.fact


@dataclass(frozen=True)
class Forgotten:
    """What `forget` did: the tombstone, whether it already existed, and the pages citing the fact.

    Those pages keep the statement until the next dream rewrites them; search, context and the
    dream prompts withhold them meanwhile (memvault.storage.wiki).
    """

    tombstone: Tombstone
    already_forgotten: bool
    cited_by: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.tombstone.id, "already_forgotten": self.already_forgotten,
                "tombstone": self.tombstone.to_dict(), "cited_by": self.cited_by}


class VaultAt:
    """The vault as it stood at one commit, read-only (`Vault.as_of`); `moment` says which commit
    answered, for what was asked."""

    def __init__(self, vault: Vault, moment):
        self.vault = vault
        self.moment = moment

    def search(self, query, **options) -> list:
        return self.vault.search(query, as_of=self.moment, **options)

    def context(self, query: str | None = None, **options):
        return self.vault.context(query, as_of=self.moment, **options)

    def recent(self, limit: int | None = 20, **options) -> list[Fact]:
        return self.vault.recent(limit, as_of=self.moment, **options)

    def show(self, fact_id: str) -> FactView:
        return self.vault.show(fact_id, as_of=self.moment)

    def status(self) -> dict:
        return self.vault.status(as_of=self.moment)


def default_vault_path() -> Path:
    from platformdirs import user_data_path

    return user_data_path("memvault", appauthor=False) / "vault"


def is_vault(path: Path) -> bool:
    return (path / CONFIG_FILE).is_file() and (path / ".git").exists()


def find_enclosing_vault(start: Path) -> Path | None:
    # memvault.toml alone is enough: a vault that lost its .git is reported, not passed over.
    for candidate in (start, *start.parents):
        if (candidate / CONFIG_FILE).is_file():
            return candidate
    return None


def locate(path: os.PathLike[str] | str | None = None) -> Path:
    """Where the vault is: explicit path > MEMVAULT_VAULT > enclosing vault of cwd > default vault."""
    explicit = path or os.environ.get("MEMVAULT_VAULT")
    if explicit:
        return Path(explicit).expanduser().resolve()
    return find_enclosing_vault(Path.cwd()) or default_vault_path()


@contextmanager
def explained_if_broken(root: Path) -> Iterator[None]:
    """A git failure that comes from a broken repository is told as such (BrokenRepository)."""
    try:
        yield
    except MemvaultError:
        raise
    except Exception as e:
        from memvault.storage.repository import repository_problem

        problem = repository_problem(root)
        if problem is None:
            raise
        raise BrokenRepository(root, problem) from e


def _unmake(root: Path, made: bool) -> None:
    """Remove what a failed `init` put in `root` (it was empty, or did not exist when `made`)."""
    if made:
        shutil.rmtree(root, ignore_errors=True)
        return
    for child in root.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


@contextmanager
def _creating(root: Path) -> Iterator[None]:
    """The vault's directory is looked at and made here: an OSError is one line naming the path.

    Cannot write (read-only, permission, disk full) is VaultUnwritable, as for any write; any
    other failure is a path no vault can be made at (a file where a directory should be, a
    name too long, /proc), which is bad input.
    """
    try:
        yield
    except OSError as e:
        # (a file in the path is named below: it is the path given, not a place that refused a write)
        clear = None if e.errno == errno.ENOTDIR else unwritable(e, e.filename or root, "no vault was created")
        if clear is not None:
            raise clear from None
        blocker = next((p for p in root.parents if p.exists() and not p.is_dir()), None)
        if blocker is not None:
            raise InvalidInput(f"cannot create a vault at {root}: {blocker} is not a directory") from None
        raise InvalidInput(f"cannot create a vault at {root}: {e.strerror or e}") from None


def _git_dir_problem(root: Path) -> str | None:
    """A cheap look at .git on every open (commands that read only never run git to notice): why
    it cannot be a repository, or None. A damaged inside is left to git and `doctor`."""
    git_dir = root / ".git"
    if git_dir.is_file():
        # A linked worktree's .git is a file naming the real git directory: `gitdir: PATH`.
        found = re.fullmatch(r"gitdir: (.+?)\s*", git_dir.read_text(encoding="utf-8", errors="replace"))
        if found is None or not (root / found.group(1)).is_dir():
            return "its git repository (.git) is broken (.git is a file that names no git directory)"
        return None
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8", errors="replace").strip()
    except FileNotFoundError:
        return None if not git_dir.exists() else "its git repository (.git) is broken (.git/HEAD is missing)"
    except (IsADirectoryError, NotADirectoryError):
        head = ""
    if head.startswith("ref: refs/") or re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", head):
        return None
    return "its git repository (.git) is broken (.git/HEAD names no branch or commit)"


# A key an import made (`memory-dir:3f47…`: a format and 16 hex digits) holds no credential: not scanned.
_MADE_KEY = re.compile(r"[a-z0-9-]+:[0-9a-f]{16}")


def _refuse_credentials_in_labels(facts: list[Fact]) -> None:
    """A fact's source, session and tags are shown, committed and sent to dream's LLM even for a
    secret fact (only its text is withheld): a credential there is refused, --allow-secret or not."""
    from memvault.base.credentials import find_credentials

    first: dict[str, tuple[int, str]] = {}  # each label once (an import's 100k facts share a few sources)
    for number, fact in enumerate(facts, start=1):
        for name, value in (("source", fact.source), ("session", fact.session), ("key", fact.key),
                            *(("tag", tag) for tag in fact.tags)):
            if value and value not in first and not (name == "key" and _MADE_KEY.fullmatch(value)):
                first[value] = (number, name)
    labels = [(number, name, value) for value, (number, name) in first.items()]
    found = find_credentials([value for _n, _name, value in labels], labels=True)
    if found:
        at = min(found)
        number, name, _value = labels[at]
        kinds = ", ".join(f.kind for f in found[at])
        raise InvalidItem(number, f"the {name} holds a credential ({kinds}); nothing was stored: labels are "
                                  "committed and shown as they are, so leave it out")


def _ids(fact_ids: Iterable[str]) -> list[str]:
    if isinstance(fact_ids, str):
        return [fact_ids]
    ids = list(fact_ids)
    if not all(isinstance(i, str) for i in ids):
        raise InvalidInput("fact ids must be strings")
    return ids


class Vault:
    """One vault. `notify` receives notices meant for a person (an index rebuilt, a repair done);
    without it they go to the `memvault` logger at INFO level. The library never prints."""

    @checked
    def __init__(self, root: os.PathLike[str] | str, *, notify: Notify | None = None):
        root = Path(root).resolve()
        if not is_vault(root):
            if root.is_file():
                raise NotAVault(f"{root} is a file, not a vault directory")
            if (root / CONFIG_FILE).is_file():
                raise BrokenRepository(root, "its git repository (.git) is missing")
            if not root.exists():
                raise NotAVault(f"{root} does not exist; create a vault there with `memvault init {root}`")
            try:
                empty = not any(root.iterdir())
            except OSError:  # not readable: no advice to init there either
                empty = False
            # init makes a vault in a new or empty directory only: name it where it would work
            advice = (f"create one with `memvault init {root}`" if empty else
                      "point --vault (or MEMVAULT_VAULT) at your vault, or make a new one with "
                      "`memvault init PATH` in a new or empty directory")
            raise NotAVault(f"{root} is not a memvault vault (it has no {CONFIG_FILE}); {advice}")
        problem = _git_dir_problem(root)
        if problem:
            raise BrokenRepository(root, problem)
        self.storage = Storage(root, notify=notify)
        self.root = root
        self.config = self.storage.config
        self.created = False
        self.recovered: list[str] = []
        from memvault.remote.sync import ensure_merge_driver

        with explained_if_broken(root):
            ensure_merge_driver(self.storage)  # a fresh clone lacks it: git config is not pushed

    @staticmethod
    def held_by(holder: dict) -> str:
        """A lock holder (`status()["lock"]`) in words: "held by pid N (command) since TIME"."""
        from memvault.storage.lock import held_by

        return held_by(holder)

    @staticmethod
    def search_on_one_thread() -> None:
        """For a long-lived process that answers searches beside other work (the MCP server): from
        now on numpy's products run on the calling thread alone (see index/vectors.py)."""
        from memvault.index.vectors import products_on_one_thread

        products_on_one_thread()

    def close(self) -> None:
        """Release the search index this object keeps open between searches."""
        self.storage.close()

    def __enter__(self) -> Vault:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- finding and creating ---------------------------------------------------------------

    @classmethod
    @checked
    def init(cls, path: os.PathLike[str] | str, *, notify: Notify | None = None) -> Vault:
        """Create a vault from the template, with its own git repository and a first commit."""
        from memvault.storage.gitstore import GitStore, require_git

        root = Path(path).expanduser().resolve()
        require_git()  # before the template is copied: a vault without its repository is half made
        with _creating(root):
            existing = (root / CONFIG_FILE).is_file()
            if not existing and root.exists() and not root.is_dir():
                raise InvalidInput(f"{root} is not a directory; choose an empty or new directory")
            if not existing and root.exists() and any(root.iterdir()):
                raise InvalidInput(f"{root} is not empty and is not a vault; choose an empty or new directory")
        if existing:
            try:
                return cls(root, notify=notify)  # idempotent: `created` stays False
            except BrokenRepository as e:
                raise InvalidInput(f"{root} is a vault, but {e.problem}; `memvault init --adopt {root}` "
                                   "re-creates the repository from the vault's files") from None
        made = not root.exists()
        with _creating(root):
            root.mkdir(parents=True, exist_ok=True)
        try:
            shutil.copytree(template_root(), root, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
            store = GitStore.init(root)
            store.commit(["."], "init: new memvault vault")
        except BaseException:
            # A vault without its first commit (a git config that fails every commit, a full disk,
            # Ctrl-C) would pass for a vault: `init` again said "already a vault" and its template
            # files stayed staged beside every later commit. The directory is left as it was found,
            # unless a first commit is there after all (an init of the same folder at the same time).
            if GitStore(root).head() is None:
                _unmake(root, made)
            raise
        vault = cls(root, notify=notify)
        vault.created = True
        return vault

    @classmethod
    @checked
    def open(cls, path: os.PathLike[str] | str | None = None, *, create_default: bool = True,
             notify: Notify | None = None) -> Vault:
        """Find the vault: explicit path > MEMVAULT_VAULT > enclosing vault of cwd > default vault."""
        root = locate(path)
        if not (path or os.environ.get("MEMVAULT_VAULT")) and not (root / CONFIG_FILE).exists():
            # No vault given or enclosing: the default vault, not created yet.
            if not create_default:
                raise NotAVault(f"no vault here and no default vault at {root}; run `memvault init`")
            vault = cls.init(root, notify=notify)
            vault.storage.notify(f"created a new vault at {vault.root}")
        else:
            vault = cls(root, notify=notify)
        with explained_if_broken(vault.root):
            vault.recover()
        return vault

    @classmethod
    @checked
    def adopt(cls, path: os.PathLike[str] | str, *, notify: Notify | None = None) -> Vault:
        """Re-create the git repository of a vault whose .git is missing or broken, from its files, in
        one commit (`created` is then True). A vault with a healthy repository is left as it is."""
        from memvault.storage.repository import recreate_repository, repository_problem

        root = Path(path).expanduser().resolve()
        if not (root / CONFIG_FILE).is_file():
            raise NotAVault(f"{root} has no {CONFIG_FILE}, so there is no vault to adopt; "
                            "`memvault init` creates a new one in an empty directory")
        if repository_problem(root) is None:
            return cls(root, notify=notify)
        done = recreate_repository(root, template_root())
        vault = cls(root, notify=notify)
        for line in done:
            vault.storage.notify(line)
        vault.created = True
        return vault

    @classmethod
    @checked
    def diagnose(cls, path: os.PathLike[str] | str | None = None, *, fix: bool = False, llm: bool = False,
                 notify: Notify | None = None, full: bool | None = None, progress: Progress | None = None):
        """`doctor` for a vault that may not open: its git repository is checked first (re-created
        from the files with `fix`, as `adopt` does), then every other check runs on the opened vault."""
        from memvault.health.checks import repository_check
        from memvault.health.doctor import FAIL, FIXED, Check, DoctorReport
        from memvault.storage.repository import recreate_repository

        root = locate(path)
        first = repository_check(root) if (root / CONFIG_FILE).is_file() else None
        done: list[str] = []
        if first is not None and first.status == FAIL:
            if not fix:
                return DoctorReport(str(root), [first], [])
            done = recreate_repository(root, template_root())
            first = Check(first.name, FIXED, "; ".join(done))
        report = cls.open(root, notify=notify).doctor(fix=fix, llm=llm, full=full, progress=progress)
        if first is not None:
            report.checks.insert(0, first)
            report.fixed[:0] = done
        return report

    @classmethod
    @checked
    def clone(cls, url: str, path: os.PathLike[str] | str | None = None, *,
              notify: Notify | None = None) -> Vault:
        """Set up a vault from a remote that holds one (default path: the default vault)."""
        from memvault.remote.sync import clone

        root = clone(url, Path(path).expanduser().resolve() if path else default_vault_path())
        vault = cls(root, notify=notify)  # installs the merge driver
        vault.created = True
        return vault

    def recover(self) -> list[str]:
        """Repair what an interrupted command left behind; returns (and tells) what was done."""
        done = self.storage.recover()
        for line in done:
            self.storage.notify(line)
        self.recovered.extend(done)
        return done

    # -- what the storage knows ------------------------------------------------------------

    @property
    def tz(self):
        return self.storage.tz

    @property
    def git(self):
        return self.storage.git

    @property
    def watermark(self):
        """The last day consolidated by dream (from log.md), or None."""
        return self.storage.watermark

    def tombstones(self) -> dict[str, Tombstone]:
        return self.storage.tombstones()

    @checked
    def iter_facts(self, include_forgotten: bool = False) -> Iterator[Fact]:
        """All facts, oldest day first (file order within a day)."""
        return self.storage.iter_facts(include_forgotten)

    def problems(self) -> list[ParseProblem]:
        """Lines in the daily logs that look like facts but do not parse (for doctor)."""
        return self.storage.problems()

    # -- writing facts ------------------------------------------------------------------------

    @checked
    def add(self, text: str, *, category: str = "fact", tags: Iterable[str] = (), source: str | None = None,
            session: str | None = None, importance: float | None = None,
            at: datetime | date | str | None = None, allow_secret: bool = False, supersedes: str | None = None,
            key: str | None = None) -> Fact:
        """Remember one fact: appended to its day's log and committed. `supersedes`: the id of an
        older live fact this one replaces (both stay; search lists this one first). A `key` already
        stored writes nothing and returns the fact stored under it (an agent retrying an add)."""
        draft = FactDraft(text=text, category=category, tags=tuple(tags), source=source, session=session,
                          importance=importance, at=at, supersedes=supersedes, key=key)
        try:
            return self.add_many([draft], allow_secret=allow_secret)[0]
        except InvalidItem as e:
            raise InvalidInput(e.reason) from None

    @checked
    def add_many(self, drafts: Iterable[FactDraft | Mapping[str, Any] | str], *,
                 allow_secret: bool = False) -> list[Fact]:
        """Remember a batch as ONE commit. Everything is validated first; one bad item writes nothing.

        A text holding a credential (memvault.base.credentials) is refused, unless `allow_secret`: then
        it is stored marked secret, and no LLM is ever sent it. A `supersedes` naming no live fact,
        one already superseded, or a fact two items supersede, is refused (memvault.recall.succession).
        An item whose `key` is already stored (or given earlier in the batch) is not written: the
        stored fact takes its place in the list returned, and a notice says so.
        """
        facts = self._checked(drafts, allow_secret=allow_secret)
        written, stored = self._write(facts)
        if len(written) == len(facts):
            return facts
        found = self._stored_facts(stored)
        for fact in facts:  # a key given twice in the batch names its first fact
            if fact.id in written and fact.key is not None:
                found.setdefault(fact.key, fact)
        repeated = [fact for fact in facts if fact.id not in written]
        self._tell_stored(repeated, found, len(facts))
        return [fact if fact.id in written else found.get(fact.key, fact) for fact in facts]  # type: ignore[arg-type]

    def fact_by_key(self, key: str) -> Fact | None:
        """The fact stored under `key` (its first copy), forgotten or not; None when no fact has it."""
        if not isinstance(key, str) or not key:
            raise InvalidInput("key must be a non-empty string")
        stored = self.storage.stored_keys([key])
        return self._stored_facts(stored).get(key)

    def _write(self, facts: list[Fact], origin: str | None = None, *, looked_up: bool = False) -> tuple[set[str], dict]:
        """Append checked facts as one commit, less those whose key is stored: (ids written, {key: where
        the stored fact is}). A retry of an add that was committed returns here without the lock
        (unless the caller `looked_up` the keys itself; they are looked up again under the lock)."""
        stored = {} if looked_up else self.storage.stored_keys(fact.key for fact in facts if fact.key is not None)
        fresh, taken = [], set(stored)
        for fact in facts:
            if fact.key is None or fact.key not in taken:
                fresh.append(fact)
                taken.add(fact.key)
        if fresh:
            stored.update(self.storage.append_facts(fresh, origin))
        written = {fact.id for fact in fresh if fact.key is None or fact.key not in stored}
        return written, stored

    def _stored_facts(self, stored: Mapping[str, Any]) -> dict[str, Fact]:
        """{key: its fact} for keys the storage found (storage.keys.Keyed), each log read once."""
        by_path: dict[str, dict[str, str]] = {}
        for key, where in stored.items():
            by_path.setdefault(where.path, {})[where.id] = key
        found: dict[str, Fact] = {}
        for rel, ids in by_path.items():
            for fact in self.storage.read_log(self.storage.path(rel))[0]:
                if fact.id in ids:
                    found.setdefault(ids[fact.id], fact)
        return found

    def _tell_stored(self, repeated: list[Fact], found: Mapping[str, Fact], total: int) -> None:
        first = repeated[0]
        stored = found.get(first.key)  # type: ignore[arg-type]
        other = ", with another text" if stored is not None and stored.text != first.text else ""
        named = f"key {first.key!r} (fact {stored.id if stored else '?'}{other})"
        if total == 1:
            self.storage.notify(f"{named} is already stored; nothing was added")
        else:
            self.storage.notify(f"{len(repeated)} of {total} facts have a key already stored or given earlier in "
                                f"the batch (the first: {named}); nothing was added for them")

    def _checked(self, drafts: Iterable[FactDraft | Mapping[str, Any] | str], *, allow_secret: bool) -> list[Fact]:
        """The drafts as facts ready to append, each checked; InvalidItem (from 1) for the first bad one."""
        from dataclasses import replace

        from memvault.base.credentials import find_credentials

        now = datetime.now(self.tz)
        new: list[Fact] = []
        for number, draft in enumerate(drafts, start=1):
            try:
                new.append(make_fact(draft, tz=self.tz, categories=self.config.categories, now=now))
            except InvalidInput as e:
                raise InvalidItem(number, str(e)) from None
        if not new:
            raise InvalidInput("nothing to add: no facts given")
        new = self._succession_checked(new)
        found = find_credentials([fact.text for fact in new])
        if found and not allow_secret:
            number, findings = next(iter(found.items()))
            raise InvalidItem(number + 1, f"the text holds a credential ({', '.join(map(str, findings))}); nothing "
                                          "was stored: remove it, or pass --allow-secret (allow_secret=True) to "
                                          "store it anyway, never to be sent to an LLM")
        _refuse_credentials_in_labels(new)
        return [replace(fact, secret=True) if i in found else fact for i, fact in enumerate(new)]

    def _succession_checked(self, facts: list[Fact]) -> list[Fact]:
        """`supersedes` checked (memvault.recall.succession), but for a fact that will not be written
        because its key is stored or given earlier in the batch: a retried add supersedes nothing anew."""
        from memvault.recall.succession import checked

        if not any(fact.supersedes for fact in facts):
            return facts
        taken = set(self.storage.stored_keys(fact.key for fact in facts if fact.key is not None and fact.supersedes))
        repeats = set()
        for i, fact in enumerate(facts):
            if fact.key is not None:
                if fact.key in taken:
                    repeats.add(i)
                taken.add(fact.key)
        return checked(self.storage, facts, skip=repeats)

    @checked
    def import_source(self, source: os.PathLike[str] | str, *, format: str | None = None, dry_run: bool = False,
                      allow_secret: bool = False, skip_secrets: bool = False, progress=None) -> ImportReport:
        """Add the memories another tool kept (memvault.importers.FORMATS; `format` guessed from the
        source when None) as one commit. Records whose key is stored already are not added again; a
        bad record raises InvalidInput naming its place, and nothing is written. A text holding a
        credential is refused unless `allow_secret` (stored marked secret) or `skip_secrets` (left
        out, counted). `dry_run` checks everything and writes nothing (memvault.importers.run)."""
        from memvault.importers.run import run_import

        return run_import(self.storage, source, format=format, dry_run=dry_run, skip_secrets=skip_secrets,
                          progress=progress, check=lambda drafts: self._checked(drafts, allow_secret=allow_secret),
                          write=lambda facts, origin: self._write(facts, origin, looked_up=True)[0])

    @checked
    def forget(self, fact_id: str, reason: str | None = None) -> Forgotten:
        """Tombstone a fact (committed); forgetting a forgotten fact changes nothing."""
        from memvault.storage.wiki import pages_citing

        if reason is not None:
            reason = reason.strip() or None
            if reason and len(reason) > 500:
                raise InvalidInput("reason must be one line of at most 500 characters")
            if reason:  # it goes into tombstones.jsonl and the commit subject, as a source does
                check_one_line(reason, "reason")
            if reason:
                from memvault.base.credentials import find_credentials

                found = find_credentials([reason])
                if found:
                    kinds = ", ".join(f.kind for f in found[0])
                    raise InvalidInput(f"the reason holds a credential ({kinds}); it would be committed and synced "
                                       "as it is; nothing was forgotten: leave it out")
        from memvault.errors import NotFound

        try:
            fact = self.storage.find_fact(fact_id)
        except NotFound:
            gone = self._purged(fact_id)
            if gone is None:
                raise
            return Forgotten(gone, True, [])  # purged: forgotten already, and its text gone too
        tombstone, already = self.storage.add_tombstone(fact, reason)
        return Forgotten(tombstone, already, sorted(pages_citing(self.storage, [fact.id])))

    @checked
    def purge_plan(self, fact_ids: str | Iterable[str]):
        """What `purge` would remove (reads only): a memvault.remote.purge.PurgePlan with the facts' ids
        and first words, the commits to rewrite and the pages citing them."""
        from memvault.remote.purge import plan

        return plan(self.storage, _ids(fact_ids))

    @checked
    def purge(self, fact_ids: str | Iterable[str], *, confirm: Callable[[Any], bool] | None = None,
              progress: Progress | None = None):
        """Remove facts' text from the logs, every commit of the history, the pages citing them,
        the search index and the embedding cache, leaving a tombstone without text or hash;
        returns a memvault.remote.purge.PurgeReport. `confirm(plan)` may refuse (InvalidInput, nothing
        changed). An unknown id raises NotFound (an empty one InvalidInput) before anything changes.
        Run again after an interrupted purge, it finishes it (report.finished). The remote keeps
        the old history until `sync` (report.remote says so). See docs/purge.md."""
        from memvault.remote.purge import purge

        return purge(self.storage, _ids(fact_ids), confirm=confirm, progress=progress)

    # -- reading facts ------------------------------------------------------------------------

    def _find(self, fact_id: str, storage: Storage | None = None) -> Fact:
        """The fact; a purged one is NotFound saying so."""
        from memvault.errors import NotFound

        storage = storage or self.storage
        try:
            return storage.find_fact(fact_id)
        except NotFound:
            gone = self._purged(fact_id, storage) or (self._purged(fact_id) if storage is not self.storage else None)
            if gone is None:
                raise
            raise NotFound(f"fact {gone.id} was purged at {gone.at}: its text is gone from this vault") from None

    def _purged(self, fact_id: str, storage: Storage | None = None) -> Tombstone | None:
        """The purge record of a fact no log holds any more, if it was purged."""
        from memvault.remote.purge import purged_tombstone

        return purged_tombstone(storage or self.storage, fact_id)

    @checked
    def show(self, fact_id: str, *, as_of=None) -> FactView:
        """One fact (NotFound if there is none), its tombstone, and its chain of supersedes links."""
        from memvault.errors import NotFound
        from memvault.recall.succession import links

        if as_of is not None:
            from memvault.recall.asof import moment

            as_of = moment(self.storage, as_of)
        with self._reading(as_of) as storage:
            try:
                fact = self._find(fact_id, storage)
            except NotFound:
                if as_of is None or self._purged(fact_id) or not self._exists(fact_id):
                    raise
                raise NotFound(f"fact {fact_id.strip()} was not in the vault yet as of {as_of.asked} (commit "
                               f"{as_of.commit.sha[:10]}): it was added later") from None
            known = links(storage)
            return FactView(fact, storage.tombstones().get(fact.id), known.successor(fact.id),
                            tuple(known.chain(fact.id)))

    def _exists(self, fact_id: str) -> bool:
        from memvault.errors import NotFound

        try:
            self.storage.find_fact(fact_id)
        except NotFound:
            return False
        return True

    @checked
    def recent(self, limit: int | RecentQuery | None = 20, *, since: Bound = None, until: Bound = None,
               category: str | None = None, tag: str | None = None, source: str | None = None,
               session: str | None = None, oldest_first: bool | None = None, as_of=None) -> list[Fact]:
        """The newest `limit` facts, forgotten ones left out (`limit` None: all of them).

        Newest first, except that one source's or session's facts read as a thread, oldest first
        (`oldest_first` overrides either way). `since` and `until` are datetimes, dates or the text
        people type ("7d", "yesterday", "2026-11-01"), read in the vault's time zone; `limit` may
        instead be a ready `memvault.RecentQuery`.
        """
        from memvault.recall.timeline import RecentQuery, recent

        options = {"since": since, "until": until, "category": category, "tag": tag, "source": source,
                   "session": session, "oldest_first": oldest_first}
        if isinstance(limit, RecentQuery):
            if any(value is not None for value in options.values()):
                raise InvalidInput("give recent options either in the RecentQuery or as keywords, not both")
            query = limit
        else:
            query = RecentQuery.parse(limit, tz=self.tz, **options)
        with self._reading(as_of) as storage:
            return recent(storage, query)

    @checked
    def sessions(self, *, since: Bound = None, until: Bound = None, source: str | None = None) -> list:
        """Sources/sessions with fact counts and first/last times, most recently active first
        (`since` and `until` as `recent` takes them)."""
        from memvault.recall.timeline import RecentQuery, list_sessions

        return list_sessions(self.storage, RecentQuery.parse(None, tz=self.tz, since=since, until=until,
                                                             source=source))

    @checked
    def history(self, fact_id: str) -> list[dict[str, str]]:
        """The commits that touched a fact, oldest first: added, edited, superseded, consolidated, forgotten.

        A commit counts when it adds or removes a line holding the fact's id where memvault writes
        it: its log item (`"id":"…"`, with any spacing, an edit too), a newer fact's item naming it
        (`"supersedes":"…"`), a forget record (`"id": "…"`), a wiki citation (`[^…]`) or dream's
        record in log.md (`  settled: …`, `kept`, `unconsolidated`). Another fact that merely
        mentions the id in its text does not.
        """
        fact = self._find(fact_id)

        def literal(text: str) -> str:  # hand-written ids may hold any character
            return re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", text)

        found = literal(fact.id)
        where = (f'"(id|supersedes)"[[:space:]]*:[[:space:]]*{literal(stored_id(fact.id))}|\\[\\^{found}\\]'
                 f"|^  ({'|'.join(dreamlog.ID_KEYS)}): (.* )?{found}( |$)")
        return [c.to_dict() for c in self.git.log("--reverse", "-E", f"-G{where}", "--", ".")]

    # -- search (memvault.index) -------------------------------------------------------------

    @checked
    def search(self, query: str | SearchQuery, *, progress: Progress | None = None, as_of=None,
               **options: Any) -> list:
        """Hybrid search: wiki pages plus facts after the watermark (`include_all` adds the rest).

        `query` is the text (options as keywords: limit, category, tag, source, session, since,
        until, include_all, lexical_only, explain, min_score), or a ready `memvault.SearchQuery`.
        Hits below the relevance floor (min_score, default 0.05) are left out: [] means no match.
        `as_of` (a date, a time or a commit) searches the vault as it stood then (see `as_of()`).
        """
        from memvault.index.search import search

        if not isinstance(query, SearchQuery):
            query = SearchQuery.parse(query, tz=self.tz, categories=self.config.categories, **options)
        elif options:
            raise InvalidInput("give search options either in the SearchQuery or as keywords, not both")
        with self._reading(as_of) as storage:
            return search(storage, query, progress=progress)

    @checked
    def reindex(self, clear: bool = False, progress: Progress | None = None) -> dict:
        """Bring the search index up to date with the files (`clear`: rebuild it aside and swap)."""
        from memvault.index.search import reindex

        return reindex(self.storage, clear=clear, progress=progress)

    def index_status(self) -> dict:
        """Documents indexed, documents without a vector yet, files that differ from the index."""
        from memvault.index.search import index_status

        return index_status(self.storage)

    def download_model(self) -> str:
        """Fetch the embedding model into the user cache (raises if the hub is unreachable)."""
        from memvault.errors import RemoteError
        from memvault.index.embedder import ModelUnavailable, download_model
        from memvault.index.search import model_spec

        try:
            return download_model(model_spec(self.storage))
        except ModelUnavailable as e:
            raise RemoteError(str(e)) from None

    def download_rerank_model(self) -> str:
        """Fetch search's rerank model (the cross-encoder) into the user cache, as `download_model`."""
        from memvault.errors import RemoteError
        from memvault.index.embedder import ModelUnavailable
        from memvault.index.rerank import download_rerank_model
        from memvault.index.search import rerank_spec

        try:
            return download_rerank_model(rerank_spec(self.storage))
        except ModelUnavailable as e:
            raise RemoteError(str(e)) from None

    @checked
    def context(self, query: str | None = None, *, budget: int = 2000, recent: int = 20,
                relevant: int = 20, as_of=None):
        """A prompt-ready Bundle of at most `budget` tokens: MEMORY.md, relevant, then recent."""
        from memvault.recall.context import build_context

        with self._reading(as_of) as storage:
            return build_context(storage, query, budget=budget, recent=recent, relevant=relevant)

    # -- dream (memvault.dream) --------------------------------------------------------------

    @checked
    def dream(self, *, dry_run: bool = False, max_batches: int | None = None, min_facts: int | None = None,
              model: str | None = None, progress: Progress | None = None, llm: Any = None,
              today: date | None = None):
        """Consolidate pending days into wiki pages; returns a DreamReport (see memvault.dream)."""
        from memvault.dream.consolidate import run_dream

        return run_dream(self.storage, dry_run=dry_run, max_batches=max_batches, min_facts=min_facts, model=model,
                         progress=progress, llm=llm, today=today)

    def dream_undo(self) -> dict:
        """Revert the last dream commit with git revert, unless later commits touched its files."""
        from memvault.dream.undo import undo_last_dream

        return undo_last_dream(self.storage)

    def dream_status(self) -> dict:
        """Watermark, pending days and facts, failed attempts, last result (from log.md and logs)."""
        from memvault.dream.status import dream_status

        return dream_status(self.storage)

    # -- sync and health (memvault.remote.sync, memvault.health) ----------------------------------------

    @checked
    def set_remote(self, url: str) -> dict:
        from memvault.remote.sync import set_remote

        return set_remote(self.storage, url)

    def remote(self) -> dict | None:
        """The remote, and ahead/behind as of the last sync; None if none is set."""
        from memvault.remote.sync import remote_info

        return remote_info(self.storage)

    def sync(self):
        """Fetch, merge, push; returns a SyncReport. Raises SyncConflict or RemoteError."""
        from memvault.remote.sync import sync

        return sync(self.storage)

    def status(self, *, as_of=None) -> dict:
        """Facts, days, pages, dream progress, index, remote, lock; `as_of`: the vault's contents
        then, with the commit that answered (no index, remote, lock or git then)."""
        if as_of is not None:
            from memvault.recall.asof import moment, status_at

            found = moment(self.storage, as_of)
            with self._reading(found) as storage:
                return status_at(self.storage, storage, found)
        from memvault.dream.status import dream_status
        from memvault.health.status import status
        from memvault.index.search import index_status
        from memvault.remote.sync import remote_info

        return status(self.storage, dream=dream_status(self.storage), index=index_status(self.storage),
                      remote=remote_info(self.storage))

    # -- time travel (memvault.recall) -------------------------------------------------------

    @checked
    def why(self, target: str):
        """Where a memory came from: for a MEMORY.md line (its number or words), a page section
        (`wiki/<zone>/<page>.md#<heading-slug>`) or a fact id, the page, the cited facts and each
        fact's commits (added, consolidated, superseded, forgotten); a memvault.recall.why.Why."""
        from memvault.recall.why import why

        return why(self.storage, target)

    def as_of(self, when) -> VaultAt:
        """The vault as it stood at `when` (a date, a time, or a commit): a read-only view whose
        `search`, `context`, `recent`, `show` and `status` answer from that commit (`moment`)."""
        from memvault.recall.asof import moment

        return VaultAt(self, moment(self.storage, when))

    @contextmanager
    def _reading(self, as_of) -> Iterator[Storage]:
        """The storage to read: the vault's own, or the vault as of a moment (memvault.recall.asof)."""
        if as_of is None:
            yield self.storage
            return
        from memvault.recall.asof import past

        with past(self.storage, as_of) as storage:
            yield storage

    @checked
    def doctor(self, fix: bool = False, llm: bool = False, full: bool | None = None, progress: Progress | None = None):
        """Health checks (safe repairs with `fix`, one tiny model request with `llm`; the checks that
        read every log with `full`, by default only where they are quick: docs/scale.md);
        returns a memvault.health.doctor.DoctorReport."""
        from memvault.health.doctor import doctor

        return doctor(self.storage, _doctor_probes(), fix=fix, llm=llm, full=full, progress=progress)


def _doctor_probes() -> list:
    """Every check doctor runs, each from the package it checks, in the order they are shown and
    repaired: leftovers are committed before the index is rebuilt from the files."""
    from memvault.dream import probes as dream
    from memvault.health import checks as vault
    from memvault.index import probes as index
    from memvault.remote import probes as remote

    return [vault.LOCKS, vault.SYMLINKS, remote.PURGE, vault.WORKTREE, remote.MERGE_DRIVER, remote.IGNORED,
            vault.IDENTITY, vault.LOG_LINES, vault.FACT_COUNTS, vault.LOG_NAMES, vault.FACT_IDS, vault.CITATIONS,
            vault.FORGOTTEN_CITATIONS, vault.CREDENTIALS, index.EMBEDDING_CACHE, index.INDEX, index.EMBEDDING_MODEL,
            index.RERANK_MODEL, dream.DREAM, dream.LLM]
