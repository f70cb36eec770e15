"""The `memvault` Typer application and its one error boundary."""

from __future__ import annotations

import inspect
import os
import re
import shutil
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from typer.core import TyperGroup
from typer.exceptions import Abort, Exit

from memvault import __version__
from memvault.cli.click_private import ClickContext, ClickException, NoArgsIsHelpError, NoSuchOption, command_line
from memvault.cli.click_private import UsageError as BadCommandLine
from memvault.cli.terminal import Environment, current
from memvault.errors import (
    ExitCode,
    InternalError,
    Interrupted,
    InvalidInput,
    InvalidItem,
    MemvaultError,
    Terminated,
    UsageError,
    one_line,
    unwritable_in,
)
from memvault.storage.gitstore import GIT_MISSING, failure_detail


class MemvaultGroup(TyperGroup):
    """Turns memvault errors into one line on stderr (JSON with --json) and their exit code."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _reflow_help(self)

    def parse_args(self, ctx: ClickContext, args: list[str]) -> list[str]:
        # `memvault --bogus` fails here, before `invoke`: one line as well, not a framed box.
        try:
            return super().parse_args(ctx, args)
        except NoArgsIsHelpError:
            raise
        except BadCommandLine as e:
            message = e.format_message()
            if isinstance(e, NoSuchOption):
                message = _misplaced(self, e.option_name, args) or message
            _fail(UsageError(f"{message} (see `memvault --help`)"), _asks_json(args))

    def invoke(self, ctx: ClickContext) -> Any:
        args = command_line(ctx)  # (the group's invoke empties them)
        wants_json = _asks_json(args)
        try:
            with _signals_unwinding():
                return super().invoke(ctx)
        except MemvaultError as e:
            _fail(_as_option(self, args, e), wants_json)
        except Terminated as e:
            _fail(e, wants_json)
        except BrokenPipeError:
            # The reader went away (`memvault recent | head`): not an error worth a message.
            quiet_stdout()
            raise Exit(int(ExitCode.OK)) from None
        except KeyboardInterrupt:
            _fail(Interrupted(), wants_json)
        except NoArgsIsHelpError:
            raise  # `memvault` called bare: its help is the answer
        except BadCommandLine as e:
            # One line like every other error, not a framed usage box.
            where = f" (see `{e.ctx.command_path} --help`)" if e.ctx is not None else ""
            _fail(UsageError(e.format_message() + where), wants_json)
        except (Exit, Abort, ClickException):
            raise
        except Exception as e:  # noqa: BLE001 - the boundary: no traceback for users
            interrupt = _interrupt_inside(e) or (_received[-1]() if _received else None)
            if interrupt is not None:  # wrapped (`__set_name__` during an import: RuntimeError), or lost
                _fail(interrupt if isinstance(interrupt, Terminated) else Interrupted(), wants_json)
            # Disk full, read-only or not ours, wherever it happened: one line naming the file.
            clear = unwritable_in(e)
            if clear is None and isinstance(e, ImportError) and shutil.which("git") is None:
                # GitPython refuses to import without git: any command reaching it says why.
                _fail(MemvaultError(GIT_MISSING), wants_json)
            if clear is None:
                _unexpected(e, wants_json)
            _fail(clear, wants_json)


@contextmanager
def _signals_unwinding() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so an unfinished write is undone before the process ends; and
    both are recorded as they arrive (`_received`). Only on the main thread, where signals land."""
    _received.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    hook = sys.unraisablehook
    previous = signal.signal(signal.SIGTERM, _terminate)
    previous_int = signal.getsignal(signal.SIGINT)
    if previous_int is signal.default_int_handler:  # (not when started with Ctrl-C ignored, or a host's own)
        signal.signal(signal.SIGINT, _interrupt)
    sys.unraisablehook = _interrupt_again
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        if signal.getsignal(signal.SIGINT) is _interrupt:
            signal.signal(signal.SIGINT, previous_int)
        sys.unraisablehook = hook


def _misplaced(group: TyperGroup, option: str, args: list[str]) -> str | None:
    """For `memvault --category x add ...`: the option is a command's, and goes after its name."""
    owners = [name for name, command in group.commands.items() if option in _option_names(command)]
    if not owners:
        return None
    named = next((arg for arg in args if arg in owners), owners[0])
    return (f"{option} is an option of `memvault {named}`" + (f" (and of {', '.join(o for o in owners if o != named)})"
                                                             if len(owners) > 1 else "")
            + f": put it after the command name, as in `memvault {named} ... {option} ...`")


def _option_names(command: Any) -> set[str]:
    return {name for param in command.params for name in (*getattr(param, "opts", ()),
                                                           *getattr(param, "secondary_opts", ()))}


def _as_option(group: TyperGroup, args: list[str], error: MemvaultError) -> MemvaultError:
    """The library names a bad value by its field ("at '2026-13-45' is not a date"); said to a
    command line, by the option that gave it ("--at '2026-13-45' ...")."""
    message = str(error)
    if not isinstance(error, InvalidInput) or isinstance(error, InvalidItem):
        return error
    command: Any = group
    for arg in args:  # down to the command run (`remote set` is two words)
        found = getattr(command, "commands", {}).get(arg)
        if found is None:
            break
        command = found
    field, space, rest = message.partition(" ")
    option = "--" + field.replace("_", "-")
    if space and command is not group and option in _option_names(command):
        error.args = (f"{option} {rest}",)
    return error


def end_past_litellm(code: int | str | None) -> None:
    """End the process at once, with `code`, once a command that loaded litellm is over.

    A model call given up on (a timeout, Ctrl-C, SIGTERM) runs on in its thread, maybe inside
    litellm's lazy imports, holding the import lock; at interpreter exit litellm's finalizers
    import too and wait for that lock for ever (seen: a dream that printed "terminated" and never
    ended, its cron runs piling up). The command is done by now, its files written or undone, its
    index and caches committed: only flushing the output is left.
    """
    if "litellm" not in sys.modules:
        return
    if isinstance(code, str):  # (what Python would print for it on the way out)
        sys.stderr.write(code + "\n")
    for stream in (sys.stdout, sys.stderr):
        with suppress(Exception):
            stream.flush()
    os._exit(code if isinstance(code, int) else (0 if code is None else 1))


def _interrupt_inside(error: BaseException | None) -> KeyboardInterrupt | None:
    """The Ctrl-C or SIGTERM an error was raised from, if any (a signal landing in a class body's
    `__set_name__` while a library is imported comes out as RuntimeError)."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, KeyboardInterrupt):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


# The signals this command received. An extension may turn the KeyboardInterrupt a signal raised
# inside it into an error of its own that keeps no trace of it: a Ctrl-C landing while pydantic-core
# built a validator came out as `SchemaError: Error building "definitions" validator:`.
_received: list[type[KeyboardInterrupt]] = []


def _interrupt(signum, frame) -> None:
    _received.append(KeyboardInterrupt)
    raise KeyboardInterrupt


def _terminate(signum, frame) -> None:
    _received.append(Terminated)
    raise Terminated()


def _interrupt_again(unraisable) -> None:
    """A Ctrl-C or SIGTERM that landed in a finalizer or an extension's callback, where Python
    can only print and drop the exception: deliver the signal again, to land in ordinary code and
    unwind the command (undoing its write) instead of being lost with a traceback on stderr."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt) and sys.is_finalizing():
        return  # the command is over; a timer would outlive Python's handlers and kill it by SIGALRM
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        # Raised from here it would be dropped again (the hook runs inside the same callback):
        # a timer delivers it a moment later, once the callback has returned.
        error = type(unraisable.exc_value)
        signal.signal(signal.SIGALRM, lambda _signum, _frame: _raise(error))
        signal.setitimer(signal.ITIMER_REAL, 0.005)
    else:
        sys.__unraisablehook__(unraisable)


def _raise(error: type[BaseException]) -> None:
    raise error()


def _asks_json(args: list[str]) -> bool:
    """Whether the command line asks for JSON: `--json` before a `--` (after it, `--json` is text:
    `memvault search -- --json`)."""
    return "--json" in (args[:args.index("--")] if "--" in args else args)


def _unexpected(e: Exception, wants_json: bool) -> NoReturn:
    if os.environ.get("MEMVAULT_DEBUG"):
        traceback.print_exc()
    _fail(InternalError(f"unexpected error: {failure_detail(e)} (set MEMVAULT_DEBUG=1 for details)"), wants_json)


def quiet_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _fail(error: MemvaultError | Terminated, wants_json: bool) -> NoReturn:
    from memvault.cli.output import emit_error, visible  # an error may quote stored or typed text

    if wants_json:
        emit_error(error)
    else:
        message = one_line(str(error))
        env = current()
        env.stderr.write(f"memvault: {visible(message) if env.stderr_isatty else message}\n")
    raise typer.Exit(int(error.exit_code))


def _reflow_help(command: Any) -> None:
    """Join the lines of each help paragraph, so the terminal wraps it at its own width.

    The docstrings are wrapped for the source, and Typer keeps every line break of the paragraphs
    after the first: at 80 columns a line ran on for a few words, then broke. A line that starts
    with a label (`Example:`, `bash:`) keeps its own line; nothing else is laid out by lines.
    """
    if command.help:
        paragraphs = inspect.cleandoc(command.help).split("\n\n")
        command.help = "\n\n".join(re.sub(r"\s*\n(?!\w+: )\s*", " ", part.strip()) for part in paragraphs)
    for sub in getattr(command, "commands", {}).values():
        _reflow_help(sub)


app = typer.Typer(
    cls=MemvaultGroup,
    name="memvault",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"memvault {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
    vault: Annotated[Path | None, typer.Option("--vault", show_default=False,
                                               help="Vault directory for the command (its own --vault wins).")] = None,
) -> None:
    """Long-term memory for agents and people: markdown facts in git, hybrid search, nightly consolidation.

    Example: memvault add "Alice prefers green tea" --category preference --tag alice
    """
    obj = ctx.ensure_object(dict)
    # Read by memvault.cli.output.root_vault() when the command opens its vault.
    obj["vault"] = vault
    # The terminal the renderers write to, built once; a caller may fake parts of it (`terminal`:
    # Environment fields, e.g. a test's 60-column colour terminal).
    obj["environment"] = Environment.from_process(**obj.get("terminal", {}))


def _register() -> None:
    # Explicit registration, in the order `--help` lists the commands: remember, recall,
    # consolidate, look after, share, serve.
    from memvault.cli import (
        context_cmd,
        dream_cmd,
        facts_cmd,
        health_cmd,
        import_cmd,
        install_cmd,
        mcp_cmd,
        search_cmd,
        sync_cmd,
        vault_cmd,
        why_cmd,
    )

    for module in (vault_cmd, facts_cmd, import_cmd, search_cmd, context_cmd, why_cmd, dream_cmd, health_cmd,
                   sync_cmd, mcp_cmd, install_cmd):
        module.register(app)

_register()
