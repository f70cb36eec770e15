"""The tests' own environment: what the machine running them sets never changes what they see."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from memvault.index.embedder import model_cache_dir
from memvault.index.location import users_copy
from memvault.vault import default_vault_path


def test_memvaults_folders_are_inside_the_tests_home(hermetic_env, tmp_path):
    """The default vault, the model cache and the index kept for a read-only vault: all under the
    test's HOME, where the tests look for them ($HOME/.cache for the cache)."""
    assert default_vault_path().is_relative_to(hermetic_env)
    assert model_cache_dir() == hermetic_env / ".cache" / "memvault" / "models"
    assert users_copy(tmp_path).parent == hermetic_env / ".cache" / "memvault" / "vaults"
    assert not any(key.startswith("XDG_") and not value.startswith(str(hermetic_env))
                   for key, value in os.environ.items())


def test_the_machines_xdg_folders_never_reach_a_test(tmp_path):
    """Seen: with XDG_CACHE_HOME set, as it is for many users, two read-only vault tests of
    test_faults.py looked for memvault's cache under $HOME/.cache and failed. The test above runs
    again in a pytest of its own, beside every XDG folder and host setting pointed elsewhere."""
    host = tmp_path / "host"
    env = {**os.environ, "NO_COLOR": "1", "MEMVAULT_DEBUG": "1",
           **{f"XDG_{kind}_HOME": str(host / kind.lower()) for kind in ("CACHE", "CONFIG", "STATE", "DATA")},
           "XDG_RUNTIME_DIR": str(host / "run")}
    inner = f"{Path(__file__).name}::test_memvaults_folders_are_inside_the_tests_home"
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", inner],
                            cwd=Path(__file__).parent, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "1 passed" in result.stdout
