"""The terminal a command writes to: its standard streams, which of them are terminals, colour, width.

Built once per command from the process (`Environment.from_process`) and handed to the renderers
of memvault.cli.output, which read nothing else about the terminal: a test gives a command a
60-column colour terminal with `Environment.from_process(stdout_isatty=True, width=60)`, no
pseudo-terminal needed. The rules are the ones rich and the conventions apply (NO_COLOR,
FORCE_COLOR, TERM=dumb, COLUMNS), gathered in this one place.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace
from typing import Any, TextIO

import typer


@dataclass(frozen=True)
class Environment:
    stdin: TextIO
    stdout: TextIO
    stderr: TextIO
    stdin_isatty: bool
    stdout_isatty: bool
    stderr_isatty: bool
    colors: bool            # escape sequences allowed (NO_COLOR unset)
    force_terminal: bool    # FORCE_COLOR: draw tables and colour though stdout is not a terminal
    dumb: bool              # TERM=dumb: a terminal that cannot move the cursor, so no progress bar
    width: int              # columns a table is fitted to

    @classmethod
    def from_process(cls, **overrides: Any) -> Environment:
        """This process's terminal, as its streams and environment variables describe it now;
        `overrides` replace any field (what a test fakes)."""
        environ = os.environ
        term = environ.get("TERM", "").lower()
        found = cls(
            stdin=sys.stdin, stdout=sys.stdout, stderr=sys.stderr,
            stdin_isatty=_isatty(sys.stdin), stdout_isatty=_isatty(sys.stdout), stderr_isatty=_isatty(sys.stderr),
            colors=not environ.get("NO_COLOR"), force_terminal=bool(environ.get("FORCE_COLOR")),
            dumb=environ.get("TERM") == "dumb", width=_width(environ, term),
        )
        return replace(found, **overrides) if overrides else found

    def echo(self, text: str, *, err: bool = False, color: bool | None = None) -> None:
        """`text` and a newline on stdout (stderr with `err`), through click's echo."""
        stream = self.stderr if err else self.stdout
        # The process's own stream is left for click to resolve: it re-encodes a misconfigured one.
        own = stream is (sys.stderr if err else sys.stdout)
        typer.echo(text, file=None if own else stream, err=err, color=color)

    @property
    def draws(self) -> bool:
        """Whether stdout gets tables and colour (a terminal, or FORCE_COLOR) rather than plain rows."""
        return self.stdout_isatty or self.force_terminal

    @property
    def progress(self) -> bool:
        """Whether a progress bar may be drawn on stderr: drawing one takes escape sequences."""
        return self.stderr_isatty and self.colors and not self.dumb


def _isatty(stream: TextIO | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except ValueError:  # a closed stream
        return False


def _width(environ: os._Environ[str], term: str) -> int:
    """rich's rule: a dumb terminal has 80 columns; else COLUMNS; else the size of the first
    standard stream that is a terminal; else 80."""
    if term in ("dumb", "unknown"):
        return 80
    columns = environ.get("COLUMNS", "")
    if columns.isdigit():
        return int(columns) or 80
    for fd in (0, 1, 2):
        try:
            width = os.get_terminal_size(fd).columns
        except (AttributeError, ValueError, OSError):  # not a terminal
            continue
        return width or 80  # a pseudo-terminal may report 0
    return 80


def current() -> Environment:
    """The environment of the command running (set by the root callback of memvault.cli.app, or
    given by a test through the context's `obj`); outside a command, this process's."""
    from memvault.cli.click_private import get_current_context

    ctx = get_current_context(silent=True)
    found = (ctx.find_root().obj or {}).get("environment") if ctx is not None else None
    return found if isinstance(found, Environment) else Environment.from_process()
