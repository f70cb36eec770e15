"""Typer's private parts, fenced in memvault/cli/click_private.py: used nowhere else, and still
what the CLI takes them for in the Typer installed. An upgrade that moves or changes them fails
here, by name, rather than as a framed usage box or a lost --json somewhere in the suite."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from typer.main import get_command

from memvault.cli import click_private
from memvault.cli.app import app

ROOT = Path(__file__).resolve().parent.parent
FENCE = ROOT / "memvault" / "cli" / "click_private.py"


def test_only_the_fence_names_typer_s_private_parts():
    private = re.compile(r"typer\._click|_protected_args")
    found = [f"{path.relative_to(ROOT)}:{n}" for folder in ("memvault", "tests", "bench")
             for path in (ROOT / folder).rglob("*.py") if path not in (FENCE, Path(__file__).resolve())
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
             if private.search(line)]
    assert found == []


def test_the_parse_errors_are_the_ones_typer_raises():
    group = get_command(app)
    parse = super(type(group), group).parse_args  # Typer's own parsing, before memvault's boundary
    with pytest.raises(click_private.NoArgsIsHelpError):
        parse(typer.Context(group, info_name="memvault"), [])
    with pytest.raises(click_private.NoSuchOption) as raised:
        parse(typer.Context(group, info_name="memvault"), ["--bogus"])
    assert isinstance(raised.value, click_private.UsageError)
    assert isinstance(raised.value, click_private.ClickException)
    assert raised.value.format_message() == "No such option: --bogus"


def test_the_command_line_and_the_current_context_are_found():
    group = get_command(app)
    ctx = group.make_context("memvault", ["--vault", "/tmp/v", "show", "0123456789abcdef", "--json"])
    assert click_private.command_line(ctx) == ["show", "0123456789abcdef", "--json"]
    assert click_private.get_current_context(silent=True) is None
    assert isinstance(ctx, click_private.ClickContext)  # what the CLI's command classes annotate
    with ctx:
        assert click_private.get_current_context() is ctx
