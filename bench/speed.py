"""Speed of add, reindex and search on vaults of synthetic facts, each beside a baseline.

For every size: bulk add (Vault.add_many) facts/s; whole-process `memvault add` median against a
bare `python -c pass`; `reindex --clear` with a cold embedding cache against raw fastembed
throughput on a sample of the same texts, then again with a warm cache; cold whole-process hybrid
`memvault search` median against a process that only imports fastembed, loads the model and embeds
the query; warm in-process Vault.search p50/p95 against the bare matrix-vector product; index
size on disk; peak RSS.

Usage: python bench/speed.py [--sizes 10000,100000] [--raw-sample 5000]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_MODEL = ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2-onnx-int8"
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"

PEOPLE = ["Alice", "Bob", "Carol", "Dan", "Erin", "Frank", "Grace", "Hana", "Ivan", "June", "Kim", "Lena"]
VERBS = ["prefers", "visited", "mentioned", "bought", "fixed", "planned", "cancelled", "recommended",
         "dislikes", "started learning", "finished", "borrowed"]
THINGS = ["green tea", "the Lisbon trip", "a used bicycle", "the quarterly report", "sourdough bread",
          "the garden shed", "a jazz concert", "Rust programming", "the kitchen tap", "a mountain hike",
          "the database migration", "an oil painting", "the dentist appointment", "a chess club"]
PLACES = ["at home", "in Berlin", "at the office", "in the park", "on the train", "at the market"]
QUERIES = ["what does Alice like to drink", "bicycle repair", "trip to Lisbon", "who is learning Rust",
           "concert plans", "database migration status", "hiking in the mountains", "dentist"]


def warm_search_timings(vault, searches: int = 200) -> list[float]:
    """Seconds of `searches` warm `vault.search` calls over QUERIES (numbered, so each differs), sorted."""
    timings = []
    for n in range(searches):
        started = time.perf_counter()
        vault.search(QUERIES[n % len(QUERIES)] + f" {n % 13}")
        timings.append(time.perf_counter() - started)
    return sorted(timings)


def environment(tree: Path) -> dict[str, str]:
    """The environment a benchmark runs `tree`'s memvault in: its code first, the local model, an identity."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.setdefault("MEMVAULT_EMBED_MODEL_PATH", str(DEFAULT_MODEL))
    for key, value in (("GIT_AUTHOR_NAME", "bench"), ("GIT_AUTHOR_EMAIL", "bench@example.test"),
                       ("GIT_COMMITTER_NAME", "bench"), ("GIT_COMMITTER_EMAIL", "bench@example.test")):
        env.setdefault(key, value)
    return env


def synthetic_facts(count: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    start = datetime(2025, 1, 1, 8, 0)
    facts = []
    for i in range(count):
        text = (f"{rng.choice(PEOPLE)} {rng.choice(VERBS)} {rng.choice(THINGS)} {rng.choice(PLACES)}"
                f" (note {i}, {rng.choice(THINGS)})")
        at = start + timedelta(minutes=int(i * 525600 / max(count, 1)))
        facts.append({"text": text, "at": at.isoformat(), "tags": [rng.choice(PEOPLE).lower()]})
    return facts


def run(args: list[str], env: dict | None = None, stdin: str | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(args, env=env, input=stdin, capture_output=True, text=True, check=True)
    return time.perf_counter() - started


def median_runs(args: list[str], runs: int, env=None) -> float:
    return statistics.median(run(args, env) for _ in range(runs))


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def bench_size(size: int, options, env: dict) -> None:
    from memvault import Vault

    print(f"\n== {size:,} facts ==")
    with tempfile.TemporaryDirectory() as tmp:
        vault = Vault.init(Path(tmp) / "vault")
        facts = synthetic_facts(size)
        started = time.perf_counter()
        for chunk in range(0, size, 20_000):
            vault.add_many(facts[chunk : chunk + 20_000])
        elapsed = time.perf_counter() - started
        print(f"bulk add (add_many)         {size / elapsed:10,.0f} facts/s   (target >= 5,000)")
        # The same facts as agents label them (a UUID session per 20 facts, everyday tags), into a
        # vault of their own: the credential check on labels must not make a labelled add slower.
        labelled = [{**fact, "session": str(uuid.UUID(int=n // 20 + 1)), "source": "my-agent/v2.3.1",
                     "tags": ["api", "keyboard"]} for n, fact in enumerate(facts[:min(size, 20_000)])]
        other = Vault.init(Path(tmp) / "labelled")
        started = time.perf_counter()
        other.add_many(labelled)
        rate = len(labelled) / (time.perf_counter() - started)
        print(f"  with labels (UUID session) {rate:10,.0f} facts/s   (x{rate * elapsed / size:.2f} of unlabelled)")

        memvault = [sys.executable, "-m", "memvault"]
        bare = median_runs([sys.executable, "-c", "pass"], 5)
        add = statistics.median(
            run([*memvault, "add", f"timing fact {n}", "--vault", str(vault.root)], env) for n in range(7))
        print(f"memvault add (process)      {add * 1000:10.0f} ms median  (bare python {bare * 1000:.0f} ms, "
              f"x{add / bare:.1f}; target <= 300 ms)")

        # Raw fastembed throughput on a sample of the same texts, with the settings memvault uses.
        from fastembed import TextEmbedding

        model = TextEmbedding(MODEL_NAME, specific_model_path=env["MEMVAULT_EMBED_MODEL_PATH"], local_files_only=True)
        sample = [f["text"] for f in facts[: options.raw_sample]]
        started = time.perf_counter()
        list(model.embed(sample, batch_size=256))
        raw = len(sample) / (time.perf_counter() - started)
        del model

        total = size + 7
        cold = run([*memvault, "reindex", "--clear", "--vault", str(vault.root)], env)
        print(f"reindex --clear, cold cache {total / cold:10,.0f} docs/s    ({cold:.1f} s; raw fastembed "
              f"{raw:,.0f} texts/s, ratio {total / cold / raw:.2f}; target >= 0.85)")
        warm = run([*memvault, "reindex", "--clear", "--vault", str(vault.root)], env)
        print(f"reindex --clear, warm cache {total / warm:10,.0f} docs/s    ({warm:.1f} s; target <= 20 s at 100k)")

        baseline_script = (
            "from fastembed import TextEmbedding as T; import os; "
            f"m = T({MODEL_NAME!r}, specific_model_path=os.environ['MEMVAULT_EMBED_MODEL_PATH'], "
            "local_files_only=True); list(m.query_embed(['what does Alice like to drink']))"
        )
        floor = median_runs([sys.executable, "-c", baseline_script], 5, env)
        searches = [run([*memvault, "search", QUERIES[n % len(QUERIES)], "--vault", str(vault.root)], env)
                    for n in range(5)]
        cold_search = statistics.median(searches)
        print(f"search, cold process        {cold_search * 1000:10.0f} ms median  (import+load+embed only "
              f"{floor * 1000:.0f} ms, x{cold_search / floor:.2f}; target <= 1500 ms)")

        vault.close()
        vault = Vault.open(vault.root)
        vault.search("warm up")
        timings = warm_search_timings(vault)
        import numpy as np

        from memvault.index.search import engine

        generation = engine(vault.storage).open()
        matrix = generation.vectors.matrix()
        query = np.ones(matrix.shape[1], dtype=np.float32)
        started = time.perf_counter()
        for _ in range(50):
            matrix @ query
        matvec = (time.perf_counter() - started) / 50
        p50, p95 = timings[len(timings) // 2], timings[int(len(timings) * 0.95)]
        print(f"search, warm in-process     {p50 * 1000:10.1f} ms p50, {p95 * 1000:.1f} ms p95  (bare matvec "
              f"{matvec * 1000:.1f} ms; target p50 <= 20 ms at 100k)")
        index_bytes = dir_size(vault.root / ".memvault" / "index")
        cache_bytes = dir_size(vault.root / ".memvault" / "cache")
        print(f"index size on disk          {index_bytes / 1e6:10.1f} MB"
              f"  (+ embedding cache {cache_bytes / 1e6:.1f} MB)")
        vault.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="Comma-separated vault sizes.")
    parser.add_argument("--raw-sample", type=int, default=5000, help="Texts for the raw fastembed baseline.")
    options = parser.parse_args()
    env = dict(os.environ)
    env.setdefault("MEMVAULT_EMBED_MODEL_PATH", str(DEFAULT_MODEL))
    os.environ.update({k: v for k, v in env.items() if k.startswith("MEMVAULT_")})
    for name, value in (("GIT_AUTHOR_NAME", "bench"), ("GIT_AUTHOR_EMAIL", "bench@example.test"),
                        ("GIT_COMMITTER_NAME", "bench"), ("GIT_COMMITTER_EMAIL", "bench@example.test")):
        env.setdefault(name, value)
        os.environ.setdefault(name, value)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{platform.system()} {platform.release()}")
    for size in (int(s) for s in options.sizes.split(",") if s.strip()):
        bench_size(size, options, env)
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"\npeak RSS: benchmark process {own:,.0f} MB, largest memvault process {children:,.0f} MB")


if __name__ == "__main__":
    main()
