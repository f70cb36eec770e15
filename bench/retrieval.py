"""Retrieval quality on LoCoMo: hit@1/5/10 for lexical-only, dense-only and hybrid search.

One vault per conversation, built twice: with the dialog turns as facts ("<speaker>: <text>",
at = the session's date and time, source = the turn's dia_id), and with the observation facts
(source = the dia_id(s) they were drawn from). Every QA question of categories 1-4 is asked; a hit
counts when one of its sources is among the question's evidence dia_ids.

Usage: python bench/retrieval.py [--data PATH] [--conversations N] [--rrf-k K] [--recency W] ...
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_DATA = ROOT.parent / "shared" / "eval" / "locomo-dev.json"
DEFAULT_MODEL = ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2-onnx-int8"
KS = (1, 5, 10)
MODES = ("lexical", "dense", "hybrid")


def session_time(text: str) -> datetime:
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")


def sessions(conversation: dict):
    for key, turns in conversation.items():
        match = re.fullmatch(r"session_(\d+)", key)
        if match and isinstance(turns, list):
            yield int(match.group(1)), session_time(conversation[f"{key}_date_time"]), turns


def turn_facts(sample: dict) -> list[dict]:
    facts = []
    for _n, at, turns in sorted(sessions(sample["conversation"]), key=lambda s: s[0]):
        for turn in turns:
            facts.append({"text": f"{turn['speaker']}: {turn['text']}", "at": at.isoformat(),
                          "source": turn["dia_id"]})
    return facts


def observation_facts(sample: dict) -> list[dict]:
    times = {n: at for n, at, _t in sessions(sample["conversation"])}
    facts = []
    for key, by_speaker in sample["observation"].items():
        number = int(re.search(r"session_(\d+)", key).group(1))
        for items in by_speaker.values():
            for text, evidence in items:
                source = ",".join(evidence) if isinstance(evidence, list) else str(evidence)
                facts.append({"text": text, "at": times[number].isoformat(), "source": source})
    return facts


def evidence_ids(values) -> set[str]:
    found = set()
    for value in values:
        found.update(part.strip() for part in re.split(r"[,;]", str(value)) if part.strip())
    return found


def run(args) -> dict:
    import json

    from memvault import SearchQuery, Vault
    from memvault.index.ranking import Weights
    from memvault.index.search import search

    weights = Weights(method=args.method, rrf_k=args.rrf_k, lexical=args.w_lexical, dense=args.w_dense,
                      recency=args.recency, importance=args.importance)
    data = json.loads(Path(args.data).read_text())[: args.conversations]
    totals = {unit: {mode: [0, 0, 0] for mode in MODES} for unit in ("turns", "observations")}
    questions = {"turns": 0, "observations": 0}
    with tempfile.TemporaryDirectory() as tmp:
        for number, sample in enumerate(data):
            for unit, facts in (("turns", turn_facts(sample)), ("observations", observation_facts(sample))):
                vault = Vault.init(Path(tmp) / f"{unit}-{number}")
                vault.add_many(facts)
                vault.reindex()
                for qa in sample["qa"]:
                    if qa.get("category") not in (1, 2, 3, 4):
                        continue
                    wanted = evidence_ids(qa.get("evidence", []))
                    questions[unit] += 1
                    for mode in MODES:
                        query = SearchQuery(qa["question"], limit=max(KS), include_all=True,
                                            lexical_only=mode == "lexical")
                        hits = search(vault.storage, query, weights=weights, dense_only=mode == "dense")
                        ranks = [i for i, h in enumerate(hits) if evidence_ids([h.source or ""]) & wanted]
                        for j, k in enumerate(KS):
                            if ranks and ranks[0] < k:
                                totals[unit][mode][j] += 1
                vault.close()
    return {"totals": totals, "questions": questions}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--conversations", type=int, default=5)
    parser.add_argument("--method", choices=("blend", "rrf"), default="blend")
    parser.add_argument("--rrf-k", type=float, default=60.0)
    parser.add_argument("--w-lexical", type=float, default=1.0)
    parser.add_argument("--w-dense", type=float, default=1.0)
    parser.add_argument("--recency", type=float, default=0.05)
    parser.add_argument("--importance", type=float, default=0.02)
    args = parser.parse_args()
    os.environ.setdefault("MEMVAULT_EMBED_MODEL_PATH", str(DEFAULT_MODEL))
    for name, value in (("GIT_AUTHOR_NAME", "bench"), ("GIT_AUTHOR_EMAIL", "bench@example.test"),
                        ("GIT_COMMITTER_NAME", "bench"), ("GIT_COMMITTER_EMAIL", "bench@example.test")):
        os.environ.setdefault(name, value)

    started = time.perf_counter()
    result = run(args)
    print(f"LoCoMo retrieval, categories 1-4, {args.conversations} conversations "
          f"(method={args.method}, rrf_k={args.rrf_k:g}, w_lexical={args.w_lexical:g}, w_dense={args.w_dense:g}, "
          f"recency={args.recency:g}, importance={args.importance:g})")
    print(f"{'unit':<13} {'mode':<8} " + " ".join(f"hit@{k:<3}" for k in KS))
    for unit, modes in result["totals"].items():
        n = result["questions"][unit]
        for mode, counts in modes.items():
            print(f"{unit:<13} {mode:<8} " + " ".join(f"{c / n:7.3f}" for c in counts))
        best = [max(modes["lexical"][j], modes["dense"][j]) for j in range(len(KS))]
        ok = all(modes["hybrid"][j] >= best[j] for j in (1, 2))
        print(f"{unit:<13} {'target':<8} hybrid >= max(lexical, dense) at k=5 and k=10: {'met' if ok else 'NOT met'}"
              f"  ({n} questions)")
    print(f"({time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
