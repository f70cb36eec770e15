"""`memvault init`: create a vault."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from memvault.cli.output import JsonOption, echo, emit_json, notice, root_vault


def init(
    path: Annotated[Path | None, typer.Argument(help="Directory for the new vault (default: --vault given before the command, else the current directory).", show_default=False)] = None,
    adopt: Annotated[bool, typer.Option("--adopt", help="Re-create the git repository of a vault whose .git is missing or broken, from its files, in one commit.")] = False,
    json_: JsonOption = False,
) -> None:
    """Create a vault: template files, its own git repository, and a first commit.

    Refuses a non-empty directory that is not a vault, and a folder inside another vault (whose
    search and git would take its files); running it on an existing vault changes nothing.
    With --adopt, a vault that lost its .git (or whose .git is broken) gets a new repository holding
    its files as they are; the broken .git is kept in .memvault/, never deleted.

    Example: memvault init ~/memory
    Example: memvault init --adopt ~/memory
    """
    from memvault.vault import Vault

    where = path or root_vault() or Path.cwd()
    vault = Vault.adopt(where, notify=notice) if adopt else Vault.init(where)
    if json_:
        emit_json({"path": str(vault.root), "created": vault.created})
        return
    if not vault.created:
        notice(f"{vault.root} is already a vault{' with a working repository' if adopt else ''}; nothing changed")
    echo(str(vault.root))


def register(app: typer.Typer) -> None:
    app.command()(init)
