"""Agent-facing commands: context (a prompt bundle), sessions, completions."""

from __future__ import annotations

from typing import Annotated

import typer

from memvault.cli.output import (
    COUNT,
    ID,
    NOTHING_TO_SHOW,
    WHEN,
    AsOfOption,
    Column,
    JsonOption,
    VaultOption,
    emit_json,
    nothing,
    notice,
    open_vault,
    reader,
    table,
)
from memvault.cli.terminal import current


def context(
    query: Annotated[str | None, typer.Argument(help="What the prompt is about; without it: MEMORY.md and recent facts.", show_default=False)] = None,
    budget: Annotated[int, typer.Option("--budget", "-b", help="Most tokens the bundle may take (cl100k_base).")] = 2000,
    recent: Annotated[int, typer.Option("--recent", help="How many recent facts to consider (0: none).")] = 20,
    relevant: Annotated[int, typer.Option("--relevant", help="How many search hits to consider (0: none).")] = 20,
    markdown: Annotated[bool, typer.Option("--markdown", help="Print the bundle as markdown (the default).")] = False,
    as_of: AsOfOption = None,
    json_: JsonOption = False,
    vault_path: VaultOption = None,
) -> None:
    """Print a ready-to-paste memory bundle for a prompt, never over the token budget.

    MEMORY.md comes first (trimmed to leave room), then the wiki sections and facts most relevant
    to QUERY, then the most recent facts. A fact cited by an included wiki section is not repeated.
    Every item shows its fact id or page path and its date; a fact another fact supersedes says so.
    With --as-of: what the agent would have been given then.

    Example: memvault context "deploy the billing service" --budget 1500 > memory.md
    """
    from memvault.errors import InvalidInput

    if markdown and json_:
        raise InvalidInput("give --json or --markdown, not both")
    memory = reader(open_vault(vault_path), as_of, tell=not json_)
    bundle = memory.context(query, budget=budget, recent=recent, relevant=relevant)
    if not (json_ or bundle.items):
        nothing(NOTHING_TO_SHOW + (f": {bundle.omitted} item(s) did not fit in {bundle.budget} tokens"
                                   if bundle.omitted else ""))
        return
    if bundle.omitted:
        notice(f"{bundle.omitted} more item(s) did not fit in {bundle.budget} tokens")
    if json_:
        emit_json({**bundle.to_dict(), "as_of": memory.moment.to_dict()} if as_of else bundle.to_dict())
    else:
        current().stdout.write(bundle.markdown)


def sessions(
    since: Annotated[str | None, typer.Option("--since", help="Only facts from this time on: 2026-11-01, yesterday, 7d, 12h.")] = None,
    until: Annotated[str | None, typer.Option("--until", help="Only facts up to this time (a date includes the whole day).")] = None,
    source: Annotated[str | None, typer.Option("--source", help="Only sessions of this source.")] = None,
    json_: JsonOption = False,
    vault_path: VaultOption = None,
) -> None:
    """List the sources and sessions facts came from, with fact counts and first/last times.

    Most recently active first. Read one in order with `memvault recent --session ID`.

    Example: memvault sessions --since 7d
    """
    found = open_vault(vault_path).sessions(since=since, until=until, source=source)
    if json_:
        emit_json([s.to_dict() for s in found])
        return
    columns = (Column("first", WHEN), Column("last", WHEN), Column("facts", COUNT, justify="right"),
               Column("source", ID), Column("session", text=True))
    when = "%Y-%m-%d %H:%M"
    table(columns, [[s.first.strftime(when), s.last.strftime(when), str(s.facts), s.source or "-", s.session or "-"]
                    for s in found])


def completions(
    ctx: typer.Context,
    shell: Annotated[str, typer.Argument(metavar="SHELL", help="bash, zsh or fish.")],
    json_: JsonOption = False,
) -> None:
    """Print the shell completion script (the same file as completions/ in the source tree).

    Fact ids complete for show, forget and history from the vault's recent facts, without Python.
    bash: the command below (the directory may not exist yet; needs the bash-completion package).
    zsh: put `memvault completions zsh > _memvault` in a directory of your $fpath.
    fish: memvault completions fish > ~/.config/fish/completions/memvault.fish

    Example: mkdir -p ~/.local/share/bash-completion/completions && memvault completions bash > ~/.local/share/bash-completion/completions/memvault
    """
    from memvault.cli.completion import SHELLS, completion_script
    from memvault.errors import InvalidInput

    if shell not in SHELLS:
        raise InvalidInput(f"unknown shell {shell!r}: choose {', '.join(SHELLS)}")
    script = completion_script(shell, ctx.find_root().command)
    if json_:
        emit_json({"shell": shell, "script": script})
    else:
        current().stdout.write(script)


def register(app: typer.Typer) -> None:
    from memvault.cli.freetext import FreeTextCommand

    app.command(cls=FreeTextCommand)(context)
    for command in (sessions, completions):
        app.command()(command)
