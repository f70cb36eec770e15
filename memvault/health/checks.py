"""doctor's checks of the vault itself: its repository, locks, work tree, daily logs, citations and
credentials. Each feature package brings its own (index.probes, dream.probes, remote.probes).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from memvault.base.config import unknown_settings
from memvault.base.credentials import find_credentials, unmarked_credentials
from memvault.errors import InvalidInput
from memvault.formats.layout import (
    CONFIG_FILE,
    INDEX_FILE,
    LOGS_DIR,
    MEMORY_FILE,
    TOMBSTONES_FILE,
    WRITE_LOCK,
    is_misdated_log,
)
from memvault.formats.pages import cited_ids
from memvault.formats.tombstones import unreadable_lines
from memvault.health.doctor import FAIL, FIXED, OK, WARN, Check, DoctorReport, Probe, process_of, shown_details
from memvault.health.full import Full
from memvault.health.tally import fact_counts, forget_tally, full_count
from memvault.storage.lock import held_by, orphaned_holder
from memvault.storage.paths import symlinks_in
from memvault.storage.repository import repository_problem
from memvault.storage.store import Storage
from memvault.storage.wiki import list_pages, pages_citing, pages_holding_credentials, read_page

REPOSITORY = "git repository"
RECREATE = "re-create the repository from the vault's files in one commit, keeping a broken .git in .memvault/"


def repository_check(root: Path) -> Check:
    problem = repository_problem(root)
    if problem is None:
        return Check(REPOSITORY, OK, "HEAD and the index are readable")
    return Check(REPOSITORY, FAIL, f"{problem}; the vault's files are intact but no command can commit",
                 ["if the vault syncs with a remote, `memvault clone URL DIR` into a new directory brings "
                  "the history back instead"], fix=RECREATE)


def diagnose(root: Path, fix: bool, then: Callable[[], DoctorReport]) -> DoctorReport:
    """doctor for a vault that may not open: its git repository is checked first (with `fix`, a
    broken one is re-created from the files, as `adopt` does); then every other check, by `then`
    (doctor on the opened vault), unless the repository fails."""
    from memvault.formats.layout import CONFIG_FILE
    from memvault.storage.paths import template_root
    from memvault.storage.repository import recreate_repository

    first = repository_check(root) if (root / CONFIG_FILE).is_file() else None
    unloadable = settings_problem(root)
    if unloadable is not None:
        # No command opens the vault until the file loads (every setting is checked as it is read),
        # so neither can the other checks, nor any repair: --fix would commit the file as a leftover.
        return DoctorReport(str(root), [check for check in (first, unloadable) if check is not None], [])
    done: list[str] = []
    if first is not None and first.status == FAIL:
        if not fix:
            return DoctorReport(str(root), [first], [])
        done = recreate_repository(root, template_root())
        first = Check(first.name, FIXED, "; ".join(done))
    report = then()
    if first is not None:
        report.checks.insert(0, first)
        report.fixed[:0] = done
    return report


def settings_problem(root: Path) -> Check | None:
    """The settings check of a vault whose memvault.toml cannot be loaded; None when it loads."""
    from memvault.base.config import load_config
    from memvault.formats.layout import CONFIG_FILE

    if not (root / CONFIG_FILE).is_file():
        return None  # (not a vault: opening it says so)
    try:
        load_config(root / CONFIG_FILE)
    except InvalidInput as exc:
        return Check("settings", FAIL, f"{exc}; no command runs until it loads",
                     ["fix what it names (docs/reference.md lists every setting), then run `memvault doctor` "
                      "again for the other checks"])
    return None


def check_locks(storage: Storage) -> Check:
    name = "locks"
    details: list[str] = []
    problems: list[str] = []
    holder = storage.lock_holder()
    stale_record = False
    if holder:
        details.append(f"write lock {held_by(holder)}")
    else:
        # harmless: the lock is free (the kernel let it go with the process); the next write removes it
        stale_record = orphaned_holder(storage.lock_path(WRITE_LOCK)) is not None
    if storage.journal.exists() and not holder:
        problems.append(f"an interrupted command left a change half-done ({storage.relpath(storage.journal.path)})")
    git_locks = storage.git.abandoned_locks()
    if git_locks:
        names = ", ".join(storage.relpath(p) for p in git_locks)
        problems.append(f"stale git lock file(s) left by a killed git process: {names}")
    if problems:
        return Check(name, FAIL, "; ".join(problems), details,
                     fix="finish or roll back the interrupted change and remove stale lock files")
    if stale_record:
        return Check(name, WARN, "a killed writer's record of holding the write lock is left; the lock itself "
                     "is free, and the next write removes the record", details, fix="remove it now")
    return Check(name, OK, details[0] if details else "no stale locks", details)


def repair_locks(storage: Storage) -> list[str]:
    done = list(storage.recovery.recover())
    record = orphaned_holder(storage.lock_path(WRITE_LOCK))
    if record is not None:
        record.unlink(missing_ok=True)
        done.append("removed the write lock's stale holder record")
    return done


def check_worktree(storage: Storage) -> Check:
    name = "uncommitted changes"
    if storage.git.merge_in_progress():
        return Check(name, FAIL, "a git merge is in progress (a sync conflict being resolved by hand?): "
                     "finish it with `git commit` or abandon it with `git merge --abort`")
    ours, temp, foreign, writer = _uncommitted_at_rest(storage)
    if not (ours or temp):
        if foreign:
            return Check(name, WARN, f"{len(foreign)} file(s) that are not part of the vault's layout are not "
                         "committed; memvault leaves them alone (commit or remove them yourself)",
                         shown_details(foreign))
        if writer is not None:
            return Check(name, OK, f"working tree clean but for a write under way{process_of(writer)}, committing "
                         "its changes")
        return Check(name, OK, "working tree clean")
    problems = []
    if ours:
        problems.append(f"{len(ours)} uncommitted change(s) to the vault's files")
    if temp:
        problems.append(f"{len(temp)} temp file(s) left by a killed git or memvault process")
    return Check(name, FAIL, "; ".join(problems), shown_details(ours + temp + foreign),
                 fix="commit the vault's files as one commit (never other files) and delete the temp files")


def _uncommitted_at_rest(storage: Storage, tries: int = 3) -> tuple[list[str], list[str], list[str], dict | None]:
    """storage.hand_edits.uncommitted(), less what writes of other processes have under way: an add appends,
    then commits, and a doctor looking in between (agents at work, doctor from cron) would call
    its change uncommitted. The files a live writer's journal names are its own; a change seen
    only while writers came and went (a write begun and done within one look, a temp file of
    theirs) is gone when looked at again. Also returns the writer whose change was set aside."""
    seen = None
    for attempt in range(tries):
        if attempt:
            time.sleep(0.05)
        before, holder = storage.being_written()
        ours, temp, foreign = storage.hand_edits.uncommitted()
        after, later = storage.being_written()
        busy = before | after
        seen = seen or ((holder or later) if busy & set(ours) else None)
        ours = [rel for rel in ours if rel not in busy]
        if not (ours or temp):
            break
    return ours, temp, foreign, seen


def repair_worktree(storage: Storage) -> list[str]:
    if storage.git.merge_in_progress():
        return []
    done = []
    with storage.write_lock():
        ours, temp, _foreign = storage.hand_edits.uncommitted()
        for rel in temp:
            storage.path(rel).unlink(missing_ok=True)
        if temp:
            done.append(f"deleted {len(temp)} temp file(s): {', '.join(temp[:3])}" + (" …" if len(temp) > 3 else ""))
        if ours:
            storage.hand_edits.refuse_lost_facts(ours)
            shown = ", ".join(ours[:3]) + (f" and {len(ours) - 3} more" if len(ours) > 3 else "")
            sha = storage.git.commit(ours, f"doctor: commit leftover changes ({shown})")
            if sha:
                done.append(f"committed {len(ours)} leftover change(s) as {sha[:10]}")
    return done


def check_symlinks(storage: Storage) -> Check:
    """Symlinks in the vault: a synced commit could aim one anywhere, so memvault never follows them."""
    found = symlinks_in(storage.root)
    tracked = [line.split("\t", 1)[1] for line in storage.git.run("ls-files", "-s").splitlines()
               if line.startswith("120000 ")]
    found = sorted(set(found) | set(tracked))
    if found:
        shown = [f"{rel} -> {os.readlink(storage.root / rel)}" if os.path.islink(storage.root / rel) else
                 f"{rel} (a symlink in git)" for rel in found]
        return Check("symlinks", FAIL, f"{len(found)} symlink(s) in the vault: memvault refuses to read or write "
                     "through them; replace each with a regular file (or delete it) and commit", shown_details(shown))
    return Check("symlinks", OK, "no symlinks in the vault")


def check_identity(storage: Storage) -> Check:
    identity = storage.git.identity()
    who = f"{identity.name} <{identity.email}>"
    if identity.fallback:
        return Check("git identity", WARN, f"no git identity configured: commits are authored as {who}",
                     [f"set one: git -C {storage.root} config user.name 'Your Name' && "
                      f"git -C {storage.root} config user.email you@example.com"])
    return Check("git identity", OK, who)


def check_settings(storage: Storage) -> Check:
    """Keys of memvault.toml that no setting reads: a typo there leaves its setting at the default."""
    unloadable = settings_problem(storage.root)  # (edited since the vault was opened)
    if unloadable is not None:
        return unloadable
    unknown = unknown_settings(storage.read_text(CONFIG_FILE), CONFIG_FILE)
    if unknown:
        return Check("settings", WARN, f"{CONFIG_FILE} holds {len(unknown)} key(s) memvault does not read, "
                     "so they change nothing: " + ", ".join(unknown),
                     ["every setting is listed in docs/reference.md (Configuration); a setting of a newer "
                      "memvault is read once this one is updated"])
    return Check("settings", OK, f"every key of {CONFIG_FILE} is a setting")


def check_log_lines(storage: Storage) -> Check:
    problems = storage.facts.problems()
    if problems:
        return Check("daily logs", FAIL, f"{len(problems)} line(s) in the daily logs do not parse as facts; "
                     "edit them back to `- text <!-- mv {...} -->`", shown_details([str(p) for p in problems]))
    return Check("daily logs", OK, f"{len(storage.facts.log_files())} daily log(s) parse cleanly")


def check_forget_records(storage: Storage) -> Check:
    """Lines of tombstones.jsonl that forget nothing (a hand edit, a merge by plain git): the fact
    they meant is still live, and nothing else would say so."""
    name = "forget records"
    bad = unreadable_lines(storage.read_text(TOMBSTONES_FILE))
    if bad:
        return Check(name, WARN, f"{len(bad)} line(s) of {TOMBSTONES_FILE} are no forget record and forget nothing: "
                     "correct or remove them, and `memvault forget` the fact each meant",
                     shown_details([line if len(line) <= 80 else line[:79] + "…" for line in bad]))
    return Check(name, OK, f"{len(storage.tombstone_log.tombstones())} forget record(s), every line readable")


def check_fact_counts(storage: Storage) -> Check:
    """The counts `status` keeps (memvault.health.tally) against a recount of every log."""
    kept, counted = fact_counts(storage), full_count(storage)
    if kept != counted:
        return Check("fact counts", WARN, f"the counts status keeps ({kept['total']} facts, {kept['forgotten']} "
                     f"forgotten) differ from a recount of the logs ({counted['total']}, {counted['forgotten']})",
                     fix="drop the kept counts; the next status counts every log again")
    return Check("fact counts", OK, f"the counts status keeps match a recount: {counted['total']} fact(s), "
                 f"{counted['forgotten']} forgotten")


def repair_fact_counts(storage: Storage) -> list[str]:
    forget_tally(storage)
    return ["dropped the kept fact counts"]


def check_log_names(storage: Storage) -> Check:
    """Files named like a daily log for a day that does not exist (2026-02-30.md): no command reads
    their facts, so they are named here rather than skipped in silence."""
    found = [storage.relpath(path) for path in storage.path(LOGS_DIR).glob("*/*.md")]
    misdated = sorted(rel for rel in found if is_misdated_log(rel))
    if misdated:
        return Check("log names", FAIL, f"{len(misdated)} file(s) in {LOGS_DIR}/ are named for a day that does "
                     "not exist, so no command reads their facts; rename each to the real day its facts belong "
                     "to (or move its items into that day's log) and commit", shown_details(misdated))
    return Check("log names", OK, "every daily log is named for a real day")


def check_fact_ids(storage: Storage) -> Check:
    duplicates = storage.facts.duplicate_ids()
    if duplicates:
        return Check("fact ids", FAIL, f"{len(duplicates)} fact(s) repeat the id of an earlier one (a hand edit or "
                     "a merge without memvault's driver): search and dream count only the first copy; delete the "
                     "repeated item, or re-add its text with `memvault add` if it is a different fact",
                     shown_details([str(p) for p in duplicates]))
    return Check("fact ids", OK, "every fact id is unique")


def check_citations(storage: Storage) -> Check:
    # A purged fact's item is gone but its purge record stays: a page citing it is withheld until
    # the next dream rewrites it, as after a forget (check_forgotten_citations), not broken.
    known = ({fact.id for fact in storage.facts.iter_facts(include_forgotten=True)}
             | set(storage.tombstone_log.tombstones()))
    missing: list[str] = []
    pages = list_pages(storage.root)
    for rel in pages:
        for fact_id in _cited(storage, rel):
            if fact_id not in known:
                missing.append(f"{rel} cites {fact_id}, which is in no daily log")
    if missing:
        return Check("citations", FAIL, f"{len(missing)} citation(s) point to facts that do not exist",
                     shown_details(missing))
    return Check("citations", OK, f"{len(pages)} page(s): every cited fact exists")


def check_forgotten_citations(storage: Storage) -> Check:
    """Pages still carrying what a forgotten fact said; the next dream's scrub rewrites them."""
    name = "pages citing forgotten facts"
    citing = pages_citing(storage)
    if not citing:
        return Check(name, OK, "no page cites a forgotten fact")
    return Check(name, WARN, f"{len(citing)} page(s) cite forgotten facts: the next `memvault dream` "
                 "rewrites them without what those facts said",
                 shown_details([f"{path} cites {', '.join(ids)}" for path, ids in citing.items()]))


def check_credentials(storage: Storage) -> Check:
    """Credentials that reached the vault without `add` and its check (a hand edit, a plain git
    commit, another tool): prompts already leave them out; the user decides whether they stay."""
    name = "credentials"
    facts = list(storage.facts.iter_facts())
    paths = {fact.id: fact.path for fact in facts}
    found = [f"{fid} ({paths[fid]}): {', '.join(kinds)}" for fid, kinds in unmarked_credentials(facts).items()]
    found += [f"{path}: no model is shown it, and dream leaves it as it is"
              for path in sorted(pages_holding_credentials(storage))]
    for summary in (MEMORY_FILE, INDEX_FILE):
        lines = storage.read_text(summary).splitlines()
        found += [f"{summary} line {i + 1}: {', '.join(k.kind for k in kinds)}"
                  for i, kinds in find_credentials(lines).items()]
    if found:
        return Check(name, WARN, f"{len(found)} fact(s), page(s) or line(s) hold a credential that `add` never "
                     "checked (a hand edit or another tool wrote it): dream and context keep them out of every "
                     "prompt; `memvault purge ID` removes a fact from history, the others need a hand edit",
                     shown_details(found))
    marked = sum(f.secret for f in facts)
    return Check(name, OK, f"none but the {marked} fact(s) stored with --allow-secret" if marked
                 else "no fact or page holds a credential")


def _cited(storage: Storage, rel: str) -> list[str]:
    page = read_page(storage.root, rel)
    if page is None:
        return []
    return list(dict.fromkeys([*page.sources, *cited_ids(page.body)]))


LOCKS = Probe(check_locks, repair_locks)
SYMLINKS = Probe(check_symlinks)
WORKTREE = Probe(check_worktree, repair_worktree)
IDENTITY = Probe(check_identity)
SETTINGS = Probe(check_settings)
LOG_LINES = Probe(check_log_lines, full=Full("daily logs"))
FORGET_RECORDS = Probe(check_forget_records)
FACT_COUNTS = Probe(check_fact_counts, repair_fact_counts, full=Full("fact counts"))
LOG_NAMES = Probe(check_log_names)
FACT_IDS = Probe(check_fact_ids, full=Full("fact ids"))
CITATIONS = Probe(check_citations, full=Full("citations"))
FORGOTTEN_CITATIONS = Probe(check_forgotten_citations)
CREDENTIALS = Probe(check_credentials, full=Full("credentials", reads=2.0))
