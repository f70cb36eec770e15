"""Speed of `memvault import` beside `memvault add --stdin`, and what keys cost an add.

In one run, taking turns (add --stdin, import of the JSONL, import of a markdown folder; again):
whole-process throughput of importing N synthetic facts into a fresh vault, each beside the
`add --stdin` of the same facts in the same round. Then, on the imported vault: a plain `add`, an
`add --key` with a new key and a retried `add --key` (medians, taking turns). With --compare PATH
(another checkout, e.g. main before keys): a plain `add` and a 20,000-fact `add --stdin` by this
tree and by that one, taking turns, on vaults of their own.

Usage: python bench/import.py [--facts 100000] [--rounds 2] [--compare /path/to/checkout]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from speed import environment, synthetic_facts  # noqa: E402

TARGET = 20_000  # facts/s, end to end


CPU: dict[str, float] = {}  # the last run's CPU seconds (user + system, git's included)


def memvault(tree: Path, *args: str, stdin: str | None = None) -> float:
    """Seconds a whole `memvault` process of `tree` takes (it must succeed); its CPU seconds, git's
    included, go to CPU["last"]: on a machine others keep busy, wall time measures them too."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "memvault", *args], env=environment(tree), input=stdin,
                          capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU["last"] = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    if done.returncode != 0:
        raise SystemExit(f"memvault {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return elapsed


def write_sources(facts: list[dict], folder: Path) -> tuple[Path, str, Path]:
    """The facts as a JSONL file (and its text, for add --stdin) and as a memory folder of daily logs."""
    lines = "".join(json.dumps(fact) + "\n" for fact in facts)
    jsonl = folder / "facts.jsonl"
    jsonl.write_text(lines, encoding="utf-8")
    days: dict[str, list[str]] = defaultdict(list)
    for fact in facts:
        at = datetime.fromisoformat(fact["at"])
        days[at.date().isoformat()].append(f"## {at:%H:%M}\n- {fact['text']} #{fact['tags'][0]}\n")
    memory = folder / "workspace" / "memory"
    memory.mkdir(parents=True)
    for day, items in days.items():
        (memory / f"{day}.md").write_text(f"# {day}\n\n" + "\n".join(items), encoding="utf-8")
    (folder / "workspace" / "MEMORY.md").write_text("# Memory\n\n- The user prefers short answers.\n")
    return jsonl, lines, folder / "workspace"


def throughput(args, work: Path) -> Path:
    facts = synthetic_facts(args.facts)
    jsonl, lines, workspace = write_sources(facts, work)
    imported = None
    print(f"== {args.facts:,} facts, {args.rounds} rounds (add --stdin, import jsonl, import memory-dir) ==")
    for round_ in range(1, args.rounds + 1):
        rates, cpu_rates = {}, {}
        for name, run in (("add --stdin", lambda v: memvault(ROOT, "add", "--stdin", "--vault", str(v), stdin=lines)),
                          ("import jsonl", lambda v: memvault(ROOT, "import", str(jsonl), "--vault", str(v))),
                          ("import memory-dir", lambda v: memvault(ROOT, "import", str(workspace), "--vault", str(v)))):
            vault = work / f"{name.replace(' ', '-')}-{round_}"
            memvault(ROOT, "init", str(vault))
            rates[name] = args.facts / run(vault)
            cpu_rates[name] = args.facts / CPU["last"]
            if name == "import jsonl":
                imported = vault
        base = rates["add --stdin"]
        print(f"round {round_}: " + "; ".join(
            f"{name} {rate:,.0f} facts/s" + (f" (x{rate / base:.2f})" if name != "add --stdin" else "")
            for name, rate in rates.items()))
        base = cpu_rates["add --stdin"]
        print("  per CPU second (user + system, git included): " + "; ".join(
            f"{name} {rate:,.0f} facts/s" + (f" (x{rate / base:.2f})" if name != "add --stdin" else "")
            for name, rate in cpu_rates.items()))
        for name in ("import jsonl", "import memory-dir"):
            verdict = "met" if rates[name] >= TARGET else "NOT met"
            print(f"  {name}: target {TARGET:,} facts/s {verdict} by the clock")
    return imported


def keyed_adds(vault: Path, runs: int) -> None:
    """Plain add, add --key (new key) and a retried add --key on a vault of keyed facts, taking turns."""
    times: dict[str, list[float]] = defaultdict(list)
    memvault(ROOT, "add", "retried fact", "--key", "retry-me", "--vault", str(vault))
    kinds = {"plain add": lambda n: ("add", f"plain fact {n}"),
             "add --key (new)": lambda n: ("add", f"named fact {n}", "--key", f"k-{n}"),
             "add --key (retry)": lambda n: ("add", "retried fact", "--key", "retry-me")}
    for n in range(runs):
        for name, words in kinds.items():
            times[name].append(memvault(ROOT, *words(n), "--vault", str(vault)))
    plain = statistics.median(times["plain add"])
    print(f"== adds on the imported vault, median of {runs}, taking turns ==")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:20} {median * 1000:7.0f} ms (range {min(values) * 1000:.0f}-{max(values) * 1000:.0f}; "
              f"x{median / plain:.2f} of a plain add)")


def compare(other: Path, work: Path, runs: int) -> None:
    """A plain add and a 20k add --stdin by this tree and by `other`, taking turns."""
    trees = {"this tree": ROOT, other.name: other}
    lines = "".join(json.dumps(fact) + "\n" for fact in synthetic_facts(20_000, seed=11))
    adds: dict[str, list[float]] = defaultdict(list)
    bulk: dict[str, list[float]] = defaultdict(list)
    vaults = {}
    for name, tree in trees.items():
        vaults[name] = work / f"compare-{len(vaults)}"
        memvault(tree, "init", str(vaults[name]))
        memvault(tree, "add", "--stdin", "--vault", str(vaults[name]), stdin=lines)
    for n in range(runs):
        for name, tree in trees.items():
            adds[name].append(memvault(tree, "add", f"compare fact {n}", "--vault", str(vaults[name])))
    for round_ in range(2):
        for name, tree in trees.items():
            fresh = work / f"bulk-{round_}-{name.replace(' ', '-')}"
            memvault(tree, "init", str(fresh))
            bulk[name].append(20_000 / memvault(tree, "add", "--stdin", "--vault", str(fresh), stdin=lines))
    print(f"== plain add before/after: this tree vs {other}, taking turns ==")
    base = statistics.median(adds[other.name])
    for name in trees:
        median = statistics.median(adds[name])
        print(f"memvault add ({name}) {median * 1000:7.0f} ms median of {runs} "
              f"(range {min(adds[name]) * 1000:.0f}-{max(adds[name]) * 1000:.0f}; x{median / base:.2f})")
    base = statistics.median(bulk[other.name])
    for name in trees:
        rate = statistics.median(bulk[name])
        print(f"add --stdin 20k ({name}) {rate:10,.0f} facts/s (rounds: "
              f"{', '.join(f'{r:,.0f}' for r in bulk[name])}; x{rate / base:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--adds", type=int, default=9, help="process adds per kind, taking turns")
    parser.add_argument("--compare", type=Path, help="another checkout, for the plain add before/after")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        imported = throughput(args, work)
        keyed_adds(imported, args.adds)
        if args.compare:
            compare(args.compare.resolve(), work, args.adds)


if __name__ == "__main__":
    main()
