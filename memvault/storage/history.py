"""Reading the vault's history: which commit was in force at a moment, and a commit's files.

A moment is answered by the vault's branch as this clone has it: the newest commit on the
first-parent line of HEAD whose commit time is not after it (the commit a checkout of the
branch would have shown then). Nothing here writes to the repository or the working tree.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from memvault.errors import InvalidInput
from memvault.formats.dreamlog import parse_journal
from memvault.formats.facts import parse_log
from memvault.formats.layout import DREAM_LOG, LOGS_DIR, STATE_DIR, TOMBSTONES_FILE, WIKI_DIR
from memvault.formats.pages import cited_ids
from memvault.formats.tombstones import parse_tombstones
from memvault.storage.gitstore import GitStore, command_error

# How a commit is named: at least 7 hex digits (what `git log --oneline` shows), up to a full sha.
COMMIT_NAME = re.compile(r"^[0-9a-fA-F]{7,64}$")
_FORMAT = "--format=%H%x1f%cI%x1f%s"
# Regular files only: a symlink or a submodule is nothing memvault reads (sync refuses them).
_FILE_MODES = (b"100644", b"100755")


@dataclass(frozen=True)
class Commit:
    """A commit of the vault's history: its sha, commit time and subject."""

    sha: str
    at: str
    message: str

    @property
    def moment(self) -> datetime:
        return datetime.fromisoformat(self.at)


def first_parent_line(git: GitStore) -> list[Commit]:
    """The commits of the branch's first-parent line, newest first (what `commit_at` searches)."""
    return [commit for line in git.run("log", "--first-parent", _FORMAT, "HEAD").split("\n")
            if (commit := _one(line)) is not None]


def commit_at(line: list[Commit], moment: datetime) -> Commit | None:
    """The commit in force at `moment` (aware) on a first-parent line, or None when the vault had no
    commit yet: the first one, newest first, not made after it (as `git log --before` picks)."""
    return next((commit for commit in line if commit.moment <= moment), None)


def head(git: GitStore) -> str | None:
    """HEAD's sha, read from git's files (a question about the past asks it every time), else from git."""
    try:
        ref = (git.git_dir / "HEAD").read_text(encoding="utf-8").strip()
        if not ref.startswith("ref: "):
            return ref or None
        name = ref[5:]
        loose = git.git_dir / name
        if loose.is_file():
            return loose.read_text(encoding="utf-8").strip() or None
        for packed in (git.git_dir / "packed-refs").read_text(encoding="utf-8").splitlines():
            sha, _space, packed_name = packed.partition(" ")
            if packed_name == name:
                return sha
    except (OSError, UnicodeDecodeError):
        pass
    return git.head()


def named_commit(git: GitStore, name: str) -> Commit:
    """The commit `name` (hex digits) names, which must be in the history of HEAD (InvalidInput)."""
    from git import GitCommandError

    if not COMMIT_NAME.match(name):
        raise InvalidInput(f"{name!r} does not name a commit (7 to 64 hex digits)")
    try:
        sha = git.run("rev-parse", "--verify", "-q", "--end-of-options", f"{name.lower()}^{{commit}}")
    except GitCommandError:
        raise InvalidInput(f"no commit {name} in this vault") from None
    try:
        git.run("merge-base", "--is-ancestor", sha, "HEAD")
    except GitCommandError:
        raise InvalidInput(f"commit {name} is not in the history of this vault's branch (a purge or an "
                           "undone change may have rewritten it)") from None
    found = _one(git.run("log", "-1", _FORMAT, sha))
    assert found is not None
    return found


def _one(line: str) -> Commit | None:
    if not line.strip():
        return None
    sha, at, message = line.split("\x1f", 2)
    return Commit(sha, at, message)


def write_tree(git: GitStore, sha: str, dest: Path) -> int:
    """Write the files of commit `sha` into the new folder `dest` (regular files only, none under
    `.memvault/`); returns the bytes written. Two git processes: one listing, one reading blobs."""
    listing = _bytes(git, ["ls-tree", "-r", "-z", "--full-tree", sha])
    entries: list[tuple[bytes, str]] = []
    for record in listing.split(b"\0"):
        if not record:
            continue
        meta, _tab, raw = record.partition(b"\t")
        mode, kind, obj = meta.split()
        path = raw.decode("utf-8", "surrogateescape")
        if kind == b"blob" and mode in _FILE_MODES and _plain(path):
            entries.append((obj, path))
    blobs = _bytes(git, ["cat-file", "--batch"], b"".join(obj + b"\n" for obj, _path in entries))
    dest.mkdir(parents=True)
    made: set[Path] = set()
    position = written = 0
    for _obj, path in entries:
        end = blobs.index(b"\n", position)
        size = int(blobs[position:end].split()[2])
        target = dest / path
        if target.parent not in made:
            target.parent.mkdir(parents=True, exist_ok=True)
            made.add(target.parent)
        target.write_bytes(blobs[end + 1:end + 1 + size])
        position = end + 1 + size + 1  # (each blob is followed by a newline)
        written += size
    return written


def tree_sizes(git: GitStore, sha: str) -> dict[str, int]:
    """Each file write_tree writes of commit `sha`, with its size in bytes: one git process."""
    sizes: dict[str, int] = {}
    for record in _bytes(git, ["ls-tree", "-r", "-l", "-z", "--full-tree", sha]).split(b"\0"):
        meta, _tab, raw = record.partition(b"\t")
        fields = meta.split()
        path = raw.decode("utf-8", "surrogateescape")
        if len(fields) == 4 and fields[1] == b"blob" and fields[0] in _FILE_MODES and _plain(path):
            sizes[path] = int(fields[3])
    return sizes


def _plain(path: str) -> bool:
    """A path that stays inside the folder it is written to, and is no state of memvault's."""
    parts = path.split("/")
    return (not path.startswith("/") and parts[0] != STATE_DIR
            and not any(part in ("", ".", "..") or part.lower() == ".git" for part in parts))


def _bytes(git: GitStore, args: list[str], given: bytes | None = None) -> bytes:
    command = ["git", *args]
    done = subprocess.run(command, env=git.env, input=given, capture_output=True,
                          stdin=None if given is not None else subprocess.DEVNULL)
    if done.returncode:
        raise command_error(command, done.returncode, os.fsdecode(done.stderr))
    return done.stdout


# -- where facts came from (memvault why) -------------------------------------------------------------

@dataclass
class Trail:
    """What the history says of one fact: the commits that added it, cited it in a page (the
    latest), recorded it in dream's journal without a citation, named it as superseded, forgot it."""

    added: Commit | None = None
    cited: Commit | None = None
    recorded: tuple[Commit, str] | None = None   # (commit, how: settled, kept or unconsolidated)
    superseded: list[tuple[str, Commit]] = field(default_factory=list)  # (successor id, its commit)
    forgotten: Commit | None = None


def trails(git: GitStore, ids: list[str]) -> tuple[dict[str, Trail], dict[str, list]]:
    """Each fact's Trail, and the dream journal entries (memvault.formats.dreamlog.Entry) each commit added.

    One pass over the history (every branch merged into HEAD, oldest first): the commits whose
    changes to the daily logs, tombstones.jsonl, the wiki or log.md mention one of the ids."""
    if not ids:
        return {}, {}
    pattern = "|".join(re.escape(fact_id) for fact_id in ids)
    out = git.run("-c", "core.quotePath=false", "log", "--reverse", "-p", "--unified=0", "--no-color",
                  "--no-renames", "--pickaxe-all", "-E", f"-G{pattern}", "--format=%x1e%H%x1f%cI%x1f%s", "HEAD",
                  "--", LOGS_DIR, TOMBSTONES_FILE, WIKI_DIR, DREAM_LOG)
    wanted = set(ids)
    found = {fact_id: Trail() for fact_id in ids}
    journal: dict[str, list] = {}
    for record in out.split("\x1e")[1:]:
        head, _newline, patch = record.partition("\n")
        commit = _one(head)
        assert commit is not None
        added_lines = _added(patch)
        for path, line in added_lines:
            _note(found, wanted, commit, path, line)
        entries = parse_journal("\n".join(line for path, line in added_lines if path == DREAM_LOG))
        if entries:
            journal[commit.sha] = entries
        for entry in entries:
            for key, listed in (("kept", entry.kept), ("settled", entry.ids)):
                for fact_id in wanted.intersection(listed):
                    found[fact_id].recorded = (commit, "unconsolidated" if entry.outcome == "skipped" else key)
    return found, journal


def _added(patch: str) -> list[tuple[str, str]]:
    """(file, line) of every line a patch adds."""
    lines = []
    path = ""
    for line in patch.split("\n"):
        if line.startswith("+++ "):
            path = line[6:] if line.startswith("+++ b/") else ""
        elif line.startswith("+") and path:
            lines.append((path, line[1:]))
    return lines


def _note(found: dict[str, Trail], wanted: set[str], commit: Commit, path: str, line: str) -> None:
    if path.startswith(LOGS_DIR + "/") and line.startswith("- "):
        for fact in parse_log(line + "\n", path)[0]:
            if fact.id in wanted and found[fact.id].added is None:
                found[fact.id].added = commit
            if fact.supersedes in wanted:
                found[fact.supersedes].superseded.append((fact.id, commit))
    elif path == TOMBSTONES_FILE:
        for fact_id in wanted.intersection(parse_tombstones(line)):
            if found[fact_id].forgotten is None:
                found[fact_id].forgotten = commit
    elif path.startswith(WIKI_DIR + "/"):
        for fact_id in wanted.intersection(cited_ids(line)):
            found[fact_id].cited = commit  # the latest: a dream undone and done again cites anew
