"""Sync commands: remote set/show, sync, clone."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from memvault.cli.output import JsonOption, VaultOption, echo, emit_json, notice, open_vault, root_vault
from memvault.errors import InvalidInput

remote_app = typer.Typer(name="remote", invoke_without_command=True)


@remote_app.callback()
def remote(ctx: typer.Context, json_: JsonOption = False, vault_path: VaultOption = None) -> None:
    """The git remote this vault syncs with; alone, the same as `remote show`.

    Example: memvault remote set git@example.com:me/memory.git
    """
    if ctx.invoked_subcommand is None:
        remote_show(json_, vault_path)
    elif json_ or vault_path is not None:  # they belong to the subcommand, which would not see them
        raise InvalidInput(f"give --json and --vault after `remote {ctx.invoked_subcommand}`, not before it")


@remote_app.command("set")
def remote_set(
    url: Annotated[str, typer.Argument(help="Any git remote: a bare repository path, ssh or https URL.")],
    json_: JsonOption = False,
    vault_path: VaultOption = None,
) -> None:
    """Set the remote `memvault sync` uses (no network access until then).

    Example: memvault remote set git@github.com:me/memory.git
    """
    info = open_vault(vault_path).set_remote(url)
    if json_:
        emit_json(info)
    else:
        echo(f"{info['name']}\t{info['url']}")


@remote_app.command("show")
def remote_show(json_: JsonOption = False, vault_path: VaultOption = None) -> None:
    """Show the remote, and how far this vault is ahead of or behind it as of the last sync.

    Example: memvault remote show --json
    """
    info = open_vault(vault_path).remote()
    if json_:
        emit_json(info)
        return
    if info is None:
        notice("no remote set; use `memvault remote set URL`")
        return
    echo(f"{info['name']}\t{info['url']}")
    if info["synced"]:
        echo(f"branch {info['branch']}: {info['ahead']} commit(s) ahead, {info['behind']} behind (as of the last sync)")
    else:
        echo(f"branch {info['branch']}: never synced")


def sync(json_: JsonOption = False, vault_path: VaultOption = None) -> None:
    """Fetch the remote, merge its commits with this vault's, push. Pushed commits are never rewritten, but by a purge.

    Facts added on several machines the same day are all kept. Wiki pages changed on both sides
    stop the sync (exit 7) with the vault left as it was; an unreachable remote exits 8.

    Example: memvault sync --json
    """
    report = open_vault(vault_path).sync()
    if report.index and report.index.get("error"):
        notice(f"search index not updated: {report.index['error']}")
    if json_:
        emit_json(report.to_dict())
        return
    if report.purged:
        echo(f"adopted the purge of {len(report.purged)} fact(s) made on another clone ({', '.join(report.purged)}): "
             "this vault's history was rewritten the same way and the old objects pruned")
    if report.rewritten:
        echo(f"replaced the history on {report.url} with the purged one (with a lease; other clones adopt it on "
             "their next sync)")
    if not (report.received or report.sent):
        echo(f"up to date with {report.remote} ({report.url})")
        return
    how = "merged" if report.merged else "fast-forwarded"
    if report.received:
        echo(f"received {report.received} commit(s) from {report.remote}/{report.branch} ({how}, "
             f"{len(report.changed)} file(s) changed)")
    from memvault.base.text import shown

    if report.edited:
        echo(f"took {len(report.edited)} fact(s) edited on the remote ({shown(report.edited, 10)}); "
             "`memvault history ID` shows each change")
    if report.forgotten:
        echo(f"took {len(report.forgotten)} fact(s) forgotten on the remote ({shown(report.forgotten, 10)}); "
             "`memvault show ID` says why")
    if report.sent:
        echo(f"sent {report.sent} commit(s) to {report.url}")


def clone(
    url: Annotated[str, typer.Argument(help="A remote that holds a vault.")],
    path: Annotated[Path | None, typer.Argument(help="Where to put the vault (default: --vault given before the command, else the default vault location).", show_default=False)] = None,
    json_: JsonOption = False,
) -> None:
    """Set up a vault on this machine from a remote, ready to `memvault sync`.

    Example: memvault clone git@github.com:me/memory.git ~/memory
    """
    from memvault.vault import Vault

    vault = Vault.clone(url, path or root_vault())
    if json_:
        emit_json({"path": str(vault.root), "remote": vault.remote()})
    else:
        echo(str(vault.root))


def register(app: typer.Typer) -> None:
    app.add_typer(remote_app)
    app.command()(sync)
    app.command()(clone)
