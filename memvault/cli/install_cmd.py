"""`memvault install` / `uninstall`: the MCP server in an agent host's own config file."""

from __future__ import annotations

from typing import Annotated

import typer

from memvault.cli.output import JsonOption, VaultOption, echo, emit_json, notice, open_vault
from memvault.cli.terminal import current

HostArgument = Annotated[str, typer.Argument(metavar="HOST", help="claude-code, claude-desktop, cursor or codex.", show_default=False)]
DryRunOption = Annotated[bool, typer.Option("--dry-run", help="Print the change to each file as a diff; write nothing.")]


def install(
    host: HostArgument,
    dry_run: DryRunOption = False,
    hook: Annotated[bool, typer.Option("--hook/--no-hook", help="Claude Code only: also a SessionStart hook that puts `memvault context` into each new session.")] = True,
    budget: Annotated[int, typer.Option("--budget", help="Most tokens the SessionStart hook's context may take.")] = 2000,
    json_: JsonOption = False,
    vault_path: VaultOption = None,
) -> None:
    """Connect an agent host to this vault: write memvault's MCP server into the host's config.

    The entry runs this installation's memvault by absolute path, `mcp --vault VAULT`, with the
    environment the server needs to find its embedding model. It is merged into what the file
    holds (other servers are kept), after a backup beside the file; a file that does not parse is
    refused, unchanged. For claude-code, a SessionStart hook also prints `memvault context` (within
    --budget tokens) into each new session. Restart the host afterwards.

    Example: memvault install claude-code --dry-run
    Example: memvault install cursor --vault ~/memory
    """
    from memvault.hosts.install import install as write
    from memvault.hosts.install import known

    known(host)  # before a first use could create the default vault
    vault = open_vault(vault_path)
    report = write(host, vault.root, hook=hook, budget=budget, dry_run=dry_run)
    _render(report, json_)


def uninstall(
    host: HostArgument,
    dry_run: DryRunOption = False,
    json_: JsonOption = False,
) -> None:
    """Disconnect an agent host: take memvault's MCP server (and Claude Code's hook) out of its config.

    Everything else in the file is kept; the file is backed up first.

    Example: memvault uninstall claude-desktop
    """
    from memvault.hosts.install import uninstall as remove

    _render(remove(host, dry_run=dry_run), json_)


def _render(report, json_: bool) -> None:
    if json_:
        emit_json(report.to_dict())
        return
    if report.dry_run:
        for change in report.changes:
            current().stdout.write(change.diff())
        notice("dry run: nothing was written")
        return
    for change in report.changes:
        backup = f" (backup: {change.backup})" if change.backup else ""
        echo({"added": f"added memvault to {change.path}{backup}",
              "updated": f"updated memvault in {change.path}{backup}",
              "removed": f"removed memvault from {change.path}{backup}",
              "unchanged": (f"{change.path} already holds memvault's entry; nothing changed" if report.install
                            else f"{change.path} holds no memvault entry; nothing changed"),
              "absent": f"{change.path} does not exist; nothing to remove"}[change.action])
    if report.install and any(c.action in ("added", "updated") for c in report.changes):
        notice(f"restart {report.host} to load the memvault server")


def register(app: typer.Typer) -> None:
    app.command()(install)
    app.command()(uninstall)
