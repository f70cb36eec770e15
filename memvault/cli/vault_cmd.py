"""`memvault init`: create a vault."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from memvault.cli.output import JsonOption, echo, emit_json, notice


def init(
    path: Annotated[Path | None, typer.Argument(help="Directory for the new vault (default: the current directory).")] = None,
    json_: JsonOption = False,
) -> None:
    """Create a vault: template files, its own git repository, and a first commit.

    Refuses a non-empty directory that is not a vault; running it on an existing vault changes nothing.

    Example: memvault init ~/memory
    """
    from memvault.vault import Vault

    vault = Vault.init(path or Path.cwd())
    if json_:
        emit_json({"path": str(vault.root), "created": vault.created})
        return
    if not vault.created:
        notice(f"{vault.root} is already a vault; nothing changed")
    echo(str(vault.root))


def register(app: typer.Typer) -> None:
    app.command()(init)
