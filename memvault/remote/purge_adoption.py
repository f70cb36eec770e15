"""Adopting a purge made on another clone (memvault.remote.sync): after a fetch, this clone's
history is rewritten by the same filter, one purge at a time in the order they were made, so its
commits become the very commits the purging clone made and the fetched history merges as usual."""

from __future__ import annotations

from memvault.errors import SyncConflict
from memvault.formats.facts import parse_log, stored_id
from memvault.formats.layout import LOGS_DIR, TOMBSTONES_FILE
from memvault.formats.tombstones import parse_tombstones
from memvault.remote import purge_state
from memvault.remote.purge_history import noted_rewrite, purge_derived, refuse_uncommitted, texts_of
from memvault.storage.store import Storage


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
    clean = set(purge_state.read_state(storage).get("clean") or [])
    unknown = purged - clean
    if unknown:
        # Never scrubbed here: a clone made after the purge has nothing to rewrite (one look at
        # the whole history, once), an older one does.
        if any(_mentioned(storage, fact_id, "--all") for fact_id in sorted(unknown)):
            return purged
        purge_state.record(storage, unknown)
    if tracking and storage.git.head() is not None:
        if any(_mentioned(storage, fact_id, f"HEAD..{tracking}") for fact_id in sorted(purged)):
            return purged
    return set()


def _mentioned(storage: Storage, fact_id: str, revisions: str) -> bool:
    """Does a commit in `revisions` add or remove a daily-log item of this fact?"""
    if storage.git.head() is None and revisions != "--all":
        return False
    return bool(storage.git.run("log", "--format=%H", "-1", "-S", stored_id(fact_id), revisions, "--", LOGS_DIR))


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
    noted_rewrite(storage, [(group, [texts[i] for i in group if i in texts])
                             for group in purge_groups(storage, tracking, ids)])
    purge_state.record(storage, ids)
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
