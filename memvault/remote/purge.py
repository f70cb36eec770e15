"""Purge: remove facts' text from the logs, from every commit of the history, and from .memvault/.

`forget` keeps the log line (history stays auditable); `purge` is for what must not be kept at
all (a credential, someone else's private data). Under the write lock and the dream lock:

1. git-filter-repo rewrites every ref (branches, remote-tracking refs, tags, stash): in every
   commit the purged facts' log items go, their tombstone lines lose the text's hash, page
   statements citing them go, a line that is a copy of the text goes, and the text anywhere else
   (inside another fact or its labels, a page, a forget reason) becomes "[purged]"; commit
   messages keep the id but lose the words (memvault.remote.purge_filter). Configuration files, ids and
   the structure of logs, tombstones and log.md are never edited. Commits left empty are dropped.
2. tombstones.jsonl gets a purge record (id, time, "purged": true; no text, no hash) in one commit.
3. Reflogs are expired and unreachable objects pruned (`git gc --prune=now`), so the old commits
   are gone from this repository; ORIG_HEAD, FETCH_HEAD, COMMIT_EDITMSG and filter-repo's own
   notes go too.
4. The search index is deleted and rebuilt, and the texts' vectors leave the embedding cache.

The remote still holds the old history until `memvault sync` pushes the new one (with a lease:
memvault.remote.sync); other clones adopt it on their next sync (memvault.remote.purge_adoption).
Steps 1 and 3 are memvault.remote.purge_history; what this clone knows of purges (an interrupted
one, a push owed) is memvault.remote.purge_state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime

from memvault.errors import InvalidInput, NotFound
from memvault.formats.facts import Fact, id_length_hint, normalize_id
from memvault.formats.layout import EMBEDDING_CACHE, KEYS_DB, TOMBSTONES_FILE
from memvault.formats.tombstones import Tombstone, parse_tombstones
from memvault.remote.origin import remote_url
from memvault.remote.purge_filter import needles_of
from memvault.remote.purge_history import (
    clean_repository,
    noted_rewrite,
    purge_derived,
    refuse_uncommitted,
    rewrite_history,
    texts_of,
)
from memvault.remote.purge_state import record
from memvault.storage.store import Storage
from memvault.storage.tombstone_log import TombstoneLog
from memvault.storage.wiki import pages_citing

WORDS = 8


@dataclass(frozen=True)
class PurgeItem:
    id: str
    words: str            # the first words, for the confirmation
    path: str             # its daily log


@dataclass
class PurgePlan:
    """What a purge would remove: shown before asking for confirmation."""

    facts: list[PurgeItem]
    already_purged: list[str]
    commits: int                          # commits the rewrite changes (and all their descendants)
    pages: list[str]                      # pages citing the facts now
    remote: str | None                    # the remote's URL, if one is set
    # other facts whose text holds a purged text: they stay, with those words as "[purged]"
    quoting: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class PurgeReport:
    purged: list[str]                     # ids purged now
    already_purged: list[str]             # ids purged before: nothing to do for them
    commits_rewritten: int                # commits whose sha changed (dropped ones included)
    pages: list[str]                      # pages that cited the facts (their citing lines are gone)
    tombstones: list[Tombstone] = field(default_factory=list)
    remote: str | None = None             # the remote still holding the old history: `memvault sync`
    index: dict | None = None             # what happened to the search index and embedding cache
    finished: list[str] = field(default_factory=list)  # ids of an interrupted purge this one finished

    def to_dict(self) -> dict:
        data = asdict(self)
        data["tombstones"] = [t.to_dict() for t in self.tombstones]
        return data


# -- planning ----------------------------------------------------------------------------------

def _resolve(storage: Storage, ids: Iterable[str]) -> tuple[list[Fact], list[str]]:
    """The facts to purge and the ids already purged; NotFound (nothing changed) for an id that
    names no fact, as for `forget` and `show`. The id of a purge that was killed after its
    rewrite (its log item is gone, its tombstone not yet written) stands for a fact whose text is
    found where refs still hold it, or is "" (unknown)."""
    wanted = list(dict.fromkeys(i.strip() for i in ids))
    if not wanted:
        raise InvalidInput("no fact id given; nothing was purged")
    if "" in wanted:
        raise InvalidInput("a fact id is empty; nothing was purged")
    tombstones = storage.tombstone_log.tombstones()
    unfinished = set(storage.recovery.unfinished_purge())
    facts: dict[str, Fact] = {}
    done: list[str] = []
    for typed in wanted:
        try:
            fact = storage.facts.find_fact(typed)
        except NotFound:
            gone = purged_tombstone(storage.tombstone_log, typed, tombstones)
            if gone is not None:
                done.append(gone.id)
                continue
            if typed in unfinished:
                fact = _unfinished(storage, typed)
            else:
                raise NotFound(f"no fact with id {typed!r}{id_length_hint(typed)}; nothing was purged") from None
        facts.setdefault(fact.id, fact)
    return list(facts.values()), list(dict.fromkeys(done))


def _unfinished(storage: Storage, fact_id: str) -> Fact:
    refs = storage.git.run("for-each-ref", "--format=%(refname)").split()
    texts = texts_of(storage, {fact_id}, refs)
    return Fact(id=fact_id, text=texts.get(fact_id, ""), at=datetime.now(storage.tz))


def unfinished_purge(storage: Storage) -> list[str]:
    """Ids of a purge that was interrupted (killed, a full disk) before it finished: run `purge`
    with them again to finish it."""
    return storage.recovery.unfinished_purge()


def purged_tombstone(tombstone_log: TombstoneLog, typed: str,
                     tombstones: dict[str, Tombstone] | None = None) -> Tombstone | None:
    """The purge record of an id as typed (or read as Crockford), if it was purged."""
    tombstones = tombstone_log.tombstones() if tombstones is None else tombstones
    typed = typed.strip()
    for candidate in (typed, normalize_id(typed)):
        found = tombstones.get(candidate)
        if found is not None and found.purged:
            return found
    return None


def _words(fact: Fact) -> str:
    words = fact.text.split()
    return " ".join(words[:WORDS]) + (" …" if len(words) > WORDS else "")


def commits_touching(storage: Storage, ids: Iterable[str], texts: Iterable[str] = ()) -> int:
    """How many commits a rewrite for these ids changes: those that add or remove a mention of
    them (or of a text), those whose message names one, and every descendant of those."""
    ids = list(ids)
    if not ids or storage.git.head() is None:
        return 0
    touching: set[str] = set()
    for needle in [*ids, *needles_of(texts)]:
        touching.update(storage.git.run("log", "--all", "--format=%H", "-S", needle, "--").split())
    for fact_id in ids:
        touching.update(storage.git.run("log", "--all", "--format=%H", "--fixed-strings", "--grep", fact_id).split())
    children: dict[str, list[str]] = {}
    for line in storage.git.run("rev-list", "--all", "--parents").splitlines():
        sha, *parents = line.split()
        for parent in parents:
            children.setdefault(parent, []).append(sha)
    seen = set(touching)
    todo = list(touching)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return len(seen)


def plan(storage: Storage, ids: Iterable[str]) -> PurgePlan:
    """What purging these ids would do (reads only)."""
    facts, done = _resolve(storage, ids)
    return _plan(storage, facts, done)


def _plan(storage: Storage, facts: list[Fact], done: list[str]) -> PurgePlan:
    ids = [f.id for f in facts]
    needles = needles_of(f.text for f in facts)
    quoting = [f.id for f in storage.facts.iter_facts(include_forgotten=True)
               if f.id not in ids and any(n in f.text for n in needles)] if needles else []
    return PurgePlan(
        facts=[PurgeItem(f.id, _words(f), f.path) for f in facts],
        already_purged=done,
        commits=commits_touching(storage, ids, [f.text for f in facts]),
        pages=sorted(pages_citing(storage, ids)),
        remote=remote_url(storage),
        quoting=quoting,
    )


# -- purging -----------------------------------------------------------------------------------

def purge(storage: Storage, ids: Iterable[str], *, confirm: Callable[[PurgePlan], bool] | None = None,
          progress=None) -> PurgeReport:
    """Purge facts (see the module docstring). `confirm` is shown the plan under the locks and may
    refuse (InvalidInput, nothing changed); without it the purge goes ahead."""
    ids = list(ids)
    with storage.dream_lock(), storage.write_lock():
        storage.recovery.recover_locked()  # (puts back what an interrupted purge left half checked out)
        storage.refuse_during_merge()
        refuse_uncommitted(storage, "purge")
        facts, done = _resolve(storage, ids)
        if not facts:
            finishing = sorted(set(done) & set(unfinished_purge(storage)))
            if finishing:
                return _finish(storage, done, finishing, progress)
            return PurgeReport([], done, 0, [])
        the_plan = _plan(storage, facts, done)
        if confirm is not None and not confirm(the_plan):
            raise InvalidInput("purge not confirmed; nothing changed")
        fact_ids = [f.id for f in facts]
        texts = [f.text for f in facts if f.text]
        rewritten = noted_rewrite(storage, [(fact_ids, texts)])
        tombstones = _write_tombstones(storage, fact_ids)
        record(storage, fact_ids, push_owed=the_plan.remote is not None)
        clean_repository(storage)
        storage.path(KEYS_DB).unlink(missing_ok=True)  # (a key may quote the text: rebuilt from the logs)
        if len(texts) < len(facts):
            # a text no ref holds any more: its vectors cannot be named, so the whole cache goes
            storage.path(EMBEDDING_CACHE).unlink(missing_ok=True)
        report = PurgeReport(fact_ids, done, rewritten, the_plan.pages, tombstones, the_plan.remote)
        report.index = purge_derived(storage, texts, progress=progress)
        record(storage, (), pending=[])
    return report


def _finish(storage: Storage, done: list[str], finishing: list[str], progress=None) -> PurgeReport:
    """Finish an interrupted purge of these ids (hold the locks): killed after its tombstones were
    committed (or a sync adopting it was killed), the rewrite may be unfinished (again: a no-op
    where it was done), the old objects may still be there."""
    refs = storage.git.run("for-each-ref", "--format=%(refname)").split()
    rewritten = rewrite_history(storage, finishing, list(texts_of(storage, set(finishing), refs).values()))
    remote = remote_url(storage)
    # (killed before it noted these ids scrubbed and the push owed: the next sync must
    # push the rewritten history, not take the purge for another clone's)
    record(storage, finishing, push_owed=remote is not None)
    clean_repository(storage)
    storage.path(EMBEDDING_CACHE).unlink(missing_ok=True)
    storage.path(KEYS_DB).unlink(missing_ok=True)  # (a key may quote the text: rebuilt from the logs)
    report = PurgeReport([], sorted(set(done) - set(finishing)), rewritten, [], remote=remote,
                         finished=finishing, index=purge_derived(storage, [], progress=progress))
    record(storage, (), pending=[])
    return report


def _write_tombstones(storage: Storage, ids: list[str]) -> list[Tombstone]:
    """The purge records, one commit: a fact's forget line is replaced (the first record of an id
    would otherwise win), the others appended."""
    # To the microsecond: the records of one purge share their time, and another clone replays
    # purges one at a time by it (purge_groups); two purges a second apart must not read as one.
    at = datetime.now(storage.tz).isoformat()
    records = {i: Tombstone(id=i, at=at, reason="purged", hash="", purged=True) for i in ids}
    kept = []
    for line in storage.read_text(TOMBSTONES_FILE).splitlines(keepends=True):
        found = parse_tombstones(line)
        if any(fact_id in records for fact_id in found):
            continue
        kept.append(line if line.endswith("\n") else line + "\n")
    content = "".join(kept) + "".join(t.to_line() for t in records.values())
    body = "\n".join(ids)
    storage.write_files({TOMBSTONES_FILE: content}, f"{purge_subject(len(ids))}\n\n{body}")
    return list(records.values())


def purge_subject(count: int) -> str:
    from memvault.remote.purge_filter import PURGE_SUBJECT

    return f"{PURGE_SUBJECT}{count} fact{'s' if count != 1 else ''} removed from the history"


# -- what this clone knows -----------------------------------------------------------------------


# -- adopting a purge made elsewhere (memvault.remote.sync) ---------------------------------------------

