"""What listings look like: tables with headers and colour on a terminal, fitted to its width;
plain tab-separated rows when piped; the same "no matches"/"nothing to show" line for every empty list."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from support import ROOT

ANSI = re.compile(r"\x1b\[[0-9;]*m")
LONG = "word " * 20_000  # a 100 KB fact on one line


def visible(text: str) -> list[str]:
    return ANSI.sub("", text).splitlines()


@pytest.fixture
def facts(cli):
    ids = {}
    for text, extra in (("Alice prefers green tea", ["-c", "preference", "-t", "alice"]),
                        ("first line of notes\nsecond line of notes", ["-t", "notes"]),
                        (LONG.strip(), [])):
        result = cli("add", text, *extra)
        assert result.exit_code == 0, result.stderr
        ids[text.split()[0]] = result.stdout.strip()
    return ids


@pytest.fixture
def terminal(cli):
    """memvault with stdout on an 80-column colour terminal (an injected Environment, no pty)."""
    return cli.on_terminal(width=80)


def test_recent_on_a_terminal_is_a_coloured_table_cut_to_the_width(facts, terminal):
    """Faults tried: a 100 KB one-line fact and a two-line fact in an 80-column terminal."""
    result = terminal("recent")
    assert result.exit_code == 0, result.stderr
    lines = visible(result.stdout)
    assert lines[0].split() == ["when", "id", "category", "text", "tags"]
    assert all(len(line) <= 80 for line in lines) and len(lines) == 4  # header + one line per fact
    assert "\x1b[" in result.stdout  # coloured
    long_row, notes_row, tea_row = lines[1:]
    assert facts["word"] in long_row and long_row.rstrip().endswith("…")
    assert "first line of notes …" in notes_row and "second line" not in result.stdout
    assert facts["Alice"] in tea_row and "preference" in tea_row and "#alice" in tea_row


def test_full_shows_whole_texts_wrapped_to_the_width(facts, terminal):
    result = terminal("recent", "--full")
    lines = visible(result.stdout)
    assert all(len(line) <= 80 for line in lines)
    text = " ".join(lines)
    assert "second line of notes" in text
    assert text.count("word") == 20_000  # nothing of the 100 KB fact is cut


def test_a_narrow_terminal_drops_optional_columns_but_keeps_ids_whole(cli, facts):
    lines = visible(cli.on_terminal(width=50)("recent").stdout)
    assert lines[0].split() == ["when", "id", "text"]
    assert all(len(line) <= 50 for line in lines)
    assert facts["Alice"] in lines[3]


def test_no_color_keeps_the_table_and_writes_no_escape_sequence(cli, facts):
    result = cli.on_terminal(width=80, colors=False)("search", "green tea", "--lexical")
    assert "\x1b" not in result.stdout
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["score", "date", "category", "text", "id"]
    assert facts["Alice"] in lines[1] and "preference" in lines[1]


def test_no_color_on_a_terminal_writes_no_escape_sequence_on_either_stream(cli, vault_dir):
    """The first search builds the index, whose progress bar would draw with escape sequences on
    stderr: under NO_COLOR, a terminal on stdin, stdout and stderr gets none at all."""
    from memvault import Vault

    Vault(vault_dir).add_many([f"note {n} about green tea" for n in range(30)])
    result = cli.on_terminal(width=80, colors=False, stdin_isatty=True, stderr_isatty=True)("search", "green tea")
    assert result.exit_code == 0, result.stderr
    assert "score" in result.stdout and "about green tea" in result.stdout  # the table, drawn without colour
    assert "\x1b" not in result.stdout + result.stderr, result.stderr


@pytest.mark.parametrize(("environ", "expected"), [
    ({}, dict(colors=True, force_terminal=False, dumb=False)),
    ({"NO_COLOR": "1", "COLUMNS": "57"}, dict(colors=False, force_terminal=False, dumb=False, width=57)),
    ({"FORCE_COLOR": "1", "COLUMNS": "abc"}, dict(colors=True, force_terminal=True, dumb=False, width=80)),
    ({"TERM": "dumb", "COLUMNS": "200"}, dict(colors=True, force_terminal=False, dumb=True, width=80)),
    ({"COLUMNS": "0"}, dict(colors=True, force_terminal=False, dumb=False, width=80)),
])
def test_the_terminal_is_read_from_the_process_environment(monkeypatch, environ, expected):
    """What the injected Environment makes of NO_COLOR, FORCE_COLOR, TERM=dumb and COLUMNS (bad
    input tried: COLUMNS of letters, and 0), as rich itself reads them; the real streams are pipes here."""
    from memvault.cli.terminal import Environment

    for key in ("NO_COLOR", "FORCE_COLOR", "TERM", "COLUMNS"):
        monkeypatch.delenv(key, raising=False)
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    env = Environment.from_process(stdin=sys.stdin, stdin_isatty=False)
    assert {key: getattr(env, key) for key in expected} == expected
    assert env.stdout is sys.stdout and not env.stdin_isatty
    assert env.draws is expected["force_terminal"]


def test_piped_output_is_plain_tab_separated_rows_with_nothing_cut(cli, facts):
    """Piped (no terminal): no header, no colour, every field whole; scripts can cut -f."""
    result = cli("recent")
    assert "\x1b" not in result.stdout
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    assert [row[1] for row in rows] == [facts["word"], facts["first"], facts["Alice"]]
    assert rows[0][3] == LONG.strip()
    assert rows[1][3:] == ["first line of notes …", "#notes"]
    assert rows[2][2:] == ["preference", "Alice prefers green tea", "#alice"]
    hit = cli("search", "green tea", "--lexical").stdout.splitlines()[0].split("\t")
    assert float(hit[0]) > 0 and hit[2:] == ["preference", "Alice prefers green tea", facts["Alice"], "#alice"]
    # a tab in a text (bad input tried) is a space in its field: the tags stay in their column
    tabbed = cli("add", "tab\there", "--tag", "x").stdout.strip()
    row = next(row for row in (line.split("\t") for line in cli("recent").stdout.splitlines()) if row[1] == tabbed)
    assert row[3:] == ["tab here", "#x"]


ANSWER_DEEP = ("Long story: after the move to Lyon in 2019 with her sister, two cats and far too many boxes of "
               "books, Alice mostly drinks rooibos in the morning and coffee at night")


def test_a_search_hit_shows_the_words_it_matched_not_only_its_start(cli, terminal):
    """Seen: long facts were cut to their first ~70 characters, which hid the answer to "what does
    Alice drink". On a terminal the text starts a little before the matched words; piped, a
    multi-line fact shows the line that matched."""
    fact = cli("add", ANSWER_DEEP, "--tag", "alice").stdout.strip()
    notes = cli("add", "Meeting notes\nBob runs the builds\nAlice said she drinks rooibos now\nmore later").stdout
    hits = visible(terminal("search", "what does alice drink", "--lexical").stdout)
    row = next(line for line in hits if fact in line)
    assert "Alice mostly drin" in row and "Long story" not in row and len(row) <= 80
    shown = row[row.index("…"):].split()
    assert shown[0][1:] in ANSWER_DEEP.split(), row  # from the start of a word
    piped = cli("search", "rooibos drinks", "--lexical").stdout.splitlines()
    assert [line.split("\t")[3] for line in piped if notes.strip() in line] == ["… Alice said she drinks rooibos now …"]


def test_explain_wraps_the_signals_rather_than_cutting_them(cli, facts):
    """Seen: `--explain` was cut even at 120 columns."""
    lines = visible(cli.on_terminal(width=120)("search", "green tea", "--explain").stdout)
    text = " ".join(lines)
    assert all(len(line) <= 120 for line in lines)
    for signal in ("lexical #1", "dense #", "recency +", "importance +", "(floor 0.05)"):
        assert signal in text, (signal, lines)


def test_the_relevance_floor_is_named_when_it_hides_hits(cli, facts, terminal):
    """Seen: the floor the docs speak of was shown only with --explain."""
    cli("reindex")  # so that the only notice left is the search's
    empty = terminal("search", "zebra crossing", "--lexical")
    assert empty.stderr == "memvault: no matches (relevance floor 0.05; --min-score 0 shows every match)\n"
    some = terminal("search", "green tea", "--lexical")
    assert "Alice prefers green tea" in some.stdout
    assert "hits scoring under 0.05 (the relevance floor) are left out; --min-score 0 shows them" in some.stderr


def test_a_column_left_out_for_want_of_width_is_named(cli, facts, terminal):
    """Seen: tags vanished at 80 columns without a sign."""
    result = terminal("search", "alice tea", "--lexical")
    assert "memvault: tags left out at 80 columns: a wider terminal or --json shows them" in result.stderr
    wide = cli.on_terminal(width=160)("search", "alice tea", "--lexical")
    assert "#alice" in wide.stdout and "tags left out" not in wide.stderr


def test_a_search_of_an_empty_vault_says_the_vault_is_empty(cli):
    result = cli("search", "what does alice drink")
    assert result.exit_code == 0 and result.stdout == ""
    assert result.stderr == "memvault: no matches: the vault holds no facts yet (`memvault add` remembers one)\n"


def test_json_is_unchanged_on_a_terminal(facts, terminal):
    result = terminal("recent", "--json")
    assert "\x1b" not in result.stdout
    assert [f["id"] for f in json.loads(result.stdout)] == [facts["word"], facts["first"], facts["Alice"]]


def test_search_scores_and_doctor_marks_are_coloured(facts, terminal):
    search = terminal("search", "green tea", "--lexical").stdout
    assert re.search(r"\x1b\[[0-9;]*32m1\.\d{3}", search)  # a strong score in green
    doctor = terminal("doctor").stdout
    assert re.search(r"\x1b\[32mok", doctor)


@pytest.mark.parametrize(
    "args, line",
    [
        (["search", "zebra crossing", "--lexical"], "no matches"),
        (["recent", "--since", "2099-01-01"], "nothing to show"),
        (["recent", "--category", "decision"], "nothing to show"),
        (["sessions"], "nothing to show"),
        (["context", "--budget", "10"], "nothing to show: "),
    ],
)
def test_every_empty_list_says_so_in_one_line_on_stderr(cli, facts, args, line):
    """Empty results tried: a search without a match, a future --since, a category nobody used,
    no sessions at all, a budget too small for anything."""
    cli("reindex")  # so that the only notice left is the empty result's
    result = cli(*args)
    assert result.exit_code == 0
    assert result.stdout == ""
    assert result.stderr.startswith(f"memvault: {line}") and result.stderr.count("\n") == 1


def test_a_real_terminal_gets_the_table_and_a_pipe_gets_plain_rows(vault_dir, facts):
    """memvault as a process on a pseudo-terminal of 60 columns, then with stdout piped."""
    import fcntl
    import pty
    import struct
    import termios

    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR", "COLUMNS", "LINES")}
    env["TERM"] = "xterm-256color"
    command = [sys.executable, "-m", "memvault", "recent", "--vault", str(vault_dir)]
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 60, 0, 0))
    with subprocess.Popen(command, stdout=follower, stderr=subprocess.PIPE, env=env, cwd=ROOT) as process:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closes when the process exits
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert process.wait(timeout=60) == 0
    os.close(leader)
    shown = b"".join(chunks).decode()
    assert "\x1b[" in shown
    lines = visible(shown.replace("\r\n", "\n"))
    assert lines[0].split()[:2] == ["when", "id"] and all(len(line) <= 60 for line in lines)

    piped = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
    assert "\x1b" not in piped.stdout and piped.stdout.splitlines()[2].split("\t")[1] == facts["Alice"]


def test_stored_escape_sequences_are_shown_not_run_on_a_terminal(cli):
    """A fact (from an agent or a synced remote) holding OSC 52 (write the clipboard), a title
    change, a screen clear, a carriage return and a C1 CSI: `show`, `recent` and `search` on a
    terminal print each as its escape; piped, the text stays byte-exact (click used to strip what
    looked like a colour code from it)."""
    hostile = "osc \x1b]52;c;cHduZWQ=\x1b\\ title \x1b]0;TITLE\x07 \x1b[2J\x1b[H cleared\rover \x9b31m"
    added = cli("add", hostile).stdout.strip()
    terminal = cli.on_terminal(width=200, stderr_isatty=True)
    for args in (["show", added], ["recent"], ["search", "cleared", "--lexical"]):
        result = terminal(*args)
        assert result.exit_code == 0, result.stderr
        shown = result.stdout + result.stderr
        assert "cleared" in shown and "\\x1b]52" in shown and "\\x0d" in shown, shown
        # (memvault's own progress line may hide the cursor: only the stored sequences count)
        assert not any(raw in shown for raw in ("\x1b]52", "\x1b]0;", "\x07", "\x1b[2J", "\x9b", "cleared\rover"))
    piped = cli("show", added).stdout
    assert piped.startswith(hostile + "\n")
