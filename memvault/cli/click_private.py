"""The one module that reaches into Typer's private parts: its vendored click (`typer._click`).

Typer 0.26-0.28 ships click inside itself and exports neither its parse errors nor the current
context; the CLI needs both to give every bad command line one line of error (not a framed box)
and to find the root's --vault; and a command class overriding parse_args or invoke must take click's
own Context to type-check against Typer's classes. A Typer upgrade that moves them breaks this module alone, and
tests/test_cli_framework.py fails on it. Contexts are built with the public typer.Context.
"""

from __future__ import annotations

from typer._click.core import Context as ClickContext
from typer._click.exceptions import ClickException, NoArgsIsHelpError, NoSuchOption, UsageError
from typer._click.globals import get_current_context

__all__ = ["ClickContext", "ClickException", "NoArgsIsHelpError", "NoSuchOption", "UsageError", "command_line",
           "get_current_context"]


def command_line(ctx) -> list[str]:
    """What a group's command line holds once parsed: the subcommand's name and its arguments."""
    return [*ctx._protected_args, *ctx.args]
