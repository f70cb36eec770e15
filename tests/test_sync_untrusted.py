"""What sync and clone refuse from a shared remote that someone else can push to.

Faults tried, each pushed with plain git by a "hostile" clone, then `memvault sync` run on another
machine: files planted under `.memvault/` (a write-queue request carrying an AWS key, a journal),
the forget records emptied, a fact's item deleted from its log (by fast-forward, and inside a real
merge where this machine changed another file), dream's `api_base` and `model` pointed at another
server, an orphan history force-pushed with such an endpoint, a forged item under an existing fact's
id in another day's log, a folder or a submodule where a daily log belongs. Each stops with exit 7
and one line, the vault exactly as before and still usable. Allowed on purpose, and checked: a
fact's text edited by hand and a forget record added (each named in the report), an endpoint change
made on both sides. A fact edited differently on both sides stops the sync until resolved.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import run_memvault
from support.git import git
from support.sync import HOSTILE, push, refused, shared

from memvault import Vault
from memvault.errors import ExitCode


def _ids(vault: Path) -> dict[str, str]:
    return {fact.id: fact.text for fact in Vault(vault).iter_facts()}


def _log(h: Path) -> Path:
    return h / "logs" / "2026" / "2026-11-20.md"


def test_files_planted_under_the_state_folder_are_refused_by_sync_and_clone(tmp_path):
    """A queue request (the next `add` would commit its fact, unchecked) and a journal."""
    _a, b, h = shared(tmp_path)
    queue = h / ".memvault" / "queue"
    queue.mkdir(parents=True)
    item = ('- planted AKIAIOSFODNN7EXAMPLE '
            '<!-- mv {"id":"1k0yyt0000000001","at":"2026-11-20T20:50:00+00:00"} -->')
    (queue / "00000000000000000001-1-deadbeef.req").write_text(json.dumps(
        {"owner": [1, None], "facts": [["logs/2026/2026-11-20.md", "1k0yyt0000000001", "planted", item]]}))
    (h / ".memvault" / "journal.json").write_text("{}")
    git(h, "add", "-f", ".memvault")
    push(h, "plant")
    refused(b, ".memvault/queue/00000000000000000001-1-deadbeef.req", ".memvault/journal.json")
    assert "1k0yyt0000000001" not in _ids(b)
    c = tmp_path / "c"
    done = run_memvault("clone", str(tmp_path / "remote.git"), str(c))
    assert done.returncode == ExitCode.SYNC_CONFLICT and ".memvault/" in done.stderr, done.stderr
    assert not c.exists()


def test_emptied_forget_records_never_bring_a_forgotten_fact_back(tmp_path):
    a, b, h = shared(tmp_path)
    forgotten = next(i for i, text in _ids(a).items() if "tea" in text)
    assert run_memvault("forget", forgotten, "--vault", str(a)).returncode == 0
    for machine in (a, b):
        assert run_memvault("sync", "--vault", str(machine)).returncode == 0
    git(h, "pull", "-q", "origin", "main")
    (h / "tombstones.jsonl").write_text("")
    push(h)
    refused(b, "forget record", forgotten)
    assert run_memvault("show", forgotten, "--vault", str(b)).returncode == ExitCode.NOT_FOUND


def test_a_fact_deleted_on_the_remote_is_refused_by_fast_forward_and_by_merge(tmp_path):
    a, b, h = shared(tmp_path)
    dropped = next(i for i, text in _ids(a).items() if "tap" in text)
    _log(h).write_text("".join(line for line in _log(h).read_text().splitlines(keepends=True)
                               if dropped not in line))
    push(h)
    refused(b, dropped, "append-only")  # b has nothing new: a fast-forward would take the removal
    # b's add above made a commit of its own: now a real merge, the log changed on the remote only
    refused(b, dropped)
    assert dropped in _ids(b)


def test_a_fact_edited_by_hand_on_another_machine_syncs_and_is_named(tmp_path):
    """Allowed, as the merge driver allows a one-sided edit (a typo fixed in the log by hand), but
    never silently: the sync names the edited fact, in text and in --json, and no other."""
    a, b, h = shared(tmp_path)
    fixed = next(i for i, text in _ids(a).items() if "tap" in text)
    _log(h).write_text(_log(h).read_text().replace("kitchen tap", "bathroom tap"))
    push(h)
    done = run_memvault("sync", "--vault", str(b))
    assert done.returncode == 0, done.stderr
    assert _ids(b)[fixed] == "Bob fixed the bathroom tap"
    assert f"took 1 fact(s) edited on the remote ({fixed})" in done.stdout
    git(h, "pull", "-q", "origin", "main")
    with _log(h).open("a") as log:  # a new fact from the remote is no edit
        log.write('- Carol repainted the shed <!-- mv {"id":"1k0yyt0000000002","at":"2026-11-20T21:00:00+00:00"} -->\n')
    push(h)
    report = json.loads(run_memvault("sync", "--json", "--vault", str(a)).stdout)
    assert report["edited"] == [fixed] and report["received"] == 2
    assert _ids(a)["1k0yyt0000000002"] == "Carol repainted the shed"


def test_a_forget_record_added_on_the_remote_is_taken_and_named(tmp_path):
    """A forget made on another machine (or written there by hand) hides a fact here too: never
    silently. The sync names it, in text and in --json; a forget made on both sides is not named."""
    a, b, h = shared(tmp_path)
    tea = next(i for i, text in _ids(b).items() if "tea" in text)
    with (h / "tombstones.jsonl").open("a") as tombstones:
        tombstones.write(json.dumps({"id": tea, "at": "2026-11-21T10:00:00+00:00", "reason": "x", "hash": ""}) + "\n")
    git(h, "add", "tombstones.jsonl")
    push(h)
    done = run_memvault("sync", "--vault", str(b))
    assert done.returncode == 0, done.stderr
    assert f"took 1 fact(s) forgotten on the remote ({tea})" in done.stdout
    assert tea not in _ids(b)
    assert run_memvault("forget", tea, "--vault", str(a)).returncode == 0   # a forgot it too, apart
    report = json.loads(run_memvault("sync", "--json", "--vault", str(a)).stdout)
    assert report["forgotten"] == [] and tea not in _ids(a)


@pytest.mark.slow
def test_a_fact_edited_differently_on_both_sides_stops_the_sync_until_resolved(tmp_path):
    """The merge driver would keep this side's text and drop the remote's from the tree: a conflict
    (exit 7), resolved as a wiki page conflict is. The same edit on both sides is no conflict."""
    a, b, h = shared(tmp_path)
    fact = next(i for i, text in _ids(a).items() if "tap" in text)
    _log(h).write_text(_log(h).read_text().replace("kitchen tap", "bathroom tap"))
    push(h)
    _log(b).write_text(_log(b).read_text().replace("kitchen tap", "garden tap"))
    git(b, *HOSTILE, "commit", "-qam", "local fix")
    refused(b, fact, "edited differently here and on origin/main", "git merge origin/main")
    assert _ids(b)[fact] == "Bob fixed the garden tap"

    git(b, *HOSTILE, "merge", "-q", "--no-edit", "origin/main")  # the documented way out
    _log(b).write_text(_log(b).read_text().replace("garden tap", "bathroom and garden taps"))
    git(b, *HOSTILE, "commit", "-qam", "keep both")
    done = run_memvault("sync", "--vault", str(b))
    assert done.returncode == 0, done.stderr
    assert run_memvault("sync", "--vault", str(a)).returncode == 0
    assert _ids(a)[fact] == _ids(b)[fact] == "Bob fixed the bathroom and garden taps"

    git(h, "pull", "-q", "origin", "main")
    for machine in (h, a):  # one edit, made on both sides
        _log(machine).write_text(_log(machine).read_text().replace("and garden taps", "tap"))
        git(machine, *HOSTILE, "commit", "-qam", f"same fix, made on {machine.name}")
    git(h, "push", "-q", "origin", "HEAD:main")
    report = json.loads(run_memvault("sync", "--json", "--vault", str(a)).stdout)
    assert report["received"] == 1 and report["edited"] == [], report
    assert _ids(a)[fact] == "Bob fixed the bathroom tap"


def test_a_remote_edit_against_a_log_saved_here_with_crlf_is_never_reported_taken_and_dropped(tmp_path):
    """This side only re-saved the log with CRLF line ends (no fact reads differently), the remote
    fixed a fact's text. The merge driver keeps this side's stored item, so the remote's text would
    leave the tree: a conflict, never `took … edited` with the edit gone."""
    a, b, h = shared(tmp_path)
    fact = next(i for i, text in _ids(a).items() if "tap" in text)
    _log(h).write_text(_log(h).read_text().replace("kitchen tap", "bathroom tap"))
    push(h)
    _log(b).write_bytes(_log(b).read_bytes().replace(b"\n", b"\r\n"))
    git(b, *HOSTILE, "commit", "-qam", "saved on windows")
    assert _ids(b)[fact] == "Bob fixed the kitchen tap"  # the same facts
    refused(b, fact, "edited differently here and on origin/main", "git show origin/main:logs/2026/2026-11-20.md")


def test_dream_endpoint_changed_on_the_remote_is_refused_until_made_here_too(tmp_path):
    """`[llm] api_base` and `model` choose who receives the facts and this machine's API key."""
    _a, b, h = shared(tmp_path)

    def point(root: Path) -> None:
        config = (root / "memvault.toml").read_text()
        config = config.replace('model = ""', 'model = "openai/gpt-4o-mini"')
        (root / "memvault.toml").write_text(config.replace("# api_base = ", "api_base = "))

    point(h)
    push(h)
    said = refused(b, "llm.api_base", "llm.model", "make the same edit here", "memvault doctor --fix")
    assert "fix it where it was pushed from" not in said  # one remedy, not two that disagree
    point(b)
    git(b, "commit", "-qam", "dream: the same endpoint")
    done = run_memvault("sync", "--vault", str(b))
    assert done.returncode == 0, done.stderr
    assert 'model = "openai/gpt-4o-mini"' in (b / "memvault.toml").read_text()


def test_an_orphan_history_force_pushed_with_an_endpoint_is_refused_like_any_other(tmp_path):
    """A remote replaced by a history unrelated to this one (a force-push of a fresh `git init`)
    still has its dream endpoint checked: there is no common commit, so all of it is new."""
    _a, b, h = shared(tmp_path)
    orphan = tmp_path / "orphan"
    assert run_memvault("init", str(orphan)).returncode == 0
    config = (orphan / "memvault.toml").read_text().replace("# api_base = ", "api_base = ")
    (orphan / "memvault.toml").write_text(config)
    git(orphan, *HOSTILE, "commit", "-qam", "point dream elsewhere")
    git(orphan, "push", "-q", "--force", str(h / ".." / "remote.git"), "HEAD:main")
    refused(b, "llm.api_base")


def test_a_copy_of_an_existing_fact_id_in_another_log_is_refused(tmp_path):
    """A forged item carrying the id of a fact this vault holds in another day's log would be read
    in its place by search and dream (readers take one of two items with one id)."""
    _a, b, h = shared(tmp_path)
    victim = next(i for i, text in _ids(b).items() if text == "Alice drinks green tea")
    forged = h / "logs" / "2026" / "2026-11-01.md"
    forged.write_text(f'# 2026-11-01\n\n- Alice wires money to account 666 <!-- mv {{"id":"{victim}",'
                      f'"at":"2026-11-01T10:00:00+00:00"}} -->\n')
    git(h, "add", str(forged))
    push(h, "forge")
    refused(b, victim, "a daily log already holds")
    assert _ids(b)[victim] == "Alice drinks green tea"


@pytest.mark.parametrize("kind", ["folder", "submodule"])
def test_a_folder_or_submodule_where_a_log_belongs_is_refused_by_sync_and_clone(tmp_path, kind):
    """Checked out, a folder (or a submodule) named like a daily log made every command that reads
    the logs fail, doctor included."""
    _a, b, h = shared(tmp_path)
    path = "logs/2026/2026-11-22.md"
    if kind == "folder":
        (h / path).mkdir(parents=True)
        (h / path / "x").write_text("hi\n")
        git(h, "add", path)
    else:
        sha = git(h, "rev-parse", "HEAD").strip()
        git(h, "update-index", "--add", "--cacheinfo", f"160000,{sha},{path}")
    git(h, *HOSTILE, "commit", "-qm", "plant")  # what is staged (a gitlink has no checkout for -a)
    git(h, "push", "-q", "origin", "HEAD:main")
    refused(b, path)
    c = tmp_path / "c"
    done = run_memvault("clone", str(tmp_path / "remote.git"), str(c))
    assert done.returncode == ExitCode.SYNC_CONFLICT and path in done.stderr, done.stderr
    assert not c.exists()


def test_gitattributes_changed_on_the_remote_is_refused_until_made_here_too(tmp_path):
    """A `working-tree-encoding` added to the logs' rule made every later `add` fail in git."""
    _a, b, h = shared(tmp_path)
    attributes = h / ".gitattributes"
    attributes.write_text(attributes.read_text().replace("logs/** merge=union",
                                                          "logs/** merge=union working-tree-encoding=UTF-16LE"))
    git(h, "add", ".gitattributes")
    git(h, *HOSTILE, "commit", "-qm", "tidy")
    git(h, "push", "-q", "origin", "HEAD:main")
    said = refused(b, ".gitattributes", "make the same edit here", "memvault doctor --fix")
    assert "fix it where it was pushed from" not in said  # one remedy, not two that disagree


def test_a_second_item_under_a_fact_id_in_the_same_log_is_refused(tmp_path):
    """A forged copy placed before the original in the same log was read as the fact everywhere,
    and reported nowhere (after it, it passed for an edit)."""
    _a, b, h = shared(tmp_path)
    victim = next(i for i, text in _ids(b).items() if text == "Alice drinks green tea")
    log = _log(h).read_text()
    original = next(line for line in log.splitlines() if victim in line)
    _log(h).write_text(log.replace(original, original.replace("Alice drinks green tea", "Alice drinks only coffee")
                                   + "\n" + original))
    push(h, "forge")
    refused(b, victim, "a daily log already holds")
    assert _ids(b)[victim] == "Alice drinks green tea"


@pytest.mark.parametrize("planted", ["logs/2025", "logs/.gitattributes", "wiki/people/.gitattributes"])
def test_a_file_where_a_year_folder_belongs_or_a_nested_gitattributes_is_refused(tmp_path, planted):
    """A file named like a year folder made adds to that year fail; a .gitattributes in a folder
    (working-tree-encoding) turned every later log commit into mojibake, clones included."""
    _a, b, h = shared(tmp_path)
    (h / planted).parent.mkdir(parents=True, exist_ok=True)
    (h / planted).write_text("*.md working-tree-encoding=UTF-16LE-BOM\n" if "attributes" in planted else "hi\n")
    git(h, "add", "-f", planted)
    git(h, *HOSTILE, "commit", "-qm", "plant")
    git(h, "push", "-q", "origin", "HEAD:main")
    refused(b, planted)
    c = tmp_path / "c"
    done = run_memvault("clone", str(tmp_path / "remote.git"), str(c))
    assert done.returncode == ExitCode.SYNC_CONFLICT and planted in done.stderr, done.stderr


def test_the_union_lines_doctor_fix_adds_on_another_machine_are_taken(tmp_path):
    """memvault's own repair is no foreign change: both machines lost a merge line, another
    machine's `doctor --fix` put it back; this one takes it. Anything else added is refused."""
    _a, b, h = shared(tmp_path)
    for root in (h, b):  # the line lost on both sides (made here too, so that sync takes it)
        attributes = root / ".gitattributes"
        attributes.write_text(attributes.read_text().replace("tombstones.jsonl merge=union\n", ""))
        git(root, "add", ".gitattributes")
        git(root, *HOSTILE, "commit", "-qm", "lose a line")
    git(h, "push", "-q", "origin", "HEAD:main")
    assert run_memvault("sync", "--vault", str(b)).returncode == 0
    # (the two "lose a line" commits are one commit only when made within the same second: else b
    # pushed a merge of both, which h takes before pushing on top)
    git(h, *HOSTILE, "pull", "-q", "--no-rebase", "origin", "main")
    (h / ".gitattributes").write_text((h / ".gitattributes").read_text() + "tombstones.jsonl merge=union\n")
    git(h, "add", ".gitattributes")
    git(h, *HOSTILE, "commit", "-qm", "doctor: union merge for daily logs and tombstones")
    git(h, "push", "-q", "origin", "HEAD:main")
    done = run_memvault("sync", "--vault", str(b))
    assert done.returncode == 0, done.stderr
    assert "tombstones.jsonl merge=union" in (b / ".gitattributes").read_text()
    (h / ".gitattributes").write_text((h / ".gitattributes").read_text() + "*.md diff=secret\n")
    git(h, "add", ".gitattributes")
    git(h, *HOSTILE, "commit", "-qm", "more")
    git(h, "push", "-q", "origin", "HEAD:main")
    refused(b, ".gitattributes")


def test_a_remote_file_where_a_file_of_yours_lies_stops_the_sync_and_deletes_nothing(tmp_path):
    """Fault tried: the remote adds `mynotes.txt`, which this clone holds untracked (a note of the
    user's), and a file named `*`. git refused the merge, and undoing it ran `git clean -- <the
    remote's paths>`: `*` as a pattern deleted every untracked file of the vault (the note, a
    draft folder), and the sync said "nothing changed". Now the sync stops first, naming the file,
    and every file of the user's is as it was; once it is moved away, the sync goes on."""
    _a, b, h = shared(tmp_path)
    mine = {"mynotes.txt": "my precious note\n", "todo.md": "buy milk\n", "drafts/a.txt": "draft\n"}
    for rel, text in mine.items():
        (b / rel).parent.mkdir(parents=True, exist_ok=True)
        (b / rel).write_text(text)
    (h / "*").write_text("x\n")
    (h / "mynotes.txt").write_text("the remote's notes\n")
    git(h, "add", "-A")
    push(h, "notes")

    head = git(b, "rev-parse", "HEAD")
    done = run_memvault("sync", "--vault", str(b))
    assert done.returncode == ExitCode.SYNC_CONFLICT and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "adds mynotes.txt" in done.stderr and "nothing was merged" in done.stderr, done.stderr
    assert {rel: (b / rel).read_text() for rel in mine} == mine and git(b, "rev-parse", "HEAD") == head

    (b / "mynotes.txt").rename(tmp_path / "mynotes.txt")
    done = run_memvault("sync", "--vault", str(b))
    assert done.returncode == 0, done.stderr
    assert (b / "mynotes.txt").read_text() == "the remote's notes\n" and (b / "todo.md").read_text() == "buy milk\n"
    assert (b / "drafts" / "a.txt").read_text() == "draft\n"


def test_a_merge_undone_keeps_the_untracked_files_it_never_wrote(tmp_path):
    """Fault tried: a merge that fails (or is killed) after its journal is written, with a file of
    the user's at one of the paths it touches. The undo restores the vault's files and deletes
    what the merge created, but never a file that was there, untracked, before it."""
    from memvault.storage.journal import MERGE

    _a, b, _h = shared(tmp_path)
    (b / "mine.txt").write_text("mine\n")
    storage = Vault(b).storage
    with pytest.raises(RuntimeError), storage.write_lock(), \
            storage.transaction(MERGE, ["mine.txt", "theirs.txt"], "sync: merge 1 commit from origin/main"):
        (b / "theirs.txt").write_text("written by the merge\n")
        raise RuntimeError("the merge failed")
    assert (b / "mine.txt").read_text() == "mine\n" and not (b / "theirs.txt").exists()
    assert not (b / ".memvault" / "journal.json").exists()


def test_a_journal_naming_a_path_git_refuses_no_longer_blocks_every_command(tmp_path):
    """Fault tried: a sync of a remote tree holding an entry named `..` left (in an earlier
    version) a journal of a merge naming `..`; undoing it ran `git reset -- ..` ("outside
    repository"), so every later command, `doctor --fix` included, failed with an unexpected
    GitCommandError until the journal was deleted by hand. Such names are skipped now."""
    _a, b, _h = shared(tmp_path)
    head = git(b, "rev-parse", "HEAD")
    (b / ".memvault").mkdir(exist_ok=True)
    (b / ".memvault" / "journal.json").write_text(json.dumps({
        "kind": "merge", "paths": ["..", ".git/config", "logs/../x"], "message": "sync: merge 1 commit",
        "head": head, "sizes": None, "claims": [], "writer": None}))
    listed = run_memvault("recent", "--vault", str(b))
    assert listed.returncode == 0, listed.stderr
    assert "Alice drinks green tea" in listed.stdout and not (b / ".memvault" / "journal.json").exists()
    assert run_memvault("doctor", "--vault", str(b)).returncode in (0, 1)
    assert git(b, "rev-parse", "HEAD") == head and git(b, "status", "--porcelain").strip() == ""


@pytest.mark.parametrize("victim", ["a planted item", "an existing fact"])
def test_a_purge_record_the_remote_history_does_not_bear_out_is_refused(tmp_path, victim):
    """Fault tried: a pusher appends a purge record to tombstones.jsonl, for a fact it plants with
    the text "Bob fixed the kitchen" in the same push, or for an existing fact's id, without
    rewriting any history. sync adopted it: every commit of this clone was rewritten, the honest
    fact became "[purged]" for good, the old objects pruned, and the rewrite force-pushed to every
    clone. A real purge arrives with the remote's history rewritten; a record alone is refused."""
    a, b, h = shared(tmp_path)
    facts = {text: fact_id for fact_id, text in _ids(a).items()}
    target = facts["Bob fixed the kitchen tap"]
    if victim == "a planted item":
        target = "1k107jq2g91rhr7x"
        with _log(h).open("a") as log:
            log.write(f'- Bob fixed the kitchen <!-- mv {{"id":"{target}","at":"2026-11-20T11:00:00+00:00"}} -->\n')
    with (h / "tombstones.jsonl").open("a") as records:
        records.write(json.dumps({"id": target, "at": "2026-11-21T09:00:00+00:00", "reason": "purged",
                                  "hash": "", "purged": True}) + "\n")
    git(h, "add", "-A")
    push(h, "routine")

    assert target in refused(b, "records the purge of", "memvault purge ID")
    assert "Bob fixed the kitchen tap" in _ids(b).values()
    assert "Bob fixed the kitchen tap" in git(b, "log", "--all", "-p")


@pytest.mark.parametrize("mine, theirs", [("notes", "notes/a.md"), ("réunion.md", "réunion.md")])
def test_an_ignored_file_of_yours_where_the_remote_brings_one_is_never_overwritten(tmp_path, mine, theirs):
    """Faults tried, with the user's file ignored (`.git/info/exclude`), which git overwrites or
    deletes without asking: the remote adds a folder where it lies (`notes/a.md` for the file
    `notes`: the file was deleted, the sync exit 0), and a file with a non-ASCII name (git quoted
    it as "r\\303\\251union.md", so the check matched nothing and the remote's file replaced it)."""
    _a, b, h = shared(tmp_path)
    (b / mine).write_text("my precious ignored file\n")
    with (b / ".git" / "info" / "exclude").open("a") as exclude:
        exclude.write(f"/{mine.split('/')[0]}\n")
    (h / theirs).parent.mkdir(parents=True, exist_ok=True)
    (h / theirs).write_text("theirs\n")
    git(h, "add", "-A")
    push(h, "a file")
    done = run_memvault("sync", "--vault", str(b))
    assert done.returncode == ExitCode.SYNC_CONFLICT, done.stderr
    assert f"adds {mine}," in done.stderr and "nothing was merged" in done.stderr, done.stderr
    assert (b / mine).read_text() == "my precious ignored file\n"


@pytest.mark.parametrize("file, line", [
    ("log", "- hand-written line without metadata"),
    ("log", '- a fact with a broken comment <!-- mv {"id": -->'),
    ("tombstones.jsonl", "garbage not json"),
])
def test_lines_no_reader_can_read_are_refused(tmp_path, file, line):
    """A remote line that is no fact (a collaborator's hand edit) was merged without a word, and dream
    then stopped before that day on every clone; a garbage forget record went unnoticed too."""
    _a, b, h = shared(tmp_path)
    target = _log(h) if file == "log" else h / file
    with target.open("a") as f:
        f.write(line + "\n")
    push(h, "hand edit")
    refused(b, "no fact or forget record memvault can read", line[:20])
    assert Vault(b).dream_status()["stopped"] is None
