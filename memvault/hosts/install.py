"""`memvault install HOST`: the memvault MCP server written into an agent host's own config file.

Each host keeps its MCP servers in a file of its own (where and in which format: HOSTS below,
taken from each host's documentation). The entry starts `memvault mcp --vault VAULT` by absolute
paths (hosts start servers without the user's shell, so neither `~` nor PATH apply), with the
`env` the server needs to find its embedding model. Claude Code also gets a SessionStart hook
that prints `memvault context` (within a token budget) into each new session, as its hooks
documentation describes: a command whose output on exit 0 is added to the session's context.
"""

from __future__ import annotations

import difflib
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memvault.errors import InvalidInput
from memvault.hosts import configs

HOSTS = ("claude-code", "claude-desktop", "cursor", "codex")
SERVER = "memvault"
# Claude Code's SessionStart sources: a new session, /clear, and after a compaction (a resumed
# session already holds what it was given).
HOOK_MATCHER = "startup|clear|compact"
HOOK_TIMEOUT = 30  # seconds; `memvault context` without a query reads MEMORY.md and the latest facts
# The variables the server reads to find its models (and whether to rerank); passed on as they are
# set here, so it ranks as `memvault search` does in this shell.
MODEL_VARIABLES = ("MEMVAULT_EMBED_MODEL", "MEMVAULT_EMBED_MODEL_PATH", "MEMVAULT_RERANK", "MEMVAULT_RERANK_MODEL",
                   "MEMVAULT_RERANK_MODEL_PATH", "FASTEMBED_CACHE_PATH")


@dataclass(frozen=True)
class Server:
    """How a host starts the memvault MCP server."""

    command: str
    args: list[str]
    env: dict[str, str]
    hook: str  # the shell command of Claude Code's SessionStart hook

    def entry(self, typed: bool = False) -> dict[str, Any]:
        """The `mcpServers` entry (`typed`: with `"type": "stdio"`, as Claude Code writes its own)."""
        entry: dict[str, Any] = {"type": "stdio"} if typed else {}
        entry.update(command=self.command, args=list(self.args))
        if self.env:
            entry["env"] = dict(self.env)
        return entry


@dataclass
class Change:
    """One config file: what it holds now and what it will hold; `action` says what happens to it."""

    path: Path
    before: str | None
    after: str | None
    action: str  # added, updated, removed, unchanged, absent
    backup: Path | None = None

    def diff(self) -> str:
        """The change as a unified diff (empty when nothing changes)."""
        if self.after is None or self.before == self.after:
            return ""
        old, new = (self.before or "").splitlines(keepends=True), self.after.splitlines(keepends=True)
        lines = difflib.unified_diff(old, new, fromfile=str(self.path) if self.before is not None else "/dev/null",
                                     tofile=str(self.path))
        return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "action": self.action,
                "backup": str(self.backup) if self.backup else None}


@dataclass
class InstallReport:
    host: str
    install: bool
    dry_run: bool
    changes: list[Change] = field(default_factory=list)
    server: Server | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "action": "install" if self.install else "uninstall", "dry_run": self.dry_run,
                "files": [change.to_dict() for change in self.changes],
                "server": self.server.entry() if self.server and self.install else None}


def install(host: str, vault: Path, *, hook: bool = True, budget: int = 2000, dry_run: bool = False,
            environ: Mapping[str, str] = os.environ) -> InstallReport:
    """Write the memvault server for `vault` into `host`'s config (and Claude Code's SessionStart
    hook, unless not `hook`); `dry_run` plans and writes nothing. InvalidInput for a malformed file."""
    from memvault.errors import check_count

    known(host)
    check_count("budget", budget, 1)
    report = plan(host, server_for(Path(vault).absolute(), budget, environ), install=True, hook=hook, environ=environ)
    report.dry_run = dry_run
    return report if dry_run else apply(report)


def uninstall(host: str, *, dry_run: bool = False, environ: Mapping[str, str] = os.environ) -> InstallReport:
    """Take the memvault server (and Claude Code's hook) out of `host`'s config again."""
    known(host)
    report = plan(host, Server("", [], {}, ""), install=False, environ=environ)
    report.dry_run = dry_run
    return report if dry_run else apply(report)


def known(host: str) -> str:
    if host not in HOSTS:
        raise InvalidInput(f"unknown host {host!r}; use one of: {', '.join(HOSTS)}")
    return host


def server_for(vault: Path, budget: int, environ: Mapping[str, str] = os.environ) -> Server:
    """The server entry for `vault`: this installation's memvault by absolute path, and the model
    variables set in `environ` (relative paths made absolute)."""
    here = Path(sys.executable).parent
    script = shutil.which("memvault", path=str(here))
    command, prefix = (str(Path(script).absolute()), []) if script else (sys.executable, ["-m", "memvault"])
    env = {}
    for name in MODEL_VARIABLES:
        value = environ.get(name)
        if value:
            env[name] = str(Path(value).expanduser().absolute()) if name.endswith("_PATH") else value
    by_path = {"MEMVAULT_EMBED_MODEL_PATH", "MEMVAULT_RERANK_MODEL_PATH"} <= env.keys()
    if not by_path and "FASTEMBED_CACHE_PATH" not in env:
        from memvault.index.embedder import model_cache_dir  # where `reindex --download-model` put it

        env["FASTEMBED_CACHE_PATH"] = str(model_cache_dir().absolute())
    words = [command, *prefix, "context", "--vault", str(vault), "--budget", str(budget)]
    hook = subprocess.list2cmdline(words) if os.name == "nt" else shlex.join(words)
    return Server(command, [*prefix, "mcp", "--vault", str(vault)], env, hook)


def config_files(host: str, environ: Mapping[str, str] = os.environ, platform: str = sys.platform) -> list[Path]:
    """The files a host keeps its MCP servers in (and, for Claude Code, its hooks), on this system."""
    home = Path(environ.get("HOME") or Path.home())
    if host == "claude-code":
        configured = environ.get("CLAUDE_CONFIG_DIR")
        if configured:
            return [Path(configured) / ".claude.json", Path(configured) / "settings.json"]
        return [home / ".claude.json", home / ".claude" / "settings.json"]
    if host == "claude-desktop":
        if platform == "darwin":
            folder = home / "Library" / "Application Support" / "Claude"
        elif platform.startswith("win"):
            folder = Path(environ.get("APPDATA") or home / "AppData" / "Roaming") / "Claude"
        else:  # the Linux builds follow the XDG layout
            folder = Path(environ.get("XDG_CONFIG_HOME") or home / ".config") / "Claude"
        return [folder / "claude_desktop_config.json"]
    if host == "cursor":
        return [home / ".cursor" / "mcp.json"]
    if host == "codex":
        return [Path(environ.get("CODEX_HOME") or home / ".codex") / "config.toml"]
    raise InvalidInput(known(host))  # (known() raises first)


def plan(host: str, server: Server, *, install: bool = True, hook: bool = True,
         environ: Mapping[str, str] = os.environ) -> InstallReport:
    """What installing (or uninstalling) changes in the host's files; reads only."""
    paths = config_files(host, environ)
    report = InstallReport(host, install, False, server=server)
    for n, path in enumerate(paths):
        before = configs.read_text(path)
        if host == "codex":
            after, had = _codex(path, before, server, install)
        elif n == 1:  # Claude Code's settings.json: the SessionStart hook (--no-hook takes an earlier one out)
            after, had = _hooked(path, before, server, install and hook)
            if install and not hook and not had:
                continue
        else:
            after, had = _mcp_json(path, before, server, install, typed=host == "claude-code")
        report.changes.append(Change(path, before, after, _action(before, after, had, install and (hook or n == 0))))
    return report


def apply(report: InstallReport) -> InstallReport:
    """Write the planned changes, every file backed up before the first is written; all of them or,
    on a failure, none (the files written already are put back from their backups)."""
    changing = [change for change in report.changes if change.after is not None and change.after != change.before]
    try:
        for change in changing:
            if change.before is not None:
                change.backup = configs.backup(change.path)
    except BaseException:
        for change in changing:
            if change.backup is not None:
                change.backup.unlink(missing_ok=True)
                change.backup = None
        raise
    done: list[Change] = []
    try:
        for change in changing:
            if change.after is not None:  # (always: `changing` holds only changes that write)
                configs.write(change.path, change.after)
                done.append(change)
    except BaseException:
        for change in done:
            if change.backup is not None:
                shutil.copy2(change.backup, change.path)
            else:
                change.path.unlink(missing_ok=True)
        raise
    return report


def _action(before: str | None, after: str | None, had: bool, install: bool) -> str:
    if after == before:
        return "unchanged" if before is not None else "absent"
    if not install:
        return "removed"
    return "updated" if had else "added"


def _mcp_json(path: Path, before: str | None, server: Server, install: bool, typed: bool) -> tuple[str | None, bool]:
    """The `mcpServers` object of a JSON config (Claude Code, Claude Desktop, Cursor) with the
    memvault entry set or taken out, and whether it held one."""
    data = configs.load_json(path, before)
    servers = data.get("mcpServers")
    if servers is not None and not isinstance(servers, dict):
        raise InvalidInput(f"{path}: \"mcpServers\" is not an object; {configs.REFUSED}")
    current: dict = servers or {}  # (the file's own object whenever it holds the entry)
    had = SERVER in current
    if not install:
        if not had:
            return before, had
        del current[SERVER]
        return configs.dump_json(data, before), had
    entry = server.entry(typed)
    if had and current[SERVER] == entry:
        return before, had
    data.setdefault("mcpServers", {})[SERVER] = entry
    return configs.dump_json(data, before), had


def _hooked(path: Path, before: str | None, server: Server, install: bool) -> tuple[str | None, bool]:
    """Claude Code's settings.json with memvault's SessionStart hook set (install) or taken out, and
    whether it held one; every other hook is kept as it is."""
    data = configs.load_json(path, before)
    hooks = data.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise InvalidInput(f"{path}: \"hooks\" is not an object; {configs.REFUSED}")
    groups = (hooks or {}).get("SessionStart")
    if groups is not None and not isinstance(groups, list):
        raise InvalidInput(f"{path}: \"hooks\".\"SessionStart\" is not a list; {configs.REFUSED}")
    kept, had = [], False
    for group in groups or []:
        listed = isinstance(group, dict) and isinstance(group.get("hooks"), list)
        mine = list(group["hooks"]) if listed else []
        rest = [h for h in mine if not _our_hook(h)]
        if len(rest) != len(mine):
            had = True
            if rest:
                kept.append({**group, "hooks": rest})
            continue
        kept.append(group)
    wanted = {"matcher": HOOK_MATCHER, "hooks": [{"type": "command", "command": server.hook, "timeout": HOOK_TIMEOUT}]}
    updated = [*kept, wanted] if install else kept
    if updated == (groups or []):
        return before, had
    hooks = data.setdefault("hooks", {})
    if updated:
        hooks["SessionStart"] = updated
    else:
        hooks.pop("SessionStart", None)
        if not hooks:
            data.pop("hooks")
    return configs.dump_json(data, before), had


def _our_hook(hook: Any) -> bool:
    """memvault's hook: a command that runs `memvault ... context` (as `install` writes it)."""
    return isinstance(hook, dict) and isinstance(hook.get("command"), str) and "memvault" in hook["command"] \
        and " context " in hook["command"]


def _codex(path: Path, before: str | None, server: Server, install: bool) -> tuple[str | None, bool]:
    """Codex's config.toml with a `[mcp_servers.memvault]` table set or taken out, and whether it
    held one."""
    import tomlkit

    document = configs.load_toml(path, before)
    servers = document.get("mcp_servers")
    if servers is not None and not isinstance(servers, dict):
        raise InvalidInput(f"{path}: mcp_servers is not a table; {configs.REFUSED}")
    current: dict = servers or {}  # (the document's own table whenever it holds the entry)
    had = SERVER in current
    if not install:
        if not had:
            return before, had
        del current[SERVER]
        return configs.dump_toml(document), had
    entry = server.entry()
    if had and current[SERVER].unwrap() == entry:
        return before, had
    table = tomlkit.table()
    table["command"] = entry["command"]
    table["args"] = entry["args"]
    if entry.get("env"):
        env = tomlkit.table()
        for name, value in entry["env"].items():
            env[name] = value
        table["env"] = env
    if servers is None:
        servers = tomlkit.table(is_super_table=True)
        document["mcp_servers"] = servers
    elif had:
        del servers[SERVER]
    servers[SERVER] = table
    (env if entry.get("env") else table).add(tomlkit.nl())  # a blank line before the next table, as between the others
    text = configs.dump_toml(document)
    return (text if text.endswith("\n") else text + "\n"), had
