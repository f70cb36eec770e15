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
memvault.remote.sync); other clones adopt it on their next sync (`adopt_purges`).
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterable
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from datetime import datetime

from memvault.errors import InvalidInput, MemvaultError, NotFound, SyncConflict, no_room, unwritable, worded
from memvault.formats.facts import Fact, id_length_hint, normalize_id, parse_log, stored_id
from memvault.formats.layout import EMBEDDING_CACHE, KEYS_DB, LOGS_DIR, PURGE_STATE, TOMBSTONES_FILE
from memvault.formats.tombstones import Tombstone, parse_tombstones
from memvault.remote.purge_filter import needles_of
from memvault.storage.files import atomic_write, writing
from memvault.storage.store import Storage
from memvault.storage.tombstone_log import TombstoneLog
from memvault.storage.wiki import pages_citing

REMOTE = "origin"
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


def _remote_url(storage: Storage) -> str | None:
    import git

    try:
        return storage.git.run("config", "--get", f"remote.{REMOTE}.url") or None
    except git.GitCommandError:
        return None


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
        remote=_remote_url(storage),
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
                # Killed after its tombstones were committed (or a sync adopting it was killed):
                # the rewrite may be unfinished (again: a no-op where it was done), the old objects
                # may still be there.
                refs = storage.git.run("for-each-ref", "--format=%(refname)").split()
                rewritten = rewrite_history(storage, finishing, list(texts_of(storage, set(finishing), refs).values()))
                remote = _remote_url(storage)
                # (killed before it noted these ids scrubbed and the push owed: the next sync must
                # push the rewritten history, not take the purge for another clone's)
                _record(storage, finishing, push_owed=remote is not None)
                clean_repository(storage)
                storage.path(EMBEDDING_CACHE).unlink(missing_ok=True)
                storage.path(KEYS_DB).unlink(missing_ok=True)  # (a key may quote the text: rebuilt from the logs)
                report = PurgeReport([], sorted(set(done) - set(finishing)), rewritten, [], remote=remote,
                                     finished=finishing, index=purge_derived(storage, [], progress=progress))
                _record(storage, (), pending=[])
                return report
            return PurgeReport([], done, 0, [])
        the_plan = _plan(storage, facts, done)
        if confirm is not None and not confirm(the_plan):
            raise InvalidInput("purge not confirmed; nothing changed")
        fact_ids = [f.id for f in facts]
        texts = [f.text for f in facts if f.text]
        rewritten = _noted_rewrite(storage, [(fact_ids, texts)])
        tombstones = _write_tombstones(storage, fact_ids)
        _record(storage, fact_ids, push_owed=the_plan.remote is not None)
        clean_repository(storage)
        storage.path(KEYS_DB).unlink(missing_ok=True)  # (a key may quote the text: rebuilt from the logs)
        if len(texts) < len(facts):
            # a text no ref holds any more: its vectors cannot be named, so the whole cache goes
            storage.path(EMBEDDING_CACHE).unlink(missing_ok=True)
        report = PurgeReport(fact_ids, done, rewritten, the_plan.pages, tombstones, the_plan.remote)
        report.index = purge_derived(storage, texts, progress=progress)
        _record(storage, (), pending=[])
    return report


def refuse_uncommitted(storage: Storage, what: str) -> None:
    ours, _temp, _foreign = storage.hand_edits.uncommitted()
    # the rewrite resets tracked files; untracked files that are not the vault's survive it
    tracked = [line[3:] for line in storage.git.status() if not line.startswith("??")]
    dirty = sorted(set(ours) | set(tracked))
    if dirty:
        paths = ", ".join(dirty[:5]) + (" …" if len(dirty) > 5 else "")
        raise InvalidInput(f"uncommitted changes in the vault ({paths}): commit them (`memvault doctor --fix`) "
                           f"before a {what}, which rewrites the history; nothing changed")


def rewrite_history(storage: Storage, ids: list[str], texts: list[str]) -> int:
    """Run the purge filter over every ref (hold the write lock); returns how many commits changed."""
    if storage.git.head() is None:
        return 0
    metadata = storage.git.git_dir / "filter-repo"
    _remove_tree(metadata)  # a leftover "already_ran" would make filter-repo ask a question
    spec = json.dumps({"ids": sorted(ids), "needles": needles_of(texts)}, ensure_ascii=False)
    env = dict(storage.git.env)
    for name in ("GIT_DIR", "GIT_WORK_TREE"):
        env.pop(name, None)  # filter-repo works in its current directory (GIT_CEILING_DIRECTORIES stays)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    with writing(".git", "the history may be partly rewritten; run the purge again"):
        done = subprocess.run([sys.executable, "-m", "memvault.remote.purge_filter"], cwd=storage.root, env=env,
                              input=spec.encode("utf-8"), capture_output=True, preexec_fn=_die_with_parent)
    try:
        if done.returncode != 0:
            lines = [line for line in done.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
            reason = lines[-1] if lines else f"exit status {done.returncode}"
            if _disk_full(storage, "\n".join(lines)):  # git fast-import died of it: a broken pipe, an OSError
                raise unwritable(OSError(errno.ENOSPC, reason), ".git",
                                 "the history may be partly rewritten; free some space and run the purge again")
            raise MemvaultError(f"rewriting the history failed: {reason}")
        changed = 0
        with suppress(OSError):
            for line in (metadata / "commit-map").read_text(encoding="utf-8").splitlines()[1:]:
                old, new = (line.split() + ["", ""])[:2]
                changed += old != new
        return changed
    finally:
        _remove_tree(metadata)


def _disk_full(storage: Storage, stderr: str) -> bool:
    """Did the filter fail for want of room? git fast-import says so, or dies of it (a broken pipe)
    with under a MiB left."""
    if "No space left on device" in stderr or "[Errno 28]" in stderr:
        return True
    return no_room(storage.root, 1024 * 1024) is not None


def _noted_rewrite(storage: Storage, purges: list[tuple[list[str], list[str]]]) -> int:
    """rewrite_history for each (ids, texts) in turn, noted first (the ids, never the texts, and
    HEAD before it): a purge killed from here on is named by doctor and sync, the next commands
    put back only the files it left half checked out (Recovery.recover_locked), and running it
    again finishes it. A rewrite that fails before moving any ref has changed nothing: the note
    goes again. Returns how many commits changed."""
    refs = storage.git.run("for-each-ref", "--format=%(objectname) %(refname)")
    _record(storage, (), pending=[i for ids, _texts in purges for i in ids], before=storage.git.head())
    try:
        return sum(rewrite_history(storage, ids, texts) for ids, texts in purges)
    except BaseException:
        with suppress(Exception):
            if storage.git.run("for-each-ref", "--format=%(objectname) %(refname)") == refs:
                _record(storage, (), pending=[])
        raise


def _die_with_parent() -> None:
    """In the filter's process, before it runs: be killed when the purge is (Linux). Left running
    without the purge's locks, it would move the branch under the writes that come next."""
    import ctypes
    import signal

    with suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


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


def clean_repository(storage: Storage) -> None:
    """Make the old commits unreachable and delete them: reflogs, ORIG_HEAD and the like, then gc."""
    for name in ("ORIG_HEAD", "FETCH_HEAD", "COMMIT_EDITMSG", "MERGE_MSG", "SQUASH_MSG"):
        with suppress(FileNotFoundError):
            (storage.git.git_dir / name).unlink()
    _remove_tree(storage.git.git_dir / "filter-repo")
    with writing(".git", "old objects may remain until the next purge or sync"):
        storage.git.run("reflog", "expire", "--expire=now", "--expire-unreachable=now", "--all")
        storage.git.run("gc", "--quiet", "--prune=now")


def _remove_tree(path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def purge_derived(storage: Storage, texts: list[str], progress=None) -> dict:
    """The index and the embedding cache, rid of the texts (a failure is reported, not raised:
    the history is already clean, and `memvault reindex --clear` can finish the job)."""
    from memvault.index.search import purge_index

    try:
        return purge_index(storage, texts, progress=progress)
    except Exception as e:  # noqa: BLE001 - the purge itself is done
        storage.notify(f"search index not rebuilt after the purge ({worded(e)}); run `memvault reindex --clear`")
        return {"error": worded(e)}


# -- what this clone knows -----------------------------------------------------------------------

def _state(storage: Storage) -> dict:
    try:
        data = json.loads(storage.read_text(PURGE_STATE) or "{}")
    except ValueError:
        data = {}
    return data if isinstance(data, dict) else {}


def _record(storage: Storage, ids: Iterable[str], *, push_owed: bool | None = None,
            pending: list[str] | None = None, before: str | None = None) -> None:
    state = _state(storage)
    state["clean"] = sorted(set(state.get("clean") or []) | set(ids))
    if pending is not None:
        state["pending"] = sorted(set(pending))
        if pending and before:
            state["before"] = before  # HEAD before the rewrite (Recovery.recover_locked)
        elif not pending:
            state.pop("before", None)
    if push_owed is not None:
        state["push_owed"] = bool(push_owed) or bool(state.get("push_owed"))
    storage.state_dir  # noqa: B018 - creates .memvault/
    atomic_write(storage.root / PURGE_STATE, json.dumps(state, indent=1) + "\n")


def push_owed(storage: Storage) -> bool:
    """Whether a purge made here has not been pushed yet (the remote still holds the old history)."""
    return bool(_state(storage).get("push_owed"))


def pushed(storage: Storage) -> None:
    state = _state(storage)
    if state.get("push_owed"):
        state["push_owed"] = False
        atomic_write(storage.root / PURGE_STATE, json.dumps(state, indent=1) + "\n")


# -- adopting a purge made elsewhere (memvault.remote.sync) ---------------------------------------------

def purged_ids_at(storage: Storage, ref: str | None) -> set[str]:
    """The purged ids in tombstones.jsonl of the working tree (ref None) or of a commit."""
    return {i for i, t in parse_tombstones(_tombstones_at(storage, ref)).items() if t.purged}


def _tombstones_at(storage: Storage, ref: str | None) -> str:
    """tombstones.jsonl of the working tree (ref None) or of a commit; "" where there is none."""
    import git

    if ref is None:
        return storage.read_text(TOMBSTONES_FILE)
    try:
        return storage.git.run("show", f"{ref}:{TOMBSTONES_FILE}")
    except git.GitCommandError:
        return ""


def needs_scrub(storage: Storage, tracking: str | None) -> set[str]:
    """The purged ids (from this vault's and the fetched remote's tombstones) whose text this
    clone's refs may still hold: ids it never scrubbed, or all of them when the fetched commits
    mention one (another clone pushed on top of the old history). Empty: nothing to rewrite."""
    purged = purged_ids_at(storage, None) | (purged_ids_at(storage, tracking) if tracking else set())
    if not purged:
        return set()
    clean = set(_state(storage).get("clean") or [])
    unknown = purged - clean
    if unknown:
        # Never scrubbed here: a clone made after the purge has nothing to rewrite (one look at
        # the whole history, once), an older one does.
        if any(_mentioned(storage, fact_id, "--all") for fact_id in sorted(unknown)):
            return purged
        _record(storage, unknown)
    if tracking and storage.git.head() is not None:
        if any(_mentioned(storage, fact_id, f"HEAD..{tracking}") for fact_id in sorted(purged)):
            return purged
    return set()


def _mentioned(storage: Storage, fact_id: str, revisions: str) -> bool:
    """Does a commit in `revisions` add or remove a daily-log item of this fact?"""
    if storage.git.head() is None and revisions != "--all":
        return False
    return bool(storage.git.run("log", "--format=%H", "-1", "-S", stored_id(fact_id), revisions, "--", LOGS_DIR))


def texts_of(storage: Storage, ids: set[str], refs: Iterable[str]) -> dict[str, str]:
    """Id -> the text of each of these facts as this clone knows it: its daily logs, then the logs
    of `refs`."""
    found: dict[str, str] = {f.id: f.text for f in storage.facts.iter_facts(include_forgotten=True) if f.id in ids}
    import git

    for ref in refs:
        missing = sorted(ids - set(found))
        if not missing:
            break
        patterns = "".join(f"{fact_id}\n" for fact_id in missing)
        try:
            hits = storage.git.run("grep", "-l", "-F", "-f", "-", ref, "--", LOGS_DIR, input=patterns).splitlines()
        except git.GitCommandError:
            continue  # (git grep exits 1 when nothing matches)
        for hit in hits:
            rel = hit.split(":", 1)[1]
            for fact in parse_log(storage.git.run("show", hit), rel)[0]:
                if fact.id in ids:
                    found.setdefault(fact.id, fact.text)
    return found


def adopt_purges(storage: Storage, tracking: str | None) -> list[str]:
    """Rewrite this clone's history for the purges it has not applied (hold the write lock):
    the same filter gives the same commits, so the fetched purged history then merges as usual.
    Returns the ids scrubbed (empty when there was nothing to do)."""
    ids = needs_scrub(storage, tracking)
    if not ids:
        return []
    refuse_uncommitted(storage, "sync that adopts a purge")
    _refuse_records_alone(storage, tracking, ids)
    texts = texts_of(storage, ids, [r for r in ("HEAD", tracking) if r])
    # One rewrite per purge, in the order they were made: one text replaced inside another gives
    # another result in one pass than in two, and the commits must come out the same as on the
    # clone that purged (replaying a purge already applied changes nothing). A sync killed from
    # here until it has pruned the old objects (`adopted`) leaves a purge to finish.
    _noted_rewrite(storage, [(group, [texts[i] for i in group if i in texts])
                             for group in purge_groups(storage, tracking, ids)])
    _record(storage, ids)
    purge_derived(storage, list(texts.values()))
    return sorted(ids)


def _refuse_records_alone(storage: Storage, tracking: str | None, ids: set[str]) -> None:
    """Stop when the remote records a purge its own history does not bear out.

    A purge made on another clone arrives with that history rewritten: no commit of the remote's
    branch holds the fact's daily-log item any more. A record whose item the branch still holds is
    a record alone (forged by anyone with push access, or old history pushed back over a purge),
    and adopting it would rewrite this clone's history wherever the fact's text appears, for good."""
    if tracking is None:
        return
    theirs = sorted(ids & (purged_ids_at(storage, tracking) - purged_ids_at(storage, None)))
    alone = [fact_id for fact_id in theirs if _item_in_history(storage, fact_id, tracking)]
    if alone:
        raise SyncConflict(
            f"sync stopped: {tracking.removeprefix('refs/remotes/')} records the purge of {', '.join(alone)} but "
            "its own history still holds the fact (a purge rewrites it away: the record is forged, or old history "
            "was pushed back over the purge); nothing was merged and the vault is as before; to purge it anyway, "
            "run `memvault purge ID` here, then `memvault sync`")


def _item_in_history(storage: Storage, fact_id: str, rev: str) -> bool:
    """Does a commit of `rev` hold a daily-log item of this fact? Its id quoted in another fact's
    text (which a purge leaves) is no item: each commit that changed how often the id is written
    is read, and only an item parsed as this fact counts."""
    import git

    needle = stored_id(fact_id)
    for commit in storage.git.run("log", "--format=%H", "-S", needle, rev, "--", LOGS_DIR).split():
        try:
            hits = storage.git.run("grep", "-l", "-F", "-e", needle, commit, "--", LOGS_DIR).splitlines()
        except git.GitCommandError:
            continue  # (git grep exits 1 when nothing matches: the commit removed it)
        for hit in hits:
            if any(fact.id == fact_id for fact in parse_log(storage.git.run("show", hit), hit.split(":", 1)[1])[0]):
                return True
    return False


def purge_groups(storage: Storage, tracking: str | None, ids: set[str]) -> list[list[str]]:
    """The purged `ids` as the purges that made them, oldest first: a purge writes its records
    together, with one time to the microsecond (the remote's tombstones first, then this
    clone's own; records of an older memvault carry whole seconds, so two of its purges made in
    one second replay as one)."""
    contents = [_tombstones_at(storage, tracking) if tracking else "", _tombstones_at(storage, None)]
    groups: list[tuple[str, list[str]]] = []
    seen: set[str] = set()
    for content in contents:
        for line in content.splitlines():
            for fact_id, record in parse_tombstones(line).items():
                if not record.purged or fact_id not in ids or fact_id in seen:
                    continue
                seen.add(fact_id)
                if groups and groups[-1][0] == record.at:
                    groups[-1][1].append(fact_id)
                else:
                    groups.append((record.at, [fact_id]))
    rest = sorted(ids - seen)  # (no record found: one rewrite for them)
    return [sorted(group) for _at, group in groups] + ([rest] if rest else [])


def adopted(storage: Storage) -> None:
    """The sync that adopted a purge has pruned the old objects: nothing is left to finish."""
    _record(storage, (), pending=[])
