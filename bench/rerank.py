"""What the rerank stage costs: warm search with and without it, in-process and through `memvault
mcp`, and a cold `memvault search` process, each beside the code before the stage (a baseline tree).

For every size: a vault of synthetic facts (bench/speed.py's), indexed once; then, taking turns in
blocks of 20 searches so a shared machine's load weighs on all alike:
- through MCP: a server of this tree with the reranker, one with it off (MEMVAULT_RERANK=0), and
  one of the baseline tree;
- in-process: `Vault.search` with and without the reranker;
and cold `memvault search` processes of this tree (reranker on, off) and of the baseline tree,
alternated (A B C A B C ...). Printed: p50/p95 (warm), medians and ranges (cold), the ratios,
and the CPU time each server or process used per search: on a machine other work keeps busy, the
wall times swing with it, the CPU time much less (it is about a quiet machine's wall time).

Usage: python bench/rerank.py --baseline DIR [--sizes 10000,100000] [--searches 200] [--keep DIR]
(DIR holds the baseline code, e.g. `git archive <commit> | tar -x -C DIR`; --keep builds each
vault once in that directory and reuses it.)
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
from contextlib import AsyncExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
# The script's own folder holds bench/mcp.py, which `import mcp` would find instead of the SDK:
# the checkout takes its place, and the other bench scripts stay importable, last.
sys.path[0] = str(ROOT)
sys.path.append(str(BENCH))

from speed import DEFAULT_MODEL, QUERIES, synthetic_facts  # noqa: E402

DEFAULT_RERANK_MODEL = ROOT.parent / "shared" / "models" / "ms-marco-MiniLM-L-12-v2-onnx-int8"
BLOCK = 20


def percentiles(timings: list[float]) -> tuple[float, float]:
    timings = sorted(timings)
    return timings[len(timings) // 2] * 1000, timings[int(len(timings) * 0.95)] * 1000


def build_vault(path: Path, size: int, env: dict) -> None:
    if (path / "memvault.toml").is_file():
        print(f"vault                       reusing {path}")
        return
    from memvault import Vault

    vault = Vault.init(path)
    facts = synthetic_facts(size)
    for chunk in range(0, size, 20_000):
        vault.add_many(facts[chunk : chunk + 20_000])
    vault.close()
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "memvault", "reindex", "--vault", str(path)], env=env, check=True,
                   capture_output=True)
    print(f"vault                       {size:,} facts, indexed in {time.perf_counter() - started:.1f} s")


async def _open(stack: AsyncExitStack, vault: Path, env: dict):
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "memvault", "mcp", "--vault", str(vault)],
                                   env=env, cwd=str(vault))
    quiet = stack.enter_context(open(os.devnull, "w"))
    session = await stack.enter_async_context(ClientSession(*await stack.enter_async_context(
        stdio_client(params, errlog=quiet))))
    await session.initialize()
    result = await session.call_tool("search", {"query": "warm up"})
    assert not result.is_error, result.content[0].text
    return session


async def _timed(session, queries: list[str], timings: list[float]) -> None:
    for query in queries:
        started = time.perf_counter()
        result = await session.call_tool("search", {"query": query})
        timings.append(time.perf_counter() - started)
        assert not result.is_error and result.structured_content["hits"], result.content[0].text


def _servers() -> dict[str, int]:
    """This process's children that are `memvault mcp` servers, by the MEMVAULT_BENCH_WAY they were given."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1]) != os.getpid():
                continue
            environ = dict(item.split("=", 1) for item in (proc / "environ").read_text().split("\0") if "=" in item)
        except (OSError, ValueError, IndexError):
            continue
        if "MEMVAULT_BENCH_WAY" in environ:
            found[environ["MEMVAULT_BENCH_WAY"]] = int(proc.name)
    return found


def _cpu(pid: int) -> float:
    """Seconds of CPU (user + system) the process has used, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def warm(vault_path: Path, envs: dict[str, dict], searches: int) -> tuple[dict, dict]:
    """Warm timings, in blocks taking turns: each server, then the same searches in-process; and
    the CPU each server used per search (what a quiet machine's wall time would be, near enough)."""
    from memvault import Vault
    from memvault.index.vectors import products_on_one_thread

    products_on_one_thread()  # as in the server
    timings: dict[str, list[float]] = {name: [] for name in (*envs, "in-process, rerank", "in-process, no rerank")}
    cpu: dict[str, float] = dict.fromkeys(envs, 0.0)
    with Vault.open(vault_path) as vault:
        vault.search("warm up")
        async with AsyncExitStack() as stack:
            sessions = {name: await _open(stack, vault_path, {**env, "MEMVAULT_BENCH_WAY": name})
                        for name, env in envs.items()}
            pids = _servers()
            for block in range(0, searches, BLOCK):
                queries = [QUERIES[n % len(QUERIES)] + f" {n % 13}" for n in range(block, min(searches, block + BLOCK))]
                for name, session in sessions.items():
                    before = _cpu(pids[name])
                    await _timed(session, queries, timings[name])
                    cpu[name] += _cpu(pids[name]) - before
                for rerank, name in ((True, "in-process, rerank"), (False, "in-process, no rerank")):
                    for query in queries:
                        started = time.perf_counter()
                        vault.search(query, rerank=rerank)
                        timings[name].append(time.perf_counter() - started)
    return timings, {name: spent / searches for name, spent in cpu.items()}


def cold(vault: Path, envs: dict[str, dict], runs: int) -> tuple[dict, dict]:
    """Whole `memvault search` processes, taking turns (A B C A B C ...): wall and CPU seconds."""
    import resource

    found: dict[str, list[float]] = {name: [] for name in envs}
    cpu: dict[str, list[float]] = {name: [] for name in envs}
    for _ in range(runs):
        for name, env in envs.items():
            used = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "memvault", "search", QUERIES[0], "--vault", str(vault)],
                           env=env, cwd=vault, capture_output=True, text=True, check=True)
            found[name].append(time.perf_counter() - started)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[name].append(after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime)
    return found, cpu


def bench_size(size: int, options, envs: dict[str, dict], workdir: Path) -> None:
    import anyio

    print(f"\n== {size:,} facts ==")
    vault = workdir / f"vault-{size}"
    build_vault(vault, size, envs["MCP, rerank"])
    warm_envs = {name: env for name, env in envs.items() if name.startswith("MCP")}
    timings, cpu = anyio.run(warm, vault, warm_envs, options.searches)
    base50 = percentiles(timings["MCP, baseline tree"])[0]
    print(f"{'warm search':<28} {'p50 ms':>8} {'p95 ms':>8}  {'CPU ms':>7}  ratio of p50s")
    for name, found in timings.items():
        p50, p95 = percentiles(found)
        spent = f"{cpu[name] * 1000:7.1f}" if name in cpu else f"{'':7}"
        print(f"{name:<28} {p50:8.1f} {p95:8.1f}  {spent}  x{p50 / base50:.2f} the baseline server")
    print("(CPU ms: the server's CPU time per search, all its threads; a quiet machine's wall time is about that)")
    cold_envs = {"cold, rerank": envs["MCP, rerank"], "cold, no rerank": envs["MCP, no rerank"],
                 "cold, baseline tree": envs["MCP, baseline tree"]}
    found, spent = cold(vault, cold_envs, options.cold_runs)
    base, base_cpu = statistics.median(found["cold, baseline tree"]), statistics.median(spent["cold, baseline tree"])
    print(f"{'cold `memvault search`':<28} {'median':>8} {'range':>15}  {'CPU':>7}  difference to the baseline tree")
    for name, times in found.items():
        median, used = statistics.median(times), statistics.median(spent[name])
        print(f"{name:<28} {median * 1000:6.0f} ms {min(times) * 1000:6.0f}-{max(times) * 1000:.0f} ms  "
              f"{used * 1000:5.0f} ms  {(median - base) * 1000:+.0f} ms wall, {(used - base_cpu) * 1000:+.0f} ms CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True, help="A tree of the code before the stage.")
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--searches", type=int, default=200, help="Warm searches timed per way.")
    parser.add_argument("--cold-runs", type=int, default=7, help="Cold processes per way.")
    parser.add_argument("--keep", type=Path, help="Build the vaults in this directory and reuse them.")
    options = parser.parse_args()
    env = dict(os.environ)
    env.setdefault("MEMVAULT_EMBED_MODEL_PATH", str(DEFAULT_MODEL))
    env.setdefault("MEMVAULT_RERANK_MODEL_PATH", str(DEFAULT_RERANK_MODEL))
    for name, value in (("GIT_AUTHOR_NAME", "bench"), ("GIT_AUTHOR_EMAIL", "bench@example.test"),
                        ("GIT_COMMITTER_NAME", "bench"), ("GIT_COMMITTER_EMAIL", "bench@example.test")):
        env.setdefault(name, value)
    os.environ.update(env)
    envs = {
        "MCP, rerank": {**env, "PYTHONPATH": str(ROOT), "MEMVAULT_RERANK": "1"},
        "MCP, no rerank": {**env, "PYTHONPATH": str(ROOT), "MEMVAULT_RERANK": "0"},
        "MCP, baseline tree": {**env, "PYTHONPATH": str(options.baseline.resolve())},
    }
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{platform.system()} {platform.release()}; load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = options.keep or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        for size in (int(s) for s in options.sizes.split(",") if s.strip()):
            bench_size(size, options, envs, workdir)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
