"""Cold and warm search on one vault of synthetic facts, for one or more checkouts in the same run.

What opening the index for a search costs, e.g. verifying the vector file against its checksum
before its rows are first scored. One vault is built and its embedding cache filled once; each
checkout then gets its own copy (its own index format), rebuilt with `reindex --clear` from the
warm cache, and is measured in rounds that alternate between checkouts, so all see the same
machine: cold whole-process `memvault search` (median), the first search of a fresh in-process
Vault (open, verify, model load), and warm in-process Vault.search p50/p95.

Usage: python bench/search_open.py [--facts 100000] [--runs 7] [--compare /path/to/other/checkout]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from speed import QUERIES, environment, synthetic_facts  # noqa: E402

WARM = """
import json, sys, time
from memvault import Vault  # first: importing speed puts this checkout's root on sys.path
sys.path.append(sys.argv[2])
from speed import QUERIES, warm_search_timings
vault = Vault.open(sys.argv[1])
started = time.perf_counter()
vault.search(QUERIES[0])
first = time.perf_counter() - started
timings = warm_search_timings(vault)
print(json.dumps({"first": first, "p50": timings[100], "p95": timings[190]}))
"""

def run(env: dict, *args: str) -> tuple[float, subprocess.CompletedProcess]:
    # From a neutral folder: `python -m` would import a checkout found in the working directory.
    started = time.perf_counter()
    done = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                          cwd=tempfile.gettempdir())
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args[:3])} failed: {done.stderr.strip()}")
    return elapsed, done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=7, help="cold searches per checkout, and warm processes")
    parser.add_argument("--compare", type=Path, action="append", default=[],
                        help="another checkout to measure the same way, in the same run")
    options = parser.parse_args()
    trees = [ROOT] + [tree.resolve() for tree in options.compare]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{options.facts:,} facts")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        source = work / "source"
        env = environment(ROOT)
        os.environ.update({k: v for k, v in env.items() if k.startswith(("GIT_", "MEMVAULT_"))})
        from memvault import Vault

        with Vault.init(source) as vault:
            facts = synthetic_facts(options.facts)
            for start in range(0, len(facts), 20_000):
                vault.add_many(facts[start : start + 20_000])
        seconds, _ = run(env, "-m", "memvault", "reindex", "--vault", str(source))
        print(f"embedding cache filled in {seconds:.0f} s")
        vaults = {}
        for number, tree in enumerate(trees):
            copy = vaults[tree] = work / f"vault-{number}"
            shutil.copytree(source, copy, symlinks=True, ignore=shutil.ignore_patterns("index"))
            seconds, _ = run(environment(tree), "-m", "memvault", "reindex", "--clear", "--vault", str(copy))
            print(f"{tree}: reindex --clear from the warm cache {seconds:.1f} s")
        cold: dict[Path, list[float]] = {tree: [] for tree in trees}
        warm: dict[Path, list[dict]] = {tree: [] for tree in trees}
        for n in range(options.runs):
            for tree in trees:
                query = QUERIES[n % len(QUERIES)]
                cold[tree].append(run(environment(tree), "-m", "memvault", "search", query,
                                      "--vault", str(vaults[tree]))[0])
                _, done = run(environment(tree), "-c", WARM, str(vaults[tree]), str(ROOT / "bench"))
                warm[tree].append(json.loads(done.stdout))
        for tree in trees:
            first = statistics.median(w["first"] for w in warm[tree])
            p50 = statistics.median(w["p50"] for w in warm[tree])
            p95 = statistics.median(w["p95"] for w in warm[tree])
            print(f"\n{tree}")
            print(f"  search, cold process        {statistics.median(cold[tree]) * 1000:8.0f} ms median "
                  f"(min {min(cold[tree]) * 1000:.0f}, max {max(cold[tree]) * 1000:.0f})")
            print(f"  first search in a process   {first * 1000:8.0f} ms median (open, verify, model load)")
            print(f"  search, warm in-process     {p50 * 1000:8.1f} ms p50, {p95 * 1000:.1f} ms p95 "
                  f"(medians of {options.runs} processes)")


if __name__ == "__main__":
    main()
