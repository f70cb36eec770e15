"""Dream: prompt size against the model's window, tokens per fact, and cost of a run without the model.

A local scripted OpenAI-compatible server (tests/support/fake_llm.py) stands in for the model. It counts
tokens with its own tokenizer (cl100k_base x1.15 plus ChatML framing), refuses like a real server
what exceeds its window, and answers instantly (or after a delay, for the latency figure).

- tokens: tokens per fact of the facts block on LoCoMo conversation 0 (facts.jsonl), the earlier
  prompt format (pretty-printed JSON, full ids, every field) against the compact one with short
  handles; and the tokens an answer spends naming a fact (a disposition plus a citation).
- backlog: for backlogs of 10, 100, 1,000 and 10,000 facts, the prompt tokens of every request
  against the window (the maximum must stay <= window - reserved answer), refusals, requests per
  fact, and seconds per batch without the model. A run stops after --max-batches batches (a
  10,000-fact backlog at 8,192 tokens is about 1,000 batches); figures are then over the facts
  consolidated so far.
- latency: median/max `add` latency while a dream waits on the model and applies its batch, against
  the same adds with no dream running (the ratio should stay near 1).

Usage: python bench/dream.py [--parts tokens,backlog,latency] [--backlogs 10,100,1000,10000]
                             [--window 8192] [--max-batches 150] [--adds 30] [--delay 2]
"""

from __future__ import annotations

import argparse
import json
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
FACTS = ROOT / "tests" / "data" / "llm-transcripts" / "qwen2.5-coder-1.5b-q4km" / "facts.jsonl"
TOPICS = 40  # pages the backlog's facts spread over (one per tag), so none outgrows its size limit


def timed_adds(vault, n: int, label: str) -> list[float]:
    out = []
    for i in range(n):
        t = time.perf_counter()
        vault.add(f"{label} {i}")
        out.append(time.perf_counter() - t)
    return out


def locomo() -> list[dict]:
    return [json.loads(line) for line in FACTS.read_text(encoding="utf-8").splitlines()]


def tokens_per_fact() -> None:
    """The facts block before and after, on the same vault's facts."""
    from memvault.base import tokens
    from memvault.dream.budget import compact
    from memvault.dream.prompt import Handles, fact_record
    from memvault.vault import Vault

    vault = Vault.init(Path(tempfile.mkdtemp()) / "vault")
    facts = vault.add_many(locomo())
    before = [{"id": f.id, "time": f.at.isoformat(timespec="seconds"), "category": f.category,
               "tags": list(f.tags), "source": f.source, "text": f.text, "late": False} for f in facts]
    old = tokens.count(json.dumps(before, ensure_ascii=False, indent=1))
    handles = Handles(f.id for f in facts)
    full_ids = "\n".join(compact(fact_record(f, f.id)) for f in facts)
    new = tokens.count("\n".join(compact(fact_record(f, handles.short[f.id])) for f in facts))
    n = len(facts)
    print(f"facts block ({n} LoCoMo facts, cl100k_base): before {old / n:.1f} tokens/fact (pretty JSON, full ids), "
          f"compact with full ids {tokens.count(full_ids) / n:.1f}, compact with handles {new / n:.1f} "
          f"(ratio {new / old:.2f}x)")
    page = "wiki/people/caroline.md"
    named = [(f.id, handles.short[f.id]) for f in facts]
    answer_old = sum(tokens.count(compact({"id": i, "disposition": "consolidated", "page": page}) + f" [^{i}]")
                     for i, _ in named)
    answer_new = sum(tokens.count(compact({"id": h, "disposition": "consolidated", "page": page}) + f" [^{h}]")
                     for _, h in named)
    print(f"naming a fact in an answer (disposition + citation): full id {answer_old / n:.1f} tokens, "
          f"handle {answer_new / n:.1f} (ratio {answer_new / answer_old:.2f}x)")


def backlog(sizes: list[int], window: int, max_batches: int) -> None:
    from support.fake_llm import FakeLLM, consolidate_by_tag

    from memvault.dream.budget import Budget, prompt_tokens
    from memvault.dream.llm import LLMSettings, model_limits
    from memvault.vault import Vault

    texts = locomo()
    settings_for = lambda fake: LLMSettings(model="openai/bench", api_base=fake.api_base, api_key="sk-bench",  # noqa: E731
                                            backoff=0.01, context_window=window)
    budget = Budget(model_limits(LLMSettings(model="openai/bench", context_window=window)))
    reserved = window - budget.max_output
    print(f"window {window} tokens, answers up to {budget.max_output} (sent as max_tokens): a prompt must stay "
          f"<= {reserved}; memvault plans first requests <= {budget.prompt_limit} of its own count")
    for n in sizes:
        vault = Vault.init(Path(tempfile.mkdtemp()) / "vault")
        days = max(1, n // 10)
        start = date.today() - timedelta(days=days + 1)
        drafts = [{"text": texts[i % len(texts)]["text"], "tags": [f"topic{i % TOPICS}"],
                   "at": f"{start + timedelta(days=i * days // n)}T09:00:00"} for i in range(n)]
        vault.add_many(drafts)
        vault.search("warm up the index", limit=1)
        with FakeLLM(default=consolidate_by_tag(), window=window, ratio=1.15) as fake:
            t = time.perf_counter()
            report = vault.dream(llm=settings_for(fake), max_batches=max_batches)
            seconds = time.perf_counter() - t
        ours = [prompt_tokens(body["messages"]) for body in fake.requests]
        firsts = [t for t, body in zip(ours, fake.requests, strict=True) if len(body["messages"]) == 2]
        theirs = [fake.prompt_tokens(body) for body in fake.requests]
        batches = [b for b in report.batches if b.outcome == "ok"]
        done = sum(b.facts for b in batches)
        print(f"{n:>6} facts: {len(fake.requests)} requests for {done} facts consolidated "
              f"({len(fake.requests) / max(1, done):.3f} per fact), {len(batches)} batches ok, "
              f"caught up {report.caught_up}, refused {len(fake.refused)}; "
              f"prompt tokens (server's count) median {statistics.median(theirs):.0f}, max {max(theirs)} "
              f"= {max(theirs) / reserved:.2f} of {reserved}; memvault's count: first requests max {max(firsts)} "
              f"(limit {budget.prompt_limit}), repair turns included max {max(ours)}; "
              f"{seconds / max(1, len(fake.requests)):.2f} s per request without the model")


def latency(adds: int, delay: float) -> None:
    from support.fake_llm import FakeLLM, consolidate_everything

    from memvault import Vault

    vault = Vault.init(Path(tempfile.mkdtemp()) / "vault")
    answer = consolidate_everything("wiki/topics/journal.md", "Journal")
    baseline = timed_adds(vault, adds, "quiet")
    vault.add_many([{"text": f"new day note {i}", "at": f"{date.today() - timedelta(days=1)}T09:00:00"}
                    for i in range(10)])
    with FakeLLM(default=lambda body: {"delay": delay, "content": answer(body)}) as fake:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="tokens,backlog,latency")
    parser.add_argument("--backlogs", default="10,100,1000,10000")
    parser.add_argument("--window", type=int, default=8192)
    parser.add_argument("--max-batches", type=int, default=150)
    parser.add_argument("--adds", type=int, default=30)
    parser.add_argument("--delay", type=float, default=2.0)
    args = parser.parse_args()
    if DEFAULT_MODEL.is_dir():
        os.environ.setdefault("MEMVAULT_EMBED_MODEL_PATH", str(DEFAULT_MODEL))
    for key in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
        os.environ.setdefault(key, "bench")
    for key in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        os.environ.setdefault(key, "bench@example.test")
    from memvault.dream.llm import load_litellm

    load_litellm()
    parts = args.parts.split(",")
    if "tokens" in parts:
        tokens_per_fact()
    if "backlog" in parts:
        backlog([int(n) for n in args.backlogs.split(",")], args.window, args.max_batches)
    if "latency" in parts:
        latency(args.adds, args.delay)


if __name__ == "__main__":
    main()
