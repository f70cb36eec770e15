"""memvault run by the tests: in-process through Typer's CliRunner, or as a real process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner


class Cli:
    """Runs memvault in-process through Typer's CliRunner, stdout and stderr kept apart."""

    def __init__(self, vault_dir: Path | None):
        self.vault_dir = vault_dir
        self.runner = CliRunner()

    def __call__(self, *args: str, input: str | None = None, vault: bool = True):
        from memvault.cli.app import app

        argv = list(args)
        if vault and self.vault_dir is not None:
            argv += ["--vault", str(self.vault_dir)]
        return self.runner.invoke(app, argv, input=input, catch_exceptions=False)


def run_memvault(*args: str, cwd: Path | None = None, env: dict | None = None, input: str | None = None,
                 timeout: float = 60) -> subprocess.CompletedProcess:
    """memvault as a real process, the way agents and cron run it."""
    return subprocess.run(
        [sys.executable, "-m", "memvault", *args],
        cwd=cwd, env={**os.environ, **(env or {})}, input=input, capture_output=True, text=True,
        timeout=timeout,
    )
