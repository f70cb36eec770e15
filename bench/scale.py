"""memvault at 100k and 1M facts: status, the first lexical search, and reindex where it is feasible.

The vaults have the shape of a long-lived agent's: the facts spread over 1,042 daily logs, texts
of about 15 words, a session per 40 facts. They are built through `memvault add --stdin` (the
real write path: the documented log format, one commit per chunk of 100,000 facts).

For each size, in one run: the build rate; `memvault status` the first time (it counts every log
and plans dream once, then keeps the answers under .memvault/) and again (warm), also right after
an add, and `memvault dream --status`; the first `memvault search --lexical` (it builds the
lexical index) and a second one; `memvault doctor` (its default run); peak RSS of each process.
With --before, `status` right after an `add` also runs --add-turns times turn about, each tree
on a copy of the vault of its own. At --doctor-full-sizes, `doctor --full` against the estimate
doctor gives for it. Every figure is printed with its ratio
to the same figure at --base (100,000 facts; run first). With --before REF, the status and the first lexical search
also run with memvault as of git REF (a temporary worktree), turn about with this tree's (A B A B),
at the sizes up to --before-max.

Embedding is measured only at --embed-sizes (default 10,000): `reindex --clear` with the model,
against raw fastembed on the same texts, the bytes of the derived data, and then a cold hybrid
search (a process of its own; the warm figures through the MCP server are bench/mcp.py's). At
900-1,000 facts/s on a 2-core machine a million facts take about 17 minutes (more on a busy one):
`--embed-sizes 100000,1000000` measures them (docs/scale.md has such a run).

Usage: python bench/scale.py [--sizes 10000,100000,1000000] [--before main] [--before-max 100000]
                             [--embed-sizes 10000] [--base 100000] [--keep DIR] [--add-turns 3]
                             [--doctor-full-sizes 100000,1000000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from speed import MODEL_NAME, PEOPLE, PLACES, THINGS, VERBS, environment

ROOT = Path(__file__).resolve().parent.parent
DAYS = 1042
CHUNK = 100_000


def facts_json(start: int, count: int, total: int) -> str:
    """`add --stdin` lines for facts start..start+count of a vault of `total`, spread over DAYS days."""
    rng = random.Random(start)
    first = datetime(2023, 1, 1, 8, 0)
    lines = []
    for i in range(start, start + count):
        at = first + timedelta(seconds=int(i * DAYS * 86400 / total))
        text = (f"{rng.choice(PEOPLE)} {rng.choice(VERBS)} {rng.choice(THINGS)} {rng.choice(PLACES)} after "
                f"{rng.choice(THINGS)} with {rng.choice(PEOPLE)} (note {i})")
        lines.append(json.dumps({"text": text, "at": at.isoformat(timespec="seconds"), "session": f"s{i // 40}"}))
    return "\n".join(lines) + "\n"


# Runs memvault's CLI in the child and records the child's own peak RSS (VmHWM: ru_maxrss from
# wait4 also counts the pages of the bench process it was forked from). memvault ends with
# os._exit, so that is wrapped too. With SCALE_TREE, memvault is imported from that tree, not the
# editable install (whose import hook comes before PYTHONPATH).
CHILD = """
import atexit, os, runpy, sys
tree = os.environ.get("SCALE_TREE")
if tree:
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
    sys.path.insert(0, tree)
def peak():
    with open("/proc/self/status") as status, open(os.environ["SCALE_PEAK"], "w") as out:
        out.write(next(line.split()[1] for line in status if line.startswith("VmHWM:")))
real_exit = os._exit
os._exit = lambda code: (peak(), real_exit(code))
atexit.register(peak)
sys.argv = ["memvault", *sys.argv[1:]]
runpy.run_module("memvault", run_name="__main__", alter_sys=True)
"""


def measured(args: list[str], env: dict, stdin: str | None = None, codes: tuple[int, ...] = (0,)
             ) -> tuple[float, float, str]:
    """Seconds, peak RSS in MB and stdout of `memvault ARGS` in a process of its own (exit code in `codes`)."""
    with tempfile.TemporaryFile("w+") as given, tempfile.TemporaryFile("w+") as out, \
            tempfile.TemporaryFile("w+") as err, tempfile.NamedTemporaryFile("r") as peak:
        given.write(stdin or "")
        given.seek(0)
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", CHILD, *args], env={**env, "SCALE_PEAK": peak.name},
                              stdin=given, stdout=out, stderr=err, check=False)
        elapsed = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        if done.returncode not in codes:
            raise SystemExit(f"memvault {' '.join(args)} failed ({done.returncode}): {err.read().strip()}")
        return elapsed, int(peak.read() or 0) / 1024, out.read()


def memvault(env: dict, vault: Path, *args: str, stdin: str | None = None, codes: tuple[int, ...] = (0,)
             ) -> tuple[float, float, str]:
    return measured([*args, "--vault", str(vault)], env, stdin, codes)


def tree_env(tree: Path) -> dict:
    env = environment(tree)
    env["SCALE_TREE"] = str(tree)
    return env


def imported_from(env: dict) -> str:
    code = ("import os, sys\nif os.environ.get('SCALE_TREE'):\n"
            "    sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]\n"
            "    sys.path.insert(0, os.environ['SCALE_TREE'])\nimport memvault\nprint(memvault.__file__)")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout.strip()


def build(vault: Path, size: int, env: dict) -> float:
    """Facts/s of `add --stdin` in chunks of CHUNK."""
    measured(["init", str(vault)], env)
    spent = 0.0
    for start in range(0, size, CHUNK):
        lines = facts_json(start, min(CHUNK, size - start), size)
        spent += memvault(env, vault, "add", "--stdin", stdin=lines)[0]
    return size / spent


def drop_derived(vault: Path) -> None:
    """Everything status and search keep: the next run starts as after a clone."""
    for name in ("index", "cache", "tally.bin", "dream-status.json"):
        path = vault / ".memvault" / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def status_and_search(vault: Path, env: dict) -> dict:
    """One tree's figures on `vault`, from nothing derived."""
    drop_derived(vault)
    found = {}
    found["status, first"] = memvault(env, vault, "status", "--json")[:2]
    found["status, warm"] = min((memvault(env, vault, "status", "--json")[:2] for _ in range(3)), key=lambda r: r[0])
    found["dream --status, warm"] = memvault(env, vault, "dream", "--status")[:2]
    found["lexical search, first (builds)"] = memvault(env, vault, "search", "--lexical", "green tea Lisbon")[:2]
    found["lexical search, built"] = min((memvault(env, vault, "search", "--lexical", "concert plans")[:2]
                                          for _ in range(3)), key=lambda r: r[0])
    memvault(env, vault, "add", "one more fact, today")
    found["status after an add"] = memvault(env, vault, "status", "--json")[:2]
    found["doctor (default run)"] = memvault(env, vault, "doctor", "--json", codes=(0, 1))[:2]
    return found


def after_adds(vaults: dict[str, Path], envs: dict[str, dict], turns: int = 3) -> dict[str, list]:
    """`status` right after an `add`, each tree on its own copy of the vault (their kept counts
    differ in layout), turn about (A B A B), every copy warmed by one status first."""
    for label, vault in vaults.items():
        memvault(envs[label], vault, "status", "--json")
    found: dict[str, list] = {label: [] for label in vaults}
    for turn in range(turns):
        for label, vault in vaults.items():
            memvault(envs[label], vault, "add", f"one more fact, today ({turn})")
            found[label].append(memvault(envs[label], vault, "status", "--json")[:2])
    return found


def doctor_full(vault: Path, env: dict) -> tuple[float, float, float]:
    """`doctor --full`: its own estimate (seconds), then the time it took and its peak MB."""
    estimate = json.loads(memvault(env, vault, "doctor", "--json", codes=(0, 1))[2])["full"]["estimate"]["seconds"]
    seconds, peak, _ = memvault(env, vault, "doctor", "--full", "--json", codes=(0, 1))
    return estimate, seconds, peak


def embedding(vault: Path, size: int, env: dict) -> tuple[float, float, float, dict[str, int]]:
    """reindex --clear with the model from an empty embedding cache (docs/s, peak MB), raw fastembed
    texts/s on 5,000 of the same texts (before and after, the mean: a long rebuild outlasts the
    machine's mood), each in a process of its own, and the bytes the derived data then takes."""
    code = ("import json, sys, time\nfrom fastembed import TextEmbedding\n"
            f"model = TextEmbedding({MODEL_NAME!r}, specific_model_path=sys.argv[1], local_files_only=True)\n"
            "texts = [json.loads(line)['text'] for line in sys.stdin]\n"
            "started = time.perf_counter()\nlist(model.embed(texts, batch_size=256))\n"
            "print(len(texts) / (time.perf_counter() - started))\n")
    sample = facts_json(0, min(size, 5000), size)

    def raw() -> float:
        return float(subprocess.run([sys.executable, "-c", code, env["MEMVAULT_EMBED_MODEL_PATH"]], env=env,
                                    input=sample, capture_output=True, text=True, check=True).stdout)

    before = raw()
    drop_derived(vault)
    seconds, peak, _ = memvault(env, vault, "reindex", "--clear")
    after = raw()
    sizes = {name: sum(p.stat().st_size for p in (vault / ".memvault" / name).rglob("*") if p.is_file())
             for name in ("index", "cache")}
    return (size + 1) / seconds, peak, (before + after) / 2, sizes


def ratio(value: float, base: float | None) -> str:
    return f"x{value / base:6.2f}" if base else "      "


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--before", help="a git ref to compare with (status and the first lexical search)")
    parser.add_argument("--before-max", type=int, default=100_000, help="largest size the --before tree runs at")
    parser.add_argument("--embed-sizes", default="10000", help="sizes at which reindex embeds (slow)")
    parser.add_argument("--base", type=int, default=100_000, help="the size ratios are to (run first)")
    parser.add_argument("--keep", type=Path, help="build the vaults here and keep them (reused if present)")
    parser.add_argument("--add-turns", type=int, default=3,
                        help="turns of `status` right after an `add`, each tree on its own copy of the vault")
    parser.add_argument("--doctor-full-sizes", default="100000,1000000",
                        help="sizes at which `doctor --full` runs (minutes at 1M)")
    options = parser.parse_args()
    sizes = sorted(int(s) for s in options.sizes.split(","))
    sizes.sort(key=lambda size: size != options.base)  # the base first: every other figure needs it
    embed_sizes = [int(s) for s in options.embed_sizes.split(",") if s]
    env = tree_env(ROOT)
    work = Path(tempfile.mkdtemp(prefix="memvault-scale-"))
    place = options.keep or work
    before_env = None
    if options.before:
        tree = work / "before"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(tree), options.before],
                       check=True)
        before_env = tree_env(tree)
    try:
        _run(sizes, embed_sizes, place, env, before_env, options, work)
    finally:
        if options.before:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(work / "before")], check=False)
        shutil.rmtree(work, ignore_errors=True)


def _run(sizes, embed_sizes, place: Path, env, before_env, options, work: Path) -> None:
    before_max, before_ref = options.before_max, options.before
    full_sizes = [int(s) for s in options.doctor_full_sizes.split(",") if s]
    print(f"memvault scale bench, {datetime.now().isoformat(timespec='seconds')}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}; vaults of {DAYS} daily logs built with `add --stdin`")
    print(f"after: memvault from {imported_from(env)}")
    if before_env is not None:
        print(f"before ({before_ref}): memvault from {imported_from(before_env)}")
    base: dict[str, tuple[float, float]] = {}
    for size in sizes:
        vault = place / f"vault-{size}"
        print(f"\n== {size:,} facts ==")
        if not (vault / "logs").is_dir():
            rate = build(vault, size, env)
            print(f"build (add --stdin)               {rate:10,.0f} facts/s")
        logs = sum(p.stat().st_size for p in (vault / "logs").rglob("*.md"))
        print(f"logs: {len(list((vault / 'logs').rglob('*.md')))} files, {logs / 1e6:.0f} MB")
        runs = [("after", env)]
        if before_env is not None and size <= before_max:
            runs = [("before", before_env), ("after", env), ("before", before_env), ("after", env)]
        results: dict[str, dict[str, list]] = {}
        for label, tree_env in runs:
            for name, figure in status_and_search(vault, tree_env).items():
                results.setdefault(name, {}).setdefault(label, []).append(figure)
        if before_env is not None and options.add_turns:
            # the before tree keeps the counts in another layout: each tree gets a copy of its own
            copies = {label: work / f"copy-{label}" for label in ("before", "after")}
            for copy in copies.values():
                shutil.copytree(vault, copy, symlinks=True)
            found = after_adds(copies, {"before": before_env, "after": env}, options.add_turns)
            for label, figures in found.items():
                results.setdefault("status after an add, turn about", {})[label] = figures
            for copy in copies.values():
                shutil.rmtree(copy, ignore_errors=True)
        for name, by_label in results.items():
            for label, figures in by_label.items():
                seconds = [f[0] for f in figures]
                peak = max(f[1] for f in figures)
                key = f"{name} ({label})"
                shown = " / ".join(f"{s:.2f}" for s in seconds)
                if size == sizes[0]:  # the base size
                    base[key] = (statistics.median(seconds), peak)
                b = base.get(key, (None, None))
                tag = f"{label} {before_ref}" if label == "before" else label
                print(f"{name:32} {tag:>14}: {shown:>12} s {ratio(statistics.median(seconds), b[0])}   "
                      f"peak {peak:7.0f} MB {ratio(peak, b[1])}")
        print(f"(load now {os.getloadavg()[0]:.1f})")
        if size in full_sizes:
            guess, seconds, peak = doctor_full(vault, env)
            print(f"doctor --full (after)             {seconds:10.1f} s, its estimate {guess:.1f} s "
                  f"(x{seconds / guess:.2f} of it); peak {peak:.0f} MB" if guess else
                  f"doctor --full (after)             {seconds:10.1f} s; peak {peak:.0f} MB")
        if size in embed_sizes:
            rate, peak, raw, derived = embedding(vault, size, env)
            if size == sizes[0]:
                base["reindex"] = (rate, peak)
            b = base.get("reindex", (None, None))
            print(f"reindex --clear with the model     {rate:10,.0f} docs/s {ratio(rate, b[0])} (raw fastembed "
                  f"{raw:,.0f} texts/s: x{rate / raw:.2f} of it); peak {peak:.0f} MB {ratio(peak, b[1])}")
            vectors = (size + 1) * 384 * 4
            print(f"derived data: index {derived['index'] / 1e6:,.0f} MB + embedding cache "
                  f"{derived['cache'] / 1e6:,.0f} MB = x{sum(derived.values()) / vectors:.2f} the raw float32 "
                  f"vectors ({vectors / 1e6:,.0f} MB)")
            cold = sorted(memvault(env, vault, "search", f"trip to Lisbon {n}")[:2] for n in range(3))
            if size == sizes[0]:
                base["cold search"] = (cold[1][0], cold[1][1])
            b = base.get("cold search", (None, None))
            print(f"cold hybrid search (3 runs)        {' / '.join(f'{c[0]:.2f}' for c in cold)} s "
                  f"{ratio(cold[1][0], b[0])}   peak {cold[1][1]:7.0f} MB {ratio(cold[1][1], b[1])}")
        else:
            print(f"reindex with the model: NOT measured at {size:,} facts (at 250-1,000 facts/s on a 2-core "
                  f"machine it would take {size / 1000 / 60:.0f}-{size / 250 / 60:.0f} min); see --embed-sizes")


if __name__ == "__main__":
    main()
