"""Rendering for the CLI: results on stdout, notices and errors on stderr, JSON without colour."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

VaultOption = Annotated[
    Path | None,
    typer.Option("--vault", envvar="MEMVAULT_VAULT", show_default=False,
                 help="Vault directory (default: the enclosing vault, else the default vault)."),
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
    """Open the vault for a command; its notices (repairs on the way, index rebuilt) go to stderr."""
    from memvault.vault import Vault

    vault = Vault.open(path, notify=notice)
    if vault.created:
        notice(f"created a new vault at {vault.root}")
    return vault
