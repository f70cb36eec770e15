"""`search --as-of` on a vault of 10,000 facts in 1,000 commits, beside a plain search in the same run;
and plain `add` and `search` of this checkout against another one (before/after), taking turns.

The vault: synthetic facts (bench/speed.py), ten per commit, one commit every eight hours over a
year (commit dates set per commit), the embedding cache filled once. Each checkout gets its own
copy (its own index format), rebuilt from the warm cache.

Measured, in rounds that alternate between the checkouts (A B A B):
- whole-process `memvault add` and `memvault search` (cold process), each checkout;
- warm in-process Vault.search p50, each checkout;
- this checkout only: whole-process `search --as-of M`, the first time for each moment M (its
  files written, its index built from the borrowed embedding cache) and the second time, beside
  a plain cold search in the same round; in one warm process (the model loaded by a plain search),
  the first as-of search of each moment and the p50 of repeated ones, beside the plain p50.

Usage: python bench/time_travel.py [--facts 10000] [--commits 1000] [--runs 5] [--compare /path/to/checkout]
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
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from speed import QUERIES, environment, synthetic_facts  # noqa: E402

START = datetime(2025, 1, 1, 9, tzinfo=UTC)
STEP = timedelta(hours=8)

WARM = """
import json, sys, time
from memvault import Vault
sys.path.append(sys.argv[2])
from speed import QUERIES
moments = json.loads(sys.argv[3])
vault = Vault.open(sys.argv[1])
vault.search("warm up")

def p50(call, n=60):
    times = []
    for i in range(n):
        started = time.perf_counter()
        call(QUERIES[i % len(QUERIES)] + f" {i % 13}")
        times.append(time.perf_counter() - started)
    return sorted(times)[n // 2]

result = {"plain": p50(vault.search), "first": [], "again": []}
for moment in moments:
    started = time.perf_counter()
    vault.search(QUERIES[0], as_of=moment)
    result["first"].append(time.perf_counter() - started)
    result["again"].append(p50(lambda q: vault.search(q, as_of=moment)))
print(json.dumps(result))
"""


def run(env: dict, *args: str) -> float:
    # From a neutral folder: `python -m` would import a checkout found in the working directory.
    started = time.perf_counter()
    done = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, cwd=tempfile.gettempdir())
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args[:4])} failed: {done.stderr.strip()}")
    run.last = done  # type: ignore[attr-defined]
    return elapsed


def build(source: Path, facts: int, commits: int) -> None:
    from memvault import Vault

    per_commit = max(facts // commits, 1)
    records = synthetic_facts(facts)
    with Vault.init(source) as vault:
        for n, start in enumerate(range(0, facts, per_commit)):
            when = (START + n * STEP).isoformat()
            vault.storage.git.env["GIT_AUTHOR_DATE"] = vault.storage.git.env["GIT_COMMITTER_DATE"] = when
            vault.add_many(records[start:start + per_commit])


def spread(commits: int, count: int) -> list[str]:
    """`count` moments spread over the history, each between two commits."""
    return [(START + int(commits * (i + 1) / (count + 1)) * STEP + timedelta(hours=1)).isoformat()
            for i in range(count)]


def show(label: str, values: list[float], unit: str = "ms") -> str:
    return (f"{label:<44}{statistics.median(values) * 1000:8.0f} {unit} median "
            f"(min {min(values) * 1000:.0f}, max {max(values) * 1000:.0f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=10_000)
    parser.add_argument("--commits", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=5, help="rounds (each checkout and moment once per round)")
    parser.add_argument("--compare", type=Path, help="another checkout (the code before) for plain add and search")
    options = parser.parse_args()
    trees = [ROOT] + ([options.compare.resolve()] if options.compare else [])
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{options.facts:,} facts in {options.commits:,} commits; load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(dir=ROOT / "bench") as tmp:
        work = Path(tmp)
        source = work / "source"
        env = environment(ROOT)
        os.environ.update({k: v for k, v in env.items() if k.startswith(("GIT_", "MEMVAULT_"))})
        started = time.perf_counter()
        build(source, options.facts, options.commits)
        print(f"vault built in {time.perf_counter() - started:.0f} s")
        print(f"embedding cache filled in {run(env, '-m', 'memvault', 'reindex', '--vault', str(source)):.0f} s")
        vaults = {}
        for number, tree in enumerate(trees):
            copy = vaults[tree] = work / f"vault-{number}"
            shutil.copytree(source, copy, symlinks=True, ignore=shutil.ignore_patterns("index"))
            seconds = run(environment(tree), "-m", "memvault", "reindex", "--clear", "--vault", str(copy))
            print(f"{tree}: reindex --clear from the warm cache {seconds:.1f} s")

        mine = vaults[ROOT]
        moments = spread(options.commits, options.runs)
        adds = {tree: [] for tree in trees}
        cold = {tree: [] for tree in trees}
        warm = {tree: [] for tree in trees}
        first, again, beside = [], [], []
        for n in range(options.runs):
            query = QUERIES[n % len(QUERIES)]
            for tree in trees:
                adds[tree].append(run(environment(tree), "-m", "memvault", "add", f"timing fact {n}",
                                      "--vault", str(vaults[tree])))
                cold[tree].append(run(environment(tree), "-m", "memvault", "search", query, "--vault",
                                      str(vaults[tree])))
                run(environment(tree), "-c", WARM, str(vaults[tree]), str(ROOT / "bench"), "[]")
                warm[tree].append(json.loads(run.last.stdout)["plain"])  # type: ignore[attr-defined]
            # this checkout: a moment asked for the first time, then again, beside a plain search
            as_of = ["-m", "memvault", "search", query, "--as-of", moments[n], "--vault", str(mine)]
            first.append(run(env, *as_of))
            beside.append(run(env, "-m", "memvault", "search", query, "--vault", str(mine)))
            again.append(run(env, *as_of))

        shutil.rmtree(mine / ".memvault" / "asof", ignore_errors=True)
        run(env, "-c", WARM, str(mine), str(ROOT / "bench"), json.dumps(spread(options.commits, 3)))
        inside = json.loads(run.last.stdout)  # type: ignore[attr-defined]

        for tree in trees:
            print(f"\n{tree}")
            print(show("  add, whole process", adds[tree]))
            print(show("  search, cold process", cold[tree]))
            print(f"  {'search, warm in-process p50':<42}{statistics.median(warm[tree]) * 1000:8.1f} ms "
                  f"(min {min(warm[tree]) * 1000:.1f}, max {max(warm[tree]) * 1000:.1f})")
        if len(trees) == 2:
            a, b = trees
            print(f"\nratios this/other: add x{statistics.median(adds[a]) / statistics.median(adds[b]):.2f}, "
                  f"cold search x{statistics.median(cold[a]) / statistics.median(cold[b]):.2f}, "
                  f"warm search x{statistics.median(warm[a]) / statistics.median(warm[b]):.2f}")
        plain = statistics.median(beside)
        print(f"\nsearch --as-of, whole process ({options.runs} moments, one per round)")
        print(show("  first time for the moment", first) + "  (target <= 2000 ms)")
        print(show("  second time", again) + f"  (x{statistics.median(again) / plain:.2f} of plain; target <= 2x)")
        print(show("  plain search, same rounds", beside))
        print("\nsearch --as-of in one warm process (3 moments)")
        print(f"  {'first time for the moment':<42}" + ", ".join(f"{t * 1000:.0f}" for t in inside["first"]) + " ms")
        print(f"  {'again, p50':<42}" + ", ".join(f"{t * 1000:.1f}" for t in inside["again"])
              + f" ms (plain p50 {inside['plain'] * 1000:.1f} ms, "
              f"x{statistics.median(inside['again']) / inside['plain']:.2f})")


if __name__ == "__main__":
    main()
