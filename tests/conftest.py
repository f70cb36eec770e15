"""Shared fixtures: every test gets a hermetic environment (no host git config, no host vault).

Helpers live in tests/support/; tests import them from there, never from this file.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.cli import Cli
from support.git import IDENTITY
from support.models import REAL_MODEL, REQUIRE_REAL_MODEL, RERANK_MODEL


def pytest_configure(config):
    config.addinivalue_line("markers", "real_model: needs the real all-MiniLM-L6-v2 embedding model "
                            "(tests about meaning); skipped without it, except where "
                            f"{REQUIRE_REAL_MODEL}=1 (CI) makes that a failure")
    config.addinivalue_line("markers", "reranker: needs the real cross-encoder ms-marco-MiniLM-L-12-v2 (the rerank "
                            "stage; other tests search without it); skipped without it, except where "
                            f"{REQUIRE_REAL_MODEL}=1 (CI) makes that a failure")


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory) -> str:
    from support import tiny_model

    return str(tiny_model.build(tmp_path_factory.mktemp("tiny-model")))


@pytest.fixture(autouse=True)
def embedding_model(request, monkeypatch, tiny_model_path):
    """Tests run on the tiny stand-in model (tests/support/tiny_model.py) unless marked `real_model`."""
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


# What a developer's shell may set that would change what a test sees.
HOST_SETTINGS = ("MEMVAULT_API_BASE", "MEMVAULT_LOCK_TIMEOUT", "MEMVAULT_WATCH", "MEMVAULT_TOKENIZER", "MEMVAULT_DEBUG",
                 "NO_COLOR", "FORCE_COLOR")


@pytest.fixture(autouse=True)
def rerank_model(request, monkeypatch, embedding_model):
    """Tests search without the reranker unless marked `reranker`, which find the real one."""
    for key in ("MEMVAULT_RERANK", "MEMVAULT_RERANK_MODEL", "MEMVAULT_RERANK_MODEL_PATH"):
        monkeypatch.delenv(key, raising=False)
    if request.node.get_closest_marker("reranker") is None:
        monkeypatch.setenv("MEMVAULT_RERANK", "0")
        return
    if RERANK_MODEL is None:
        reason = ("needs the cross-encoder ms-marco-MiniLM-L-12-v2: set MEMVAULT_RERANK_MODEL_PATH to a local copy, "
                  "or run `memvault reindex --download-model` once")
        if os.environ.get(REQUIRE_REAL_MODEL) == "1":
            pytest.fail(f"{reason} ({REQUIRE_REAL_MODEL}=1)")
        pytest.skip(reason)
    for key, value in RERANK_MODEL.items():
        monkeypatch.setenv(key, value)


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


@pytest.fixture
def cli(vault_dir) -> Cli:
    return Cli(vault_dir)
