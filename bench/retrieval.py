"""Retrieval quality on LoCoMo: hit@1/5/10 for lexical-only, dense-only and hybrid search.

One vault per conversation, built twice: with the dialog turns as facts ("<speaker>: <text>",
at = the session's date and time, source = the turn's dia_id), and with the observation facts
(source = the dia_id(s) they were drawn from). Each fact carries its session (`session_N`), as an
agent passes its conversation id. Every QA question of categories 1-4 is asked with the default
settings (relevance floor included); a hit counts when one of its sources is among the question's
evidence dia_ids.

Also printed: MRR@10, the issue's targets, the share of hybrid evidence hits (found in the top 10
with no floor) that the default floor keeps, and how many off-topic or nonsense queries still get
any hit. The reranker (ms-marco-MiniLM-L-12-v2 beside the checkout, else MEMVAULT_RERANK_MODEL_PATH)
takes part as in a default search; --no-rerank measures without it.

Usage: python bench/retrieval.py [--data PATH] [--conversations N] [--modes hybrid] [--no-rerank]
       [--rerank-candidates N] [--rerank-share W] [--no-sessions] [--recency W] ...
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
DEFAULT_RERANK_MODEL = ROOT.parent / "shared" / "models" / "ms-marco-MiniLM-L-12-v2-onnx-int8"
KS = (1, 5, 10)
TARGETS = {"turns": (0.50, 0.85), "observations": (0.55, 0.78)}  # hybrid hit@1, hit@10 (default settings)
MODES = ("lexical", "dense", "hybrid")
# Queries no LoCoMo conversation is about, and strings that mean nothing.
OFF_TOPIC = (
    "quantum chromodynamics", "xkqzv wprlt mnbvc", "asdfgh jkl qwerty", "zzzqqq nothing",
    "lorem ipsum dolor sit amet", "stock price of nvidia", "kernel panic in linux 6.2",
    "the boiling point of liquid nitrogen", "how to compile rust on windows", "SQL join syntax",
    "differential equations homework", "blockchain consensus algorithms", "tax deductions for small businesses",
    "photosynthesis in chloroplasts", "torque specification for cylinder head bolts",
)


def session_time(text: str) -> datetime:
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")


def sessions(conversation: dict):
    for key, turns in conversation.items():
        match = re.fullmatch(r"session_(\d+)", key)
        if match and isinstance(turns, list):
            yield int(match.group(1)), session_time(conversation[f"{key}_date_time"]), turns


def turn_facts(sample: dict) -> list[dict]:
    facts = []
    for n, at, turns in sorted(sessions(sample["conversation"]), key=lambda s: s[0]):
        for turn in turns:
            facts.append({"text": f"{turn['speaker']}: {turn['text']}", "at": at.isoformat(),
                          "source": turn["dia_id"], "session": f"session_{n}"})
    return facts


def observation_facts(sample: dict) -> list[dict]:
    times = {n: at for n, at, _t in sessions(sample["conversation"])}
    facts = []
    for key, by_speaker in sample["observation"].items():
        number = int(re.search(r"session_(\d+)", key).group(1))
        for items in by_speaker.values():
            for text, evidence in items:
                source = ",".join(evidence) if isinstance(evidence, list) else str(evidence)
                facts.append({"text": text, "at": times[number].isoformat(), "source": source,
                              "session": f"session_{number}"})
    return facts


def evidence_ids(values) -> set[str]:
    found = set()
    for value in values:
        found.update(part.strip() for part in re.split(r"[,;]", str(value)) if part.strip())
    return found


def paired(hits: list, following: dict[str, dict]) -> list:
    """The other way to put answers over questions (not memvault's): each question among the hits
    followed at once by its reply, the next fact of its thread, moved up or brought in."""
    from types import SimpleNamespace

    listed: list = []
    for hit in hits:
        if any(h.source == hit.source for h in listed):
            continue  # already brought in as a reply
        listed.append(hit)
        reply = following.get(hit.source or "")
        if reply and hit.text.rstrip().endswith("?") and not any(h.source == reply["source"] for h in listed):
            listed.append(SimpleNamespace(text=reply["text"], source=reply["source"], score=hit.score))
    return listed


def run(args) -> dict:
    import json

    from memvault import SearchQuery, Vault
    from memvault.index.ranking import MIN_SCORE, Weights, for_model
    from memvault.index.search import search

    weights = Weights(lexical=args.w_lexical, dense=args.w_dense, context=args.context,
                      thread=args.thread, day=args.day, month=args.month, recency=args.recency,
                      importance=args.importance, newest=not args.no_newest, rerank=args.rerank_share,
                      replies=not args.replies_alone)
    if args.noise is not None:  # the model's cosines read from another noise level
        weights = for_model(weights, args.noise)
    data = json.loads(Path(args.data).read_text())[: args.conversations]
    units = ("turns", "observations")
    totals = {unit: {mode: [0, 0, 0, 0.0] for mode in args.modes} for unit in units}  # hit@1/5/10, MRR@10
    questions = dict.fromkeys(units, 0)
    floor = {unit: [0, 0] for unit in units}  # [evidence hits found with no floor, kept by the floor]
    scores = {unit: [] for unit in units}     # the score of each first evidence hit (no floor)
    off_topic = {unit: [0, 0.0] for unit in units}  # [queries answered with any hit, best score seen]
    with tempfile.TemporaryDirectory() as tmp:
        for number, sample in enumerate(data):
            for unit, facts in (("turns", turn_facts(sample)), ("observations", observation_facts(sample))):
                if args.no_sessions:
                    facts = [{k: v for k, v in f.items() if k != "session"} for f in facts]
                vault = Vault.init(Path(tmp) / f"{unit}-{number}")
                if args.rerank_candidates:
                    settings = vault.root / "memvault.toml"
                    text = re.sub(r"(?m)^candidates = \d+", f"candidates = {args.rerank_candidates}",
                                  settings.read_text(encoding="utf-8"))
                    settings.write_text(text, encoding="utf-8")
                    vault = Vault.open(vault.root)
                vault.add_many(facts)
                following = {f["source"]: g for f, g in zip(facts, facts[1:], strict=False)
                             if f.get("session") and f.get("session") == g.get("session")}
                vault.reindex()
                for qa in sample["qa"]:
                    if qa.get("category") not in (1, 2, 3, 4):
                        continue
                    wanted = evidence_ids(qa.get("evidence", []))
                    questions[unit] += 1
                    least = MIN_SCORE if args.min_score is None else args.min_score
                    for mode in args.modes:
                        # Asked once with no floor: the floor cuts a prefix of the ranked hits, so the
                        # floored hits are those scoring at least the floor (hybrid's also tell how
                        # many evidence hits the floor keeps).
                        query = SearchQuery(qa["question"], limit=max(KS), include_all=True, min_score=0,
                                            lexical_only=mode == "lexical", rerank=not args.no_rerank)
                        unfloored = search(vault.storage, query, weights=weights, dense_only=mode == "dense")
                        hits = [h for h in unfloored if h.score >= least]
                        if args.pairs:
                            hits = paired(hits, following)
                        ranks = [i for i, h in enumerate(hits) if evidence_ids([h.source or ""]) & wanted]
                        for j, k in enumerate(KS):
                            if ranks and ranks[0] < k:
                                totals[unit][mode][j] += 1
                        if ranks:
                            totals[unit][mode][3] += 1 / (ranks[0] + 1)
                        found = [h for h in unfloored if evidence_ids([h.source or ""]) & wanted]
                        if mode == "hybrid" and found:
                            floor[unit][0] += 1
                            floor[unit][1] += found[0].score >= least
                            scores[unit].append(found[0].score)
                for text in OFF_TOPIC:
                    best = search(vault.storage, SearchQuery(text, include_all=True, min_score=0,
                                                             rerank=not args.no_rerank), weights=weights)
                    off_topic[unit][0] += any(h.score >= least for h in best)
                    off_topic[unit][1] = max([off_topic[unit][1]] + [h.score for h in best])
                vault.close()
    return {"totals": totals, "questions": questions, "floor": floor, "scores": scores, "off_topic": off_topic,
            "off_topic_asked": len(OFF_TOPIC) * len(data)}


def main() -> None:
    from memvault.index.ranking import Weights

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--conversations", type=int, default=5)
    parser.add_argument("--no-sessions", action="store_true", help="Add the facts without their session.")
    parser.add_argument("--min-score", type=float, default=None, help="Relevance floor (default: memvault's).")
    defaults = Weights()
    for name in ("w_lexical", "w_dense", "noise", "context", "thread", "day", "month", "recency", "importance"):
        field = {"w_lexical": "lexical", "w_dense": "dense"}.get(name, name)
        parser.add_argument("--" + name.replace("_", "-"), type=float, default=getattr(defaults, field))
    parser.add_argument("--no-newest", action="store_true", help="Questions about now keep the plain order.")
    parser.add_argument("--no-rerank", action="store_true", help="Rank without the reranker.")
    parser.add_argument("--modes", default=",".join(MODES), type=lambda text: text.split(","),
                        help="Which of lexical,dense,hybrid to measure (hybrid always included).")
    parser.add_argument("--rerank-share", type=float, default=defaults.rerank)
    parser.add_argument("--replies-alone", action="store_true",
                        help="The reranker reads a reply without the question it follows.")
    parser.add_argument("--pairs", action="store_true",
                        help="List each question hit's reply right after it (measured against reading it after).")
    parser.add_argument("--rerank-candidates", type=int, default=None,
                        help="[rerank] candidates (default: memvault's).")
    args = parser.parse_args()
    args.modes = [mode for mode in MODES if mode in args.modes or mode == "hybrid"]
    os.environ.setdefault("MEMVAULT_EMBED_MODEL_PATH", str(DEFAULT_MODEL))
    if DEFAULT_RERANK_MODEL.is_dir():
        os.environ.setdefault("MEMVAULT_RERANK_MODEL_PATH", str(DEFAULT_RERANK_MODEL))
    for name, value in (("GIT_AUTHOR_NAME", "bench"), ("GIT_AUTHOR_EMAIL", "bench@example.test"),
                        ("GIT_COMMITTER_NAME", "bench"), ("GIT_COMMITTER_EMAIL", "bench@example.test")):
        os.environ.setdefault(name, value)

    started = time.perf_counter()
    result = run(args)
    settings = ", ".join(f"{k}={v}" for k, v in sorted(vars(args).items()) if k not in ("data", "conversations"))
    print(f"LoCoMo retrieval, categories 1-4, {args.conversations} conversations ({settings})")
    print(f"{'unit':<13} {'mode':<8} " + " ".join(f"hit@{k:<3}" for k in KS) + "  MRR@10")
    for unit, modes in result["totals"].items():
        n = result["questions"][unit]
        for mode, counts in modes.items():
            print(f"{unit:<13} {mode:<8} " + " ".join(f"{c / n:7.3f}" for c in counts))
        hit1, hit10 = modes["hybrid"][0] / n, modes["hybrid"][2] / n
        low1, low10 = TARGETS[unit]
        print(f"{unit:<13} {'target':<8} hybrid hit@1 >= {low1} and hit@10 >= {low10}: "
              f"{'met' if hit1 >= low1 and hit10 >= low10 else 'NOT met'}")
        if len(modes) == len(MODES):
            best = [max(modes["lexical"][j], modes["dense"][j]) for j in range(len(KS))]
            ok = all(modes["hybrid"][j] >= best[j] for j in (1, 2))
            print(f"{unit:<13} {'target':<8} hybrid >= max(lexical, dense) at k=5 and k=10: "
                  f"{'met' if ok else 'NOT met'}")
        print(f"{unit:<13} ({n} questions)")
    for unit in result["floor"]:
        found, kept = result["floor"][unit]
        answered, best = result["off_topic"][unit]
        low = sorted(result["scores"][unit])
        quantiles = " ".join(f"{q}%={low[int(len(low) * q / 100)]:.3f}" for q in (1, 3, 5, 10)) if low else "-"
        print(f"{unit:<13} floor    keeps {kept}/{found} evidence hits ({kept / max(found, 1):.3f}; first-hit score "
              f"{quantiles}); off-topic queries with a hit: {answered}/{result['off_topic_asked']} "
              f"(best score with no floor {best:.3f})")
    print(f"({time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
