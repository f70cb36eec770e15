"""`dream --undo`: revert the last applied consolidation, if nothing later touched its files.

Which commits count is read from the log.md lines each dream commit added, not from commit
subjects: a commit whose lines include `dream ok <days or late>` applied a batch; one that only
logged a failed attempt, a provider error or a skip (`failed`, `error`, `skipped`) wrote no page
and is passed over, its log.md lines kept. A scrub (`dream ok scrub`) is never reverted, and undo
does not reach past one: that could bring back what forgotten facts said.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memvault.errors import MemvaultError, NotFound
from memvault.formats.dreamlog import SCRUB_LABEL, parse_journal
from memvault.formats.layout import DREAM_LOG
from memvault.storage.files import atomic_write
from memvault.storage.journal import REPLACE
from memvault.storage.store import Storage

UNDO_PREFIX = "dream: undo "
_RECORD = "\x1e"
_FIELD = "\x1f"


class UndoRefused(MemvaultError):
    """Later commits changed the batch's files, they hold uncommitted edits, or a scrub came after
    it (exit 1, type `UndoRefused`)."""


@dataclass
class _DreamCommit:
    sha: str
    message: str
    added: list[str] = field(default_factory=list)   # the log.md lines the commit appended

    @property
    def outcomes(self) -> set[tuple[str, bool]]:
        """(outcome, is a scrub) of each log.md entry the commit added."""
        return {(e.outcome, e.label == SCRUB_LABEL) for e in parse_journal("\n".join(self.added))}


def _records(out: str) -> list[tuple[str, str, list[str]]]:
    """(sha, subject, following lines) of a `git log --format=<RS>%H<US>%s ...` output."""
    found = []
    for record in out.split(_RECORD)[1:]:
        head, _, rest = record.partition("\n")
        sha, _, subject = head.partition(_FIELD)
        found.append((sha, subject, rest.splitlines()))
    return found


def _dream_commits(storage: Storage) -> list[_DreamCommit]:
    """Every commit that changed log.md with a `dream: ` subject, newest first: one git call."""
    out = storage.git.run("log", f"--format={_RECORD}%H{_FIELD}%s", "--grep=^dream: ", "-p", "--unified=0",
                        "--no-color", "--no-renames", "--", DREAM_LOG)
    commits = []
    for sha, subject, lines in _records(out):
        added = [line[1:] for line in lines if line.startswith("+") and not line.startswith("+++")]
        commits.append(_DreamCommit(sha, subject, added))
    return commits


def _changes_since(storage: Storage, sha: str) -> tuple[dict[str, str], list[tuple[str, str, set[str]]]]:
    """The target's {path: status letter} and each later commit's (sha, subject, paths): one git call."""
    out = storage.git.run("log", f"--format={_RECORD}%H{_FIELD}%s", "--name-status", "--no-renames",
                        f"{sha}^..HEAD")
    target: dict[str, str] = {}
    later = []
    for commit, subject, lines in _records(out):
        # `--name-status` lines are "<status>\t<path>": path -> status
        changes = {path: status for status, path in (line.split("\t", 1) for line in lines if "\t" in line)}
        if commit == sha:
            target = {path: status[0] for path, status in changes.items()}
        else:
            later.append((commit, subject, set(changes)))
    return target, later


def _without_block(text: str, block: list[str]) -> str | None:
    """`text` with the consecutive lines `block` removed once (None when they are not there)."""
    lines = text.split("\n")
    n = len(block)
    for i in range(len(lines) - n, -1, -1):
        if lines[i:i + n] == block:
            return "\n".join(lines[:i] + lines[i + n:])
    return None


def _is_undone(sha: str, undone: set[str]) -> bool:
    """Was the commit reverted already (`undone`: the short shas the undo commits name)?"""
    return any(sha.startswith(short) for short in undone)


def _undo_target(commits: list[_DreamCommit], undone: set[str]) -> _DreamCommit:
    """The newest applied day batch not undone yet; refused when a scrub came after it."""
    target = scrub = None
    for commit in commits:
        if commit.message.startswith(UNDO_PREFIX) or _is_undone(commit.sha, undone):
            continue
        if ("ok", True) in commit.outcomes:
            scrub = scrub or commit
        elif ("ok", False) in commit.outcomes:
            target = commit
            break
    if target is None:
        raise NotFound("no applied dream batch to undo" + (
            f" after the scrub {scrub.sha[:12]} ({scrub.message})" if scrub else ""))
    if scrub is not None:
        raise UndoRefused(
            f"cannot undo {target.sha[:12]} ({target.message}): the later scrub {scrub.sha[:12]} rewrote "
            "pages without forgotten facts, and undoing past it could bring their statements back"
        )
    return target


def _refuse_later_changes(target: _DreamCommit, paths: set[str], later: list[tuple[str, str, set[str]]],
                          undone: set[str]) -> None:
    """UndoRefused when a later commit changed one of the target's files."""
    for sha, subject, changed in later:
        # an undone dream and its undo cancel out; log.md is handled line by line below;
        # anything else touching these files blocks
        if subject.startswith(UNDO_PREFIX) or _is_undone(sha, undone):
            continue
        clash = paths & changed
        if clash:
            raise UndoRefused(
                f"cannot undo {target.sha[:12]} ({target.message}): later commit {sha[:12]} "
                f"({subject}) changed {', '.join(sorted(clash)[:3])}"
            )


def _refuse_uncommitted(storage: Storage, target: _DreamCommit, paths: list[str]) -> None:
    """UndoRefused when a file the revert rewrites holds an edit git has no copy of: it would be lost."""
    dirty = [line[3:] for line in storage.git.status(*paths)]
    if dirty:
        raise UndoRefused(
            f"cannot undo {target.sha[:12]} ({target.message}): the revert would overwrite uncommitted edits "
            f"to {', '.join(dirty[:3])}; keep them by committing them (then undo refuses, as after any later "
            f"change), or drop them (`git -C {storage.root} checkout -- {' '.join(dirty[:3])}`) and undo again"
        )


def undo_last_dream(storage: Storage) -> dict:
    """Revert the newest applied dream batch not undone yet; returns what was reverted."""
    storage.recovery.recover()
    with storage.dream_lock(), storage.write_lock():
        storage.refuse_during_merge()
        commits = _dream_commits(storage)
        undone = {c.message[len(UNDO_PREFIX):].split(" ", 1)[0] for c in commits
                  if c.message.startswith(UNDO_PREFIX)}
        target = _undo_target(commits, undone)
        status, later = _changes_since(storage, target.sha)
        paths = set(status) - {DREAM_LOG}
        _refuse_later_changes(target, paths, later, undone)
        # later log-only commits (failed attempts, errors, skips) appended to log.md: drop only
        # the target's own lines, so their retry counts and watermark lines stay
        log = _without_block(storage.read_text(DREAM_LOG), target.added)
        if log is None:
            raise UndoRefused(f"cannot undo {target.sha[:12]} ({target.message}): its log.md lines were edited since")
        message = f"{UNDO_PREFIX}{target.sha[:12]} ({target.message})"
        restore = sorted(p for p in paths if status[p] != "A")
        everything = sorted(paths | {DREAM_LOG})
        _refuse_uncommitted(storage, target, everything)
        with storage.transaction(REPLACE, everything, message):
            if restore:
                # nothing later changed these files: their state before the batch is the revert
                storage.git.run("checkout", f"{target.sha}^", "--", *restore)
            for path in paths - set(restore):  # pages the batch created
                storage.path(path).unlink(missing_ok=True)
            atomic_write(storage.path(DREAM_LOG), log)
            commit = storage.git.commit(everything, message)
    return {
        "reverted": target.sha,
        "message": target.message,
        "commit": commit,
        "paths": everything,
        "watermark": storage.dreams.watermark.isoformat() if storage.dreams.watermark else None,
    }
