"""`Vault`, the public API: find or create a vault, then remember, recall, consolidate, sync.

A typed facade over the layers below (see docs/architecture.md): each method checks its
arguments, opens what it needs and makes one call down to the package where the rule lives.
Features are imported when first used, so `import memvault` stays light (search pulls in
Tantivy and numpy, dream litellm).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import date, datetime, tzinfo
from typing import TYPE_CHECKING, Any, cast

from memvault.base.arguments import checked
from memvault.base.dates import Bound
from memvault.errors import InvalidInput, InvalidItem
from memvault.formats.drafts import FactDraft
from memvault.formats.facts import Fact, ParseProblem
from memvault.formats.reports import DreamStatus, IndexStatus, ReindexReport, RemoteInfo, UndoReport, VaultStatus
from memvault.formats.tombstones import Tombstone
from memvault.index.query import SearchQuery
from memvault.recall.forgetting import Forgotten
from memvault.recall.lookup import CommitRecord, FactView
from memvault.recall.timeline import RecentQuery
from memvault.storage.vault_dir import locate
from memvault.vault.moment import VaultAt, reading
from memvault.vault.opening import Notify, Opening
from memvault.vault.probes import doctor_probes

if TYPE_CHECKING:
    from memvault.dream.results import DreamReport
    from memvault.health.doctor import DoctorReport
    from memvault.importers.run import ImportReport
    from memvault.index.hits import Hit
    from memvault.recall.context import Bundle
    from memvault.recall.timeline import SessionSummary
    from memvault.recall.why import Why
    from memvault.remote.purge import PurgePlan, PurgeReport
    from memvault.remote.sync import SyncReport
    from memvault.storage.gitstore import GitStore

Progress = Callable[..., None]  # what each long task tells of its stages (see the task's docs)


def fact_ids_given(fact_ids: Iterable[str]) -> list[str]:
    if isinstance(fact_ids, str):
        return [fact_ids]
    ids = list(fact_ids)
    if not all(isinstance(i, str) for i in ids):
        raise InvalidInput("fact ids must be strings")
    return ids


class Vault(Opening):
    """One vault. `notify` receives notices meant for a person (an index rebuilt, a repair done);
    without it they go to the `memvault` logger at INFO level. The library never prints."""

    # -- what the storage knows ------------------------------------------------------------

    @property
    def tz(self) -> tzinfo:
        return self.storage.tz

    @property
    def git(self) -> GitStore:
        return self.storage.git

    @property
    def watermark(self) -> date | None:
        """The last day consolidated by dream (from log.md), or None."""
        return self.storage.dreams.watermark

    @checked
    def tombstones(self) -> dict[str, Tombstone]:
        return self.storage.tombstone_log.tombstones()

    @checked
    def iter_facts(self, include_forgotten: bool = False) -> Iterator[Fact]:
        """All facts, oldest day first (file order within a day)."""
        return self.storage.facts.iter_facts(include_forgotten)

    @checked
    def problems(self) -> list[ParseProblem]:
        """Lines in the daily logs that look like facts but do not parse (for doctor)."""
        return self.storage.facts.problems()

    # -- writing facts (memvault.recall.remember, .forgetting; memvault.remote.purge) -----------

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
        """Remember a batch as ONE commit. Everything is validated first; one bad item writes nothing
        (InvalidItem); a credential in a text needs `allow_secret` (memvault.recall.remember)."""
        from memvault.recall.remember import add_facts

        return add_facts(self.storage, drafts, allow_secret=allow_secret)

    @checked
    def fact_by_key(self, key: str) -> Fact | None:
        """The fact stored under `key` (its first copy), forgotten or not; None when no fact has it."""
        from memvault.recall.remember import fact_by_key

        if not isinstance(key, str) or not key:
            raise InvalidInput("key must be a non-empty string")
        return fact_by_key(self.storage, key)

    @checked
    def import_source(self, source: os.PathLike[str] | str, *, format: str | None = None, dry_run: bool = False,
                      allow_secret: bool = False, skip_secrets: bool = False,
                      progress: Progress | None = None) -> ImportReport:
        """Add the memories another tool kept (memvault.importers.FORMATS; `format` guessed when None)
        as one commit, less those already stored (memvault.importers.run)."""
        from memvault.importers.run import run_import

        return run_import(self.storage, source, format=format, dry_run=dry_run, allow_secret=allow_secret,
                          skip_secrets=skip_secrets, progress=progress)

    @checked
    def forget(self, fact_id: str, reason: str | None = None) -> Forgotten:
        """Tombstone a fact (committed); forgetting a forgotten fact changes nothing."""
        from memvault.recall.forgetting import forget

        return forget(self.storage, fact_id, reason)

    @checked
    def purge_plan(self, fact_ids: str | Iterable[str]) -> PurgePlan:
        """What `purge` would remove (reads only): a memvault.remote.purge.PurgePlan with the facts' ids
        and first words, the commits to rewrite and the pages citing them."""
        from memvault.remote.purge import plan

        return plan(self.storage, fact_ids_given(fact_ids))

    @checked
    def purge(self, fact_ids: str | Iterable[str], *, confirm: Callable[[Any], bool] | None = None,
              progress: Progress | None = None) -> PurgeReport:
        """Remove facts' text from the logs, every commit of the history, the pages citing them,
        the search index and the embedding cache, leaving a tombstone without text or hash;
        returns a memvault.remote.purge.PurgeReport. `confirm(plan)` may refuse (InvalidInput, nothing
        changed). An unknown id raises NotFound (an empty one InvalidInput) before anything changes.
        Run again after an interrupted purge, it finishes it (report.finished). The remote keeps
        the old history until `sync` (report.remote says so). See docs/purge.md."""
        from memvault.remote.purge import purge

        return purge(self.storage, fact_ids_given(fact_ids), confirm=confirm, progress=progress)

    # -- reading facts (memvault.recall) -------------------------------------------------------

    @checked
    def show(self, fact_id: str, *, as_of: Any = None) -> FactView:
        """One fact (NotFound if there is none), its tombstone, and its chain of supersedes links."""
        from memvault.recall.lookup import show

        return show(self.storage, fact_id, as_of)

    @checked
    def recent(self, limit: int | RecentQuery | None = 20, *, since: Bound = None, until: Bound = None,
               category: str | None = None, tag: str | None = None, source: str | None = None,
               session: str | None = None, oldest_first: bool | None = None, as_of: Any = None) -> list[Fact]:
        """The newest `limit` facts, forgotten ones left out (`limit` None: all of them).

        Newest first, except that one source's or session's facts read as a thread, oldest first
        (`oldest_first` overrides either way). `since` and `until` are datetimes, dates or the text
        people type ("7d", "yesterday", "2026-11-01"), read in the vault's time zone; `limit` may
        instead be a ready `memvault.RecentQuery`.
        """
        from memvault.recall.timeline import recent

        if isinstance(limit, RecentQuery):
            if any(value is not None for value in (since, until, category, tag, source, session, oldest_first)):
                raise InvalidInput("give recent options either in the RecentQuery or as keywords, not both")
            query = limit
        else:
            query = RecentQuery.parse(limit, tz=self.tz, since=since, until=until, category=category, tag=tag,
                                      source=source, session=session, oldest_first=oldest_first)
        with reading(self.storage, as_of) as storage:
            return recent(storage, query)

    @checked
    def sessions(self, *, since: Bound = None, until: Bound = None,
                 source: str | None = None) -> list[SessionSummary]:
        """Sources/sessions with fact counts and first/last times, most recently active first
        (`since` and `until` as `recent` takes them)."""
        from memvault.recall.timeline import list_sessions

        return list_sessions(self.storage, RecentQuery.parse(None, tz=self.tz, since=since, until=until,
                                                             source=source))

    @checked
    def history(self, fact_id: str) -> list[CommitRecord]:
        """The commits that touched a fact, oldest first: added, edited, superseded, consolidated,
        forgotten (which count: memvault.recall.lookup.history)."""
        from memvault.recall.lookup import history

        return history(self.storage, fact_id)

    # -- search (memvault.index) -------------------------------------------------------------

    @checked
    def search(self, query: str | SearchQuery, *, progress: Progress | None = None, as_of: Any = None,
               **options: Any) -> list[Hit]:
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
        with reading(self.storage, as_of) as storage:
            return search(storage, query, progress=progress)

    @checked
    def reindex(self, clear: bool = False, progress: Progress | None = None) -> ReindexReport:
        """Bring the search index up to date with the files (`clear`: rebuild it aside and swap)."""
        from memvault.index.search import reindex

        return cast(ReindexReport, reindex(self.storage, clear=clear, progress=progress))

    @checked
    def index_status(self) -> IndexStatus:
        """Documents indexed, documents without a vector yet, files that differ from the index."""
        from memvault.index.search import index_status

        return cast(IndexStatus, index_status(self.storage))

    @checked
    def download_model(self) -> str:
        """Fetch the embedding model into the user cache (RemoteError if the hub is unreachable)."""
        from memvault.index.fetch import fetch_embedding_model

        return fetch_embedding_model(self.storage)

    @checked
    def download_rerank_model(self) -> str:
        """Fetch search's rerank model (the cross-encoder) into the user cache, as `download_model`."""
        from memvault.index.fetch import fetch_rerank_model

        return fetch_rerank_model(self.storage)

    @checked
    def context(self, query: str | None = None, *, budget: int = 2000, recent: int = 20,
                relevant: int = 20, as_of: Any = None) -> Bundle:
        """A prompt-ready Bundle of at most `budget` tokens: MEMORY.md, relevant, then recent."""
        from memvault.recall.context import build_context

        with reading(self.storage, as_of) as storage:
            return build_context(storage, query, budget=budget, recent=recent, relevant=relevant)

    # -- dream (memvault.dream) --------------------------------------------------------------

    @checked
    def dream(self, *, dry_run: bool = False, max_batches: int | None = None, min_facts: int | None = None,
              model: str | None = None, progress: Progress | None = None, llm: Any = None,
              today: date | None = None) -> DreamReport:
        """Consolidate pending days into wiki pages; returns a DreamReport (see memvault.dream)."""
        from memvault.dream.consolidate import run_dream

        return run_dream(self.storage, dry_run=dry_run, max_batches=max_batches, min_facts=min_facts, model=model,
                         progress=progress, llm=llm, today=today)

    @checked
    def dream_undo(self) -> UndoReport:
        """Revert the last dream commit with git revert, unless later commits touched its files."""
        from memvault.dream.undo import undo_last_dream

        return cast(UndoReport, undo_last_dream(self.storage))

    @checked
    def dream_status(self) -> DreamStatus:
        """Watermark, pending days and facts, failed attempts, last result (from log.md and logs)."""
        from memvault.dream.status import dream_status

        return cast(DreamStatus, dream_status(self.storage))

    # -- sync and health (memvault.remote.sync, memvault.health) ----------------------------------------

    @checked
    def set_remote(self, url: str) -> RemoteInfo:
        """Point the vault at a remote (no network access); what `remote` then says."""
        from memvault.remote.origin import set_remote

        return cast(RemoteInfo, set_remote(self.storage, url))

    @checked
    def remote(self) -> RemoteInfo | None:
        """The remote, and ahead/behind as of the last sync; None if none is set."""
        from memvault.remote.origin import remote_info

        return cast("RemoteInfo | None", remote_info(self.storage))

    @checked
    def sync(self) -> SyncReport:
        """Fetch, merge, push; returns a SyncReport. Raises SyncConflict or RemoteError."""
        from memvault.remote.sync import sync

        return sync(self.storage)

    @checked
    def status(self, *, as_of: Any = None) -> VaultStatus:
        """Facts, days, pages, dream progress, index, remote, lock; `as_of`: the vault's contents
        then, with the commit that answered (no index, remote, lock or git then)."""
        if as_of is not None:
            from memvault.recall.asof import moment, status_at

            found = moment(self.storage, as_of)
            with reading(self.storage, found) as storage:
                return cast(VaultStatus, status_at(self.storage, storage, found))
        from memvault.dream.status import dream_status
        from memvault.health.status import status

        with self.storage.facts.reading_once():  # planning and counting read the same logs
            return status(self.storage, dream=dream_status(self.storage), index=self.index_status(),
                          remote=self.remote())

    # -- time travel (memvault.recall) -------------------------------------------------------

    @checked
    def why(self, target: str | int) -> Why:
        """Where a memory came from: for a MEMORY.md line (its number or words), a page section
        (`wiki/<zone>/<page>.md#<heading-slug>`) or a fact id, the page, the cited facts and each
        fact's commits (added, consolidated, superseded, forgotten); a memvault.recall.why.Why."""
        from memvault.recall.why import why

        return why(self.storage, str(target))

    @checked
    def as_of(self, when: Any) -> VaultAt:
        """The vault as it stood at `when` (a date, a time, or a commit): a read-only view whose
        `search`, `context`, `recent`, `show` and `status` answer from that commit (`moment`)."""
        from memvault.recall.asof import moment

        return VaultAt(self, moment(self.storage, when))

    @classmethod
    @checked
    def diagnose(cls, path: os.PathLike[str] | str | None = None, *, fix: bool = False, llm: bool = False,
                 notify: Notify | None = None, full: bool | None = None,
                 progress: Progress | None = None) -> DoctorReport:
        """`doctor` for a vault that may not open: its git repository is checked first (re-created
        from the files with `fix`, as `adopt` does), then every other check runs on the opened vault."""
        from memvault.health.checks import diagnose

        root = locate(path)
        return diagnose(root, fix, then=lambda: cls.open(root, notify=notify).doctor(fix=fix, llm=llm, full=full,
                                                                                      progress=progress))

    @checked
    def doctor(self, fix: bool = False, llm: bool = False, full: bool | None = None,
               progress: Progress | None = None) -> DoctorReport:
        """Health checks (safe repairs with `fix`, one tiny model request with `llm`; the checks that
        read every log with `full`, by default only where they are quick: docs/scale.md);
        returns a memvault.health.doctor.DoctorReport."""
        from memvault.health.doctor import doctor

        return doctor(self.storage, doctor_probes(), fix=fix, llm=llm, full=full, progress=progress)
