"""`memvault import`: memories kept by other tools, added as facts in one commit."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from memvault.cli.output import JsonOption, VaultOption, echo, emit_json, open_vault, progress_bar


def import_(
    source: Annotated[Path, typer.Argument(metavar="SOURCE", help="The file or folder to import (see --format).", show_default=False)],
    format_: Annotated[str | None, typer.Option("--format", "-f", metavar="FORMAT", help="memory-dir (daily YYYY-MM-DD.md logs and MEMORY.md), claude-code (CLAUDE.md files, the auto memory folder), chatgpt (conversations.json, or the export's folder or .zip), basic-memory (a project folder), mem0 (a JSON export), jsonl (what `add --stdin` takes). Guessed when SOURCE shows it plainly.", show_default=False)] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Check everything and say what would be added; write nothing.")] = False,
    allow_secret: Annotated[bool, typer.Option("--allow-secret", help="Store texts holding a credential anyway, marked secret (never sent to an LLM).")] = False,
    skip_secrets: Annotated[bool, typer.Option("--skip-secrets", help="Leave texts holding a credential out (counted), instead of refusing the import.")] = False,
    json_: JsonOption = False,
    vault_path: VaultOption = None,
) -> None:
    """Import memories kept elsewhere: each becomes a fact on its own day, in one commit.

    Sources and sessions are labelled (the file, the conversation), dates are kept, and every fact
    carries a key made from the source's ids or its place and text, so importing the same thing
    twice adds nothing the second time. A record that cannot be read stops the import with its
    place (exit 2) and nothing is written; what holds nothing to keep (an assistant's message, an
    empty item) is skipped and counted. A text holding a credential is refused, naming its place,
    unless --allow-secret or --skip-secrets.

    Example: memvault import ~/.openclaw/workspace --format memory-dir --dry-run
    Example: memvault import ~/Downloads/chatgpt-export.zip
    """
    from memvault.errors import InvalidInput

    if allow_secret and skip_secrets:
        raise InvalidInput("give --allow-secret or --skip-secrets, not both")
    vault = open_vault(vault_path)
    with progress_bar() as progress:
        report = vault.import_source(source, format=format_, dry_run=dry_run, allow_secret=allow_secret,
                                     skip_secrets=skip_secrets, progress=progress)
    if json_:
        emit_json(report.to_dict())
        return
    echo(summary(report))


def summary(report) -> str:
    """One line: what was (or would be) added, what was there already, what was skipped and why."""
    facts = f"{report.new:,} fact{'s' if report.new != 1 else ''}"
    if report.dry_run:
        head = f"would import {facts} from {report.source} ({report.format})"
    elif report.new:
        head = f"imported {facts} from {report.source} ({report.format}) in commit {report.commit[:10]}"
    else:
        head = f"nothing new to import from {report.source} ({report.format})"
    parts = [head]
    if report.already:
        parts.append(f"{report.already:,} already in the vault")
    if report.skipped:
        reasons = ", ".join(f"{count:,} {reason}" for reason, count in sorted(report.skipped.items(),
                                                                              key=lambda item: -item[1]))
        parts.append(f"skipped {sum(report.skipped.values()):,}: {reasons}")
    return "; ".join(parts)


def register(app: typer.Typer) -> None:
    app.command(name="import")(import_)
