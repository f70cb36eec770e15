"""What a `reindex --clear` killed halfway leaves, and what its rerun redoes.

On a vault of synthetic facts (cold embedding cache): SIGKILL `reindex --clear` once about half of
the texts have been embedded (as seen in the embedding cache, or after the time a full run took
to reach half, for a memvault that caches only at the end), then count what was left behind
(generation directories, temp and lock files) and run `reindex --clear` again: texts it embedded
against texts it reused, beside an uninterrupted cold run measured in the same script run.

Usage: python bench/interrupted_reindex.py [--facts 10000] [--compare /path/to/checkout]
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from speed import environment, synthetic_facts  # noqa: E402


def memvault(env: dict, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    # From a neutral folder: `python -m` would import a checkout found in the working directory.
    return subprocess.run([sys.executable, "-m", "memvault", *args], env=env, input=stdin, capture_output=True,
                          text=True, cwd=tempfile.gettempdir())


def cached(vault: Path) -> int:
    try:
        with sqlite3.connect(vault / ".memvault" / "cache" / "embeddings.sqlite", timeout=5) as db:
            return db.execute("SELECT count(*) FROM vectors").fetchone()[0]
    except sqlite3.Error:
        return 0


def leftovers(vault: Path) -> str:
    index = vault / ".memvault" / "index"
    gens = list(index.glob("gen-*"))
    size = sum(p.stat().st_size for g in gens for p in g.rglob("*") if p.is_file())
    temps = list(index.glob(".current.*")) + list(vault.glob(".git/*.lock"))
    return f"{len(gens)} generation dir(s), {size / 1e6:.1f} MB, {len(temps)} temp/lock file(s)"


def measure(tree: Path, facts: int, workdir: Path) -> None:
    env = environment(tree)
    vault = workdir / f"vault-{tree.name}"
    memvault(env, "init", str(vault))
    lines = "\n".join(json.dumps(f) for f in synthetic_facts(facts))
    assert memvault(env, "add", "--stdin", "--vault", str(vault), stdin=lines).returncode == 0

    started = time.perf_counter()
    full = json.loads(memvault(env, "reindex", "--clear", "--json", "--vault", str(vault)).stdout)
    full_seconds = time.perf_counter() - started
    print(f"  uninterrupted cold run: embedded {full['embedded']:,} in {full_seconds:.1f} s")

    shutil.rmtree(vault / ".memvault" / "index")
    shutil.rmtree(vault / ".memvault" / "cache")
    proc = subprocess.Popen([sys.executable, "-m", "memvault", "reindex", "--clear", "--vault", str(vault)],
                            env=env, cwd=tempfile.gettempdir(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started = time.perf_counter()
    # Half the texts cached, or (a memvault that caches only at the end) half the full run's time.
    half = full["embedded"] // 2
    while proc.poll() is None and cached(vault) < half and time.perf_counter() - started < full_seconds / 2:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    print(f"  killed after {time.perf_counter() - started:.1f} s; cache held {cached(vault):,} vectors; "
          f"left: {leftovers(vault)}")
    started = time.perf_counter()
    rerun = json.loads(memvault(env, "reindex", "--clear", "--json", "--vault", str(vault)).stdout)
    print(f"  rerun: embedded {rerun['embedded']:,}, reused {rerun['reused']:,} in "
          f"{time.perf_counter() - started:.1f} s; left: {leftovers(vault)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=10_000)
    parser.add_argument("--compare", type=Path, help="another checkout to measure the same way, in the same run")
    options = parser.parse_args()
    trees = [ROOT] + ([options.compare.resolve()] if options.compare else [])
    with tempfile.TemporaryDirectory() as tmp:
        for tree in trees:
            print(f"== {tree} ({options.facts:,} facts) ==")
            measure(tree, options.facts, Path(tmp))


if __name__ == "__main__":
    main()
