"""Shared fixtures: every test gets a hermetic environment (no host git config, no host vault)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
SHARED_MODEL = ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2-onnx-int8"
if "MEMVAULT_EMBED_MODEL_PATH" not in os.environ and SHARED_MODEL.is_dir():
    os.environ["MEMVAULT_EMBED_MODEL_PATH"] = str(SHARED_MODEL)

IDENTITY = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.test",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.test",
}


@pytest.fixture(autouse=True)
def hermetic_env(tmp_path_factory, monkeypatch):
    """No host git config or identity leaks in, and the default vault lives in a temp dir."""
    home = tmp_path_factory.mktemp("home")
    empty = home / "gitconfig"
    empty.write_text("")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.delenv("MEMVAULT_VAULT", raising=False)
    monkeypatch.delenv("MEMVAULT_MODEL", raising=False)
    for key, value in IDENTITY.items():
        monkeypatch.setenv(key, value)
    yield home


@pytest.fixture
def vault_dir(tmp_path) -> Path:
    from memvault import Vault

    return Vault.init(tmp_path / "vault").root


@pytest.fixture
def vault(vault_dir):
    from memvault import Vault

    return Vault.open(vault_dir)


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


@pytest.fixture
def cli(vault_dir) -> Cli:
    return Cli(vault_dir)


def run_memvault(*args: str, cwd: Path | None = None, env: dict | None = None, input: str | None = None,
                 timeout: float = 60) -> subprocess.CompletedProcess:
    """memvault as a real process, the way agents and cron run it."""
    return subprocess.run(
        [sys.executable, "-m", "memvault", *args],
        cwd=cwd, env={**os.environ, **(env or {})}, input=input, capture_output=True, text=True,
        timeout=timeout,
    )


def git(vault_dir: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(vault_dir), *args], check=True, capture_output=True,
                          text=True).stdout


def commit_count(vault_dir: Path) -> int:
    return int(git(vault_dir, "rev-list", "--count", "HEAD").strip())


def is_clean(vault_dir: Path) -> bool:
    return git(vault_dir, "status", "--porcelain", "--untracked-files=all") == ""
