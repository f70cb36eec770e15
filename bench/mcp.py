"""Warm search through `memvault mcp` (the whole MCP round trip) beside a cold `memvault search` process.

For every size: a vault of synthetic facts (bulk-added, indexed with the real model); then one
`memvault mcp` server process spoken to over stdio with the SDK's client: the first search (index
opening and model load), then p50/p95 of warm searches, in blocks of 20 taking turns with the
same searches in-process (`Vault.search`, the round trip's floor) and through a baseline server
whose numpy products use OpenBLAS's thread pool (as the server did before), and of warm adds; beside,
in the same run, a cold `memvault search` process and a `memvault add` process (what an agent pays
without the server), and a ping (the protocol's own round trip).

Usage: python bench/mcp.py [--sizes 10000,100000] [--searches 200] [--keep DIR] [--busy N]
(--keep builds each vault once in DIR and reuses it on the next run; --busy N keeps N cores busy
with spinning processes while the warm figures are taken, as an agent's machine at work is.)
"""

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
# This file is named mcp.py: with its directory first on sys.path, `import mcp` would find it
# instead of the SDK. The checkout goes first; the other bench scripts stay importable, last.
sys.path[0] = str(ROOT)
sys.path.append(str(BENCH))

import anyio  # noqa: E402
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402
from speed import DEFAULT_MODEL, QUERIES, synthetic_facts  # noqa: E402

BLOCK = 20  # searches in a row in one process, then the same ones in the other


def percentiles(timings: list[float]) -> tuple[float, float]:
    timings = sorted(timings)
    return timings[len(timings) // 2] * 1000, timings[int(len(timings) * 0.95)] * 1000


def process_median(args: list[str], runs: int, env: dict, cwd: Path) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def build_vault(path: Path, size: int) -> None:
    from memvault import Vault

    if (path / "memvault.toml").is_file():
        print(f"vault                       reusing {path}")
        return
    vault = Vault.init(path)
    facts = synthetic_facts(size)
    started = time.perf_counter()
    for chunk in range(0, size, 20_000):
        vault.add_many(facts[chunk : chunk + 20_000])
    added = time.perf_counter() - started
    report = vault.reindex()
    print(f"vault                       {size:,} facts added in {added:.1f} s, indexed in {report['seconds']:.1f} s")
    vault.close()


# The baseline server: numpy's products spread over OpenBLAS's thread pool, as the server ran them
# before it kept them on one thread (memvault.index.vectors.products_on_one_thread).
POOLED_SERVER = ("import memvault.index.vectors as vectors; vectors.products_on_one_thread = lambda: None; "
                 "from memvault.cli import main; main()")


async def timed_searches(session: ClientSession, queries: list[str], timings: list[float]) -> None:
    for query in queries:
        started = time.perf_counter()
        result = await session.call_tool("search", {"query": query})
        timings.append(time.perf_counter() - started)
        assert not result.is_error and result.structured_content["hits"], result.content[0].text


async def through_mcp(vault_path: Path, env: dict, searches: int, adds: int) -> dict:
    """Timings through the server. Warm searches take turns, in blocks, with the same searches through
    the baseline server and in-process, so the load of a shared machine weighs on all alike."""
    from memvault import Vault
    from memvault.index.vectors import products_on_one_thread

    products_on_one_thread()  # in-process as in the server, and no spinning pool here between blocks
    serve = ["mcp", "--vault", str(vault_path)]
    params = StdioServerParameters(command=sys.executable, args=["-m", "memvault", *serve], env=env,
                                   cwd=str(vault_path))
    pooled_params = StdioServerParameters(command=sys.executable, args=["-c", POOLED_SERVER, *serve], env=env,
                                          cwd=str(vault_path))
    found: dict = {}
    with open(os.devnull, "w") as quiet, Vault.open(vault_path) as vault:
        vault.search("warm up")
        async with AsyncExitStack() as stack:
            started = time.perf_counter()
            session = await stack.enter_async_context(ClientSession(*await stack.enter_async_context(
                stdio_client(params, errlog=quiet))))
            await session.initialize()
            found["start"] = (time.perf_counter() - started) * 1000
            started = time.perf_counter()
            first = await session.call_tool("search", {"query": "warm up"})
            found["first"] = (time.perf_counter() - started) * 1000
            assert not first.is_error, first.content[0].text
            pooled = await stack.enter_async_context(ClientSession(*await stack.enter_async_context(
                stdio_client(pooled_params, errlog=quiet))))
            await pooled.initialize()
            await pooled.call_tool("search", {"query": "warm up"})
            remote, baseline, local = [], [], []
            # Blocks of searches, taking turns: a search in one process right after one in another
            # slowed both (~2x: the other's threads were still winding down), so no pairs. The
            # one-thread server's blocks never follow the pooled server's, whose idle OpenBLAS threads
            # spin for a while.
            for block in range(0, searches, BLOCK):
                queries = [QUERIES[n % len(QUERIES)] + f" {n % 13}" for n in range(block, min(searches, block + BLOCK))]
                await timed_searches(pooled, queries, baseline)
                for query in queries:
                    started = time.perf_counter()
                    vault.search(query)
                    local.append(time.perf_counter() - started)
                await timed_searches(session, queries, remote)
            found["search"], found["in_process"] = percentiles(remote), percentiles(local)
            found["pooled"] = percentiles(baseline)
            found["overhead"] = found["search"][0] - found["in_process"][0]
            timings = []
            for n in range(adds):
                started = time.perf_counter()
                result = await session.call_tool("add", {"text": f"benchmark fact {n}", "tags": ["bench"]})
                timings.append(time.perf_counter() - started)
                assert not result.is_error, result.content[0].text
            found["add"] = percentiles(timings)
            timings = []
            for _ in range(searches):
                started = time.perf_counter()
                await session.send_ping()
                timings.append(time.perf_counter() - started)
            found["ping"] = percentiles(timings)
    return found


def bench_size(size: int, options, env: dict, workdir: Path) -> None:
    print(f"\n== {size:,} facts ==")
    vault = workdir / f"vault-{size}"
    build_vault(vault, size)
    memvault = [sys.executable, "-m", "memvault"]

    # Spinning processes stand for the rest of a working machine: the agent, a build, an editor.
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(options.busy)]
    try:
        warm = anyio.run(through_mcp, vault, env, options.searches, options.adds)
    finally:
        for process in busy:
            process.kill()
            process.wait()
    cold = process_median([*memvault, "search", QUERIES[0], "--vault", str(vault)], 5, env, vault)
    cold_add = process_median([*memvault, "add", "a cold benchmark fact", "--vault", str(vault)], 5, env, vault)

    (p50, p95), (floor50, floor95) = warm["search"], warm["in_process"]
    print(f"server start + initialize   {warm['start']:10.0f} ms; first search {warm['first']:.0f} ms "
          "(opens the index, loads the model)")
    print(f"search through MCP, warm    {p50:10.1f} ms p50, {p95:.1f} ms p95  (target p50 <= 20 ms)")
    print(f"  same searches in-process  {floor50:10.1f} ms p50, {floor95:.1f} ms p95  (the round trip adds "
          f"{warm['overhead']:.1f} ms: difference of the p50s)")
    pool50, pool95 = warm["pooled"]
    print(f"  baseline: BLAS pool       {pool50:10.1f} ms p50, {pool95:.1f} ms p95  (products on OpenBLAS's threads, "
          f"as before: x{pool50 / p50:.2f} the p50, x{pool95 / p95:.2f} the p95)")
    print(f"  protocol alone (ping)     {warm['ping'][0]:10.1f} ms p50, {warm['ping'][1]:.1f} ms p95")
    print(f"search, cold process        {cold:10.0f} ms median  (x{cold / p50:.0f} the warm MCP p50)")
    a50, a95 = warm["add"]
    print(f"add through MCP, warm       {a50:10.1f} ms p50, {a95:.1f} ms p95  (cold `memvault add` process "
          f"{cold_add:.0f} ms median, x{cold_add / a50:.1f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="Comma-separated vault sizes.")
    parser.add_argument("--searches", type=int, default=200, help="Warm searches timed per size.")
    parser.add_argument("--adds", type=int, default=20, help="Warm adds timed per size.")
    parser.add_argument("--keep", type=Path, help="Build the vaults in this directory and reuse them.")
    parser.add_argument("--busy", type=int, default=0, help="Keep this many cores busy during the warm timings.")
    options = parser.parse_args()
    env = dict(os.environ)
    env.setdefault("MEMVAULT_EMBED_MODEL_PATH", str(DEFAULT_MODEL))
    for name, value in (("GIT_AUTHOR_NAME", "bench"), ("GIT_AUTHOR_EMAIL", "bench@example.test"),
                        ("GIT_COMMITTER_NAME", "bench"), ("GIT_COMMITTER_EMAIL", "bench@example.test")):
        env.setdefault(name, value)
    os.environ.update(env)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{platform.system()} {platform.release()}")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = options.keep or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        for size in (int(s) for s in options.sizes.split(",") if s.strip()):
            bench_size(size, options, env, workdir)


if __name__ == "__main__":
    main()
