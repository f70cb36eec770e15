"""doctor's checks of what sync and purge look after: an unfinished purge, the merge driver, the
vault's own files a .gitignore hides.
"""

from __future__ import annotations

from memvault.formats.layout import DREAM_LOCK
from memvault.health.doctor import FAIL, OK, WARN, Check, Probe, process_of, shown_details
from memvault.remote.ignores import ignored, own_paths
from memvault.remote.merge_driver import merge_driver_problems, repair_merge_driver
from memvault.storage.lock import holder
from memvault.storage.store import Storage


def check_purge(storage: Storage) -> Check:
    from memvault.remote.purge import unfinished_purge

    ids = unfinished_purge(storage)
    who = storage.lock_holder() if ids else None
    if who is not None and holder(storage.lock_path(DREAM_LOCK)) is not None:
        # The ids stay pending until the purge (or a sync adopting one) has finished, and it holds
        # the dream and write locks all along (OS locks: they die with it). Both held: at work.
        # (A dream holds both only for its commits, and an add never takes the dream lock.)
        return Check("purge", OK, f"a purge of {len(ids)} fact(s) is under way{process_of(who)}", ids)
    if ids:
        return Check("purge", FAIL, f"a purge of {len(ids)} fact(s) was interrupted before it finished: run "
                     f"`memvault purge {' '.join(ids)} --yes` again to finish it", ids)
    return Check("purge", OK, "no unfinished purge")


def check_ignored(storage: Storage) -> Check:
    """The vault's own files a .gitignore ignores: memvault commits them anyway, but a plain `git add`,
    `git status` or another tool passes over them."""
    head = storage.git.head()
    found = ignored(storage.git, own_paths(storage.git, *([head] if head else [])))
    if found:
        return Check("ignored files", WARN, f"a .gitignore ignores {len(found)} of the vault's own files: memvault "
                     "commits them anyway, but plain git passes over them; remove the pattern that names them "
                     "(`git check-ignore -v --no-index PATH` shows it) and commit", shown_details(found))
    return Check("ignored files", OK, "no .gitignore ignores the vault's own files")


def check_merge_driver(storage: Storage) -> Check:
    problems = merge_driver_problems(storage)
    if problems:
        return Check("merge driver", FAIL, "daily logs or tombstones may not merge cleanly on sync", problems,
                     fix="install the union merge driver")
    return Check("merge driver", OK, "daily logs and tombstones merge item by item (union driver installed)")


PURGE = Probe(check_purge)
MERGE_DRIVER = Probe(check_merge_driver, repair_merge_driver)
IGNORED = Probe(check_ignored)
