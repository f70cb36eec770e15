"""Dream's statement check: where the meaning threshold lies, and what each check catches.

Pairs of (statement, fact), true and false:
- LoCoMo (../shared/eval/locomo-dev.json, conversations 0-4): true = an observation and the dialog
  turn it was written from (the same event in other words, first person against third); false =
  the observation and the dialog turn of another observation of the same speaker, and the
  observation and another observation of the same speaker ("about something else, same person").
- live answers (tests/data/llm-transcripts/*/NNN.json, notes mode): true = each filed statement
  and its fact; false = the statement and another fact of the batch about the same person.

Speakers' names are masked on both sides, as memvault.dream.check masks known people's (who a
statement is about is the person check's to judge). For each embedding model given, and for the
lexical fallback, it prints the score distribution
of true and false pairs (percentiles), and for candidate thresholds the share of true pairs kept
and false pairs caught. memvault.dream.check.THRESHOLDS takes the threshold that keeps 99% of the
true pairs (a wrong statement the meaning check lets through can still fail on its specifics; a
true one it refuses costs a repair turn or a fact left raw).

Usage: python bench/dream_check.py [--models all-MiniLM-L6-v2-onnx-int8,all-MiniLM-L6-v2-onnx]
(folders of ../shared/models; bge-small-en-v1.5 there has no model.onnx memvault can load)
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared"
LOCOMO = SHARED / "eval" / "locomo-dev.json"
TRANSCRIPTS = ROOT / "tests" / "data" / "llm-transcripts"
NAMES = {"all-MiniLM-L6-v2-onnx-int8": "sentence-transformers/all-MiniLM-L6-v2",
         "all-MiniLM-L6-v2-onnx": "sentence-transformers/all-MiniLM-L6-v2",
         "bge-small-en-v1.5-onnx-int8": "BAAI/bge-small-en-v1.5"}


def locomo_pairs(seed: int = 7) -> tuple[list[tuple[str, str]], list[tuple[str, str]], list[tuple[str, str]]]:
    """(true, false: other turn, false: other observation) pairs of LoCoMo conversations 0-4."""
    rng = random.Random(seed)
    true, other_turn, other_fact = [], [], []
    for conversation in json.loads(LOCOMO.read_text(encoding="utf-8")):
        turns = {t["dia_id"]: t["text"] for key, session in conversation["conversation"].items()
                 if isinstance(session, list) for t in session}
        by_speaker: dict[str, list[tuple[str, str]]] = {}
        for session in conversation["observation"].values():
            for speaker, items in session.items():
                for text, evidence in items:
                    ids = evidence if isinstance(evidence, list) else [evidence]
                    turn = " ".join(turns[i] for i in ids if i in turns)
                    if turn:
                        by_speaker.setdefault(speaker, []).append((text, turn))
        for items in by_speaker.values():
            for n, (text, turn) in enumerate(items):
                true.append((text, turn))
                other = items[rng.choice([i for i in range(len(items)) if i != n])]
                other_turn.append((text, other[1]))
                other_fact.append((text, other[0]))
    return true, other_turn, other_fact


def live_pairs() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(statement, its fact) and (statement, another fact of the same person) from recorded notes answers."""
    true, false = [], []
    for path in sorted(TRANSCRIPTS.glob("*/[0-9][0-9][0-9].json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        request, response = record.get("request") or {}, record.get("response") or {}
        try:
            answer = json.loads(response["choices"][0]["message"]["content"])
            text = request["messages"][1]["content"]
            data = json.loads(text[text.index("<data>\n") + 7:text.index("\n</data>")])
        except (KeyError, IndexError, ValueError, TypeError):
            continue
        if not isinstance(answer, dict) or not isinstance(answer.get("facts"), list):
            continue
        facts = {f["id"]: f for f in data.get("facts", []) if isinstance(f, dict) and "id" in f}
        for item in answer["facts"]:
            if not isinstance(item, dict) or item.get("do") != "file" or item.get("id") not in facts:
                continue
            statement, fact = item.get("statement") or "", facts[item["id"]]
            if not statement:
                continue
            true.append((statement, fact["text"]))
            person = set(fact.get("tags") or [])
            for other in facts.values():
                if other is not fact and person & set(other.get("tags") or []):
                    false.append((statement, other["text"]))
    return true, false


def paraphrase_pairs() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(paraphrase, its fact) and (paraphrase, another fact of the same person and day): the live
    model asked to restate each of conversation 0's facts in other words (paraphrases.jsonl)."""
    rows = [json.loads(line) for path in sorted(TRANSCRIPTS.glob("*/paraphrases.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines()]
    true, false = [], []
    for row in rows:
        true.append((row["statement"], row["fact"]))
        for other in rows:
            if other is not row and other["at"][:10] == row["at"][:10] and set(other["tags"]) & set(row["tags"]):
                false.append((row["statement"], other["fact"]))
    return true, false


def swaps(score, rows_true: list[tuple[str, str]], facts_by_day: dict[str, list[str]], margins) -> str:
    """Share of true statements another fact of their day beats by each margin (a refused true statement)."""
    out = []
    for margin in margins:
        beaten = 0
        for statement, fact in rows_true:
            own = score(statement, fact)
            day = next((d for d, texts in facts_by_day.items() if fact in texts), None)
            if any(score(statement, other) > own + margin for other in facts_by_day.get(day, []) if other != fact):
                beaten += 1
        out.append(f"margin {margin:.2f}: {beaten}/{len(rows_true)}")
    return "; ".join(out)


def percentiles(values: list[float]) -> str:
    if not values:
        return "(none)"
    s = sorted(values)
    pick = [s[min(len(s) - 1, int(q * len(s)))] for q in (0.01, 0.05, 0.25, 0.5, 0.75, 0.95)]
    return " ".join(f"{v:.2f}" for v in pick)


def report(name: str, score, sets: dict[str, list[tuple[str, str]]], true_keys: tuple[str, ...],
           used: float) -> None:
    """Score distributions, and what candidate thresholds (`used`: memvault's) keep and catch."""
    scores = {key: [score(s, f) for s, f in pairs] for key, pairs in sets.items()}
    print(f"\n## {name}\n")
    print("| pairs | n | p1 p5 p25 p50 p75 p95 |")
    print("|---|---|---|")
    for key, values in scores.items():
        print(f"| {key} | {len(values)} | {percentiles(values)} |")
    trues = [v for k in true_keys for v in scores[k]]
    if not trues:
        return
    keep99 = sorted(trues)[int(0.01 * len(trues))]
    print(f"\nthreshold keeping 99% of true pairs ({', '.join(true_keys)}): {keep99:.2f}")
    print("\n| threshold | " + " | ".join(f"{k} passing" for k in scores) + " |")
    print("|---|" + "---|" * len(scores))
    for t in sorted({round(keep99, 2), 0.2, 0.3, 0.4, 0.5, 0.6, used}):
        row = [f"{sum(v >= t for v in vals) / max(1, len(vals)):.3f}" for vals in scores.values()]
        print(f"| {t:.2f}{' (memvault)' if t == used else ''} | " + " | ".join(row) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="all-MiniLM-L6-v2-onnx-int8,all-MiniLM-L6-v2-onnx")
    args = parser.parse_args()
    from memvault.dream.check import LEXICAL_THRESHOLD, THRESHOLDS, lexical_score, mask
    from memvault.dream.words import fold
    from memvault.index.embedder import Embedder, ModelSpec

    people = {fold(c["conversation"][k]) for c in json.loads(LOCOMO.read_text(encoding="utf-8"))
              for k in ("speaker_a", "speaker_b")}

    true, other_turn, other_fact = locomo_pairs()
    live_true, live_false = live_pairs()
    para_true, para_false = paraphrase_pairs()
    sets = {"locomo true (obs, its turn)": true, "locomo false (obs, other turn)": other_turn,
            "locomo false (obs, other obs)": other_fact, "live true (statement, its fact)": live_true,
            "live false (statement, other fact)": live_false, "paraphrase true (restated, its fact)": para_true,
            "paraphrase false (restated, other fact)": para_false}
    keys = ("live true (statement, its fact)", "paraphrase true (restated, its fact)")
    rows = [json.loads(line) for path in sorted(TRANSCRIPTS.glob("*/paraphrases.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines()]
    by_day: dict[str, list[str]] = {}
    for row in rows:
        by_day.setdefault(row["at"][:10], []).append(row["fact"])

    sets = {k: [(mask(a, people), mask(b, people)) for a, b in pairs] for k, pairs in sets.items()}
    para_true = sets["paraphrase true (restated, its fact)"]
    by_day = {d: [mask(t, people) for t in texts] for d, texts in by_day.items()}

    def lexical(s, f):
        return lexical_score(s, [f])

    report("lexical fallback (share of the statement's content words in the fact)", lexical, sets, keys,
           LEXICAL_THRESHOLD)
    print("\nswap check, true paraphrases refused:", swaps(lexical, para_true, by_day, (0.15, 0.25, 0.35)))
    for folder in [m for m in args.models.split(",") if m]:
        embedder = Embedder(ModelSpec(NAMES[folder], str(SHARED / "models" / folder)))
        texts = sorted({t for pairs in sets.values() for pair in pairs for t in pair})
        vectors = dict(zip(texts, embedder.embed(texts), strict=True))
        def cosine(s, f, v=vectors):
            return float(v[s] @ v[f])

        report(f"{folder} cosine", cosine, sets, keys, THRESHOLDS.get(NAMES[folder], 0.45))
        print("\nswap check, true paraphrases refused:", swaps(cosine, para_true, by_day, (0.0, 0.05, 0.1, 0.15)))


if __name__ == "__main__":
    main()
