"""The dense half's coarse first pass against the full matrix-vector product, on the same vectors.

Opens (or builds, with --keep reusing it) a vault of synthetic facts, then for each query: the
exact top 50 by scoring every row, and the top 50 of the coarse pass (a 128-dimension
projection, then the 1,000-row shortlist scored exactly) that a warm process uses. Prints p50 of
both, their ratio, the one-time cost of the projection, and recall@50: the share of the exact
top 50 the coarse pass also returns (a tie at the 50th cosine counts as found), mean and worst.
Queries: the LoCoMo dev questions (not about these facts: a hard case) and bench/speed.py's.
Then recall@10 on real text: the LoCoMo dev turns and observations, shortlisting the same 1%.

Usage: python bench/coarse.py [--size 100000] [--keep DIR] [--queries 500]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.append(str(Path(__file__).resolve().parent))

from speed import DEFAULT_MODEL, QUERIES, synthetic_facts  # noqa: E402

LOCOMO = ROOT.parent / "shared" / "eval" / "locomo-dev.json"
TOP = 50


def vault_at(path: Path, size: int):
    from memvault import Vault

    if (path / "memvault.toml").is_file():
        return Vault.open(path)
    vault = Vault.init(path)
    facts = synthetic_facts(size)
    for chunk in range(0, size, 20_000):
        vault.add_many(facts[chunk : chunk + 20_000])
    vault.reindex()
    return vault


def questions(count: int) -> list[str]:
    found = list(QUERIES)
    if LOCOMO.is_file():
        for sample in json.loads(LOCOMO.read_text()):
            found += [qa["question"] for qa in sample["qa"]]
    return found[:count]


def main() -> None:
    from memvault.index.search import engine
    from memvault.index.vectors import Coarse, VectorFile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--keep", type=Path, help="Build the vault in this directory and reuse it.")
    parser.add_argument("--queries", type=int, default=500)
    options = parser.parse_args()
    os.environ.setdefault("MEMVAULT_EMBED_MODEL_PATH", str(DEFAULT_MODEL))

    with tempfile.TemporaryDirectory() as tmp:
        path = (options.keep or Path(tmp)) / f"vault-{options.size}"
        vault = vault_at(path, options.size)
        vault.search("warm up")
        index = engine(vault.storage)
        vectors: VectorFile = index.open().vectors
        matrix = vectors.matrix()
        texts = questions(options.queries)
        queries = [index.query_embedder.embed_query(text) for text in texts]
        print(f"{len(matrix):,} rows x {matrix.shape[1]}, {len(queries)} queries")

        started = time.perf_counter()
        coarse = Coarse(matrix)
        print(f"projection, once per process  {(time.perf_counter() - started) * 1000:8.0f} ms "
              f"({coarse.nbytes / 2**20:.0f} MiB in memory)")

        exact = VectorFile(vectors.path, vectors.rows, vectors.crc)
        exact.matrix()
        exact._coarse_pass = lambda _matrix: None  # every row, every time: the truth
        warm = VectorFile(vectors.path, vectors.rows, vectors.crc)
        warm.matrix()
        warm._coarse = coarse  # as after a process's second search
        timings: dict[str, list[float]] = {"exact": [], "coarse": []}
        recalls = []
        for query in queries:
            found = {}
            for name, source in (("exact", exact), ("coarse", warm)):
                started = time.perf_counter()
                found[name] = source.top(query, TOP)
                timings[name].append(time.perf_counter() - started)
            cut = found["exact"][-1][1] - 1e-6
            truth = {slot for slot, _ in found["exact"]}
            recalls.append(sum(1 for slot, cosine in found["coarse"] if slot in truth or cosine >= cut) / TOP)
        p50 = {name: statistics.median(t) * 1000 for name, t in timings.items()}
        print(f"top {TOP}, every row exactly       {p50['exact']:8.2f} ms p50")
        print(f"top {TOP}, coarse pass + shortlist {p50['coarse']:8.2f} ms p50  (x{p50['exact'] / p50['coarse']:.1f})")
        print(f"recall@{TOP}                       {statistics.mean(recalls):8.4f} mean, {min(recalls):.2f} worst, "
              f"{sum(r == 1 for r in recalls)} of {len(recalls)} queries complete")
        if LOCOMO.is_file():
            real_text(index.embedder, index.query_embedder, texts)
        vault.close()


def real_text(embedder, query_embedder, texts: list[str]) -> None:
    """Recall on real text, whose vectors spread over more directions than synthetic facts do:
    the LoCoMo dev turns and observations, with a shortlist of the same share of rows (1%)."""
    import numpy as np
    from retrieval import observation_facts, turn_facts

    from memvault.index.vectors import Coarse

    corpus = []
    for sample in json.loads(LOCOMO.read_text()):
        corpus += [f["text"] for f in turn_facts(sample) + observation_facts(sample)]
    matrix = embedder.embed(corpus)
    coarse = Coarse(matrix)
    shortlist = max(TOP, len(matrix) // 100)
    recalls = []
    for text in texts:
        query = query_embedder.embed_query(text)
        exact = matrix @ query
        cut = exact[np.argsort(-exact)[:10]][-1] - 1e-6
        picked = np.argpartition(-coarse.scores(matrix, query), shortlist - 1)[:shortlist]
        found = picked[np.argsort(-exact[picked])][:10]
        recalls.append(sum(1 for row in found if exact[row] >= cut) / 10)
    print(f"real text: {len(matrix):,} LoCoMo texts, shortlist {shortlist}: recall@10 {statistics.mean(recalls):.4f} "
          f"mean, {min(recalls):.1f} worst, {sum(r == 1 for r in recalls)} of {len(recalls)} queries complete")


if __name__ == "__main__":
    main()
