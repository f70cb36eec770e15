"""Shared fixtures: every test gets a hermetic environment (no host git config, no host vault)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
REAL_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
REQUIRE_REAL_MODEL = "MEMVAULT_TESTS_REQUIRE_REAL_MODEL"  # set by .ci/run: a missing model fails


def _real_model() -> dict[str, str] | None:
    """Where the real embedding model is, found the way memvault finds it: MEMVAULT_EMBED_MODEL_PATH,
    then memvault's model cache (`memvault reindex --download-model`), then this repository's
    CI copy beside the checkout. Returns the environment that points memvault at it."""
    configured = os.environ.get("MEMVAULT_EMBED_MODEL_PATH")
    if configured and (Path(configured) / "model.onnx").is_file():
        return {"MEMVAULT_EMBED_MODEL_PATH": configured}
    from memvault.health import cached_model
    from memvault.index.embedder import model_cache_dir

    cache = model_cache_dir()
    if cached_model(cache, REAL_MODEL_NAME) is not None:
        return {"FASTEMBED_CACHE_PATH": str(cache)}
    shared = ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2-onnx-int8"
    if (shared / "model.onnx").is_file():
        return {"MEMVAULT_EMBED_MODEL_PATH": str(shared)}
    return None


REAL_MODEL = _real_model()


def pytest_configure(config):
    config.addinivalue_line("markers", "real_model: needs the real all-MiniLM-L6-v2 embedding model "
                            "(tests about meaning); skipped without it, except where "
                            f"{REQUIRE_REAL_MODEL}=1 (CI) makes that a failure")


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory) -> str:
    import tiny_model

    return str(tiny_model.build(tmp_path_factory.mktemp("tiny-model")))


@pytest.fixture(autouse=True)
def embedding_model(request, monkeypatch, tiny_model_path):
    """Tests run on the tiny stand-in model (tests/tiny_model.py) unless marked `real_model`."""
    monkeypatch.delenv("MEMVAULT_EMBED_MODEL", raising=False)
    if request.node.get_closest_marker("real_model") is None:
        monkeypatch.delenv("FASTEMBED_CACHE_PATH", raising=False)
        monkeypatch.setenv("MEMVAULT_EMBED_MODEL_PATH", tiny_model_path)
        return
    if REAL_MODEL is None:
        reason = ("needs the real all-MiniLM-L6-v2 embedding model: set MEMVAULT_EMBED_MODEL_PATH to a local "
                  "copy, or run `memvault reindex --download-model` once")
        if os.environ.get(REQUIRE_REAL_MODEL) == "1":
            pytest.fail(f"{reason} ({REQUIRE_REAL_MODEL}=1)")
        pytest.skip(reason)
    monkeypatch.delenv("MEMVAULT_EMBED_MODEL_PATH", raising=False)
    for key, value in REAL_MODEL.items():
        monkeypatch.setenv(key, value)

IDENTITY = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.test",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.test",
}


# What a developer's shell may set that would change what a test sees.
HOST_SETTINGS = ("MEMVAULT_API_BASE", "MEMVAULT_LOCK_TIMEOUT", "MEMVAULT_WATCH", "MEMVAULT_TOKENIZER", "MEMVAULT_DEBUG",
                 "NO_COLOR", "FORCE_COLOR")


@pytest.fixture(autouse=True)
def hermetic_env(tmp_path_factory, monkeypatch):
    """No host git config or identity leaks in, and the default vault lives in a temp dir."""
    home = tmp_path_factory.mktemp("home")
    empty = home / "gitconfig"
    empty.write_text("")
    monkeypatch.setenv("HOME", str(home))
    # Every folder memvault, its libraries and git look up by XDG_* follows HOME (the cache in
    # $HOME/.cache), whatever the machine running the tests sets; the data folder is moved aside.
    for key in [key for key in os.environ if key.startswith("XDG_")] + list(HOST_SETTINGS):
        monkeypatch.delenv(key, raising=False)
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


def snapshot(vault_dir: Path):
    """Everything a bad command must leave untouched: files and history."""
    files = {p.relative_to(vault_dir).as_posix(): p.read_bytes() for p in vault_dir.rglob("*")
             if p.is_file() and ".git" not in p.parts and ".memvault" not in p.parts}
    return files, git(vault_dir, "rev-parse", "HEAD")
