"""memvault run by the tests: in-process through Typer's CliRunner, or as a real process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from typer.testing import CliRunner


class Cli:
    """Runs memvault in-process through Typer's CliRunner, stdout and stderr kept apart.

    `terminal` fakes what the command's terminal is (memvault.cli.terminal.Environment's fields:
    `stdout_isatty`, `width`, `colors`...); by default every stream is a pipe, as in a script.
    """

    def __init__(self, vault_dir: Path | None, **terminal: Any):
        self.vault_dir = vault_dir
        self.runner = CliRunner()
        self.terminal = terminal

    def on_terminal(self, width: int = 80, colors: bool = True, **streams: bool) -> Cli:
        """This vault's memvault with stdout on a colour terminal `width` columns wide (and any
        `stdin_isatty`/`stderr_isatty` given)."""
        return Cli(self.vault_dir, stdout_isatty=True, width=width, colors=colors, force_terminal=False,
                   dumb=False, **streams)

    def __call__(self, *args: str, input: str | None = None, vault: bool = True):
        from memvault.cli.app import app

        argv = list(args)
        if vault and self.vault_dir is not None:
            argv += ["--vault", str(self.vault_dir)]
        return self.runner.invoke(app, argv, input=input, catch_exceptions=False, obj={"terminal": self.terminal})


def run_memvault(*args: str, cwd: Path | None = None, env: dict | None = None, input: str | None = None,
                 timeout: float = 300) -> subprocess.CompletedProcess:
    """memvault as a real process, the way agents and cron run it. `timeout` guards against a hang,
    not a speed: a doctor that loads both models took over 60 s on a 2-core machine at load 50."""
    return subprocess.run(
        [sys.executable, "-m", "memvault", *args],
        cwd=cwd, env={**os.environ, **(env or {})}, input=input, capture_output=True, text=True,
        timeout=timeout,
    )
