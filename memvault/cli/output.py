"""Rendering for the CLI: results on stdout, notices and errors on stderr, JSON without colour."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

VaultOption = Annotated[
    Optional[Path],
    typer.Option("--vault", envvar="MEMVAULT_VAULT", help="Vault directory (default: the enclosing vault, else the default vault).", show_default=False),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")


def emit_jsonl(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def echo(text: str = "") -> None:
    typer.echo(text)


def notice(text: str) -> None:
    """A message for the person at the terminal: stderr, never mixed into results."""
    typer.echo(f"memvault: {text}", err=True)


def open_vault(path: Path | None):
    """Open the vault for a command and tell the user about anything done on the way."""
    from memvault.vault import Vault

    vault = Vault.open(path)
    if vault.created:
        notice(f"created a new vault at {vault.root}")
    for done in vault.recovered:
        notice(done)
    return vault
