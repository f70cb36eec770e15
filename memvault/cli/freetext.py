"""Commands whose argument is free text (a fact, a query) that may start with `-`.

`memvault add "-5 degrees tonight"` should store the fact, not fail on an unknown option `-5`. A
word that starts with `-` is taken as the text when it cannot be an option: it is not one of the
command's options and does not look like one (`-5 ...`, `- buy milk`, `--- notes`, `-> next`). A
word that does look like one (`--catgory`, `-x`) stays an error, which names the options it may
be a misspelling of, and says to use `--` when no other word on the line is the text.
"""

from __future__ import annotations

import re
import shlex

from typer.core import TyperCommand

from memvault.cli.click_private import ClickContext, NoSuchOption, UsageError

_OPTION_LIKE = re.compile(r"--?[A-Za-z][\w-]*(=.*)?", re.S)


class FreeTextCommand(TyperCommand):
    def parse_args(self, ctx: ClickContext, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, text_after_dashes(self, args))
        except NoSuchOption as e:
            message = f"No such option: {e.option_name}"
            closest = _closest(e.option_name, e.possibilities or ())
            if closest:
                message += f"; did you mean {' or '.join(closest)}?"
            if not _text_given(self, args):  # (with the text elsewhere on the line, it is a misspelt option)
                hint = f"memvault {ctx.info_name} -- {shlex.quote(e.option_name)}"
                message += f"{' I' if e.possibilities else '; i'}f it is the text, put `--` before it: {hint}"
            raise UsageError(message, ctx) from None


def _closest(word: str, possibilities) -> list[str]:
    """Of click's suggestions, those nearly as close as the best: `--catgory` is `--category`, and
    `--at`, close enough for click, is only noise beside it."""
    import difflib

    ratios = {p: difflib.SequenceMatcher(None, word, p).ratio() for p in possibilities}
    best = max(ratios.values(), default=0.0)
    return sorted(p for p, ratio in ratios.items() if ratio >= best - 0.15)


def _options(command) -> tuple[set[str], set[str]]:
    """The command's option names, and those of them that take a value."""
    takes_value = set()
    names = set()
    for param in command.params:
        for name in (*getattr(param, "opts", ()), *getattr(param, "secondary_opts", ())):
            names.add(name)
            if param.param_type_name == "option" and not (param.is_flag or param.count):
                takes_value.add(name)
    return names, takes_value


def _text_given(command, args: list[str]) -> bool:
    """Is there a word on the line that is the text (not an option, nor an option's value)?"""
    _names, takes_value = _options(command)
    skip = False
    for word in args:
        if skip:
            skip = False
        elif word in takes_value:
            skip = True
        elif not word.startswith("-") or word == "-":
            return True
    return False


def text_after_dashes(command, args: list[str]) -> list[str]:
    """`args` with the first text-like word that starts with `-` moved behind a `--`."""
    if "--" in args:
        return args  # the caller already said where options end
    names, takes_value = _options(command)
    skip = False
    for i, word in enumerate(args):
        if skip:  # the value of the option before
            skip = False
            continue
        if word in takes_value:
            skip = True
        elif word.startswith("-") and word != "-" and word.split("=", 1)[0] not in names \
                and not _OPTION_LIKE.fullmatch(word):
            return [*args[:i], *args[i + 1:], "--", word]
    return args
