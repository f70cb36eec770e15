"""A sync that merges a large daily log: wall time and peak memory of `memvault sync`, beside a
plain `git pull` of the same commits in the same run (the fetch and merge alone, memvault's merge
driver included, without sync's checks of what the remote brings).

Machine A holds one day with --facts facts (about 250 bytes each: 100k make a 25 MB log) and
pushes it to a bare remote; B clones it; each adds one fact to that day and A syncs, so B's sync
fetches A's line and merges the two versions of the big log. B is copied first, and the copy takes
the same commits with `git pull`. With --compare PATH, the memvault of another checkout (e.g. the
main branch) syncs a third copy in the same run.

Peak memory is the child's own maximum resident set (wait4): `memvault sync` and the git and merge
driver processes it runs are counted apart, the largest shown.

Usage: python bench/sync.py [--facts 100000] [--compare /path/to/checkout]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = """
import sys
from pathlib import Path
from memvault import Vault
vault = Vault.init(Path(sys.argv[1]))
vault.add_many([{"text": f"fact number {i}: what was said about the weather, the trains and the work "
                         f"of a long day, written down so that it can be found again later on", "at": sys.argv[3]}
                for i in range(int(sys.argv[2]))])
"""


def environment(tree: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(tree), "MEMVAULT_EMBED_MODEL_PATH": ""}
    for name, value in (("GIT_AUTHOR_NAME", "bench"), ("GIT_AUTHOR_EMAIL", "bench@example.test"),
                        ("GIT_COMMITTER_NAME", "bench"), ("GIT_COMMITTER_EMAIL", "bench@example.test")):
        env.setdefault(name, value)
    return env


def timed(command: list[str], cwd: Path, env: dict) -> tuple[float, float]:
    """Seconds and the largest peak resident set (MB) of the command and the processes it waited for."""
    started = time.perf_counter()
    child = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    err = child.stderr.read().decode()
    child.stdout.close()
    child.stderr.close()
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{' '.join(command)} failed: {err.strip()}")
    return seconds, usage.ru_maxrss / 1024


def run(tree: Path, env: dict, *args: str, cwd: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "memvault", *args], cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"memvault {' '.join(args)} failed: {done.stderr.strip()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--compare", type=Path, help="another checkout whose memvault syncs a copy too")
    args = parser.parse_args()
    env = environment(ROOT)
    day = "2026-11-20"
    with tempfile.TemporaryDirectory(prefix="memvault-bench-sync-") as tmp:
        work = Path(tmp)
        a, b, remote = work / "a", work / "b", work / "remote.git"
        subprocess.run([sys.executable, "-c", BUILD, str(a), str(args.facts), f"{day}T10:00:00"], env=env,
                       check=True, cwd=work)
        subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
        run(ROOT, env, "remote", "set", str(remote), cwd=a)
        run(ROOT, env, "sync", cwd=a)
        run(ROOT, env, "clone", str(remote), str(b), cwd=work)
        run(ROOT, env, "add", "--at", f"{day}T11:00", "a line from machine A", cwd=a)
        run(ROOT, env, "add", "--at", f"{day}T11:05", "a line from machine B", cwd=b)
        run(ROOT, env, "sync", cwd=a)
        size = (a / "logs" / day[:4] / f"{day}.md").stat().st_size
        copies = {"git pull": work / "b-pull", "memvault sync": b}
        if args.compare:
            copies[f"memvault sync ({args.compare.name})"] = work / "b-compare"
        for copy in copies.values():
            if copy != b:
                shutil.copytree(b, copy, symlinks=True)
        results = {}
        results["git pull"] = timed(["git", "pull", "-q", "--no-rebase", "--no-edit"], copies["git pull"], env)
        results["memvault sync"] = timed([sys.executable, "-m", "memvault", "sync"], b, env)
        if args.compare:
            results[f"memvault sync ({args.compare.name})"] = timed(
                [sys.executable, "-m", "memvault", "sync"], copies[f"memvault sync ({args.compare.name})"],
                environment(args.compare.resolve()))
    base_seconds, base_mb = results["git pull"]
    print(f"sync merging one {size / 1e6:.1f} MB daily log ({args.facts:,} facts) with one new line on each side; "
          f"Python {platform.python_version()}, {os.cpu_count()} cores")
    for name, (seconds, mb) in results.items():
        print(f"{name:<32} {seconds:6.2f} s  (x{seconds / base_seconds:4.1f} git pull)   peak {mb:6.0f} MB  "
              f"(x{mb / base_mb:4.1f})")
    print(f"(this process: peak {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)")


if __name__ == "__main__":
    main()
