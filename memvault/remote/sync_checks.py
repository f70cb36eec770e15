"""What sync refuses to take from what a remote changed, checked on the fetched commits before a merge.

A shared remote may be written by someone else, so its commits are read as untrusted input. Its
tree is checked first (memvault.remote.tree_checks: paths git refuses, symlinks, submodules, this
machine's state folder and the like); then what it changed since the common base of both sides:

- a fact or a forget record removed: logs and tombstones.jsonl are append-only, and a fast-forward
  (or a file changed on the remote side only) would take a removal as it is, un-forgetting a fact
  or dropping one, where memvault's merge driver never drops an item. Edits of an item stay
  allowed, as the driver allows them (a typo fixed by hand on another machine);
- a memvault.toml memvault cannot load (a value out of range, a TOML syntax error): every command
  on every clone would stop at it, sync and `doctor --fix` included;
- a .gitignore (at any depth) that makes git ignore the vault's own files: plain git would pass
  over them (memvault stages its own files regardless; memvault.remote.ignores);
- an item added under the id of a fact a daily log holds (another log, or the same one): readers
  take one of two items with one id, so a forged copy would stand in for the fact;
- a change of where dream sends the facts (`[llm] model` or `api_base` in memvault.toml): those
  decide which server receives the vault's facts and this machine's API key, so they change only
  by a commit made here too (the same edit on both sides merges as one); `.gitattributes` alike,
  which decides how git converts and merges the vault's files (but for the union lines memvault's
  own `doctor --fix` restores).

Each check answers a one-line reason, or None. A sync also reports the facts whose text the remote
edited (`RemoteChanges.edited`), which it takes, and stops at a fact edited differently on both
sides (`edited_both`), as at a wiki page changed on both: the merge driver would keep this side's
text, and the remote's would silently leave the tree.
"""

from __future__ import annotations

import tomllib
from collections import Counter
from dataclasses import dataclass, field

from memvault.base.config import parse_config
from memvault.base.text import shown
from memvault.errors import InvalidInput
from memvault.formats.facts import INDENT, item_id, parse_log, split_log, stored_id
from memvault.formats.layout import CONFIG_FILE, GITATTRIBUTES, GITIGNORE, LOGS_DIR, TOMBSTONES_FILE
from memvault.formats.tombstones import Tombstone, parse_tombstones, unreadable_lines
from memvault.remote.ignores import ignored, own_paths
from memvault.remote.revisions import common_base, read_files
from memvault.remote.union_merge import MERGE_DRIVER, UNION_PATTERNS
from memvault.storage.gitstore import GitStore

LLM_ENDPOINT_KEYS = ("model", "api_base")


FIX_AT_SOURCE = "fix it where it was pushed from, then sync again"


@dataclass
class RemoteChanges:
    """What the remote side changed in the logs, the forget records, memvault.toml, .gitattributes
    and the .gitignore files since the common base of both sides."""

    removed_facts: list[str] = field(default_factory=list)  # items gone from a log (a purge's excepted)
    unforgotten: list[str] = field(default_factory=list)    # forget records gone from tombstones.jsonl
    forgotten: list[str] = field(default_factory=list)      # forget records added there and not here: taken
    edited: list[str] = field(default_factory=list)         # items changed there and not here: taken
    edited_both: list[str] = field(default_factory=list)    # items changed there and here, differently
    edited_logs: set[str] = field(default_factory=set)      # the logs holding them
    reused: list[str] = field(default_factory=list)         # ids added there that another log holds
    unreadable: list[str] = field(default_factory=list)     # "<file>: <line>" of lines added there that no reader reads
    ignored: list[str] = field(default_factory=list)        # the vault's files a .gitignore changed there ignores
    ignore_files: list[str] = field(default_factory=list)   # the .gitignore files changed there
    config_problem: str | None = None                       # why memvault.toml there cannot be loaded
    endpoint_move: str | None = None                        # "llm.model: 'a' -> 'b'", when only the remote moved it
    attributes_move: bool = False                           # .gitattributes changed there, not here

    def refusal(self) -> tuple[str, str] | None:
        """Why sync must not take these changes and what to do about it, or None."""
        if self.unforgotten:
            return (f"removes forget record(s) of {shown(self.unforgotten)} from {TOMBSTONES_FILE}, which would "
                    "bring forgotten facts back; forget records are append-only", FIX_AT_SOURCE)
        if self.reused:
            return (f"adds a second item under the id(s) of fact(s) a daily log already holds "
                    f"({shown(self.reused)}), which would be read in place of those facts; remove the copies",
                    FIX_AT_SOURCE)
        if self.unreadable:
            return (f"adds line(s) that are no fact or forget record memvault can read ({shown(self.unreadable)}), "
                    "which would stop dream before their day on every clone; correct or remove them", FIX_AT_SOURCE)
        if self.removed_facts:
            return (f"removes fact(s) {shown(self.removed_facts)} from the daily logs, which are append-only "
                    "(`memvault forget` is how a fact goes)", FIX_AT_SOURCE)
        if self.config_problem:
            return (f"changes {CONFIG_FILE} into settings memvault cannot load ({self.config_problem}), which "
                    "would stop every command on every clone, sync included", FIX_AT_SOURCE)
        if self.ignored:
            return (f"changes {shown(self.ignore_files)} so that git ignores the vault's own files "
                    f"({shown(self.ignored)}), which a plain `git add` or `git status` would then pass over; "
                    "a vault's .gitignore may ignore other files only", FIX_AT_SOURCE)
        # A setting may be the user's own change, made on another machine.
        yours = ("if that change is yours, make the same edit here and commit it (`memvault doctor --fix`), "
                 "then sync again; if not, undo it where it was pushed from")
        if self.attributes_move:
            return f"changes {GITATTRIBUTES}, which tells git how to read, convert and merge the vault's files", yours
        if self.endpoint_move:
            return f"changes where dream sends the facts ({self.endpoint_move}) in {CONFIG_FILE}", yours
        return None


def remote_changes(store: GitStore, head: str, rev: str) -> RemoteChanges:
    """What `rev` changed since its common base with `head` (for unrelated histories, since
    nothing: no fact to remove or edit, but an endpoint set there is still a move)."""
    changes = RemoteChanges()
    base = common_base(store, head, rev)
    changed = _changed_paths(store, base, rev)
    # Both versions of every changed file from one git process: a sync after months away may bring
    # hundreds of daily logs.
    files = read_files(store, [(commit, path) for path in [*changed, TOMBSTONES_FILE] for commit in (base, head, rev)])
    theirs_tombstones = parse_tombstones(files[rev, TOMBSTONES_FILE])
    added: dict[str, set[str]] = {}  # id -> the logs the remote added an item of it to
    for path in changed:
        versions = tuple(files[commit, path] for commit in (base, head, rev))
        if path.rsplit("/", 1)[-1] == GITIGNORE:  # logs/.gitignore too
            changes.ignore_files.append(path)
        elif path == TOMBSTONES_FILE:
            _forget_records_changed(changes, *versions)
        elif path.startswith(LOGS_DIR + "/"):
            _log_changed(changes, path, versions, theirs_tombstones, added)
        elif path == CONFIG_FILE:
            changes.config_problem = config_problem(files[rev, path])
            changes.endpoint_move = _llm_endpoint_change(*versions)
        elif path == GITATTRIBUTES:
            changes.attributes_move = not _own_attributes_added(files[head, path], files[rev, path])
    if changes.ignore_files:
        own = own_paths(store, head, rev)
        changes.ignored = sorted(set(ignored(store, own, rev)) - set(ignored(store, own, head)))
    changes.reused = sorted(set(changes.reused) | set(_reused(store, head, added)))
    return changes


def _changed_paths(store: GitStore, base: str, rev: str) -> list[str]:
    """The files `rev` changed since `base` that the checks read: the logs, the forget records,
    memvault.toml, .gitattributes and the .gitignore files."""
    # (memvault's paths to git are literal, so the .gitignore files at any depth are picked here)
    return [path for path in store.run("diff", "--name-only", "-z", "--no-renames", base, rev).split("\0")
            if path.startswith(LOGS_DIR + "/") or path in (TOMBSTONES_FILE, CONFIG_FILE, GITATTRIBUTES)
            or path.rsplit("/", 1)[-1] == GITIGNORE]


def _forget_records_changed(changes: RemoteChanges, base: str, ours: str, theirs: str) -> None:
    """Forget records the remote removed (refused), and those it added that this side lacks (taken)."""
    before, here, there = (parse_tombstones(text) for text in (base, ours, theirs))
    bad = Counter(unreadable_lines(theirs)) - Counter(unreadable_lines(base)) - Counter(unreadable_lines(ours))
    changes.unreadable += [f"{TOMBSTONES_FILE}: {_cut(line)}" for line in bad]
    changes.unforgotten = sorted(set(before) - set(there))
    changes.forgotten = sorted(i for i, t in there.items() if i not in before and i not in here and not t.purged)


def _log_changed(changes: RemoteChanges, path: str, versions: tuple[str, ...],
                 theirs_tombstones: dict[str, Tombstone], added: dict[str, set[str]]) -> None:
    """What the remote did to one daily log's items: added (noted in `added`), repeated, removed, edited."""
    log = _LogReader(path)
    before, ours, after = (log.read(text) for text in versions)
    changes.unreadable += [f"{path}: {_cut(line)}" for line in after.unreadable - before.unreadable - ours.unreadable]
    for i in after.parsed.keys() - before.parsed.keys():
        added.setdefault(i, set()).add(path)
    # an id twice in one log (readers take one of them): counted as reused unless it was so before
    changes.reused += sorted(after.repeated() - before.repeated())
    # A purge (adopted before this check) removes a fact's item with a purge record.
    changes.removed_facts += sorted(i for i in before.parsed.keys() - after.parsed.keys()
                                    if not (i in theirs_tombstones and theirs_tombstones[i].purged))
    for i in sorted(before.parsed.keys() & after.parsed.keys()):
        if after.stored.get(i) == before.stored.get(i):
            continue  # the remote left its item as it was (every item of an append-only log)
        kind = _edit(before.stored.get(i), ours.stored.get(i), after.stored.get(i),
                     before.fact(i), ours.fact(i), after.fact(i))
        if kind == "taken":
            changes.edited.append(i)
        elif kind == "conflict":
            changes.edited_both.append(i)
            changes.edited_logs.add(path)


def _cut(line: str) -> str:
    first = line.split("\n", 1)[0].strip()
    return first if len(first) <= 60 else first[:59] + "…"


def _reused(store: GitStore, head: str, added: dict[str, set[str]]) -> list[str]:
    """The ids the remote added an item of to a log other than the one `head` (or another log of
    the remote) holds it in: two items with one id, where readers take one of them."""
    import git

    reused = {i for i, paths in added.items() if len(paths) > 1}
    ours: list[str] = []
    if added:
        # Only the logs naming one of the ids are read (an item writes its id as stored_id gives it),
        # the patterns on stdin: 100k ids fit no command line.
        patterns = "".join(f"{stored_id(fact_id)}\n" for fact_id in sorted(added))
        try:
            hits = store.run("grep", "-l", "-F", "-z", "-f", "-", head, "--", LOGS_DIR, input=patterns).split("\0")
        except git.GitCommandError:  # exit 1: no log names any of them
            hits = []
        ours = [hit.split(":", 1)[1] for hit in hits if hit]
    files = read_files(store, [(head, path) for path in ours])
    for path in ours:
        reused.update(i for i in _LogReader(path).read(files[head, path]).parsed if i in added and path not in added[i])
    return sorted(reused)


def _own_attributes_added(ours: str, theirs: str) -> bool:
    """Is .gitattributes there this side's, or this side's plus only the union lines memvault
    writes itself (`doctor --fix` on the other machine)?"""
    def lines(text: str) -> list[str]:
        return [" ".join(line.split()) for line in text.splitlines() if line.strip()]

    own = {f"{pattern} merge={MERGE_DRIVER}" for pattern in UNION_PATTERNS}
    mine, there = lines(ours), lines(theirs)
    return set(mine) <= set(there) and set(there) - set(mine) <= own


def _edit(base_raw, ours_raw, theirs_raw, base, ours, theirs) -> str | None:
    """What the merge will do with a fact's item the remote stored differently: "taken" (its text
    or fields changed and this side's item did not), "conflict" (this side's item changed too, so
    the merge driver keeps it, and the remote's different text or fields would leave the tree),
    or None (nothing a reader would see changes, or this side already says the same).

    The driver compares the stored items byte for byte (memvault.remote.union_merge), so that is what
    decides which side it keeps; whether the result differs is judged on the parsed fact, so that
    line ends or key order (a log saved with CRLF) are no edit.
    """
    if theirs_raw == base_raw:
        return None
    if ours_raw is None or ours_raw == base_raw:
        return "taken" if theirs != base else None
    return "conflict" if ours != theirs else None


def config_problem(text: str) -> str | None:
    """Why memvault.toml's `text` cannot be loaded, as the loader says it (the key and the value, or
    where it does not parse), or None. No MEMVAULT_* variable stands in for a bad value here: a
    clone without it would fail."""
    try:
        parse_config(text, CONFIG_FILE, environ={})
    except InvalidInput as e:
        return str(e)
    return None


def _llm_endpoint_change(base_toml: str, ours_toml: str, theirs_toml: str) -> str | None:
    """Dream's model or endpoint as the remote changed it (memvault.toml's texts at the common base,
    here and there), when this side did not make the same change."""
    old, ours, theirs = (_llm_settings(text) for text in (base_toml, ours_toml, theirs_toml))
    moved = [f"llm.{key}: {ours.get(key)!r} -> {theirs.get(key)!r}" for key in LLM_ENDPOINT_KEYS
             if theirs.get(key) != old.get(key) and theirs.get(key) != ours.get(key)]
    return ", ".join(moved) or None


def _llm_settings(text: str) -> dict:
    try:
        llm = tomllib.loads(text).get("llm", {})
    except tomllib.TOMLDecodeError:
        return {}  # loading the settings reports the file
    return llm if isinstance(llm, dict) else {}


@dataclass
class _LogVersion:
    """One version of a daily log as the checks read it."""

    ids: list[str] = field(default_factory=list)        # of the items that parse, in order
    parsed: dict[str, str] = field(default_factory=dict)  # id -> stored text of its last item that parses
    stored: dict[str, str] = field(default_factory=dict)  # id -> its last item as the merge driver keys it
    unreadable: Counter = field(default_factory=Counter)  # lines and items no reader takes for a fact
    path: str = ""

    def repeated(self) -> set[str]:
        """Ids that more than one item carries (readers take one of them)."""
        return {fact_id for fact_id, count in Counter(self.ids).items() if count > 1}

    def fact(self, fact_id: str) -> dict | None:
        """The fact as stored (where in the file it sits left out), None when no item of it parses."""
        if fact_id not in self.parsed:
            return None
        facts, _problems = parse_log(self.parsed[fact_id], self.path)
        return {**facts[0].to_dict(), "path": None}


class _LogReader:
    """Reads the versions of one daily log (the common base, this side's, the remote's), parsing
    each distinct item once: they share nearly all their items, and reading each version whole
    several times took a sync bringing one line to a 25 MB log to 17 s and 560 MB."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._known: dict[str, tuple[str, str | None, bool]] = {}  # item -> (item, its id, parses)

    def read(self, text: str) -> _LogVersion:
        version = _LogVersion(path=self.path)
        for chunk in split_log(text):
            if not chunk.is_item:
                line = chunk.text.rstrip("\n")
                if line.strip() and not line.startswith("#") and not line.startswith(INDENT):  # as parse_log reads it
                    version.unreadable[line] += 1
                continue
            known = self._known.get(chunk.text)
            if known is None:
                facts, _problems = parse_log(chunk.text, self.path)
                # The merge driver keys an item by its metadata's id even where the rest does not parse.
                fact_id = facts[0].id if facts else item_id(chunk.text.split("\n", 1)[0])
                known = self._known[chunk.text] = (chunk.text, fact_id, bool(facts))
            item, fact_id, parses = known  # one copy of an item's text for all versions
            if not parses:
                version.unreadable[item] += 1
            if fact_id is None:
                continue
            version.stored[fact_id] = item
            if parses:
                version.ids.append(fact_id)
                version.parsed[fact_id] = item
        return version

