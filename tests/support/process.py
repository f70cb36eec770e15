"""For test modules that start many memvault processes: they share one bytecode cache.

An installed memvault runs from compiled .pyc files; with PYTHONDONTWRITEBYTECODE set (as on some
CI machines) every child process would compile memvault from source again, which costs each one
about 90 ms of CPU and makes a crowd measure the compiler. Import `compiled_children` into a test
module to give its child processes the cache.
"""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def compiled_children(monkeypatch, tmp_path_factory):
    cache = tmp_path_factory.getbasetemp() / "pycache"  # one per test run (per xdist worker)
    cache.mkdir(exist_ok=True)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "")
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(cache))
