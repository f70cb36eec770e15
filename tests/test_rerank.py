"""The rerank stage: a cross-encoder re-orders search's best candidates, the same way for the CLI,
the Python API, the MCP server and `context`; without its model, search ranks as before."""

from __future__ import annotations

import json

import pytest
from support import ROOT
from support.cli import run_memvault
from support.git import snapshot
from support.models import REQUIRE_REAL_MODEL

CONVERSATION = [
    "Caroline: Hey Mel! How have you been lately?",
    "Melanie: Swamped with the kids and work, but good. Painting helps me relax.",
    "Caroline: You play any instruments?",
    "Melanie: Yes, clarinet and violin. I started when I was a kid and still play most evenings.",
    "Caroline: I went to a pride parade last week, it was amazing.",
    "Melanie: Music is my therapy after a long day.",
]
QUESTION = "What instruments does Melanie play?"
ASKING, ANSWERING = CONVERSATION[2], CONVERSATION[3]


def _conversation(vault) -> None:
    vault.add_many([{"text": text, "session": "chat-1", "at": "2026-05-07T10:00"} for text in CONVERSATION])


def _texts(result) -> list[str]:
    assert result.exit_code == 0, result.stderr
    return [hit["text"] for hit in json.loads(result.stdout)]


@pytest.mark.real_model
@pytest.mark.reranker
def test_the_answer_ranks_above_the_question_that_asks_what_the_query_asks(vault, cli):
    """The words and the embedding both match the turn *asking* about instruments best; the
    reranker reads each turn with the question and puts the answer first."""
    _conversation(vault)
    assert _texts(cli("search", QUESTION, "--json", "--no-rerank"))[0] == ASKING
    hits = json.loads(cli("search", QUESTION, "--json", "--explain").stdout)
    assert hits[0]["text"] == ANSWERING
    rerank = hits[0]["explain"]["rerank"]
    assert rerank["rank"] == 1 and rerank["relevance"] > 0.5
    # The explanation still adds up to the score, the rerank's part included.
    parts = [signal["contribution"] for signal in hits[0]["explain"].values()
             if isinstance(signal, dict) and "contribution" in signal]
    assert sum(parts) == pytest.approx(hits[0]["score"], abs=1e-5)
    shown = cli("search", QUESTION, "--explain")
    assert "rerank #1 +" in shown.stdout


@pytest.mark.real_model
@pytest.mark.reranker
def test_a_reply_is_judged_after_the_question_it_answers(vault):
    """"Lisbon, with the whole family" says nothing of a holiday on its own; read after the
    question it answers, it is the answer, and ranks above the question."""
    vault.add_many([{"text": text, "session": "chat-1", "at": "2026-05-07T10:00"} for text in (
        "Caroline: Hey Mel! How have you been lately?",
        "Melanie: Swamped with the kids and work, but good.",
        "Caroline: Where did you go on holiday this summer?",
        "Melanie: Lisbon, with the whole family. The kids loved the trams.",
        "Caroline: I went to a pride parade last week, it was amazing.",
        "Melanie: I would love to travel more next year.",
    )])
    hits = vault.search("Where did Melanie go on holiday?", explain=True)
    assert hits[0].text == "Melanie: Lisbon, with the whole family. The kids loved the trams."
    assert hits[0].explain["rerank"]["relevance"] > 0.8
    assert [h.text for h in vault.search("Where did Melanie go on holiday?", rerank=False)][0] == \
        "Caroline: Where did you go on holiday this summer?"


@pytest.mark.real_model
@pytest.mark.reranker
def test_cli_api_mcp_and_context_rank_the_same_way(vault, cli, monkeypatch):
    import os

    _conversation(vault)
    vault.add("Melanie bought a new violin bow in June", session="chat-2", at="2026-06-02T09:00")
    cli_order = [hit["id"] for hit in json.loads(cli("search", QUESTION, "--json").stdout)]
    api_order = [hit.id for hit in vault.search(QUESTION)]
    assert cli_order == api_order and vault.search(QUESTION)[0].text == ANSWERING

    from test_mcp import connect, server_env

    env = {**server_env(vault.root.parent, os.environ["MEMVAULT_EMBED_MODEL_PATH"]),
           "MEMVAULT_RERANK": "1", "MEMVAULT_RERANK_MODEL_PATH": os.environ["MEMVAULT_RERANK_MODEL_PATH"]}

    async def over_mcp():
        with open(vault.root.parent / "mcp.stderr", "w") as errlog:
            async with connect(["--vault", str(vault.root)], env, errlog) as session:
                result = await session.call_tool("search", {"query": QUESTION})
                return [hit["id"] for hit in result.structured_content["hits"]]

    import anyio

    assert anyio.run(over_mcp) == cli_order
    bundle = vault.context(QUESTION, recent=0)
    relevant = [item.id for item in bundle.items if item.reason == "relevant"]
    # context keeps a thread's own order, so compare which facts it chose and where each thread stands
    assert set(relevant) == set(cli_order)
    assert relevant.index(cli_order[0]) < relevant.index(cli_order[-1]) or len(relevant) == 1


@pytest.mark.real_model
@pytest.mark.reranker
def test_judged_in_two_parts_at_once_each_candidate_keeps_its_own_judgement(vault, monkeypatch):
    """A search's pairs are judged in two halves at once (one on a worker thread); each logit must
    come back to its own candidate, so the order is the one a single run gives."""
    from memvault.index import rerank

    _conversation(vault)
    vault.add_many([{"text": f"Melanie walked the dog along the canal on day {n}"} for n in range(12)])

    def judged(parts: int) -> dict[str, float]:
        monkeypatch.setattr(rerank, "_parts", lambda: parts)
        hits = vault.search(QUESTION, explain=True, limit=20, min_score=0)
        assert hits[0].text == ANSWERING
        return {hit.id: hit.explain["rerank"]["score"] for hit in hits if "rerank" in hit.explain}

    alone, halves = judged(1), judged(2)
    assert len(alone) == 15 and alone.keys() == halves.keys()
    # int8 activations are scaled per run, so a logit moves a little with its company, never more
    assert max(abs(alone[key] - halves[key]) for key in alone) < 1.5
    assert sorted(alone, key=alone.get)[-2:] == sorted(halves, key=halves.get)[-2:]


@pytest.mark.real_model
@pytest.mark.reranker
def test_the_reranker_reads_the_first_15_candidates_unless_told_otherwise(vault, cli):
    """15 by default (measured against quality, docs/search.md); [rerank] candidates sets another."""
    vault.add_many([{"text": f"Zoe planted {n} basil seedlings in pot {n} on the balcony"} for n in range(30)])

    def read() -> int:
        hits = json.loads(cli("search", "basil seedlings on the balcony", "--json", "--explain", "--limit", "30",
                              "--min-score", "0").stdout)
        assert len(hits) == 30
        return sum("rerank" in hit["explain"] for hit in hits)

    assert read() == 15
    config = vault.root / "memvault.toml"
    config.write_text(config.read_text().replace("candidates = 15", "candidates = 4"))
    assert read() == 4


@pytest.mark.real_model
@pytest.mark.reranker
def test_off_topic_and_nonsense_queries_still_answer_no_matches(vault, cli):
    for text in ("Alice prefers green tea in the morning", "The team moved the database to Postgres",
                 "Bob is allergic to peanuts", "There is nothing left in the fridge"):
        vault.add(text)
    for query in ("quantum chromodynamics", "xkqzv wprlt mnbvc", "zzzqqq nothing", "SQL join syntax"):
        result = cli("search", query, "--json")
        assert result.exit_code == 0 and json.loads(result.stdout) == [], query
    assert _texts(cli("search", "which beverage does she like to drink", "--json"))[0] == \
        "Alice prefers green tea in the morning"


def test_without_the_rerank_model_search_ranks_as_before_with_one_notice(vault_dir, tmp_path):
    """No cross-encoder on the machine: the hits of --no-rerank, exit 0, and one notice naming
    the model and how to get it (once per process, however many queries)."""
    from memvault import Vault

    vault = Vault.open(vault_dir)
    _conversation(vault)
    missing = {"MEMVAULT_RERANK": "1", "MEMVAULT_RERANK_MODEL_PATH": str(tmp_path / "nowhere")}
    plain = run_memvault("search", "instruments play", "--json", "--no-rerank", "--vault", str(vault_dir))
    result = run_memvault("search", "instruments play", "--json", "--vault", str(vault_dir), env=missing)
    assert result.returncode == 0 and result.stdout == plain.stdout and json.loads(result.stdout)
    notices = [line for line in result.stderr.splitlines() if "rerank model" in line]
    assert len(notices) == 1
    assert "Xenova/ms-marco-MiniLM-L-12-v2" in notices[0] and "search ranks without it" in notices[0]
    assert "--download-model" in notices[0]
    many = run_memvault("search", "--stdin", "--json", "--vault", str(vault_dir), env=missing,
                        input="instruments\nviolin\nparade\n")
    assert many.returncode == 0 and len(many.stdout.splitlines()) == 3
    assert sum("rerank model" in line for line in many.stderr.splitlines()) == 1


def test_a_newcomer_without_either_model_gets_one_notice_for_both(vault_dir, tmp_path):
    """Neither model downloaded (a first install offline): search answers by words, and one line
    says what is missing and the one command that fetches both, not a line per model."""
    import os
    import subprocess
    import sys

    from memvault import Vault

    _conversation(Vault.open(vault_dir))
    env = {k: v for k, v in os.environ.items() if k not in ("MEMVAULT_EMBED_MODEL_PATH", "MEMVAULT_RERANK_MODEL_PATH")}
    env.update(MEMVAULT_RERANK="1", FASTEMBED_CACHE_PATH=str(tmp_path / "models"))
    search = [sys.executable, "-m", "memvault", "search", "--stdin", "--json", "--vault", str(vault_dir)]
    result = subprocess.run(search, input="instruments play\nparade\n", env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert [bool(json.loads(line)["hits"]) for line in result.stdout.splitlines()] == [True, True]
    notices = [line for line in result.stderr.splitlines() if "model" in line]
    assert len(notices) == 1, result.stderr
    assert "sentence-transformers/all-MiniLM-L6-v2" in notices[0] and "Xenova/ms-marco-MiniLM-L-12-v2" in notices[0]
    assert "memvault reindex --download-model" in notices[0] and str(tmp_path / "models") in notices[0]


@pytest.mark.parametrize("setting", ["--no-rerank", "MEMVAULT_RERANK=off", "enabled = false", "rerank: false"])
def test_the_reranker_can_be_turned_off_every_way(vault_dir, tmp_path, setting):
    """Off, search never loads it: no notice even where the model is missing, no rerank in --explain."""
    from memvault import Vault

    Vault.open(vault_dir).add("Zoe grows chillies on the windowsill")
    env = {"MEMVAULT_RERANK": "1", "MEMVAULT_RERANK_MODEL_PATH": str(tmp_path / "nowhere")}
    args = ["search", "chillies", "--json", "--explain", "--vault", str(vault_dir)]
    stdin = None
    if setting == "--no-rerank":
        args.append(setting)
    elif setting.startswith("MEMVAULT_RERANK"):
        env["MEMVAULT_RERANK"] = "off"
    elif setting == "enabled = false":
        del env["MEMVAULT_RERANK"]
        config = vault_dir / "memvault.toml"
        config.write_text(config.read_text().replace("enabled = true", "enabled = false"))
    else:
        args = ["search", "--stdin", "--json", "--vault", str(vault_dir)]
        stdin = json.dumps({"query": "chillies", "explain": True, "rerank": False}) + "\n"
    result = run_memvault(*args, env=env, input=stdin)
    assert result.returncode == 0, result.stderr
    assert "rerank" not in result.stderr
    hits = json.loads(result.stdout)
    hits = hits["hits"] if isinstance(hits, dict) else hits
    assert hits[0]["text"] == "Zoe grows chillies on the windowsill" and "rerank" not in hits[0]["explain"]


@pytest.mark.parametrize(("setting", "said"), [
    ({"MEMVAULT_RERANK": "maybe"}, "MEMVAULT_RERANK must be on or off (1 or 0), got 'maybe'"),
    (("candidates = 15", "candidates = 0"), "memvault.toml: rerank.candidates must be a positive integer, got 0"),
    (("candidates = 15", "candidates = 5000"), "memvault.toml: rerank.candidates must be at most 200, got 5000"),
    (("enabled = true", 'enabled = "sometimes"'),
     "memvault.toml: rerank.enabled must be true or false, got 'sometimes'"),
    (("[rerank]", "[unknown]", 'rerank = "off"\n'), "memvault.toml: rerank must be a table ([rerank]), got 'off'"),
])
def test_bad_rerank_settings_are_one_line_and_change_nothing(vault_dir, setting, said):
    from memvault import Vault

    Vault.open(vault_dir).add("Zoe grows chillies on the windowsill")
    env = setting if isinstance(setting, dict) else None
    if isinstance(setting, tuple):
        config = vault_dir / "memvault.toml"
        text = config.read_text()
        assert setting[0] in text
        first = setting[2] if len(setting) > 2 else ""  # a key before any table
        config.write_text(first + text.replace(setting[0], setting[1]))
    before = snapshot(vault_dir)
    for args in (["search", "chillies"], ["add", "Zoe also grows basil"]):
        result = run_memvault(*args, "--vault", str(vault_dir), env=env)
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith("memvault: ") and result.stderr.strip().endswith(said)
        assert len(result.stderr.strip().splitlines()) == 1
        assert result.stdout == ""
    assert snapshot(vault_dir) == before


def test_lexical_search_loads_no_reranker(vault_dir, tmp_path):
    from memvault import Vault

    vault = Vault.open(vault_dir)
    vault.add("Zoe grows chillies on the windowsill")
    vault.reindex()
    env = {"MEMVAULT_RERANK": "1", "MEMVAULT_RERANK_MODEL_PATH": str(tmp_path / "nowhere")}
    result = run_memvault("search", "chillies", "--lexical", "--json", "--vault", str(vault_dir), env=env)
    assert result.returncode == 0 and result.stderr == "" and json.loads(result.stdout)


def test_download_model_fetches_the_rerank_model_too(vault_dir, tmp_path):
    """With local copies configured nothing is downloaded: each model is said to be where it is."""
    copy = tmp_path / "ms-marco"
    env = {"MEMVAULT_RERANK": "1", "MEMVAULT_RERANK_MODEL_PATH": str(copy)}
    result = run_memvault("reindex", "--download-model", "--vault", str(vault_dir), env=env)
    assert result.returncode == 0, result.stderr
    assert f"model Xenova/ms-marco-MiniLM-L-12-v2 is in {copy}" in result.stderr
    off = run_memvault("reindex", "--download-model", "--vault", str(vault_dir), env={"MEMVAULT_RERANK": "0"})
    assert off.returncode == 0 and "rerank" not in off.stderr


def test_doctor_and_status_say_how_search_reranks(vault_dir, tmp_path):
    from memvault import Vault

    Vault.open(vault_dir).add("Zoe grows chillies on the windowsill")
    missing = {"MEMVAULT_RERANK": "1", "MEMVAULT_RERANK_MODEL_PATH": str(tmp_path / "nowhere")}
    doctor = run_memvault("doctor", "--json", "--vault", str(vault_dir), env=missing)
    check = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}["rerank model"]
    assert check["status"] == "fail" and "search ranks without it" in check["message"]
    off = run_memvault("doctor", "--json", "--vault", str(vault_dir))
    assert {c["name"]: c for c in json.loads(off.stdout)["checks"]}["rerank model"]["status"] == "ok"
    status = json.loads(run_memvault("status", "--json", "--vault", str(vault_dir), env=missing).stdout)
    assert status["index"]["rerank"] == "Xenova/ms-marco-MiniLM-L-12-v2"
    assert "rerank      Xenova/ms-marco-MiniLM-L-12-v2" in run_memvault("status", "--vault", str(vault_dir),
                                                                        env=missing).stdout
    assert "rerank      off" in run_memvault("status", "--vault", str(vault_dir)).stdout


def test_status_names_the_model_the_index_was_built_with(vault_dir, tmp_path):
    """After a change of model, until the next search re-embeds, status says which model made the
    vectors; the search re-embeds with one notice, and status then names the new model."""
    from support import tiny_model

    from memvault import Vault

    Vault.open(vault_dir).add("Zoe grows chillies on the windowsill")
    assert run_memvault("reindex", "--vault", str(vault_dir)).returncode == 0
    first = json.loads(run_memvault("status", "--json", "--vault", str(vault_dir)).stdout)["index"]
    assert first["built_with"] == first["model"]
    assert first["model"].startswith("sentence-transformers/all-MiniLM-L6-v2@")
    other = {"MEMVAULT_EMBED_MODEL_PATH": str(tiny_model.build(tmp_path / "other-model", variant=1))}
    changed = json.loads(run_memvault("status", "--json", "--vault", str(vault_dir), env=other).stdout)["index"]
    assert changed["built_with"] == first["model"] != changed["model"]
    shown = run_memvault("status", "--vault", str(vault_dir), env=other).stdout
    assert f"vectors by {first['model']}; the next search re-embeds with {changed['model']}" in shown
    searched = run_memvault("search", "chillies", "--vault", str(vault_dir), env=other)
    assert searched.returncode == 0 and searched.stderr.count("embedding model changed") == 1
    after = json.loads(run_memvault("status", "--json", "--vault", str(vault_dir), env=other).stdout)["index"]
    assert after["built_with"] == after["model"] == changed["model"]


@pytest.fixture
def bge(monkeypatch):
    """bge-small-en-v1.5 where memvault's tests find local models (beside the checkout, as CI has it)."""
    import os
    from pathlib import Path


    path = Path(os.environ.get("MEMVAULT_TESTS_BGE_PATH") or ROOT.parent / "shared" / "models" /
                "bge-small-en-v1.5-onnx-int8")
    if not (path / "model_optimized.onnx").is_file():
        reason = f"needs bge-small-en-v1.5 (int8 ONNX) in {path} or MEMVAULT_TESTS_BGE_PATH"
        if os.environ.get(REQUIRE_REAL_MODEL) == "1":
            pytest.fail(f"{reason} ({REQUIRE_REAL_MODEL}=1)")
        pytest.skip(reason)
    monkeypatch.setenv("MEMVAULT_EMBED_MODEL", "BAAI/bge-small-en-v1.5")
    monkeypatch.setenv("MEMVAULT_EMBED_MODEL_PATH", str(path))
    return path


@pytest.mark.reranker
def test_bge_small_embeds_queries_with_its_instruction_and_has_its_own_noise_level(vault, cli, bge):
    """fastembed pools bge by its CLS token; memvault puts the model's instruction before queries
    (never before facts) and reads its cosines from its own noise level (0.60, not MiniLM's 0.35:
    bge gives unrelated sentences cosines up to 0.6, so its meaning part alone is weak, and the
    reranker, on by default, finds the paraphrase)."""
    import numpy as np
    from fastembed import TextEmbedding

    for text in ("Alice prefers green tea in the morning", "The team moved the database to Postgres",
                 "Bob is allergic to peanuts"):
        vault.add(text)
    hits = json.loads(cli("search", "which beverage does she like to drink", "--json", "--explain").stdout)
    assert hits[0]["text"] == "Alice prefers green tea in the morning"
    hits = json.loads(cli("search", "which beverage does she like to drink", "--json", "--explain", "--no-rerank",
                          "--min-score", "0").stdout)
    model = TextEmbedding("BAAI/bge-small-en-v1.5", specific_model_path=str(bge), local_files_only=True)
    unit = lambda vector: np.asarray(vector) / np.linalg.norm(vector)  # noqa: E731
    # As memvault embeds them: the query alone, the facts in one batch (int8 results vary a little
    # with the batch).
    fact = unit(next(iter(model.embed(["Alice prefers green tea in the morning", "The team moved the database to "
                                        "Postgres", "Bob is allergic to peanuts"]))))
    asked = "which beverage does she like to drink"
    query = unit(next(iter(model.query_embed(["Represent this sentence for searching relevant passages: " + asked]))))
    bare = unit(next(iter(model.query_embed([asked]))))
    dense = hits[0]["explain"]["dense"]
    assert dense["score"] == pytest.approx(float(query @ fact), abs=1e-4)
    assert abs(float(bare @ fact) - dense["score"]) > 0.01  # without the instruction it would differ
    assert dense["score"] > 0.60
    assert dense["contribution"] == pytest.approx((dense["score"] - 0.60) / (1 - 0.60) / 2, abs=1e-3)
    index = json.loads(cli("status", "--json").stdout)["index"]
    assert index["built_with"] == index["model"] and index["model"].startswith("BAAI/bge-small-en-v1.5@")
    for query in ("quantum chromodynamics", "xkqzv wprlt mnbvc"):
        assert json.loads(cli("search", query, "--json").stdout) == [], query
