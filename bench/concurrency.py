"""Throughput of `memvault add` under contention: aggregate adds/s for 1, 10 and 40 concurrent
writer processes, each figure beside the single-writer rate measured in the same run.

Every writer runs `memvault add` as a new process, one after another, as an agent's hook does;
all writers share one fresh vault. Printed per level: adds, wall time, aggregate adds/s and its
ratio to the single-writer rate, refused adds (non-zero exit), commits made, and the latency of
one add (p50 / p95 / max). With --compare PATH the same levels run again with the memvault of
another checkout (e.g. the main branch), in the same run.

The children share a private bytecode cache, as an installed memvault has its .pyc files.

Usage: python bench/concurrency.py [--levels 1,10,40] [--adds 400] [--compare /path/to/checkout]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def environment(tree: Path, pycache: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "",
           "PYTHONPYCACHEPREFIX": str(pycache / tree.name)}
    env.setdefault("GIT_AUTHOR_NAME", "bench")
    env.setdefault("GIT_AUTHOR_EMAIL", "bench@example.test")
    env.setdefault("GIT_COMMITTER_NAME", env["GIT_AUTHOR_NAME"])
    env.setdefault("GIT_COMMITTER_EMAIL", env["GIT_AUTHOR_EMAIL"])
    env.pop("MEMVAULT_LOCK_TIMEOUT", None)  # the default timeout is what must survive the load
    return env


def memvault(env: dict, *args: str) -> subprocess.CompletedProcess:
    # Run from the vaults' folder: `python -m` puts the working directory first on sys.path, and a
    # checkout there would shadow the tree under test.
    return subprocess.run([sys.executable, "-m", "memvault", *args], env=env, capture_output=True, text=True,
                          cwd=tempfile.gettempdir())


def level(tree: Path, writers: int, adds: int, env: dict, workdir: Path) -> dict:
    """`adds` adds spread over `writers` concurrent writers on a fresh vault."""
    vault = workdir / f"{tree.name}-{writers}"
    done = memvault(env, "init", str(vault))
    if done.returncode:
        raise SystemExit(f"init failed: {done.stderr}")
    memvault(env, "add", "warm-up", "--vault", str(vault))
    per_writer = max(adds // writers, 1)

    def writer(w: int) -> list[tuple[int, float]]:
        results = []
        for i in range(per_writer):
            started = time.perf_counter()
            code = memvault(env, "add", f"writer {w} fact {i}", "--vault", str(vault)).returncode
            results.append((code, time.perf_counter() - started))
        return results

    started = time.perf_counter()
    with ThreadPoolExecutor(writers) as pool:
        results = [r for batch in pool.map(writer, range(writers)) for r in batch]
    wall = time.perf_counter() - started
    latencies = sorted(seconds for _code, seconds in results)
    commits = int(subprocess.run(["git", "-C", str(vault), "rev-list", "--count", "HEAD"],
                                 capture_output=True, text=True).stdout or 0) - 2  # init, warm-up
    return {
        "writers": writers, "adds": len(results), "wall": wall, "rate": len(results) / wall,
        "refused": sum(1 for code, _s in results if code != 0), "commits": commits,
        "p50": statistics.median(latencies), "p95": latencies[int(len(latencies) * 0.95) - 1],
        "max": latencies[-1],
    }


def report(name: str, rows: list[dict]) -> None:
    single = next((r["rate"] for r in rows if r["writers"] == 1), None)
    print(f"\n== {name} ==")
    print(f"{'writers':>7} {'adds':>5} {'wall s':>7} {'adds/s':>7} {'x single':>8} {'refused':>7} {'commits':>7} "
          f"{'p50 ms':>7} {'p95 ms':>7} {'max ms':>7}")
    for r in rows:
        ratio = f"{r['rate'] / single:.2f}" if single else "-"
        print(f"{r['writers']:>7} {r['adds']:>5} {r['wall']:>7.1f} {r['rate']:>7.2f} {ratio:>8} {r['refused']:>7} "
              f"{r['commits']:>7} {r['p50'] * 1000:>7.0f} {r['p95'] * 1000:>7.0f} {r['max'] * 1000:>7.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", default="1,10,40", help="writer counts, comma-separated (1 is the baseline)")
    parser.add_argument("--adds", type=int, default=400, help="adds per level (the single writer does min(adds, 100))")
    parser.add_argument("--compare", type=Path, help="another checkout to measure the same way, in the same run")
    options = parser.parse_args()
    levels = sorted({1, *(int(n) for n in options.levels.split(","))})
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{platform.system()} {platform.release()}")
    trees = [("this checkout", ROOT)] + ([("compare: " + str(options.compare), options.compare.resolve())]
                                         if options.compare else [])
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        results = {}
        for name, tree in trees:
            env = environment(tree, workdir / "pycache")
            memvault(env, "--version")  # compile once into the cache
            results[name] = [level(tree, n, min(options.adds, 100) if n == 1 else options.adds, env, workdir)
                             for n in levels]
        for name, rows in results.items():
            report(name, rows)


if __name__ == "__main__":
    main()
