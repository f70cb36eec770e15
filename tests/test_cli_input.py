"""What the CLI accepts and refuses: --vault before the command, categories in any case, texts that
start with '-', implausible dates, bad environment values, JSON lines past what Python's parser
takes, and the Ctrl-D hint of `add --stdin`."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime

import pytest
from support import ROOT
from support.cli import Cli, run_memvault
from support.git import commit_count, snapshot

from memvault import Vault
from memvault.errors import ExitCode, InvalidInput


def _texts(cli, *args) -> list[str]:
    result = cli("recent", "--json", *args)
    assert result.exit_code == 0, result.stderr
    return [f["text"] for f in json.loads(result.stdout)]


def test_vault_before_the_command(tmp_path, monkeypatch, vault_dir):
    """Faults tried: MEMVAULT_VAULT naming another vault, --vault given twice (the command's own wins),
    a --vault before the command that is not a vault."""
    other = Vault.init(tmp_path / "other").root
    monkeypatch.setenv("MEMVAULT_VAULT", str(other))
    cli = Cli(None)
    assert cli("--vault", str(vault_dir), "add", "before the command", vault=False).exit_code == 0
    assert cli("--vault", str(other), "add", "in the other", "--vault", str(vault_dir), vault=False).exit_code == 0
    assert _texts(Cli(vault_dir)) == ["in the other", "before the command"]
    assert _texts(Cli(other)) == []
    shown = cli("--vault", str(vault_dir), "recent", vault=False)
    assert "before the command" in shown.stdout

    result = cli("--vault", str(tmp_path / "nowhere"), "recent", vault=False)
    assert result.exit_code == ExitCode.NOT_FOUND and result.stderr.count("\n") == 1
    assert "nowhere" in result.stderr


def test_categories_are_read_in_any_case(cli, vault_dir):
    """Bad input tried: a category that does not exist in any case."""
    assert cli("add", "Alice prefers green tea", "--category", "Preference").exit_code == 0
    added = cli("add", "--stdin", "--json", input='{"text": "ship on Friday", "category": "DECISION"}\n')
    assert json.loads(added.stdout)[0]["category"] == "decision"
    assert _texts(cli, "--category", "PREFERENCE") == ["Alice prefers green tea"]
    hits = json.loads(cli("search", "green tea", "--category", "Preference", "--lexical", "--json").stdout)
    assert [h["category"] for h in hits] == ["preference"]
    before = snapshot(vault_dir)
    result = cli("add", "x", "--category", "Gossip")
    assert result.exit_code == ExitCode.USAGE and "unknown category 'Gossip'" in result.stderr
    assert snapshot(vault_dir) == before


@pytest.mark.parametrize("text", ["-5 degrees tonight", "- buy milk", "--- notes ---", "-> next step", "-5"])
def test_a_text_that_starts_with_a_dash_is_a_fact(cli, text):
    result = cli("add", text, "--tag", "dash")
    assert result.exit_code == 0, result.stderr
    assert _texts(cli) == [text]
    assert cli("search", text, "--lexical", "--json").exit_code == 0


@pytest.mark.parametrize("word", ["--catgory", "-x", "--colour=red"])
def test_an_option_like_word_is_refused_with_a_hint_to_use_dashes(cli, vault_dir, word):
    """Bad input tried: a misspelt option, an unknown short option, an unknown option with a value."""
    before = snapshot(vault_dir)
    result = cli("add", word)
    assert result.exit_code == ExitCode.USAGE and result.stderr.count("\n") == 1
    assert "put `--` before it" in result.stderr and result.stdout == ""
    assert snapshot(vault_dir) == before
    assert cli("add", "--vault", str(vault_dir), "--", word, vault=False).exit_code == 0
    assert _texts(cli) == [word]


@pytest.mark.parametrize(
    "args",
    [
        ["add", "x", "--at", "0001-01-01"],
        ["add", "x", "--at", "99999d"],
        ["add", "x", "--at", "1899-12-31T23:00"],
        ["add", "x", "--at", "0001-01-01T00:00+01:00"],
        ["recent", "--since", "0001-01-01"],
        ["search", "x", "--until", "200000w"],
        ["sessions", "--since", "1066-10-14"],
    ],
)
def test_implausible_dates_are_refused_in_one_line(cli, vault_dir, args):
    """Bad input tried: year 1 (also with an offset, which overflows time zone arithmetic), 99999 days
    ago (1753), just before 1900, and the same bound for since/until of recent, search and sessions."""
    before = snapshot(vault_dir)
    result = cli(*args)
    assert result.exit_code == ExitCode.USAGE, result.stderr
    assert "is too far back: dates before 1900-01-01 are refused as typos" in result.stderr
    assert result.stderr.count("\n") == 1 and result.stdout == ""
    assert snapshot(vault_dir) == before


def test_historical_dates_from_1900_on_stay_legitimate(cli, vault):
    assert cli("add", "Grandmother was born", "--at", "1900-01-01").exit_code == 0
    assert cli("add", "Moved to Lyon", "--at", "1975-06-01T10:00+02:00").exit_code == 0
    assert _texts(cli, "--since", "1900-01-01", "--until", "1980-01-01") == ["Moved to Lyon", "Grandmother was born"]
    with pytest.raises(InvalidInput, match="too far back"):
        vault.add("from Python", at=datetime(1, 1, 1))


@pytest.mark.parametrize("value", ["abc", "-1", "0", "nan"])
def test_a_bad_lock_timeout_in_the_environment_names_the_variable(cli, vault_dir, monkeypatch, value):
    """Bad input tried: text, a negative, zero and NaN in MEMVAULT_LOCK_TIMEOUT."""
    before = snapshot(vault_dir)
    monkeypatch.setenv("MEMVAULT_LOCK_TIMEOUT", value)
    result = cli("add", "x")
    assert result.exit_code == ExitCode.USAGE and result.stderr.count("\n") == 1
    assert f"MEMVAULT_LOCK_TIMEOUT must be a positive number of seconds, got '{value}'" in result.stderr
    assert "memvault.toml" not in result.stderr
    assert snapshot(vault_dir) == before


@pytest.mark.parametrize("value", ["-1", "0", '"ten"'])
def test_a_bad_lock_timeout_in_the_settings_is_refused(cli, vault_dir, value):
    """Bad input tried: a negative, zero and a string as vault.lock_timeout in memvault.toml."""
    config = vault_dir / "memvault.toml"
    config.write_text(config.read_text().replace("lock_timeout = 10", f"lock_timeout = {value}", 1))
    commits = commit_count(vault_dir)
    result = cli("add", "x")
    assert result.exit_code == ExitCode.USAGE and result.stderr.count("\n") == 1
    assert "vault.lock_timeout must be a positive number" in result.stderr
    assert commit_count(vault_dir) == commits


@pytest.mark.parametrize("section, line, words", [
    ("vault", "categories = [5]", "vault.categories holds 5"),
    ("vault", "categories = [\"fact\", \" padded \"]", "vault.categories holds ' padded '"),
    ("vault", 'categories = "fact"', "vault.categories must be a non-empty list"),
    ("vault", 'categories = ["fact", "Fact"]', "names one of them twice"),
    ("dream", 'zones = ["people", "../outside"]', "dream.zones holds '../outside'"),
])
def test_bad_category_and_zone_lists_in_the_settings_are_refused(cli, vault_dir, section, line, words):
    """Bad input tried: a number, a bare string (once read as its letters), a name twice, a zone
    that climbs out of wiki/. Each is one line naming the key, and doctor's failed settings check;
    nothing is added or committed, by `doctor --fix` neither."""
    config = vault_dir / "memvault.toml"
    text = "".join(kept for kept in config.read_text().splitlines(keepends=True)
                   if not kept.startswith(line.split(" = ")[0] + " = "))  # the template's own zones line
    config.write_text(text.replace(f"[{section}]\n", f"[{section}]\n{line}\n", 1))
    commits = commit_count(vault_dir)
    result = cli("add", "x", "--category", "f")
    assert result.exit_code == ExitCode.USAGE and result.stderr.count("\n") == 1, result.stderr
    assert words in result.stderr and "memvault.toml" in result.stderr
    for fix in ((), ("--fix",)):
        doctor = cli("doctor", *fix)
        assert doctor.exit_code == ExitCode.ERROR and doctor.stderr == "", doctor.stderr
        failed = next(row for row in doctor.stdout.splitlines() if row.startswith("FAIL"))
        assert failed.startswith("FAIL   settings: ") and words in failed and "memvault.toml" in failed
    assert commit_count(vault_dir) == commits


def test_a_json_string_line_is_a_fact_text(cli):
    result = cli("add", "--stdin", "--json", input='"a quoted fact"\n[not json at all\n')
    assert [f["text"] for f in json.loads(result.stdout)] == ["a quoted fact", "[not json at all"]


def test_add_stdin_on_a_terminal_says_how_to_end(vault_dir):
    """Standard input on a terminal (an injected Environment): the hint appears; piped input gets none."""
    typed = Cli(vault_dir, stdin_isatty=True)("add", "--stdin", input="typed at the terminal\n")
    assert typed.exit_code == 0, typed.stderr
    assert "Ctrl-D" in typed.stderr and len(typed.stdout.split()) == 1
    piped = Cli(vault_dir)("add", "--stdin", input="piped in\n")
    assert piped.exit_code == 0 and "Ctrl-D" not in piped.stderr
    assert _texts(Cli(vault_dir)) == ["piped in", "typed at the terminal"]


DEEP = "[" * 5000 + "]" * 5000
LONG = "1" * 5000


@pytest.mark.parametrize(("line", "message"), [
    ('{"text": ' + DEEP + "}", "line 2: invalid JSON (nested too deeply)"),
    (DEEP, "line 2: invalid JSON (nested too deeply)"),
    ("[" * 5000, "line 2: invalid JSON (nested too deeply)"),
    (LONG, "line 2: JSON a number is not a fact"),
    ('{"text": "x", "importance": ' + LONG + "}", "line 2: importance must be between 0 and 1, got inf"),
])
def test_add_stdin_json_past_the_parsers_limits_is_a_usage_error(vault_dir, line, message):
    """Bad input tried: 5000 nested lists inside an object and alone (closed and not), a number of
    5000 digits as the line and as importance; Python's json raised RecursionError and ValueError.
    The good line before the bad one is not stored either: the batch writes nothing."""
    before = snapshot(vault_dir)
    result = run_memvault("add", "--stdin", "--vault", str(vault_dir), input=f"fine\n{line}\n")
    assert result.returncode == ExitCode.USAGE, result.stderr
    assert result.stderr.startswith(f"memvault: {message}") and result.stderr.count("\n") == 1
    assert snapshot(vault_dir) == before


def test_search_stdin_json_past_the_parsers_limits_fails_that_line_only(vault_dir):
    """Bad input tried: 5000 nested lists as "query", 5000 digits as "limit" and as "min-score"; each
    is its own error line, the good line after them is answered, and the exit code is 2."""
    lines = ['{"query": ' + DEEP + "}", '{"query": "x", "limit": ' + LONG + "}",
             '{"query": "x", "min-score": ' + LONG + "}", '{"query": "fine"}']
    result = run_memvault("search", "--stdin", "--json", "--lexical", "--vault", str(vault_dir),
                          input="\n".join(lines) + "\n")
    assert result.returncode == ExitCode.USAGE, result.stderr
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert [a.get("error", {}).get("message") for a in answers] == [
        "line 1: invalid JSON (nested too deeply)", "line 2: limit must be a whole number from 1 to 1000",
        "line 3: min_score must be a number of 0 or more (0 keeps every match)", None]
    assert answers[3] == {"query": "fine", "hits": []}


@pytest.mark.parametrize(("args", "message"), [
    (["add", "bad \udcff byte"], "fact text is not valid UTF-8"),
    (["add", "x", "--source", "a\udcffb"], "--source is not valid UTF-8"),
    (["add", "x", "--session", "a\udcffb"], "--session is not valid UTF-8"),
    (["add", "x", "--tag", "a\udcffb"], "--tag is not valid UTF-8"),
    (["add", "x", "--source", "\x1b[31mred"], "--source holds a control character ('\\x1b'); give printable text"),
    (["search", "a\udcffb", "--lexical"], "search query is not valid UTF-8"),
    (["search", "x", "--tag", "a\udcffb", "--lexical"], "--tag is not valid UTF-8"),
])
def test_bytes_that_are_not_utf8_and_control_characters_are_named(vault_dir, args, message):
    """Bad input tried: a byte 0xFF (not UTF-8) in the fact text, source, session, tag and search
    query, and an ESC in --source. The 0xFF ones in a label or query were an unexpected
    UnicodeEncodeError, in the text a 'lone surrogate'; the ESC was called too long or not one line."""
    before = snapshot(vault_dir)
    result = run_memvault(*args, "--vault", str(vault_dir))
    assert result.returncode == ExitCode.USAGE and result.stderr == f"memvault: {message}\n", result.stderr
    assert snapshot(vault_dir) == before


def test_add_stdin_bytes_that_are_not_utf8_are_called_so(vault_dir):
    """Bad input tried: raw bytes 0xFF 0xFE on a --stdin line, and a JSON "\\ud800" escape (a lone
    surrogate that is valid UTF-8 input)."""
    before = snapshot(vault_dir)
    command = [sys.executable, "-m", "memvault", "add", "--stdin", "--vault", str(vault_dir)]
    raw = subprocess.run(command, input=b"fine\nok\xff\xfe bad\n", capture_output=True, cwd=ROOT, timeout=60)
    assert raw.returncode == ExitCode.USAGE and raw.stderr == b"memvault: line 2: fact text is not valid UTF-8\n"
    escaped = run_memvault("add", "--stdin", "--vault", str(vault_dir), input='{"text": "a\\ud800"}\n')
    assert escaped.returncode == ExitCode.USAGE
    assert escaped.stderr == "memvault: line 1: fact text is not valid unicode (lone surrogate)\n"
    assert snapshot(vault_dir) == before


def test_a_byte_order_mark_opening_stdin_is_no_part_of_a_fact_or_query(vault_dir):
    """Input tried: a file saved by a Windows tool, a UTF-8 byte-order mark before a JSON line
    (it was stored as the text '\\ufeff{"text": ...}') and before a search --stdin line."""
    added = subprocess.run([sys.executable, "-m", "memvault", "add", "--stdin", "--json", "--vault", str(vault_dir)],
                           input='\ufeff{"text": "bom line", "tags": ["win"]}\n\ufeffplain line\n'.encode(),
                           capture_output=True, cwd=ROOT, timeout=60)
    assert added.returncode == 0, added.stderr
    facts = json.loads(added.stdout)
    assert [(f["text"], f["tags"]) for f in facts] == [("bom line", ["win"]), ("plain line", [])]
    found = run_memvault("search", "--stdin", "--json", "--lexical", "--vault", str(vault_dir),
                         input='\ufeff{"query": "bom line", "tag": "win"}\n')
    assert found.returncode == 0, found.stderr
    line = json.loads(found.stdout.splitlines()[0])
    assert line["query"] == "bom line" and [hit["text"] for hit in line["hits"]] == ["bom line"]


def test_an_error_quoting_a_huge_value_stays_a_short_line(vault_dir):
    """Bad inputs tried: a 100,000-character id (show, forget), category and date. Each error quoted
    the value whole: a 100 KB error line on a terminal, in a log, in an agent's context."""
    huge = "x" * 100_000
    for args, code in ((["show", huge], ExitCode.NOT_FOUND), (["forget", huge], ExitCode.NOT_FOUND),
                       (["add", "a fact", "--category", huge], ExitCode.USAGE),
                       (["recent", "--since", huge], ExitCode.USAGE)):
        for json_flag in ([], ["--json"]):
            done = run_memvault(*args, *json_flag, "--vault", str(vault_dir))
            assert done.returncode == code, (args[0], done.stderr[:300])
            assert done.stderr.count("\n") == 1 and len(done.stderr) < 1_200, (args[0], len(done.stderr))
            message = json.loads(done.stderr)["error"]["message"] if json_flag else done.stderr
            assert "characters left out" in message, message
    assert commit_count(vault_dir) == 1  # nothing was written


@pytest.mark.parametrize(("args", "message"), [
    (["recent", "--limit", "0"], "--limit must be a whole number of at least 1"),
    (["recent", "-n", "-3"], "--limit must be a whole number of at least 1"),
    (["search", "tea", "--limit", "0"], "--limit must be a whole number from 1 to 1000"),
    (["search", "tea", "--limit", "1001"], "--limit must be a whole number from 1 to 1000"),
    (["context", "--budget", "0"], "--budget must be a whole number of tokens from 1 to 1000000"),
    (["context", "--recent", "-1"], "--recent must be a whole number of at least 0"),
    (["context", "--relevant", "-1"], "--relevant must be a whole number of at least 0"),
    (["dream", "--max-batches", "-1"], "--max-batches must be a whole number of at least 0"),
    (["dream", "--min-facts", "-1"], "--min-facts must be a whole number of at least 0"),
])
def test_every_count_out_of_range_gets_memvaults_own_error(cli, vault_dir, args, message):
    """Bad input tried: zero and negative counts for every count option (and a search limit past
    1000). The CLI framework's range check worded some of them ("0 is not in the range x>=1", its
    type UsageError under --json); each is now the one line and exit 2 the Python API gives."""
    before = snapshot(vault_dir)
    result = cli(*args)
    assert result.exit_code == ExitCode.USAGE
    assert result.stderr.startswith(f"memvault: {message}") and result.stderr.count("\n") == 1
    assert result.stdout == ""
    result = cli(*args, "--json")
    assert result.exit_code == ExitCode.USAGE
    error = json.loads(result.stderr)["error"]
    assert error["type"] == "InvalidInput" and error["message"].startswith(message)
    assert error["exit_code"] == ExitCode.USAGE and result.stdout == ""
    assert snapshot(vault_dir) == before


def test_a_count_out_of_range_is_refused_before_a_default_vault_is_made(hermetic_env):
    """`recent`, `dream` and `mcp` check their counts first, as the framework did: a first command
    with a bad count does not leave a default vault behind."""
    for args in (["recent", "--limit", "0"], ["dream", "--max-batches", "-1"], ["mcp", "--port", "0"]):
        result = Cli(None)(*args, vault=False)
        assert result.exit_code == ExitCode.USAGE and result.stderr.count("\n") == 1
        assert "must be a whole number" in result.stderr
    assert not (hermetic_env / "data").exists()


def test_the_python_api_refuses_counts_alike(vault):
    for call, message in ((lambda: vault.recent(0), "limit must be a whole number of at least 1"),
                          (lambda: vault.dream(max_batches=-1), "max_batches must be a whole number of at least 0"),
                          (lambda: vault.dream(min_facts=-2), "min_facts must be a whole number of at least 0")):
        with pytest.raises(InvalidInput, match=message):
            call()


LINE_BREAKS = ["\r", "\n", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@pytest.mark.parametrize("line_break", LINE_BREAKS, ids=[f"U+{ord(c):04X}" for c in LINE_BREAKS])
def test_a_label_holding_a_line_break_is_refused_everywhere(cli, vault, vault_dir, line_break):
    """Bad input tried: every character str.splitlines() breaks at, inside --source, --session and
    --tag, on a --stdin JSON line and through the Python API. \\x85, U+2028 and U+2029 were
    stored in a source or session (two lines in `sessions` and to any line reader); each is now a
    one-line error, exit 2, nothing stored."""
    before = snapshot(vault_dir)
    label = f"chat{line_break}42"
    for option, message in (("--source", "--source must be one line"), ("--session", "--session must be one line"),
                            ("--tag", "invalid tag")):
        result = cli("add", "a fact", option, label)
        assert result.exit_code == ExitCode.USAGE, (option, result.stdout)
        assert result.stderr.startswith(f"memvault: {message}") and result.stderr.count("\n") == 1
    for field, message in (("source", "source must be one line"), ("session", "session must be one line")):
        line = json.dumps({"text": "a fact", field: label})
        result = cli("add", "--stdin", input=f"fine\n{line}\n")
        assert result.exit_code == ExitCode.USAGE and message in result.stderr and result.stderr.count("\n") == 1
        with pytest.raises(InvalidInput, match=message):
            vault.add("a fact", **{field: label})
    with pytest.raises(InvalidInput, match="invalid tag"):
        vault.add("a fact", tags=[label])
    assert snapshot(vault_dir) == before


def test_a_c1_control_character_is_refused_in_a_label_and_a_tag(vault):
    """Bad input tried: CSI (U+009B, a terminal's escape in one character) in a source and a tag."""
    with pytest.raises(InvalidInput, match=r"source holds a control character \('\\x9b'\)"):
        vault.add("a fact", source="agent\x9b31m")
    with pytest.raises(InvalidInput, match="invalid tag"):
        vault.add("a fact", tags=["red\x9b31m"])
    assert vault.add("a fact", source="agent ünï ✓", session="chat·42", tags=["café"]).source == "agent ünï ✓"
