"""`memvault install` / `uninstall` against real config files of each host, in a fresh HOME.

The existing configs (tests/data/hosts) hold other servers and hooks; they must survive, in their
format. The installed entry is then started the way the host starts it, and the hook run by a shell.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from support.git import IDENTITY

from memvault.errors import ExitCode

DATA = Path(__file__).parent / "data" / "hosts"
FIXTURES = {"claude-code": "claude.json", "claude-desktop": "claude_desktop_config.json", "cursor": "cursor_mcp.json",
            "codex": "codex_config.toml"}


@pytest.fixture
def home(hermetic_env, monkeypatch) -> Path:
    """A fresh HOME, and none of the variables that would point a host's config elsewhere."""
    for name in ("XDG_CONFIG_HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "APPDATA", "MEMVAULT_EMBED_MODEL",
                 "FASTEMBED_CACHE_PATH"):
        monkeypatch.delenv(name, raising=False)
    return hermetic_env


def where(host: str, home: Path) -> Path:
    return {"claude-code": home / ".claude.json", "cursor": home / ".cursor" / "mcp.json",
            "claude-desktop": home / ".config" / "Claude" / "claude_desktop_config.json",
            "codex": home / ".codex" / "config.toml"}[host]


def place(host: str, home: Path) -> Path:
    target = where(host, home)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(DATA / FIXTURES[host], target)
    return target


def read(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    return tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)


def backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".bak-*"))


def memvault_script() -> str:
    return str(Path(shutil.which("memvault", path=str(Path(sys.executable).parent))).absolute())


@pytest.mark.parametrize("host", list(FIXTURES))
def test_install_merges_into_the_hosts_own_config_and_uninstall_gives_it_back(cli, vault_dir, home, host,
                                                                           tiny_model_path):
    config = place(host, home)
    original = config.read_bytes()
    result = cli("install", host)
    assert result.exit_code == 0, result.stderr
    assert f"added memvault to {config} (backup: {config}.bak-" in result.stdout
    assert f"restart {host} to load the memvault server" in result.stderr
    assert [b.read_bytes() for b in backups(config)] == [original]

    now, before = read(config), (tomllib.loads(original.decode()) if host == "codex" else json.loads(original))
    key = "mcp_servers" if host == "codex" else "mcpServers"
    entry = now[key].pop("memvault")
    assert now == before  # every other server, setting and state as it was
    from memvault.index.embedder import model_cache_dir

    # (tests turn the reranker off; its model would come from the model cache)
    expected = {"command": memvault_script(), "args": ["mcp", "--vault", str(vault_dir)],
                "env": {"MEMVAULT_EMBED_MODEL_PATH": tiny_model_path, "MEMVAULT_RERANK": "0",
                        "FASTEMBED_CACHE_PATH": str(model_cache_dir().absolute())}}
    assert entry == ({"type": "stdio", **expected} if host == "claude-code" else expected)
    text = config.read_text()
    if host == "cursor":
        assert '\n\t"mcpServers": {\n\t\t"context7"' in text  # the file's tab indentation kept
    if host == "codex":  # comments and layout untouched: only memvault's tables are new
        tables = r"\[mcp_servers\.memvault\]\n.*?\n\[mcp_servers\.memvault\.env\]\n(?:[^\n]+\n)+\n"
        block = re.search(tables, text, re.S)
        assert block and text.replace(block.group(), "") == original.decode()

    gone = cli("uninstall", host, vault=False)
    assert gone.exit_code == 0 and f"removed memvault from {config}" in gone.stdout
    assert config.read_bytes() == original
    again = cli("uninstall", host, vault=False)
    assert again.exit_code == 0 and f"{config} holds no memvault entry; nothing changed" in again.stdout


def test_claude_code_gets_a_session_start_hook_beside_the_hooks_already_there(cli, vault_dir, home):
    place("claude-code", home)
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    shutil.copyfile(DATA / "claude_settings.json", settings)
    original = json.loads(settings.read_text())
    assert cli("install", "claude-code", "--budget", "800").exit_code == 0
    now = json.loads(settings.read_text())
    hooks = now["hooks"].pop("SessionStart")
    assert hooks[0] == original["hooks"]["SessionStart"][0]  # the other tool's hook stays, first
    assert hooks[1] == {"matcher": "startup|clear|compact", "hooks": [
        {"type": "command", "command": f"{memvault_script()} context --vault {vault_dir} --budget 800", "timeout": 30}]}
    original["hooks"].pop("SessionStart")
    assert now == original
    # Installing again with another budget replaces memvault's hook, never adds a second.
    assert cli("install", "claude-code", "--budget", "1200").exit_code == 0
    starts = json.loads(settings.read_text())["hooks"]["SessionStart"]
    assert len(starts) == 2 and starts[1]["hooks"][0]["command"].endswith("--budget 1200")
    # --no-hook takes memvault's hook out and leaves the server.
    assert cli("install", "claude-code", "--no-hook").exit_code == 0
    assert json.loads(settings.read_text())["hooks"]["SessionStart"] == [starts[0]]
    assert "memvault" in json.loads((home / ".claude.json").read_text())["mcpServers"]


def test_the_hook_prints_the_vaults_context_when_a_shell_runs_it(cli, home, tmp_path):
    vault = tmp_path / "Mes notes d'équipe" / "vault"  # a space, a quote, an accent: quoted for the shell
    assert cli("init", str(vault), vault=False).exit_code == 0
    fact = cli("add", "The user prefers answers in French", "--vault", str(vault), vault=False).stdout.strip()
    assert cli("install", "claude-code", "--vault", str(vault), vault=False).exit_code == 0
    hook = json.loads((home / ".claude" / "settings.json").read_text())["hooks"]["SessionStart"][0]["hooks"][0]
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", **IDENTITY}
    ran = subprocess.run(["/bin/sh", "-c", hook["command"]], env=env, capture_output=True, text=True,
                         timeout=hook["timeout"] * 4)
    assert ran.returncode == 0, ran.stderr
    assert fact in ran.stdout and "The user prefers answers in French" in ran.stdout


def _served(home: Path, tool: str, arguments: dict) -> dict:
    """What the server of cursor's installed entry answers to one call, started the host's way: the
    entry's command, args and env alone (no shell, a bare PATH)."""
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    entry = json.loads((home / ".cursor" / "mcp.json").read_text())["mcpServers"]["memvault"]

    async def ask() -> dict:
        params = StdioServerParameters(command=entry["command"], args=entry["args"],
                                       env={"HOME": str(home), "PATH": "/usr/bin:/bin", **IDENTITY, **entry["env"]})
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (reader, writer):
                async with ClientSession(reader, writer) as session:
                    await session.initialize()
                    result = await session.call_tool(tool, arguments)
                    return result.structured_content

    return anyio.run(ask)


def test_the_installed_entry_starts_a_server_that_answers(cli, vault_dir, home):
    fact = cli("add", "Hana starts on Monday").stdout.strip()
    assert cli("install", "cursor").exit_code == 0
    assert _served(home, "show", {"id": fact})["text"] == "Hana starts on Monday"


@pytest.mark.real_model
@pytest.mark.reranker
def test_the_installed_server_finds_both_models_and_ranks_as_search_does_here(cli, vault_dir, home):
    """Models given by path where `install` runs (the reranker's too) reach the host's entry, so
    the server it starts with a bare environment ranks as `memvault search` does, reranker and all."""
    for text in ("You play any instruments?", "Yes, the clarinet and the violin.", "We went to the parade.",
                 "The violin was my grandmother's."):
        cli("add", text, "--session", "chat-1")
    query = "What instruments does Melanie play?"
    here = [(hit["id"], hit["score"]) for hit in json.loads(cli("search", query, "--json").stdout)]
    assert cli("install", "cursor").exit_code == 0
    entry = json.loads((home / ".cursor" / "mcp.json").read_text())["mcpServers"]["memvault"]
    assert {"MEMVAULT_EMBED_MODEL_PATH", "MEMVAULT_RERANK_MODEL_PATH"} <= entry["env"].keys()
    served = [(hit["id"], hit["score"]) for hit in _served(home, "search", {"query": query})["hits"]]
    assert [key for key, _ in served] == [key for key, _ in here]
    assert [score for _, score in served] == pytest.approx([score for _, score in here], abs=1e-3)


def test_each_host_file_is_found_where_the_host_keeps_it(cli, vault_dir, home, monkeypatch, tmp_path):
    """No config yet: the files (and their folders) are made, per the host's own variables."""
    for host in FIXTURES:
        assert cli("install", host).exit_code == 0
        assert "memvault" in read(where(host, home))["mcp_servers" if host == "codex" else "mcpServers"]
        assert backups(where(host, home)) == []  # nothing to back up
    assert (home / ".claude" / "settings.json").is_file()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    for host in ("claude-desktop", "claude-code", "codex"):
        assert cli("install", host).exit_code == 0
    assert (tmp_path / "xdg" / "Claude" / "claude_desktop_config.json").is_file()
    assert (tmp_path / "claude" / ".claude.json").is_file() and (tmp_path / "claude" / "settings.json").is_file()
    assert (tmp_path / "codex" / "config.toml").is_file()


@pytest.mark.parametrize(("host", "content", "says"), [
    ("cursor", '{\n  "mcpServers": {\n    "sqlite": {"command": "uvx"},\n  }\n}\n',
     "is not valid JSON (line 4, column 3"),
    ("claude-desktop", '{"mcpServers": ["filesystem"]}\n', '"mcpServers" is not an object'),
    ("claude-code", '[1, 2]\n', "holds JSON that is not an object"),
    ("codex", 'model = "gpt-5"\n[mcp_servers.docs\ncommand = "npx"\n', "is not valid TOML (line 2"),
    ("codex", 'mcp_servers = "none"\n', "mcp_servers is not a table"),
])
def test_a_malformed_config_is_refused_in_one_line_and_left_untouched(cli, vault_dir, home, host, content, says):
    config = where(host, home)
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(content)
    for command in (["install", host], ["uninstall", host]):
        result = cli(*command, vault=command[0] == "install")
        assert result.exit_code == ExitCode.USAGE
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and says in lines[0] and str(config) in lines[0] and "nothing was changed" in lines[0]
        assert config.read_text() == content and backups(config) == []


def test_a_malformed_settings_file_stops_claude_code_before_either_file_changes(cli, vault_dir, home):
    config = place("claude-code", home)
    original = config.read_bytes()
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_text('{"hooks": {"SessionStart": {"matcher": "startup"}}}')
    result = cli("install", "claude-code")
    assert result.exit_code == ExitCode.USAGE and '"SessionStart" is not a list' in result.stderr
    assert config.read_bytes() == original and backups(config) == []


def test_dry_run_prints_the_change_as_a_diff_and_writes_nothing(cli, vault_dir, home):
    config = place("codex", home)
    original = config.read_bytes()
    result = cli("install", "codex", "--dry-run")
    assert result.exit_code == 0 and result.stderr == "memvault: dry run: nothing was written\n"
    assert result.stdout.startswith(f"--- {config}\n+++ {config}\n")
    assert "+[mcp_servers.memvault]\n" in result.stdout
    assert f'+args = ["mcp", "--vault", "{vault_dir}"]\n' in result.stdout
    assert config.read_bytes() == original and backups(config) == []
    report = json.loads(cli("install", "codex", "--dry-run", "--json").stdout)
    assert report["dry_run"] is True and report["files"] == [{"path": str(config), "action": "added", "backup": None}]


def test_installing_twice_changes_nothing_the_second_time(cli, vault_dir, home):
    config = place("claude-desktop", home)
    assert cli("install", "claude-desktop").exit_code == 0
    installed = config.read_bytes()
    again = cli("install", "claude-desktop")
    assert again.exit_code == 0 and "already holds memvault's entry; nothing changed" in again.stdout
    assert config.read_bytes() == installed and len(backups(config)) == 1
    # Another vault: the entry is updated in place, after a new backup.
    other = vault_dir.parent / "other"
    assert cli("init", str(other), vault=False).exit_code == 0
    moved = cli("install", "claude-desktop", "--vault", str(other), vault=False)
    assert moved.exit_code == 0 and "updated memvault in" in moved.stdout
    assert read(config)["mcpServers"]["memvault"]["args"] == ["mcp", "--vault", str(other)]
    assert len(backups(config)) == 2


def test_bad_arguments_are_one_line_and_exit_2(cli, vault_dir, home):
    for args, says in ((["install", "vscode"], "unknown host 'vscode'; use one of: claude-code, claude-desktop"),
                       (["uninstall", "zed"], "unknown host 'zed'"),
                       (["install", "cursor", "--budget", "0"], "budget must be a whole number of at least 1")):
        result = cli(*args, vault=args[0] == "install")
        assert result.exit_code == ExitCode.USAGE and len(result.stderr.splitlines()) == 1 and says in result.stderr
    assert not (home / ".cursor").exists()


def test_a_failure_writing_the_second_file_puts_the_first_back(vault_dir, home, tmp_path):
    """Fault tried: Claude Code's settings folder is on a read-only file system."""
    config = place("claude-code", home)
    original = config.read_bytes()
    folder = home / ".claude"
    folder.mkdir()
    try:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)],
                                 capture_output=True, text=True)
    except FileNotFoundError:
        pytest.skip("no `mount` command here: this test needs one (and root)")
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip() or 'refused'}); this test needs root")
    try:
        (folder / "settings.json").write_text('{"model": "sonnet"}\n')
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True, capture_output=True)
        result = subprocess.run([sys.executable, "-m", "memvault", "install", "claude-code", "--vault", str(vault_dir)],
                                capture_output=True, text=True, env=dict(os.environ), timeout=120)
        assert result.returncode == ExitCode.UNWRITABLE
        assert re.fullmatch(r"memvault: read-only file system: cannot write \S*/\.claude/settings\.json\S*; "
                            r"nothing was changed\n", result.stderr), result.stderr
        assert config.read_bytes() == original
        assert (folder / "settings.json").read_text() == '{"model": "sonnet"}\n'
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)
