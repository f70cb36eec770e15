"""Dream against a real model: LoCoMo conversation 0 (74 facts, 8 days) consolidated by a live server.

Start a local OpenAI-compatible server first (../shared/llm/: `setup.sh DIR`, then `serve.sh DIR`
serves Qwen2.5-Coder-1.5B on 127.0.0.1:8089). The bench puts a recording pass-through in front of
it, so every request and answer is saved as OUT/NNN.json ({"request", "response", "status",
"seconds"}: the layout tests/fake_llm.py replays), makes a fresh vault of the 74 facts, and runs
`memvault dream` (one run per night, up to --nights, while facts are left) with the given mode.

It prints per batch: facts, prompt tokens (the server's count) against the window, seconds, model
calls (repair turns), outcome (applied / split / failed / skipped), facts left for a smaller
batch, and statements the check dropped. Then it checks what the run left, on its own (its own
word rules, not memvault's checker): every page statement holds no capitalised name and no number
its cited facts do not (text, tags, the date of the fact: year, month, day, weekday); every fact is
accounted for and the watermark is at the last day; every MEMORY.md line links an existing page;
and `memvault search` finds, in its top 5, a page section citing the fact for 10 LoCoMo questions:
the first 10 questions of conversation 0 (the adversarial category 5 left out) whose one evidence
turn is the source of exactly one of the 74 facts, each with a fact of its own.

Usage: python bench/dream_live.py OUT [--mode notes|prose] [--nights 3] [--server http://127.0.0.1:8089]
       [--model openai/qwen2.5-coder-1.5b] [--window 8192] [--max-output 2048] [--timeout 3600]
       [--vault DIR]   (reuse a vault made by an earlier run: its checks only, no model)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from datetime import date, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared"
FACTS = SHARED / "llm-transcripts" / "qwen2.5-coder-1.5b-q4km" / "facts.jsonl"
LOCOMO = SHARED / "eval" / "locomo-dev.json"
MODEL_PATH = SHARED / "models" / "all-MiniLM-L6-v2-onnx-int8"
MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december"]
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
NUMBER_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
                "ten": 10, "eleven": 11, "twelve": 12, "twenty": 20, "thirty": 30, "hundred": 100,
                "dozen": 12, "twice": 2}
# words that may open a sentence without being a name (this checker's own short list)
OPENERS = {"the", "a", "an", "she", "he", "they", "her", "his", "their", "it", "this", "that", "these",
           "those", "in", "on", "at", "after", "before", "when", "while", "since", "last", "next", "recently",
           "also", "both", "each", "for", "from", "to", "with", "as", "and", "but", "or", "i", "we", "you",
           "there", "here", "one", "some", "many", "most", "until", "during"}


# -- recording pass-through --------------------------------------------------------------------

def recorder(out: Path, upstream: str) -> tuple[ThreadingHTTPServer, list[dict]]:
    out.mkdir(parents=True, exist_ok=True)
    calls: list[dict] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            start = time.time()
            request = urllib.request.Request(upstream + self.path, data=body, method="POST",
                                             headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=7200) as answer:
                    status, data = answer.status, answer.read()
            except urllib.error.HTTPError as error:
                status, data = error.code, error.read()
            except Exception as error:  # noqa: BLE001 - the server is down: a gateway's answer
                status, data = 502, json.dumps({"error": {"message": repr(error)}}).encode()
            with lock:
                n = len(calls) + 1
                record = {"n": n, "path": self.path, "status": status, "seconds": round(time.time() - start, 1)}
                try:
                    record["request"] = json.loads(body)
                    record["response"] = json.loads(data)
                except ValueError:
                    record["raw_response"] = data.decode("utf-8", "replace")
                calls.append(record)
                (out / f"{n:03d}.json").write_text(json.dumps(record, indent=1, ensure_ascii=False), encoding="utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, calls


# -- the run -----------------------------------------------------------------------------------

def make_vault(path: Path, window: int, max_output: int, mode: str, timeout: float):
    from memvault.vault import Vault

    vault = Vault.init(path)
    toml = vault.root / "memvault.toml"
    text = toml.read_text(encoding="utf-8")
    text = text.replace("[llm]\n", f"[llm]\ncontext_window = {window}\nmax_output_tokens = {max_output}\n", 1)
    text = re.sub(r"(?m)^timeout = .*$", f"timeout = {timeout:g}", text)
    text = re.sub(r'(?m)^mode = .*$', f'mode = "{mode}"', text)
    toml.write_text(text, encoding="utf-8")
    vault.storage.git.commit(["memvault.toml"], "bench: settings")
    vault = Vault(path)
    for line in FACTS.read_text(encoding="utf-8").splitlines():
        f = json.loads(line)
        vault.add(f["text"], at=f["at"], tags=f["tags"], source=f["source"], session=f["session"])
    return vault


def run_nights(vault, args, base: str, calls: list[dict]) -> list[tuple[int, object, list[dict]]]:
    from memvault.dream.llm import LLMSettings

    settings = LLMSettings(model=args.model, api_base=base, api_key="local", timeout=args.timeout, attempts=2,
                           backoff=5, context_window=args.window, max_output_tokens=args.max_output)
    nights = []
    for night in range(1, args.nights + 1):
        first = len(calls)
        started = time.time()
        report = vault.dream(llm=settings, today=date(2023, 7, 16), progress=lambda m: print(m, flush=True))
        print(f"night {night}: {time.time() - started:.0f} s, watermark {report.watermark_after}, "
              f"caught up {report.caught_up}, error {report.error}", flush=True)
        nights.append((night, report, calls[first:]))
        if report.caught_up or not report.batches:
            break
    return nights


def batch_table(nights, window: int) -> list[str]:
    rows = ["| night | batch | facts | prompt tokens / window | seconds | calls | outcome | left | dropped |",
            "|---|---|---|---|---|---|---|---|---|"]
    for night, report, calls in nights:
        pointer = 0
        for b in report.batches:
            n = b.requests or 0
            mine = calls[pointer:pointer + n]
            pointer += n
            prompts = [c["response"]["usage"]["prompt_tokens"] for c in mine
                       if isinstance(c.get("response"), dict) and "usage" in c["response"]]
            tokens = f"{max(prompts):,} / {window:,}" if prompts else "-"
            outcome = {"ok": "applied"}.get(b.outcome, b.outcome)
            rows.append(f"| {night} | {b.label} | {b.facts} | {tokens} | {b.seconds or 0:.0f} | {n} | {outcome} | "
                        f"{len(b.left or [])} | {len(b.dropped or [])} |")
    return rows


# -- the independent checks ------------------------------------------------------------------------

def fold(word: str) -> str:
    word = word.lower().replace("’", "'")
    word = re.sub(r"'s?$", "", word)
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def allowed(facts: list) -> tuple[set[str], set[int]]:
    words, numbers = set(), set()
    for f in facts:
        for text in [f.text, *f.tags, f.source or ""]:
            words |= {fold(w) for w in re.findall(r"[A-Za-z][A-Za-z'’]*", text)}
            numbers |= {int(n) for n in re.findall(r"\d+", text)}
            numbers |= {v for w, v in NUMBER_WORDS.items() if re.search(rf"\b{w}\b", text, re.I)}
        words |= {MONTHS[f.at.month - 1], WEEKDAYS[f.at.weekday()]}
        numbers |= {f.at.year, f.at.month, f.at.day}
    return words, numbers


def statement_faults(text: str, facts: list) -> list[str]:
    words, numbers = allowed(facts)
    plain = re.sub(r"\[\^[^\]]*\]|\(until \d{4}-\d{2}-\d{2}", " ", text)
    plain = re.sub(r"^\s*[-*+]\s+", "", plain)
    faults = []
    for m in re.finditer(r"[A-Za-z][A-Za-z'’]*", plain):
        word = m.group(0)
        opening = not plain[:m.start()].strip() or re.search(r"[.!?:]\s*$", plain[:m.start()])
        if word[0].isupper() and word != "I" and fold(word) not in words:
            if not (opening and word.lower() in OPENERS):
                faults.append(word)
    for n in re.findall(r"\d+", plain):
        if int(n) not in numbers:
            faults.append(n)
    for w, v in NUMBER_WORDS.items():
        if re.search(rf"\b{w}\b", plain, re.I) and v not in numbers:
            faults.append(w)
    return faults


def check_vault(vault) -> dict:
    from memvault.formats.pages import CITATION, CONFLICTS_PAGE
    from memvault.storage.wiki import list_pages, read_page

    facts = {f.id: f for f in vault.storage.facts.iter_facts()}
    statements = faulty = 0
    faults = []
    for path in list_pages(vault.root):
        page = read_page(vault.root, path)
        for line in page.body.splitlines():
            ids = CITATION.findall(line)
            if not ids or line.startswith("#"):
                continue
            statements += 1
            if path == CONFLICTS_PAGE:  # the runner's date and batch, then the model's reason
                line = re.sub(r"^- \d{4}-\d{2}-\d{2} \(batch [^)]*\): ", "- ", line)
            found = statement_faults(line, [facts[i] for i in ids if i in facts])
            if found:
                faulty += 1
                faults.append(f"{path}: {line[:120]} -> {found}")
    status = vault.dream_status()
    memory = (vault.root / "MEMORY.md").read_text(encoding="utf-8")
    lines = [line for line in memory.splitlines() if line.startswith("- ")]
    unlinked = [line for line in lines if not (m := re.search(r"\]\((wiki/[^)]+\.md)\)$", line))
                or not (vault.root / m.group(1)).is_file()]
    return {"statements": statements, "faulty": faulty, "faults": faults,
            "watermark": str(vault.watermark), "pending_facts": status["pending_facts"],
            "late_facts": status["late_facts"], "memory_lines": len(lines), "memory_unlinked": unlinked}


def search_targets(vault) -> list[tuple[str, str, bool, int | None]]:
    from memvault.formats.pages import CITATION

    conversation = json.loads(LOCOMO.read_text(encoding="utf-8"))[0]
    by_text = {f.text: f for f in vault.storage.facts.iter_facts()}
    sources: dict[str, list[str]] = {}
    for session in conversation["observation"].values():
        for items in session.values():
            for text, evidence in items:
                if text in by_text:
                    for turn in evidence if isinstance(evidence, list) else [evidence]:
                        sources.setdefault(turn, []).append(text)
    picked, used = [], set()
    for qa in conversation["qa"]:
        if qa.get("category") == 5 or len(qa["evidence"]) != 1:
            continue
        texts = sources.get(qa["evidence"][0], [])
        if len(texts) == 1 and texts[0] not in used:
            used.add(texts[0])
            picked.append((qa["question"], by_text[texts[0]]))
        if len(picked) == 10:
            break
    out = []
    for question, fact in picked:
        hits = vault.search(question, limit=5)
        rank = next((n for n, h in enumerate(hits, 1) if h.kind == "page" and fact.id in CITATION.findall(h.text)),
                    None)
        out.append((question, fact.text, rank is not None, rank))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--mode", default="notes", choices=["notes", "prose"])
    parser.add_argument("--nights", type=int, default=3)
    parser.add_argument("--server", default="http://127.0.0.1:8089")
    parser.add_argument("--model", default="openai/qwen2.5-coder-1.5b")
    parser.add_argument("--window", type=int, default=8192)
    parser.add_argument("--max-output", type=int, default=2048)
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--vault", type=Path)
    args = parser.parse_args()
    os.environ.setdefault("MEMVAULT_EMBED_MODEL_PATH", str(MODEL_PATH))
    os.environ.setdefault("OPENAI_API_KEY", "local")
    from memvault.vault import Vault

    if args.vault:
        vault, nights = Vault(args.vault), []
    else:
        path = Path(tempfile.mkdtemp(prefix="dream-live-")) / "vault"
        vault = make_vault(path, args.window, args.max_output, args.mode, args.timeout)
        print(f"vault {path}; recording to {args.out}", flush=True)
        server, calls = recorder(args.out, args.server)
        try:
            nights = run_nights(vault, args, f"http://127.0.0.1:{server.server_address[1]}/v1", calls)
        finally:
            server.shutdown()
    lines = [f"# dream live: {args.model}, mode {args.mode}, window {args.window}, {datetime.now():%Y-%m-%d %H:%M}", ""]
    lines += batch_table(nights, args.window)
    applied = sum(1 for _, r, _ in nights for b in r.batches if b.outcome == "ok")
    total = sum(1 for _, r, _ in nights for b in r.batches)
    checked = check_vault(vault)
    targets = search_targets(vault)
    lines += ["", f"batches applied: {applied}/{total} ({applied / max(1, total):.0%})",
              f"page statements: {checked['statements']}, holding a name or number their facts do not: "
              f"{checked['faulty']}",
              *[f"  {f}" for f in checked["faults"]],
              f"watermark {checked['watermark']} (last day 2023-07-15); facts not accounted for: "
              f"{checked['pending_facts']} pending, {checked['late_facts']} late",
              f"MEMORY.md: {checked['memory_lines']} lines, {len(checked['memory_unlinked'])} not linking a page",
              f"search: {sum(t[2] for t in targets)}/10 page sections citing the fact in the top 5", ""]
    lines += [f"- {'yes' if hit else 'NO '} {rank or '-'} {question} ({text[:70]})"
              for question, text, hit, rank in targets]
    text = "\n".join(lines)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"summary-{args.mode}.md").write_text(text + "\n", encoding="utf-8")
    print(f"vault: {vault.root}")


if __name__ == "__main__":
    main()
