"""Dream: cost of a batch without the model, and how long `add` waits while a dream runs.

A local scripted OpenAI-compatible server answers instantly (catch-up figure) or after a delay
(add-latency figure). Prints each figure and its ratio to a baseline measured in this run:
- catch-up: seconds per batch of 40 days x 10 facts, vs. adding those facts (one add_many);
- add during a dream: median/max `add` latency while the model is thinking and the batch is
  applied, vs. the same adds with no dream running. The dream must not make `add` wait for the
  model: the ratio should stay near 1.

Usage: python bench/dream.py [--days 40] [--per-day 10] [--adds 30] [--delay 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
DEFAULT_MODEL = ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2-onnx-int8"


def timed_adds(vault, n: int, label: str) -> list[float]:
    out = []
    for i in range(n):
        t = time.perf_counter()
        vault.add(f"{label} {i}")
        out.append(time.perf_counter() - t)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=40)
    parser.add_argument("--per-day", type=int, default=10)
    parser.add_argument("--adds", type=int, default=30)
    parser.add_argument("--delay", type=float, default=2.0)
    args = parser.parse_args()
    if DEFAULT_MODEL.is_dir():
        os.environ.setdefault("MEMVAULT_EMBED_MODEL_PATH", str(DEFAULT_MODEL))
    for key in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
        os.environ.setdefault(key, "bench")
    for key in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        os.environ.setdefault(key, "bench@example.test")

    from fake_llm import FakeLLM, consolidate_everything

    from memvault import Vault
    from memvault.dream.llm import LLMSettings, load_litellm

    load_litellm()
    vault = Vault.init(Path(tempfile.mkdtemp()) / "vault")
    start = date.today() - timedelta(days=args.days + 1)
    drafts = [{"text": f"day {d} note {i} about topic {i % 7}", "at": f"{start + timedelta(days=d)}T08:00:00"}
              for d in range(args.days) for i in range(args.per_day)]
    t = time.perf_counter()
    vault.add_many(drafts)
    add_many_s = time.perf_counter() - t
    vault.search("warm up the index", limit=1)

    answer = consolidate_everything("wiki/topics/journal.md", "Journal")
    with FakeLLM(default=answer) as fake:
        settings = LLMSettings(model="openai/bench", api_base=fake.api_base, api_key="sk-bench")
        t = time.perf_counter()
        report = vault.dream(llm=settings)
        dream_s = time.perf_counter() - t
    per_batch = dream_s / max(1, len(report.batches))
    print(f"catch-up: {len(report.batches)} batches, {len(drafts)} facts in {dream_s:.2f} s "
          f"({per_batch:.2f} s per batch without the model); add_many of the same facts {add_many_s:.2f} s "
          f"(ratio {dream_s / add_many_s:.1f}x)")

    baseline = timed_adds(vault, args.adds, "quiet")
    vault.add_many([{"text": f"new day note {i}", "at": f"{date.today() - timedelta(days=1)}T09:00:00"}
                    for i in range(args.per_day)])
    with FakeLLM(default=lambda body: {"delay": args.delay, "content": answer(body)}) as fake:
        # the dream runs as its own process, as cron runs it
        env = {**os.environ, "MEMVAULT_MODEL": "openai/bench", "MEMVAULT_API_BASE": fake.api_base,
               "OPENAI_API_KEY": "sk-bench"}
        dreaming = subprocess.Popen([sys.executable, "-m", "memvault", "dream", "--vault", str(vault.root)],
                                    env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while not fake.requests and dreaming.poll() is None:
            time.sleep(0.01)
        during = []
        while dreaming.poll() is None:
            during += timed_adds(vault, 1, "during")
        if dreaming.returncode != 0:
            raise SystemExit(f"dream failed with exit code {dreaming.returncode}")
    med_b, med_d = statistics.median(baseline), statistics.median(during)
    print(f"add while dreaming: {len(during)} adds, median {med_d * 1000:.0f} ms, max {max(during) * 1000:.0f} ms; "
          f"quiet median {med_b * 1000:.0f} ms, max {max(baseline) * 1000:.0f} ms "
          f"(median ratio {med_d / med_b:.2f}x, max ratio {max(during) / max(baseline):.2f}x)")


if __name__ == "__main__":
    main()
