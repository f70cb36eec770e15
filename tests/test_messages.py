"""What a newcomer reads: the first search, a long reindex, `mcp` typed in a terminal, and the
error lines a first hour runs into, each as seen and as it now reads."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys

import pytest
from support.cli import Cli, run_memvault
from support.git import snapshot

from memvault.errors import ExitCode


def test_the_first_search_says_it_builds_the_index_as_a_routine_step(cli):
    """Seen: "search index missing; building it from the vault files", which reads like an error."""
    cli("add", "Alice prefers green tea")
    first = cli("search", "tea", "--lexical")
    assert first.exit_code == 0 and first.stderr == (
        "memvault: building the search index from the vault files (once: later searches keep it up to date)\n")
    assert cli("search", "tea", "--lexical").stderr == ""


def test_reindex_tells_the_model_loading_stage(vault, monkeypatch):
    """Seen: `reindex` sat at "reading files 100%" for about 4 s while the model loaded."""
    from memvault.index import embedder

    monkeypatch.setattr(embedder, "_loaded", {})  # as in a new process: the model is not in memory
    vault.add("Alice prefers green tea")
    stages: list[tuple[str, int, int]] = []
    vault.reindex(clear=True, progress=lambda phase, done, total: stages.append((phase, done, total)))
    phases = list(dict.fromkeys(phase for phase, _done, _total in stages))
    assert phases == ["reading files", "loading the embedding model", "embedding"], stages
    assert ("loading the embedding model", 0, 1) in stages and ("loading the embedding model", 1, 1) in stages


def test_mcp_typed_in_a_terminal_says_what_it_is_and_how_to_stop_it(vault_dir):
    """Seen: `memvault mcp` in a terminal printed nothing and answered nothing."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "memvault", "mcp", "--vault", str(vault_dir)], stdin=follower,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    os.close(follower)
    try:
        ready, _, _ = select.select([proc.stderr], [], [], 60)
        assert ready, "it said nothing on stderr"
        said = proc.stderr.readline()
        assert said == (f"memvault: serving {vault_dir} over MCP on stdin and stdout, for an MCP client to start "
                        "(see `memvault mcp --help`); Ctrl-C stops it\n")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == ExitCode.INTERRUPTED
    finally:
        proc.kill()
        os.close(leader)


def test_mcp_started_by_a_client_on_a_pipe_says_nothing(vault_dir):
    done = subprocess.run([sys.executable, "-m", "memvault", "mcp", "--vault", str(vault_dir)], input="",
                          capture_output=True, text=True, timeout=60)
    assert done.stdout == "" and "serving" not in done.stderr


@pytest.mark.parametrize(("args", "line"), [
    # Seen: "No such option: --category" alone.
    (["--category", "preference", "add", "Alice prefers green tea"],
     "--category is an option of `memvault add` (and of recent, search): put it after the command name, as in "
     "`memvault add ... --category ...` (see `memvault --help`)"),
    # Seen: "if it is the text, put `--` before it" although the text was there and the option misspelt
    # (and --at offered beside --category, as close for click's cut-off).
    (["add", "Alice prefers green tea", "--catgory", "preference"],
     "No such option: --catgory; did you mean --category? (see `memvault add --help`)"),
    (["add", "Alice prefers green tea", "--tags", "drinks"],
     "No such option: --tags; did you mean --tag? (see `memvault add --help`)"),
    # Seen: "at '2026-13-45' is not a date", naming no option.
    (["add", "Alice moved", "--at", "2026-13-45"],
     "--at '2026-13-45' is not a date: use ISO 8601 (2026-11-01, 2026-11-01T09:30, 2026-11-01T09:30+01:00), or "
     "today, yesterday, 7d, 12h, 2w"),
    (["recent", "--since", "last week"],
     "--since 'last week' is not a date: use ISO 8601 (2026-11-01, 2026-11-01T09:30, 2026-11-01T09:30+01:00), or "
     "today, yesterday, 7d, 12h, 2w"),
    (["add", "Alice moved", "--importance", "3"], "--importance must be between 0 and 1, got 3.0"),
    # Seen: "no fact with id 'abc'", with no word on what an id looks like.
    (["show", "abc"], "no fact with id 'abc' (a fact id is 16 characters, as `add` printed it; this is 3)"),
    (["forget", "zzzzzzzzzzzzzzzz"], "no fact with id 'zzzzzzzzzzzzzzzz'"),
])
def test_error_lines_name_what_to_type(cli, vault_dir, args, line):
    before = snapshot(vault_dir)
    result = cli(*args, vault=False) if args[0].startswith("--") else cli(*args)
    assert result.stderr == f"memvault: {line}\n" and result.stdout == ""
    assert result.exit_code in (ExitCode.USAGE, ExitCode.NOT_FOUND)
    assert snapshot(vault_dir) == before


def test_a_path_that_is_no_vault_says_whether_it_exists(tmp_path):
    """Seen: "is not a memvault vault (no memvault.toml and .git)" for a folder that did not exist."""
    missing = Cli(None)("recent", "--vault", str(tmp_path / "nowhere"), vault=False)
    assert missing.exit_code == ExitCode.NOT_FOUND and missing.stderr == (
        f"memvault: {tmp_path / 'nowhere'} does not exist; create a vault there with "
        f"`memvault init {tmp_path / 'nowhere'}`\n")
    (tmp_path / "notes.txt").write_text("mine")
    other = run_memvault("recent", "--vault", str(tmp_path))
    assert other.returncode == ExitCode.NOT_FOUND and other.stderr == (
        f"memvault: {tmp_path} is not a memvault vault (it has no memvault.toml); point --vault (or "
        "MEMVAULT_VAULT) at your vault, or make a new one with `memvault init PATH` in a new or empty directory\n")
    assert not (tmp_path / "nowhere").exists()
