"""`status` (what the vault holds and where it stands) and `doctor` (checks, and safe repairs).

Both only read, except `doctor(fix=True)`, whose repairs are each one commit or a local-only change.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from memvault.citations import pages_citing, pages_holding_credentials
from memvault.credentials import find_credentials, unmarked_credentials
from memvault.dream.status import dream_status
from memvault.errors import LLMError, MemvaultError, VaultUnwritable
from memvault.gitstore import GitStore, execute
from memvault.index import location
from memvault.index.search import engine, index_status, model_spec, refill_embedding_cache, reindex
from memvault.pages import cited_ids, list_pages, read_page
from memvault.storage.layout import (
    CONFIG_FILE,
    DREAM_LOCK,
    INDEX_FILE,
    LOGS_DIR,
    MEMORY_FILE,
    STATE_DIR,
    WRITE_LOCK,
    is_misdated_log,
    symlinks_in,
)
from memvault.storage.lock import held_by, holder, orphaned_holder
from memvault.storage.store import Storage
from memvault.sync import merge_driver_problems, remote_info, repair_merge_driver
from memvault.sync_checks import ignored, own_paths

OK, WARN, FAIL, FIXED = "ok", "warn", "fail", "fixed"
SHOWN_DETAILS = 20


# -- status -------------------------------------------------------------------------------------

def status(storage: Storage) -> dict:
    """Everything `memvault status` shows, as one JSON-ready dict."""
    tombstones = storage.tombstones()
    total = forgotten = 0
    for fact in storage.iter_facts(include_forgotten=True):
        total += 1
        forgotten += fact.id in tombstones
    clean = storage.git.status()
    return {
        "path": str(storage.root),
        # a purged fact's text is gone from the logs: only its tombstone counts it
        "facts": {"total": total, "live": total - forgotten, "forgotten": forgotten,
                  "purged": sum(1 for tombstone in tombstones.values() if tombstone.purged)},
        "days": len(storage.log_files()),
        "pages": len(list_pages(storage.root)),
        **_dream_state(storage),
        "index": _index_state(storage),
        "remote": remote_info(storage),
        "lock": storage.lock_holder(),
        "git": {"head": storage.git.head(), "uncommitted": len(clean)},
    }


def _dream_state(storage: Storage) -> dict:
    state = dream_status(storage)
    return {
        "watermark": state.get("watermark"),
        "pending": {"days": state.get("pending_days", 0), "facts": state.get("pending_facts", 0),
                    "scrub_pages": len(state.get("scrub_pages", []))},
        "last_dream": state.get("last_dream"),
        "failed_attempts": state.get("failed_attempts", 0),
        "failing": state.get("failing"),
        "stopped": state.get("stopped"),
    }


def _index_state(storage: Storage) -> dict:
    """The index's counts; a missing or damaged index is reported as it is, never built here."""
    state = index_status(storage)
    return {"built": not state["missing"], **state}


# -- doctor -------------------------------------------------------------------------------------

@dataclass
class Check:
    name: str
    status: str                     # ok | warn | fail | fixed
    message: str
    details: list[str] = field(default_factory=list)
    fix: str | None = None          # what `doctor --fix` would do; None when nothing is safe to do

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class DoctorReport:
    path: str
    checks: list[Check]
    fixed: list[str]

    @property
    def ok(self) -> bool:
        return not any(c.status == FAIL for c in self.checks)

    def to_dict(self) -> dict:
        return {"path": self.path, "ok": self.ok, "checks": [c.to_dict() for c in self.checks],
                "fixed": self.fixed}


def doctor(storage: Storage, fix: bool = False, llm: bool = False) -> DoctorReport:
    """Run every check; with `fix`, repair what is safe, then check again; with `llm`, the LLM check
    sends the model one tiny request."""
    fixed: list[str] = []
    checks: list[Check] = []
    for probe, repair in CHECKS:
        if probe is check_llm and llm:
            probe = _contacting_llm
        check = _run(probe, storage)
        if fix and repair and check.status in (WARN, FAIL) and check.fix:
            try:
                done = repair(storage)
            except VaultUnwritable:
                raise  # a full or read-only disk stops every repair alike: exit 9, in one line
            except MemvaultError as e:
                checks.append(Check(check.name, FAIL, f"{check.message}; the repair failed: {e}", check.details))
                continue
            fixed.extend(done)
            after = _run(probe, storage)
            if after.status == OK and done:
                after = Check(check.name, FIXED, "; ".join(done), check.details)
            check = after
        checks.append(check)
    return DoctorReport(str(storage.root), checks, fixed)


def _run(probe: Callable[[Storage], Check], storage: Storage) -> Check:
    try:
        return probe(storage)
    except MemvaultError as e:  # e.g. a symlinked log the check would read: the other checks still run
        return Check(probe.__name__.removeprefix("check_").replace("_", " "), FAIL, str(e))


# -- the git repository: the way back when .git is missing or broken ----------------------------

REPOSITORY = "git repository"
RECREATE = "re-create the repository from the vault's files in one commit, keeping a broken .git in .memvault/"


def repository_problem(root: Path) -> str | None:
    """Why the vault's git repository cannot be used (missing; HEAD or the index unreadable), or None.

    A repository git cannot write or read for want of space or permission (a full disk, a
    read-only vault) is not broken: that raises VaultUnwritable, so that nothing is set aside.
    """
    if not (root / ".git").exists():
        return "its git repository (.git) is missing"
    # The store's environment runs git with GIT_OPTIONAL_LOCKS=0: `status` would otherwise write
    # the refreshed index, and a full disk would look like a broken repository.
    store = GitStore(root)
    for args in (("rev-parse", "--verify", "--quiet", "HEAD^{commit}"), ("status", "--porcelain")):
        status, _out, err = execute(["git", *args], store.env)
        if status != 0:
            error = store.error(["git", *args], status, err)
            if isinstance(error, VaultUnwritable):
                raise error
            said = [line for line in err.splitlines() if line.strip()] or ["HEAD names no readable commit"]
            return f"its git repository (.git) is broken ({said[-1]})"
    return None


def repository_check(root: Path) -> Check:
    problem = repository_problem(root)
    if problem is None:
        return Check(REPOSITORY, OK, "HEAD and the index are readable")
    return Check(REPOSITORY, FAIL, f"{problem}; the vault's files are intact but no command can commit",
                 ["if the vault syncs with a remote, `memvault clone URL DIR` into a new directory brings "
                  "the history back instead"], fix=RECREATE)


def recreate_repository(root: Path, template: Path) -> list[str]:
    """A new repository holding the vault's files as they are, in one commit. A broken .git is moved
    into .memvault/ (never deleted); template files the vault lost (.gitignore, ...) are put back."""
    storage = Storage(root)
    done: list[str] = []
    with storage.write_lock():
        if repository_problem(root) is None:
            return done  # repaired meanwhile by another process
        git_dir = root / ".git"
        had_git = git_dir.exists() or git_dir.is_symlink()
        kept: Path | None = None
        restored: list[Path] = []
        try:
            if had_git:
                aside = root / STATE_DIR / f"broken-git-{time.strftime('%Y%m%dT%H%M%S')}"
                aside.parent.mkdir(parents=True, exist_ok=True)
                git_dir.rename(aside)
                kept = aside  # only once moved: until then the .git in place is the vault's own
                done.append(f"moved the broken .git to {storage.relpath(kept)}")
            for source in sorted(template.rglob("*")):
                target = root / source.relative_to(template)
                if source.is_file() and "__pycache__" not in source.parts and not target.exists():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    restored.append(target)
                    shutil.copy2(source, target)
                    done.append(f"restored {storage.relpath(target)} from the template")
            store = GitStore.init(root)
            sha = store.commit(["."], "adopt: re-create the repository from the vault's files")
        except BaseException:
            # A repair that cannot finish (a full disk, Ctrl-C) leaves the vault as it found it:
            # never without the .git it had, however broken.
            if kept is not None or not had_git:
                _undo_recreate(root, kept, restored)
            raise
    done.append(f"re-created the git repository from the vault's files as {(sha or '')[:10]} "
                "(earlier history is not in it)")
    return done


def _undo_recreate(root: Path, kept: Path | None, restored: list[Path]) -> None:
    """Remove the half-made repository and template files, and put the moved .git back."""
    git_dir = root / ".git"
    if git_dir.is_symlink() or git_dir.is_file():
        git_dir.unlink()
    else:
        shutil.rmtree(git_dir, ignore_errors=True)
    if kept is not None:
        kept.rename(git_dir)
    for path in restored:
        path.unlink(missing_ok=True)


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
    done = list(storage.recover())
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
                         "committed; memvault leaves them alone (commit or remove them yourself)", _shown(foreign))
        if writer is not None:
            return Check(name, OK, f"working tree clean but for a write under way{_process(writer)}, committing "
                         "its changes")
        return Check(name, OK, "working tree clean")
    problems = []
    if ours:
        problems.append(f"{len(ours)} uncommitted change(s) to the vault's files")
    if temp:
        problems.append(f"{len(temp)} temp file(s) left by a killed git or memvault process")
    return Check(name, FAIL, "; ".join(problems), _shown(ours + temp + foreign),
                 fix="commit the vault's files as one commit (never other files) and delete the temp files")


def _process(who: dict) -> str:
    """What to say of a lock holder: " (pid N: command)", or "" when it left no record."""
    return f" (pid {who['pid']}: {who['command']})" if who.get("pid") else ""


def _uncommitted_at_rest(storage: Storage, tries: int = 3) -> tuple[list[str], list[str], list[str], dict | None]:
    """storage.uncommitted(), less what writes of other processes have under way: an add appends,
    then commits, and a doctor looking in between (agents at work, doctor from cron) would call
    its change uncommitted. The files a live writer's journal names are its own; a change seen
    only while writers came and went (a write begun and done within one look, a temp file of
    theirs) is gone when looked at again. Also returns the writer whose change was set aside."""
    seen = None
    for attempt in range(tries):
        if attempt:
            time.sleep(0.05)
        before, holder = storage.being_written()
        ours, temp, foreign = storage.uncommitted()
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
        ours, temp, _foreign = storage.uncommitted()
        for rel in temp:
            storage.path(rel).unlink(missing_ok=True)
        if temp:
            done.append(f"deleted {len(temp)} temp file(s): {', '.join(temp[:3])}" + (" …" if len(temp) > 3 else ""))
        if ours:
            storage.refuse_lost_facts(ours)
            shown = ", ".join(ours[:3]) + (f" and {len(ours) - 3} more" if len(ours) > 3 else "")
            sha = storage.git.commit(ours, f"doctor: commit leftover changes ({shown})")
            if sha:
                done.append(f"committed {len(ours)} leftover change(s) as {sha[:10]}")
    return done


def check_purge(storage: Storage) -> Check:
    from memvault.purge import unfinished_purge

    ids = unfinished_purge(storage)
    who = storage.lock_holder() if ids else None
    if who is not None and holder(storage.lock_path(DREAM_LOCK)) is not None:
        # The ids stay pending until the purge (or a sync adopting one) has finished, and it holds
        # the dream and write locks all along (OS locks: they die with it). Both held: at work.
        # (A dream holds both only for its commits, and an add never takes the dream lock.)
        return Check("purge", OK, f"a purge of {len(ids)} fact(s) is under way{_process(who)}", ids)
    if ids:
        return Check("purge", FAIL, f"a purge of {len(ids)} fact(s) was interrupted before it finished: run "
                     f"`memvault purge {' '.join(ids)} --yes` again to finish it", ids)
    return Check("purge", OK, "no unfinished purge")


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
                     "through them; replace each with a regular file (or delete it) and commit", _shown(shown))
    return Check("symlinks", OK, "no symlinks in the vault")


def check_ignored(storage: Storage) -> Check:
    """The vault's own files a .gitignore ignores: memvault commits them anyway, but a plain `git add`,
    `git status` or another tool passes over them."""
    head = storage.git.head()
    found = ignored(storage.git, own_paths(storage.git, *([head] if head else [])))
    if found:
        return Check("ignored files", WARN, f"a .gitignore ignores {len(found)} of the vault's own files: memvault "
                     "commits them anyway, but plain git passes over them; remove the pattern that names them "
                     "(`git check-ignore -v --no-index PATH` shows it) and commit", _shown(found))
    return Check("ignored files", OK, "no .gitignore ignores the vault's own files")


def check_merge_driver(storage: Storage) -> Check:
    problems = merge_driver_problems(storage)
    if problems:
        return Check("merge driver", FAIL, "daily logs or tombstones may not merge cleanly on sync", problems,
                     fix="install the union merge driver")
    return Check("merge driver", OK, "daily logs and tombstones merge item by item (union driver installed)")


def check_identity(storage: Storage) -> Check:
    identity = storage.git.identity()
    who = f"{identity.name} <{identity.email}>"
    if identity.fallback:
        return Check("git identity", WARN, f"no git identity configured: commits are authored as {who}",
                     [f"set one: git -C {storage.root} config user.name 'Your Name' && "
                      f"git -C {storage.root} config user.email you@example.com"])
    return Check("git identity", OK, who)


def check_log_lines(storage: Storage) -> Check:
    problems = storage.problems()
    if problems:
        return Check("daily logs", FAIL, f"{len(problems)} line(s) in the daily logs do not parse as facts; "
                     "edit them back to `- text <!-- mv {...} -->`", _shown([str(p) for p in problems]))
    return Check("daily logs", OK, f"{len(storage.log_files())} daily log(s) parse cleanly")


def check_log_names(storage: Storage) -> Check:
    """Files named like a daily log for a day that does not exist (2026-02-30.md): no command reads
    their facts, so they are named here rather than skipped in silence."""
    found = [storage.relpath(path) for path in storage.path(LOGS_DIR).glob("*/*.md")]
    misdated = sorted(rel for rel in found if is_misdated_log(rel))
    if misdated:
        return Check("log names", FAIL, f"{len(misdated)} file(s) in {LOGS_DIR}/ are named for a day that does "
                     "not exist, so no command reads their facts; rename each to the real day its facts belong "
                     "to (or move its items into that day's log) and commit", _shown(misdated))
    return Check("log names", OK, "every daily log is named for a real day")


def check_fact_ids(storage: Storage) -> Check:
    duplicates = storage.duplicate_ids()
    if duplicates:
        return Check("fact ids", FAIL, f"{len(duplicates)} fact(s) repeat the id of an earlier one (a hand edit or "
                     "a merge without memvault's driver): search and dream count only the first copy; delete the "
                     "repeated item, or re-add its text with `memvault add` if it is a different fact",
                     _shown([str(p) for p in duplicates]))
    return Check("fact ids", OK, "every fact id is unique")


def check_citations(storage: Storage) -> Check:
    # A purged fact's item is gone but its purge record stays: a page citing it is withheld until
    # the next dream rewrites it, as after a forget (check_forgotten_citations), not broken.
    known = {fact.id for fact in storage.iter_facts(include_forgotten=True)} | set(storage.tombstones())
    missing: list[str] = []
    pages = list_pages(storage.root)
    for rel in pages:
        for fact_id in _cited(storage, rel):
            if fact_id not in known:
                missing.append(f"{rel} cites {fact_id}, which is in no daily log")
    if missing:
        return Check("citations", FAIL, f"{len(missing)} citation(s) point to facts that do not exist",
                     _shown(missing))
    return Check("citations", OK, f"{len(pages)} page(s): every cited fact exists")


def check_forgotten_citations(storage: Storage) -> Check:
    """Pages still carrying what a forgotten fact said; the next dream's scrub rewrites them."""
    name = "pages citing forgotten facts"
    citing = pages_citing(storage)
    if not citing:
        return Check(name, OK, "no page cites a forgotten fact")
    return Check(name, WARN, f"{len(citing)} page(s) cite forgotten facts: the next `memvault dream` "
                 "rewrites them without what those facts said",
                 _shown([f"{path} cites {', '.join(ids)}" for path, ids in citing.items()]))


def check_credentials(storage: Storage) -> Check:
    """Credentials that reached the vault without `add` and its check (a hand edit, a plain git
    commit, another tool): prompts already leave them out; the user decides whether they stay."""
    name = "credentials"
    facts = list(storage.iter_facts())
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
                     _shown(found))
    marked = sum(f.secret for f in facts)
    return Check(name, OK, f"none but the {marked} fact(s) stored with --allow-secret" if marked
                 else "no fact or page holds a credential")


def _cited(storage: Storage, rel: str) -> list[str]:
    page = read_page(storage.root, rel)
    if page is None:
        return []
    return list(dict.fromkeys([*page.sources, *cited_ids(page.body)]))


def check_embedding_cache(storage: Storage) -> Check:
    """sqlite's quick_check over the whole cache, and the length of every stored vector."""
    from memvault.index.embedder import cache_problem

    name = "embedding cache"
    path = _embedding_cache(storage)
    problem = cache_problem(path)
    if problem is None:
        shown = path.relative_to(storage.root) if path.is_relative_to(storage.root) else path
        return Check(name, OK, f"{shown} reads cleanly" if path.exists() else "empty (filled as texts are embedded)")
    return Check(name, WARN, f"damaged ({problem}); the next command that reads it starts it again empty",
                 fix="delete it and refill it from the search index's verified vectors")


def _embedding_cache(storage: Storage) -> Path:
    return engine(storage).cache_path


def _kept_elsewhere(storage: Storage) -> str:
    """Where the index of a vault this user cannot write is kept, as doctor says it ("" if in the vault)."""
    state = engine(storage).state
    return f" (kept in {state}: this user cannot write the vault)" if location.is_users_copy(state) else ""


def repair_embedding_cache(storage: Storage) -> list[str]:
    from memvault.index.embedder import cache_problem, delete_cache

    path = _embedding_cache(storage)
    if cache_problem(path) is None:
        return []
    with storage.index_turn:  # never under another thread's search
        index = storage.search_index
        if index is not None:
            index.close()  # its open cache connection would keep the deleted file
        delete_cache(path)
        refilled = refill_embedding_cache(storage)
    return [f"deleted the damaged embedding cache; refilled {refilled} vector(s) from the search index"]


def check_index(storage: Storage) -> Check:
    # Reads every vector row and catalog page: damage there is found here, not only by the next search.
    state = index_status(storage, verify=True)
    state = {"built": not state["missing"], **state}
    if not state["built"]:
        return Check("search index", WARN, "not built yet (the first search builds it)", fix="build it now")
    if state["unavailable"]:
        return Check("search index", WARN, f"cannot be opened: {state['unavailable']} (not damage: free some "
                     "space or make the vault writable)", fix="open it again")
    if state["damaged"]:
        return Check("search index", WARN, f"damaged ({state['damaged']}); the next search rebuilds it",
                     fix="rebuild it from the vault files")
    lag = []
    if state["drift"]:
        lag.append(f"{state['drift']} file(s) changed since indexing")
    summary = f"{state['documents']} document(s){_kept_elsewhere(storage)}"
    if state["pending_embeddings"] and not state["drift"] and not _model_on_disk(storage):
        # Only the model can give them one: a reindex would change nothing (see "embedding model").
        return Check("search index", WARN, f"{summary}; {state['pending_embeddings']} document(s) without a "
                     "vector until the embedding model is on this machine (search uses their words)")
    if state["pending_embeddings"]:
        lag.append(f"{state['pending_embeddings']} document(s) without a vector")
    if lag:
        return Check("search index", WARN, f"{summary}; " + ", ".join(lag) + " (the next search catches up)",
                     fix="reindex")
    return Check("search index", OK, f"{summary}, up to date")


def repair_index(storage: Storage) -> list[str]:
    damaged = index_status(storage, verify=True)["damaged"]
    result = reindex(storage, clear=bool(damaged))
    return [f"{'rebuilt' if damaged else 'reindexed'}: {result['facts']} fact(s), {result['sections']} page section(s)"]


def check_embedding_model(storage: Storage) -> Check:
    name = storage.config.embed_model
    path = storage.config.embed_model_path
    if path:
        origin = "MEMVAULT_EMBED_MODEL_PATH" if os.environ.get("MEMVAULT_EMBED_MODEL_PATH") else CONFIG_FILE
        model_dir = Path(path).expanduser()
        if not (model_dir / "model.onnx").is_file():
            return Check("embedding model", FAIL, f"{name}: no model.onnx in {model_dir} (from {origin}); "
                         "search falls back to words only")
        return _loadable(storage, f"{name} from {model_dir} (from {origin})")
    from memvault.index.embedder import model_cache_dir

    # Where `memvault reindex --download-model` puts the model and where search loads it from.
    cache = model_cache_dir()
    found = cached_model(cache, name)
    if found is not None:
        return _loadable(storage, f"{name} from the model cache ({found})")
    return Check("embedding model", WARN, f"{name} is not in the model cache ({cache}) and searches never "
                 "download it: search uses words only; run `memvault reindex --download-model` once, or set "
                 "MEMVAULT_EMBED_MODEL_PATH to a local ONNX model directory")


def _model_on_disk(storage: Storage) -> bool:
    """Is the embedding model's file where search loads it from (whether it loads is not asked)?"""
    path = storage.config.embed_model_path
    if path:
        return (Path(path).expanduser() / "model.onnx").is_file()
    from memvault.index.embedder import model_cache_dir

    return cached_model(model_cache_dir(), storage.config.embed_model) is not None


def _loadable(storage: Storage, where: str) -> Check:
    """The file is there; load it for real (a second or two), since a damaged file looks the same."""
    from memvault.index.embedder import Embedder, ModelUnavailable

    try:
        Embedder(model_spec(storage), threads=1).load()
    except ModelUnavailable as e:
        return Check("embedding model", FAIL, f"{where} does not load: {e}; search falls back to words only")
    return Check("embedding model", OK, f"{where}, loads")


def cached_model(cache: Path, name: str) -> Path | None:
    """The cache directory holding this model's ONNX file (hub layout or fastembed's own), if any."""
    stem = name.rsplit("/", 1)[-1].lower()
    if not cache.is_dir():
        return None
    for folder in sorted(cache.iterdir()):
        if folder.is_dir() and stem in folder.name.lower() and next(folder.rglob("*.onnx"), None) is not None:
            return folder
    return None


def check_dream(storage: Storage) -> Check:
    """A batch whose latest attempts failed: named with since when and why, so nothing stalls silently."""
    state = dream_status(storage)
    failing = state.get("failing")
    if failing is None:
        last = state.get("last_dream")
        return Check("dream", OK, f"last dream {last['outcome']} {last['batch']} at {last['at']}" if last
                     else "never run")
    runs = f"{failing['failures']} time(s)" + (f", {failing['errors']} of them without an answer"
                                               if failing["errors"] else "")
    message = f"batch {failing['batch']} keeps failing: {runs} since {failing['since']}: {failing['reason']}"
    details = [f"problem: {p}" for p in failing["problems"]]
    if failing["outcome"] == "error":
        details.append("outages and a key or model the provider refuses never count towards skipping a batch: "
                       "it waits until the model answers (check with `memvault doctor --llm`)")
    else:
        details.append(f"after {state['max_retries']} failed attempts in a row the batch is skipped; its "
                       "facts stay searchable as raw facts")
    return Check("dream", WARN, message, _shown(details))


def check_llm(storage: Storage, contact: bool = False) -> Check:
    """The model string, its keys and its window; with `contact`, one tiny request."""
    model = storage.config.llm_model
    if not model:
        return Check("LLM", WARN, "no model set: `memvault dream` cannot run (set MEMVAULT_MODEL or "
                     "[llm] model in memvault.toml)")
    from memvault.dream.consolidate import llm_settings
    from memvault.dream.llm import load_litellm, model_limits, ping, provider_of

    settings = llm_settings(storage)
    where = f" at {settings.api_base}" if settings.api_base else ""
    try:
        provider_of(model)
    except LLMError as e:
        return Check("LLM", FAIL, str(e))
    limits = model_limits(settings)
    window = f"a window of {limits.window} tokens ({limits.source}), answers of up to {limits.max_output}"
    try:
        found = load_litellm().validate_environment(model=model, api_base=settings.api_base)
    except Exception:  # noqa: BLE001 - litellm's check is advisory; the call itself says more
        found = {}
    missing = [k for k in found.get("missing_keys") or [] if k.endswith("_KEY")]
    if missing:
        # A warning: a clone that never dreams (dream runs on one machine) needs no key.
        return Check("LLM", WARN, f"{model}{where}: `memvault dream` cannot run here until {' or '.join(missing)} "
                     "is set in its environment (any value for a local server without authentication)")
    if not contact:
        return Check("LLM", OK, f"{model}{where}: configuration complete, {window} (not contacted; "
                     "`memvault doctor --llm` sends one tiny request)")
    try:
        seconds = ping(settings)
    except LLMError as e:
        return Check("LLM", FAIL, str(e))
    return Check("LLM", OK, f"{model}{where}: answered in {seconds:.1f} s; {window}")


def _contacting_llm(storage: Storage) -> Check:
    return check_llm(storage, contact=True)


def _shown(items: list[str]) -> list[str]:
    if len(items) <= SHOWN_DETAILS:
        return items
    return items[:SHOWN_DETAILS] + [f"… and {len(items) - SHOWN_DETAILS} more"]


# In repair order: leftovers are committed before the index is rebuilt from the files.
CHECKS: list[tuple[Callable[[Storage], Check], Callable[[Storage], list[str]] | None]] = [
    (check_locks, repair_locks),
    (check_symlinks, None),
    (check_purge, None),
    (check_worktree, repair_worktree),
    (check_merge_driver, repair_merge_driver),
    (check_ignored, None),
    (check_identity, None),
    (check_log_lines, None),
    (check_log_names, None),
    (check_fact_ids, None),
    (check_citations, None),
    (check_forgotten_citations, None),
    (check_credentials, None),
    (check_embedding_cache, repair_embedding_cache),
    (check_index, repair_index),
    (check_embedding_model, None),
    (check_dream, None),
    (check_llm, None),
]
