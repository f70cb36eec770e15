"""Rendering for the CLI: results on stdout, notices and errors on stderr, JSON without colour.

On a terminal, lists are tables with headers and colour, fitted to its width (long texts cut,
whole with --full). Piped, the same rows are plain tab-separated lines without a header, nothing
cut, so scripts get stable text; `--json` is the format meant for programs. rich is imported
only to draw on a terminal, which keeps `memvault add` and piped output fast. What the terminal
is (streams, tty, colour, width) comes from memvault.cli.terminal, never from sys or os here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from memvault.cli.terminal import current
from memvault.errors import MemvaultError, Terminated, error_json

VaultOption = Annotated[
    Path | None,
    typer.Option("--vault", show_default=False,
                 help="Vault directory (default: MEMVAULT_VAULT, else the enclosing vault, else the default "
                      "vault); also accepted before the command."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
FullOption = Annotated[bool, typer.Option("--full", help="Show whole texts (all their lines), not cut to fit.")]
AsOfOption = Annotated[str | None, typer.Option(
    "--as-of", metavar="WHEN", show_default=False,
    help="The vault as it stood then, from git: a date or time (2026-06-01, 2026-06-01T09:30, yesterday, 7d), "
         "a commit, or HEAD~N (N commits back); the output names the commit that answered.")]

NO_MATCHES = "no matches"
NOTHING_TO_SHOW = "nothing to show"
MIN_TEXT_WIDTH = 24  # below this, optional columns give way to the text column

Style = str | Callable[[str], str]


@dataclass(frozen=True)
class Column:
    """One column of a listing. `style` is a rich style, or a function of the cell's text."""

    header: str
    style: Style = ""
    text: bool = False        # the free text: cut to the room left (whole with --full)
    optional: bool = False    # dropped on a narrow terminal before the text gets too short
    justify: Literal["left", "center", "right"] = "left"


# Colours shared by every listing, so an id or a category looks the same everywhere.
ID, WHEN, CATEGORY, TAGS, COUNT = "cyan", "dim", "magenta", "green", "bold"
STATUS_STYLES = {"ok": "green", "fixed": "green", "warn": "yellow", "FAIL": "bold red"}  # doctor's marks


def score_style(cell: str) -> str:
    score = float(cell)
    return "bold green" if score >= 0.5 else "yellow" if score >= 0.25 else "dim"


def emit_json(data: Any) -> None:
    current().stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")


def emit_error(error: MemvaultError | Terminated) -> None:
    """A failure with --json: `{"error": ...}` on stderr (stdout keeps the result, if any)."""
    current().stderr.write(json.dumps(error_json(error)) + "\n")


def emit_jsonl(data: Any) -> None:
    stdout = current().stdout
    stdout.write(json.dumps(data, ensure_ascii=False, default=str) + "\n")
    stdout.flush()


def echo(text: str = "") -> None:
    # color=True: click would otherwise strip what looks like a colour code from piped output,
    # and a fact's text must reach a script byte for byte.
    env = current()
    env.echo(visible(text) if env.stdout_isatty else text, color=True)


def notice(text: str) -> None:
    """A message for the person at the terminal: stderr, never mixed into results."""
    env = current()
    env.echo(f"memvault: {visible(text) if env.stderr_isatty else text}", err=True)


# Every C0 and C1 control character but tab and newline. Stored text comes from agents and from
# synced remotes: on a terminal an ESC would run (clear the screen, set the title, write the
# clipboard with OSC 52), a carriage return would overwrite the line. Piped output stays exact.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """`text` with each control character shown as its escape (ESC as `\\x1b`), for a terminal."""
    return _CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", text)


def nothing(message: str = NOTHING_TO_SHOW) -> None:
    """The one line every empty list gets: `no matches` for a search, else `nothing to show`."""
    notice(message)


def terminal():
    """A rich Console when stdout is a terminal (or FORCE_COLOR asks for one); None when piped.

    With NO_COLOR the layout stays and no escape sequence is written at all.
    """
    env = current()
    if not env.draws:
        return None
    from rich.console import Console

    return Console(file=env.stdout, force_terminal=True, width=env.width, highlight=False, emoji=False,
                   markup=False, color_system="auto" if env.colors else None)


def first_line(text: str) -> str:
    """A text's first line, with ` …` when more lines follow."""
    return shown_line(text)[0]


def shown_line(text: str, spans: Sequence[tuple[int, int]] = ()) -> tuple[str, int | None]:
    """The line of a text a listing shows, with ` …` / `… ` where lines are left out: its first, or
    the one holding the first of `spans` (what a search matched); and where in it that match starts."""
    if not spans:
        first, _, rest = text.strip("\n").partition("\n")
        return first + (" …" if rest.strip() else ""), None
    start = spans[0][0]
    begin = text.rfind("\n", 0, start) + 1
    end = text.find("\n", start)
    end = len(text) if end < 0 else end
    before = "… " if text[:begin].strip() else ""
    return before + text[begin:end] + (" …" if text[end:].strip() else ""), len(before) + start - begin


def table(columns: Sequence[Column], rows: Sequence[Sequence[str]], *, full: bool = False,
          empty: str = NOTHING_TO_SHOW, focus: Sequence[Sequence[tuple[int, int]]] | None = None,
          wrapped: frozenset[int] = frozenset()) -> None:
    """Print rows under `columns`; an empty list prints `empty` on stderr instead.

    `focus` gives each row the spans of its text to show when the text must be cut (a search's
    matched words): the line holding the first, and on a terminal the part around it. The rows
    numbered in `wrapped` wrap their text on a terminal rather than being cut.
    """
    if not rows:
        nothing(empty)
        return
    focus = focus or [()] * len(rows)
    matches: list[int | None] = []
    cut = []
    for row, spans in zip(rows, focus, strict=True):
        cells, at = [], None
        for column, cell in zip(columns, row, strict=True):
            if column.text and not full:
                cell, at = shown_line(cell, spans)
            cells.append(cell)
        cut.append(cells)
        matches.append(at)
    console = terminal()
    if console is None:
        for row in cut:
            # a tab inside a field (a fact's text may hold one) would shift the fields after it
            echo("\t".join(cell.replace("\t", " ") for cell in row).rstrip("\t"))
        return
    _draw(console, list(columns), cut, full, matches, wrapped)


GAP = 2  # spaces between columns


def _draw(console, columns: list[Column], raw: list[list[str]], full: bool, matches: list[int | None],
          wrapped: frozenset[int]) -> None:
    from rich.table import Table
    from rich.text import Text

    rows = [[visible(cell) for cell in row] for row in raw]
    widths = _natural_widths(columns, rows, wrapped)
    shown = _fit(columns, widths, console.width)
    _say_dropped(columns, rows, shown, console.width)
    room = _room(columns, widths, shown, console.width)
    text = next((i for i in shown if columns[i].text), None)
    if text is not None and not full:
        for n, at in enumerate(matches):
            if at is not None and n not in wrapped:
                rows[n][text] = _around(rows[n][text], len(visible(raw[n][text][:at])), room)
    grid = Table(box=None, pad_edge=False, show_edge=False, padding=(0, GAP, 0, 0), header_style="bold")
    for i in shown:
        column = columns[i]
        if column.text:
            grid.add_column(column.header, no_wrap=not full, overflow="fold" if full else "ellipsis",
                            max_width=max(room, 8))
        else:
            grid.add_column(column.header, no_wrap=True, width=widths[i], justify=column.justify)
    for n, row in enumerate(rows):
        # a wrapped row folds its text over lines rather than being cut
        grid.add_row(*(Text(row[i], style=_style(columns[i].style, row[i]), no_wrap=False, overflow="fold")
                       if n in wrapped else Text(row[i], style=_style(columns[i].style, row[i]))
                       for i in shown))
    console.print(grid)


def _natural_widths(columns: list[Column], rows: list[list[str]], wrapped: frozenset[int]) -> list[int]:
    """Each column's width unsqueezed: its header or its longest line (wrapped rows aside)."""
    from rich.cells import cell_len

    return [max(cell_len(column.header), *(cell_len(line) for n, row in enumerate(rows) if n not in wrapped
                                           for line in row[i].split("\n")))
            for i, column in enumerate(columns)]


def _room(columns: list[Column], widths: list[int], shown: list[int], width: int) -> int:
    """The columns the text column is left with, beside the others shown."""
    fixed = sum(widths[i] for i in shown if not columns[i].text)
    return width - fixed - GAP * (len(shown) - 1)


def _fit(columns: list[Column], widths: list[int], width: int) -> list[int]:
    """The columns shown: a narrow terminal drops optional ones (last first) rather than squeezing
    ids and dates, until the text has MIN_TEXT_WIDTH."""
    shown = list(range(len(columns)))
    for i in reversed(range(len(columns))):
        if _room(columns, widths, shown, width) >= MIN_TEXT_WIDTH:
            break
        if columns[i].optional:
            shown.remove(i)
    return shown


def _say_dropped(columns: list[Column], rows: list[list[str]], shown: list[int], width: int) -> None:
    dropped = [columns[i].header for i in range(len(columns)) if i not in shown and any(row[i] for row in rows)]
    if dropped:  # a sign, rather than tags that silently are not there
        notice(f"{' and '.join(dropped)} left out at {width} columns: a wider terminal or --json shows them")


def _around(cell: str, at: int, room: int) -> str:
    """A cell too long for `room` cut to start a little before position `at` (a search's match),
    so the match shows; the table cuts the end."""
    from rich.cells import cell_len

    if cell_len(cell) <= room or cell_len(cell[:at]) < room * 2 // 3:
        return cell
    start = at - room // 4
    space = cell.find(" ", start, at)  # from a word's start, not from inside one ("…rs at a bakery")
    return "…" + cell[space + 1 if space >= 0 else start:]


def _style(style: Style, cell: str) -> str:
    if callable(style):
        return style(cell) if cell else ""
    return style


def line(*parts: str | tuple[str, str]) -> None:
    """One line of text pieces, each plain or (text, style); coloured only on a terminal."""
    console = terminal()
    if console is None:
        echo("".join(p if isinstance(p, str) else p[0] for p in parts))
        return
    from rich.text import Text

    console.print(Text.assemble(*(visible(p) if isinstance(p, str) else (visible(p[0]), p[1]) for p in parts)),
                  soft_wrap=True)


@contextmanager
def progress_bar() -> Iterator[Any]:
    """A progress callback `(phase, done, total)` drawing a bar on stderr, only on a terminal
    (the first search, reindex, import).

    The bar starts with the first piece of work reported, so a command with none writes nothing
    to stderr. With NO_COLOR (or TERM=dumb) there is no bar at all, since drawing one takes escape
    sequences (the notices still say what is being done)."""
    env = current()
    if not env.progress:
        yield None
        return
    from rich.console import Console
    from rich.progress import Progress

    bar: Progress | None = None
    tasks: dict[str, Any] = {}

    def update(phase: str, done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = Progress(console=Console(file=env.stderr, force_terminal=True, width=env.width), transient=True)
            bar.start()
        if phase not in tasks:
            tasks[phase] = bar.add_task(phase, total=total)
        bar.update(tasks[phase], completed=done, total=total)

    try:
        yield update
    finally:
        if bar is not None:
            bar.stop()


def open_vault(path: Path | None):
    """Open the vault for a command; its notices (created, repaired, index rebuilt) go to stderr.

    A --vault given before the command name counts when the command itself got none.
    """
    from memvault.vault import Vault

    return Vault.open(path or root_vault(), notify=notice)


def reader(vault, as_of: str | None, *, tell: bool = True):
    """What a read command asks: the vault, or the vault as of WHEN (`Vault.as_of`), whose commit
    is told on stderr unless `tell` is False (a command that shows it itself)."""
    if as_of is None:
        return vault
    past = vault.as_of(as_of)
    if tell:
        notice(past.moment.describe())
    return past


def root_vault() -> Path | None:
    """The --vault given before the command (`memvault --vault PATH add ...`), if any."""
    from memvault.cli.click_private import get_current_context

    ctx = get_current_context(silent=True)
    return (ctx.find_root().obj or {}).get("vault") if ctx is not None else None
