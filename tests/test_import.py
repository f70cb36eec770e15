"""`memvault import`: the six formats from real-shaped samples (tests/data/import), idempotence,
dry runs, all or nothing with the bad record's place, credentials, and the progress bar."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest
from support.cli import Cli
from support.git import commit_count, git, is_clean, snapshot

from memvault import Vault
from memvault.errors import ExitCode

DATA = Path(__file__).parent / "data" / "import"


def facts(vault_dir: Path) -> list[dict]:
    vault = Vault.open(vault_dir)
    return [fact.to_dict() for fact in vault.iter_facts()]


def copy(name: str, tmp_path: Path) -> Path:
    target = tmp_path / "source" / name
    shutil.copytree(DATA / name, target)
    return target


def test_a_memory_folder_lands_each_item_on_its_day_in_one_commit(cli, vault_dir, tmp_path):
    source = copy("openclaw", tmp_path)
    commits = commit_count(vault_dir)
    result = cli("import", str(source))  # the format is guessed: daily YYYY-MM-DD.md logs
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(f"imported 13 facts from {source} (memory-dir) in commit ")
    assert "skipped 1: 1 files that are neither a daily log nor MEMORY.md" in result.stdout
    assert result.stderr == "" and commit_count(vault_dir) == commits + 1 and is_clean(vault_dir)
    subject = git(vault_dir, "log", "-1", "--format=%s")
    assert subject.startswith("import: 13 facts from openclaw as memory-dir (")
    found = {fact["text"]: fact for fact in facts(vault_dir)}
    standup = found["Alice will ship the invoice rounding fix today."]
    assert standup["at"] == "2026-03-02T09:30:00+00:00" and standup["path"] == "logs/2026/2026-03-02.md"
    assert standup["source"] == "memory-dir:memory/2026-03-02.md" and standup["key"].startswith("memory-dir:")
    assert found["Ran the migration for the new tax table:\n\n```sh\nmake migrate ENV=staging\n```"]["at"] == \
        "2026-03-02T14:05:00+00:00"
    assert found["Agreed with Bob to rotate the payments API keys every 90 days."]["path"] == "logs/2026/2026-03-03.md"
    lisbon = next(fact for text, fact in found.items() if text.startswith("The user said they are travelling"))
    assert lisbon["text"].endswith("\nKeep replies short while they are away.")
    assert lisbon["at"] == "2026-03-03T00:00:00+00:00"
    assert found["Deploys happen on Tuesdays; never deploy on a Friday."]["source"] == "memory-dir:MEMORY.md"


def test_importing_the_same_thing_twice_adds_nothing_and_says_so(cli, vault_dir, tmp_path):
    source = copy("openclaw", tmp_path)
    assert cli("import", str(source)).exit_code == 0
    before = snapshot(vault_dir)
    again = cli("import", str(source))
    assert again.exit_code == 0
    assert again.stdout.startswith(f"nothing new to import from {source} (memory-dir); 13 already in the vault")
    assert snapshot(vault_dir) == before
    # A new line in a daily log is imported; the rest is there already.
    log = source / "memory" / "2026-03-03.md"
    log.write_text(log.read_text() + "- The user switched to the Berlin office.\n")
    third = cli("import", str(source), "--json")
    report = json.loads(third.stdout)
    assert (report["new"], report["already"]) == (1, 13)
    assert report["commit"] == git(vault_dir, "rev-parse", "HEAD").strip()


def test_a_forgotten_import_is_not_brought_back_by_importing_again(cli, vault_dir, tmp_path):
    source = copy("openclaw", tmp_path)
    cli("import", str(source))
    doomed = next(f for f in facts(vault_dir) if f["text"].startswith("Bob is on call"))
    assert cli("forget", doomed["id"]).exit_code == 0
    assert "13 already in the vault" in cli("import", str(source)).stdout


def test_dry_run_counts_and_writes_nothing(cli, vault_dir, tmp_path):
    source = copy("openclaw", tmp_path)
    before = snapshot(vault_dir)
    result = cli("import", str(source), "--dry-run", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {
        "format": "memory-dir", "source": str(source), "new": 13, "already": 0, "dry_run": True, "commit": None,
        "skipped": {"files that are neither a daily log nor MEMORY.md": 1}}
    assert snapshot(vault_dir) == before
    assert cli("import", str(source), "--dry-run").stdout.startswith(f"would import 13 facts from {source}")


def test_claude_code_instructions_and_the_auto_memory_folder(cli, vault_dir, tmp_path):
    project = copy("claude-code", tmp_path) / "project"
    result = cli("import", str(project))
    assert result.exit_code == 0, result.stderr
    assert "imported 8 facts" in result.stdout and "1 @import lines" in result.stdout
    memory = tmp_path / "source" / "claude-code" / "projects" / "-home-me-billing" / "memory"
    result = cli("import", str(memory))
    assert result.exit_code == 0, result.stderr
    assert "imported 4 facts" in result.stdout and "3 index lines of MEMORY.md" in result.stdout
    found = {fact["text"].split("\n")[0]: fact for fact in facts(vault_dir)}
    assert found["Money is always an integer number of cents, never a float."]["category"] == "principle"
    assert found["Money is always an integer number of cents, never a float."]["source"] == "claude-code:CLAUDE.md"
    rule = found["Never mock the database: tests run against the real Postgres container."]
    assert rule["source"] == "claude-code:.claude/rules/testing.md"
    feedback = found["Integration tests must hit a real database, not mocks."]
    assert (feedback["category"], feedback["tags"]) == ("principle", ["feedback"])
    assert "**Why:** a mocked test passed" in feedback["text"]
    assert found["The user is a senior backend engineer (ten years of Go and Python) who is new to React;"]["tags"] == \
        ["user"]
    assert "The staging deploy script lives in scripts/deploy_staging.sh." in found


def test_chatgpt_keeps_the_users_messages_of_the_shown_branch_with_their_times(cli, vault_dir, tmp_path):
    export = copy("chatgpt", tmp_path) / "conversations.json"
    result = cli("import", str(export), "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["format"], report["new"]) == ("chatgpt", 4)
    assert report["skipped"] == {"assistant messages": 4, "system messages": 1, "tool messages": 1,
                                 "hidden messages": 1, "empty messages": 1,
                                 "messages of a branch left by an edit or a regeneration": 1}
    found = {fact["text"]: fact for fact in facts(vault_dir)}
    first = found["I'm going to Lisbon from 10 to 14 March with my partner, we're both vegetarian."]
    assert first["at"] == "2026-03-04T10:41:00+00:00" and first["path"] == "logs/2026/2026-03-04.md"
    assert (first["source"], first["session"]) == ("chatgpt", "Lisbon trip planning (67c6f000)")
    assert first["key"] == "chatgpt:a1b2c3d4-0001-4e5f-8a9b-000000000002"
    assert "We don't like seafood restaurants at all." not in found  # edited away
    assert found["Thanks. Also remember that our team uses tenacity in production code."]["session"] == \
        "Python retry decorator (67c8a2c0)"
    # The export as downloaded: a .zip holding conversations.json. Nothing new in it.
    archive = tmp_path / "chatgpt-export.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.write(export, "conversations.json")
        z.writestr("user.json", "{}")
    again = cli("import", str(archive))
    assert again.exit_code == 0
    assert again.stdout.startswith(f"nothing new to import from {archive} (chatgpt); 4 already")


def test_basic_memory_observations_and_relations_with_the_note_as_source(cli, vault_dir, tmp_path):
    project = copy("basic-memory", tmp_path)
    result = cli("import", str(project), "--format", "basic-memory")
    assert result.exit_code == 0, result.stderr
    assert "imported 12 facts" in result.stdout
    found = {fact["text"]: fact for fact in facts(vault_dir)}
    tea = found["Water temperature at 94°C extracts the best flavour #brewing"]
    assert tea["tags"] == ["technique", "brewing"] and tea["source"] == "basic-memory:coffee-brewing-methods"
    assert tea["at"] == "2026-01-15T08:30:00+00:00"  # the note's `created`, in the vault's zone
    assert found["Ethiopian beans work well with lighter roasts (personal experience)"]["category"] == "preference"
    assert found["Coffee Brewing Methods requires Proper Grinding Technique (burr grinder, medium-fine)"]["category"] \
        == "relationship"
    assert found["Alice Martin reports to Carla Diaz"]["source"] == "basic-memory:people/alice-martin"
    assert found["Prefers written proposals over meetings"]["at"] == "2026-02-10T00:00:00+00:00"
    assert not any("grinder burr" in text for text in found)  # a task item is no observation


def test_mem0_exports_of_the_platform_and_of_the_open_source_library(cli, vault_dir, tmp_path):
    source = copy("mem0", tmp_path)
    assert cli("import", str(source / "get_all.json")).exit_code == 0
    assert cli("import", str(source / "oss_get_all.json"), "--format", "mem0").exit_code == 0
    found = {fact["text"]: fact for fact in facts(vault_dir)}
    trip = found["Alex is planning a trip to San Francisco from July 1st to July 10th"]
    assert trip["at"] == "2026-02-01T20:00:00+00:00" and trip["category"] == "event"
    assert trip["tags"] == ["travel", "type:event", "source:chat", "user:alex"]
    assert trip["key"] == "mem0:f4cbdb08-7062-4f3e-8eb2-9f5c80dfe64c"
    coach = found["Alex works at TechCorp as a senior engineer"]
    assert (coach["source"], coach["session"]) == ("mem0:career-coach", "onboarding-2026-02-07")
    assert found["Is a vegetarian and allergic to nuts"]["category"] == "preference"


def test_memvaults_own_jsonl_keeps_given_keys_and_makes_the_others(cli, vault_dir, tmp_path):
    source = copy("jsonl", tmp_path) / "facts.jsonl"
    result = cli("import", str(source))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(f"imported 5 facts from {source} (jsonl)")
    stored = facts(vault_dir)
    assert [f["text"] for f in stored].count("Alice leads billing") == 2  # the same line twice: two facts
    assert next(f for f in stored if f["text"] == "Bob is on call this week")["key"] == "chat-42/turn-3"
    assert "5 already in the vault" in cli("import", str(source)).stdout


@pytest.mark.parametrize(("name", "content", "fmt", "message"), [
    ("facts.jsonl", '{"text": "fine"}\n{"text": "bad", "category": "gossip"}\n', "jsonl",
     "facts.jsonl:2: unknown category 'gossip'"),
    ("facts.jsonl", '{"text": "fine"}\n\n{"text": "broken"\n', "jsonl", "facts.jsonl: line 3: invalid JSON"),
    ("facts.jsonl", '{"text": "from the future", "at": "2999-01-01"}\n', "jsonl",
     "facts.jsonl:1: at '2999-01-01' is in the future"),
    ("conversations.json", '[{"title": "x", "mapping": []}]', "chatgpt",
     "conversations.json: conversation 1 ('x'): no \"mapping\" of its messages"),
    ("conversations.json", '[{"title": "x", "mapping": {"m1": {"message": {"author": {"role": "user"}, '
     '"content": {"content_type": "text", "parts": ["hi"]}, "create_time": "yesterday"}}}}]', "chatgpt",
     "conversations.json: conversation 1 ('x'), message m1: create_time is not a time in seconds: 'yesterday'"),
    ("conversations.json", '{"title": "not a list"}', "chatgpt", "not a ChatGPT conversations.json"),
    ("export.json", '[{"memory": "ok", "created_at": "2026-01-01"}, {"text_missing": true}]', "mem0",
     "export.json: memory 2: no \"memory\" text"),
    ("export.json", '[{"memory": "ok", "created_at": "last tuesday"}]', "mem0",
     "export.json: memory 1: at 'last tuesday' is not a date"),
])
def test_a_bad_record_names_its_place_exits_2_and_writes_nothing(cli, vault_dir, tmp_path, name, content, fmt,
                                                                 message):
    source = tmp_path / name
    source.write_text(content, encoding="utf-8")
    before = snapshot(vault_dir)
    result = cli("import", str(source), "--format", fmt)
    assert result.exit_code == ExitCode.USAGE
    assert len(result.stderr.splitlines()) == 1 and message in result.stderr, result.stderr
    assert snapshot(vault_dir) == before


def test_bad_markdown_sources_name_the_file_and_line(cli, vault_dir, tmp_path):
    before = snapshot(vault_dir)
    folder = tmp_path / "memory"
    folder.mkdir()
    (folder / "2026-02-30.md").write_text("- a day that does not exist\n")
    assert "2026-02-30.md: named for a day that does not exist" in cli("import", str(folder)).stderr
    (folder / "2026-02-30.md").unlink()
    (folder / "2026-03-01.md").write_bytes(b"- fine\n- caf\xe9 in Latin-1\n")
    result = cli("import", str(folder))
    assert result.exit_code == ExitCode.USAGE and "2026-03-01.md:2: not UTF-8 text" in result.stderr
    notes = tmp_path / "claude"
    notes.mkdir()
    (notes / "CLAUDE.md").write_text("- fine\n")
    (notes / "topic.md").write_text("---\nname: [unclosed\ntype: user\n---\nbody\n")
    result = cli("import", str(notes), "--format", "claude-code")
    assert result.exit_code == ExitCode.USAGE and "topic.md:" in result.stderr and "not valid YAML" in result.stderr
    assert snapshot(vault_dir) == before


def test_an_unknown_source_or_format_is_one_line_and_exit_2(cli, vault_dir, tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "ideas.md").write_text("- an idea\n")
    cases = [(["import", str(tmp_path / "missing")], "no such file or folder"),
             (["import", str(tmp_path / "notes")], "cannot tell the format of"),
             (["import", str(tmp_path / "notes"), "--format", "evernote"], "unknown import format 'evernote'"),
             (["import", str(tmp_path / "notes"), "--format", "memory-dir"], "holds no daily log"),
             (["import", str(tmp_path / "notes"), "--allow-secret", "--skip-secrets"], "not both")]
    for args, message in cases:
        result = cli(*args)
        assert result.exit_code == ExitCode.USAGE and message in result.stderr, (args, result.stderr)
        assert len(result.stderr.splitlines()) == 1


def test_a_memvault_vault_is_never_read_as_notes_to_import(cli, vault_dir, tmp_path):
    """A folder holding vaults (the one imported into, another) beside a memory folder imports the
    memory folder and passes the vaults over, counted: their logs read as notes came back with each
    fact's metadata as text, and this vault's facts twice. A vault itself, or a folder inside one,
    is refused in one line, and nothing is written."""
    from memvault.importers.records import VAULT_SKIPPED

    copy("openclaw", tmp_path)
    other = Vault.init(tmp_path / "source" / "other")
    other.add("Alice moved to Lyon")
    Vault.open(vault_dir).add("Bob prefers tea")
    own_log = next((vault_dir / "logs").rglob("*.md"))
    (tmp_path / "source" / "openclaw" / "memory" / own_log.name).symlink_to(own_log)  # a vault's log, linked in
    result = cli("import", str(tmp_path), "--format", "memory-dir", "--json")  # tmp_path holds this vault too
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["new"] == 13 and report["skipped"][VAULT_SKIPPED] == 3
    texts = [fact["text"] for fact in facts(vault_dir)]
    assert texts.count("Bob prefers tea") == 1 and "Alice moved to Lyon" not in texts
    assert not any("<!--" in text for text in texts)
    before = snapshot(vault_dir)
    for source, message in ((vault_dir, "is a memvault vault"), (vault_dir / "logs", "is inside the memvault vault"),
                            (other.root, "is a memvault vault"), (other.root / "memvault.toml", "is inside")):
        refused = cli("import", str(source))
        assert refused.exit_code == ExitCode.USAGE and message in refused.stderr, (source, refused.stderr)
        assert len(refused.stderr.splitlines()) == 1 and "memvault sync" in refused.stderr
    # A folder holding nothing but a vault: the error says that is why.
    (tmp_path / "only").mkdir()
    shutil.move(other.root, tmp_path / "only" / "other")
    for fmt in ("memory-dir", "basic-memory", "claude-code"):
        refused = cli("import", str(tmp_path / "only"), "--format", fmt)
        assert refused.exit_code == ExitCode.USAGE and "memvault's own (other)" in refused.stderr, refused.stderr
    assert snapshot(vault_dir) == before


def test_a_credential_is_refused_by_place_unless_skipped_or_allowed(cli, vault_dir, tmp_path):
    source = tmp_path / "memory"
    source.mkdir()
    (source / "2026-03-01.md").write_text("- The deploy uses the shared role.\n"
                                          "- aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n")
    before = snapshot(vault_dir)
    refused = cli("import", str(source))
    assert refused.exit_code == ExitCode.USAGE
    assert "2026-03-01.md:2: the text holds a credential" in refused.stderr and "--allow-secret" in refused.stderr
    assert snapshot(vault_dir) == before
    skipped = cli("import", str(source), "--skip-secrets")
    assert skipped.exit_code == 0 and "1 holds a credential (--skip-secrets)" in skipped.stdout
    assert [f["text"] for f in facts(vault_dir)] == ["The deploy uses the shared role."]
    allowed = cli("import", str(source), "--allow-secret")
    assert allowed.exit_code == 0 and "imported 1 fact" in allowed.stdout and "1 already in the vault" in allowed.stdout
    assert [f["secret"] for f in facts(vault_dir)] == [False, True]


def test_a_progress_bar_is_drawn_on_a_terminal_and_never_into_a_pipe(vault_dir, tmp_path):
    """stderr on a 100-column colour terminal (an injected Environment) gets the bar; a pipe nothing."""
    source = copy("openclaw", tmp_path)
    piped = Cli(vault_dir)("import", str(source), "--dry-run")
    assert piped.exit_code == 0 and piped.stderr == ""
    drawn = Cli(vault_dir, stderr_isatty=True, width=100, colors=True, dumb=False)("import", str(source))
    assert drawn.exit_code == 0, drawn.stderr
    assert "reading" in drawn.stderr and "━" in drawn.stderr
    assert drawn.stdout.startswith("imported 13 facts")
