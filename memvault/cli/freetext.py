"""Commands whose argument is free text (a fact, a query) that may start with `-`.

`memvault add "-5 degrees tonight"` should store the fact, not fail on an unknown option `-5`. A
word that starts with `-` is taken as the text when it cannot be an option: it is not one of the
command's options and does not look like one (`-5 ...`, `- buy milk`, `--- notes`, `-> next`). A
word that does look like one (`--catgory`, `-x`) stays an error, which says to use `--`.
"""

from __future__ import annotations

import re
import shlex

from typer import Context
from typer.core import TyperCommand

from memvault.cli.click_private import NoSuchOption, UsageError

_OPTION_LIKE = re.compile(r"--?[A-Za-z][\w-]*(=.*)?", re.S)


class FreeTextCommand(TyperCommand):
    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, text_after_dashes(self, args))
        except NoSuchOption as e:
            hint = f"memvault {ctx.info_name} -- {shlex.quote(e.option_name)}"
            raise UsageError(f"{e.format_message()}; if it is the text, put `--` before it: {hint}", ctx) from None


def text_after_dashes(command, args: list[str]) -> list[str]:
    """`args` with the first text-like word that starts with `-` moved behind a `--`."""
    if "--" in args:
        return args  # the caller already said where options end
    takes_value = set()
    names = set()
    for param in command.params:
        for name in (*getattr(param, "opts", ()), *getattr(param, "secondary_opts", ())):
            names.add(name)
            if param.param_type_name == "option" and not (param.is_flag or param.count):
                takes_value.add(name)
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
