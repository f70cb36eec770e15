"""The index stays a faithful projection of the files: hand edits, forgets, rebuilds, damage, races."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.cli import run_memvault


def texts(hits):
    return [h.text for h in hits]


def log_file(vault, fact) -> Path:
    return vault.root / fact.path


def test_add_is_searchable_at_once_without_loading_the_model(vault_dir):
    script = textwrap.dedent(f"""
        import sys
        from memvault import Vault
        vault = Vault.open({str(vault_dir)!r})
        vault.search("warm up", lexical_only=True)
        fact = vault.add("Sven restores old sailing boats")
        hits = vault.search("sailing boats", lexical_only=True)
        assert [h.id for h in hits] == [fact.id], hits
        assert "fastembed" not in sys.modules and "onnxruntime" not in sys.modules
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "ok", result.stderr


def test_hand_edits_are_seen_by_the_next_search(vault):
    first = vault.add("Tara keeps bees on the roof", at="2025-02-01")
    gone = vault.add("Ulla sells honey at the market", at="2025-02-02")
    assert texts(vault.search("bees roof", lexical_only=True)) == ["Tara keeps bees on the roof"]

    # Edit a fact's text in place, delete a whole daily log, and write a new one by hand.
    path = log_file(vault, first)
    path.write_text(path.read_text().replace("keeps bees on the roof", "keeps pigeons in the attic"))
    log_file(vault, gone).unlink()
    copied = vault.root / "logs" / "2025" / "2025-02-03.md"
    copied.write_text(path.read_text().replace(first.id, "0000000000000aaa").replace(
        "Tara keeps pigeons in the attic", "Vera repairs clocks"))

    assert texts(vault.search("bees roof", lexical_only=True)) == []
    assert texts(vault.search("pigeons attic", lexical_only=True)) == ["Tara keeps pigeons in the attic"]
    assert "Ulla sells honey at the market" not in texts(vault.search("honey market"))
    assert [h.id for h in vault.search("repairs clocks", lexical_only=True)] == ["0000000000000aaa"]
    # The dense half sees the edit too: the old meaning is gone, the new one is found.
    assert texts(vault.search("pigeons"))[0] == "Tara keeps pigeons in the attic"
    assert vault.index_status()["drift"] == 0


def test_index_status_counts_drift_and_pending(vault):
    fact = vault.add("Wim paints watercolours")
    vault.search("watercolours")
    assert vault.index_status() == {**vault.index_status(), "documents": 1, "pending_embeddings": 0, "drift": 0}
    path = log_file(vault, fact)
    path.write_text(path.read_text().replace("watercolours", "oil portraits"))
    assert vault.index_status()["drift"] == 1
    vault.search("portraits", lexical_only=True)
    status = vault.index_status()
    assert status["drift"] == 0 and status["pending_embeddings"] == 1


def test_forgotten_facts_never_come_back(vault, cli):
    secret = vault.add("Xena's door code is 9911")
    vault.add("Xena likes jazz")
    assert texts(vault.search("door code"))[0] == "Xena's door code is 9911"
    vault.forget(secret.id, reason="secret")
    assert "Xena's door code is 9911" not in texts(vault.search("door code", include_all=True))

    assert cli("reindex", "--clear").exit_code == 0
    assert "Xena's door code is 9911" not in texts(vault.search("door code", include_all=True))
    # A hand edit of the day's log re-parses it; the tombstoned fact stays out.
    path = log_file(vault, secret)
    path.write_text(path.read_text() + "\n")
    hits = vault.search("door code 9911", include_all=True, limit=50)
    assert secret.id not in [h.id for h in hits]


def test_reindex_reuses_cached_embeddings(vault):
    vault.add_many([{"text": f"Yusuf's note number {i} about kayaks"} for i in range(12)])
    first = vault.reindex()
    assert first["facts"] == 12 and first["embedded"] == 12
    again = vault.reindex(clear=True)
    assert again["facts"] == 12 and again["embedded"] == 0 and again["reused"] == 12
    assert texts(vault.search("kayak note number 7"))[0] == "Yusuf's note number 7 about kayaks"


EARLIER_CACHE_LAYOUTS = {
    "first": "CREATE TABLE earlier (model TEXT, hash BLOB, vector BLOB, PRIMARY KEY (model, hash)) WITHOUT ROWID",
    "second": "CREATE TABLE earlier (id INTEGER PRIMARY KEY, model TEXT NOT NULL, hash BLOB NOT NULL, vector BLOB)",
}


@pytest.mark.parametrize("layout", sorted(EARLIER_CACHE_LAYOUTS))
def test_a_cache_of_an_earlier_layout_is_moved_over_and_its_vectors_reused(vault, layout):
    """An embedding cache written by an earlier memvault (the first kept vectors inside a WITHOUT
    ROWID key tree, the second float32 vectors beside each row's model name) keeps serving after
    the upgrade: nothing is re-embedded, search finds the same, and the file is in the new layout."""
    import sqlite3

    import numpy as np

    vault.add_many([{"text": f"Ines logged ferry crossing {i} to Mull"} for i in range(9)])
    assert vault.reindex()["embedded"] == 9
    before = [(h.id, round(h.score, 3)) for h in vault.search("ferry crossing 4")]
    vault.close()
    path = vault.root / ".memvault" / "cache" / "embeddings.sqlite"
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT m.name, v.hash, v.vector FROM vectors v JOIN models m ON m.id = v.model").fetchall()
        db.executescript(EARLIER_CACHE_LAYOUTS[layout] + "; DROP TABLE vectors; DROP TABLE models;")
        db.executemany("INSERT INTO earlier (model, hash, vector) VALUES (?, ?, ?)",
                       [(m, h, np.frombuffer(v, dtype=np.float16).astype(np.float32).tobytes()) for m, h, v in rows])
        db.execute("ALTER TABLE earlier RENAME TO vectors")
    again = type(vault).open(vault.root)
    rebuilt = again.reindex(clear=True)
    assert rebuilt["embedded"] == 0 and rebuilt["reused"] == 9
    assert [(h.id, round(h.score, 3)) for h in again.search("ferry crossing 4")] == before
    with sqlite3.connect(path) as db:
        assert "model INTEGER" in db.execute("SELECT sql FROM sqlite_master WHERE name = 'vectors'").fetchone()[0]
        assert {len(v) for (v,) in db.execute("SELECT vector FROM vectors")} == {384 * 2}


def test_a_cache_busy_being_moved_by_another_process_is_a_clear_busy_error(tmp_path, monkeypatch):
    """Fault tried: an earlier-layout cache that another process is moving to the new layout (its
    write lock held: about 20 s at 1M vectors) past the wait. Before: "unexpected error:
    OperationalError: database is locked". Now exit 4's VaultBusy, nothing changed; once free, the
    move happens, with a notice, and the vectors are kept."""
    import sqlite3

    import memvault.index.embedding_cache as cache_module
    from memvault.errors import VaultBusy

    path = tmp_path / "embeddings.sqlite"
    with sqlite3.connect(path) as db:
        db.execute(EARLIER_CACHE_LAYOUTS["second"].replace("earlier", "vectors"))
        db.execute("INSERT INTO vectors (model, hash, vector) VALUES ('m', ?, ?)", (b"h" * 32, b"\0" * 1536))
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    monkeypatch.setattr(cache_module, "BUSY_TIMEOUT", 0.2)
    with pytest.raises(VaultBusy, match="embedding cache stayed busy"):
        cache_module.EmbeddingCache(path, "m")
    holder.execute("ROLLBACK")
    holder.close()
    told: list[str] = []
    cache = cache_module.EmbeddingCache(path, "m", notify=told.append)
    assert list(cache.get_many([b"h" * 32])) == [b"h" * 32] and "new layout" in told[0]
    cache.close()
    with sqlite3.connect(path) as db:  # a models table lost by hand: doctor says so, the cache works on
        db.execute("DROP TABLE models")
    assert cache_module.cache_problem(path) == "its models table is missing"
    cache = cache_module.EmbeddingCache(path, "m")
    cache.put_many([(b"g" * 32, b"\0" * 1536)])
    assert list(cache.get_many([b"g" * 32, b"h" * 32])) == [b"g" * 32]
    cache.close()


def test_a_rebuild_from_the_embedding_cache_scores_exactly_as_the_first_build(vault):
    """The cache keeps float16; the index stores every vector as the cache gives it back, fresh
    from the model too, so `reindex --clear` (which takes them from the cache) changes no score."""
    vault.add_many([{"text": f"Ines logged ferry crossing {i} to Mull with {i % 3} bikes"} for i in range(40)])
    queries = ["ferry crossing 7", "bikes on the ferry", "Mull"]
    first = [[(h.id, h.score) for h in vault.search(q, limit=20, min_score=0)] for q in queries]
    assert vault.reindex(clear=True)["embedded"] == 0
    assert [[(h.id, h.score) for h in vault.search(q, limit=20, min_score=0)] for q in queries] == first


def test_the_embedding_cache_keeps_a_vector_in_under_a_kilobyte_and_gives_back_its_direction(tmp_path):
    """The cache is the second copy of every vector (the index scores its own): float16, filed
    under a model number, 0.8 KB a vector where the float32 rows beside the model's name took 2 KB
    (about 2 GB at a million facts). What comes back points the same way to within 1e-3."""
    import numpy as np

    from memvault.index.embedding_cache import EmbeddingCache

    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((4000, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    hashes = [rng.bytes(32) for _ in vectors]
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite", "sentence-transformers/all-MiniLM-L6-v2@22878524")
    cache.put_many(zip(hashes, (v.tobytes() for v in vectors), strict=True))
    found = cache.get_many(hashes)
    cache.close()
    back = np.stack([np.frombuffer(found[h], dtype=np.float32) for h in hashes])
    assert np.min(np.einsum("ij,ij->i", back, vectors)) > 1 - 1e-3
    assert (tmp_path / "embeddings.sqlite").stat().st_size < 4000 * 900



def test_changing_the_embedding_model_re_embeds_and_says_so(vault_dir, tmp_path):
    from support import tiny_model

    from memvault import Vault

    Vault.open(vault_dir).add("Zoe grows chillies on the windowsill")
    run_memvault("reindex", "--vault", str(vault_dir))
    other = tiny_model.build(tmp_path / "other-model", variant=1)
    result = run_memvault("search", "chillies windowsill", "--json", "--vault", str(vault_dir),
                          env={"MEMVAULT_EMBED_MODEL_PATH": str(other)})
    assert result.returncode == 0
    assert "embedding model changed" in result.stderr and "re-embedding 1" in result.stderr
    assert json.loads(result.stdout)[0]["text"] == "Zoe grows chillies on the windowsill"


@pytest.mark.parametrize("damage", ["catalog", "lexical", "pointer", "everything"])
def test_a_damaged_or_missing_index_is_rebuilt_with_a_notice(vault_dir, damage):
    from memvault import Vault

    Vault.open(vault_dir).add("Anna builds harpsichords")
    run_memvault("reindex", "--vault", str(vault_dir))
    index = vault_dir / ".memvault" / "index"
    live = index / (index / "current").read_text().strip()
    if damage == "catalog":
        (live / "catalog.sqlite").write_bytes(b"this is not a database" * 100)
        for extra in live.glob("catalog.sqlite-*"):
            extra.unlink()
    elif damage == "lexical":
        (live / "lexical" / "meta.json").write_text("{broken")
    elif damage == "pointer":
        (index / "current").write_text("gen-does-not-exist")
    else:
        import shutil

        shutil.rmtree(index)
    result = run_memvault("search", "harpsichord", "--json", "--vault", str(vault_dir))
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "rebuil" in result.stderr or "building" in result.stderr
    assert json.loads(result.stdout)[0]["text"] == "Anna builds harpsichords"


def test_a_search_during_a_full_rebuild_still_answers(vault):
    vault.add_many([{"text": f"Bruno's logbook entry {i} about sailing"} for i in range(40)])
    vault.reindex()
    answers = []

    def progress(phase, done, total):
        if not answers:
            # Another process searches while this one is in the middle of building the new index.
            result = run_memvault("search", "logbook entry 17", "--lexical", "--json", "--vault", str(vault.root))
            answers.append((result.returncode, result.stdout, result.stderr))

    report = vault.reindex(clear=True, progress=progress)
    assert answers, "the rebuild reported no progress"
    code, out, err = answers[0]
    assert code == 0, err
    assert json.loads(out)[0]["text"] == "Bruno's logbook entry 17 about sailing"
    assert report["facts"] == 40
    assert texts(vault.search("logbook entry 17"))[0] == "Bruno's logbook entry 17 about sailing"
    generations = [p for p in (vault.storage.state_dir / "index").iterdir() if p.name.startswith("gen-")]
    assert len(generations) <= 2


def test_parallel_adds_and_searches_lose_no_fact(vault_dir):
    adder = textwrap.dedent("""
        import sys
        from memvault import Vault
        vault = Vault.open(sys.argv[1])
        for i in range(8):
            vault.add(f"parallel fact token{sys.argv[2]}x{i} about lighthouses")
    """)
    searcher = textwrap.dedent("""
        import sys
        from memvault import Vault
        vault = Vault.open(sys.argv[1])
        for i in range(8):
            vault.search("lighthouses", limit=5, lexical_only=(i % 2 == 0))
    """)
    procs = [subprocess.Popen([sys.executable, "-c", adder, str(vault_dir), str(n)], stderr=subprocess.PIPE)
             for n in range(3)]
    procs += [subprocess.Popen([sys.executable, "-c", searcher, str(vault_dir)], stderr=subprocess.PIPE)
              for _ in range(2)]
    for proc in procs:
        _out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err.decode()

    from memvault import Vault

    vault = Vault.open(vault_dir)
    hits = vault.search("lighthouses", limit=100, lexical_only=True)
    assert len(hits) == 24
    for n in range(3):
        for i in range(8):
            found = texts(vault.search(f"token{n}x{i}", lexical_only=True))
            assert found == [f"parallel fact token{n}x{i} about lighthouses"]
    status = vault.index_status()
    assert status["documents"] == 24 and status["drift"] == 0


def test_reindex_cli_reports_counts(cli):
    cli("add", "Carla keeps a reading diary")
    result = cli("reindex", "--json")
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert report["facts"] == 1 and report["sections"] == 0 and report["pending_embeddings"] == 0
    text = cli("reindex", "--clear")
    assert text.exit_code == 0 and "indexed 1 facts" in text.stdout


def test_a_long_lived_process_follows_rebuilds_by_other_processes(vault):
    """Two `reindex --clear` runs elsewhere delete the generation this process had open; its next
    search (which must write the new fact into the index) still works and finds the fact."""
    vault.add("Cleo tunes pianos")
    assert texts(vault.search("pianos"))[0] == "Cleo tunes pianos"
    index = vault.storage.state_dir / "index"
    first = (index / "current").read_text().strip()
    for _ in range(2):
        result = run_memvault("reindex", "--clear", "--vault", str(vault.root))
        assert result.returncode == 0, result.stderr
    assert not (index / first).exists()

    vault.add("Dario restores violins")
    assert texts(vault.search("violins restore"))[0] == "Dario restores violins"
    assert vault.index_status()["drift"] == 0


def test_search_reports_its_long_index_work_to_a_progress_callback(vault):
    """The first search builds the index: `progress` hears each phase; later searches stay quiet."""
    vault.add_many([{"text": f"Emil's diary page {i} about gliders"} for i in range(30)])
    calls = []
    hits = vault.search("diary gliders", progress=lambda phase, done, total: calls.append((phase, done, total)))
    assert hits and {"reading files", "embedding"} <= {phase for phase, _, _ in calls}
    assert ("embedding", 30, 30) in calls
    calls.clear()
    vault.search("diary gliders", progress=lambda *a: calls.append(a))
    assert calls == []


def test_embedding_ahead_hands_the_callers_batches_in_order_and_a_worker_failure_back():
    """The rebuild embeds the next batch on a worker thread: its vectors come back in order, and
    a failure there (a model that errors on a batch) reaches the caller at that batch, not later."""
    import threading

    from memvault.index.embedder import Embedder, ModelSpec

    class Counting(Embedder):
        threads: set[str] = set()

        def embed(self, texts, progress=None):
            Counting.threads.add(threading.current_thread().name)
            if texts[0] == "broken":
                raise RuntimeError("the model failed on this batch")
            progress(len(texts))
            return [f"vectors of {texts[0]}"]

    told: list[int] = []
    batches = Counting(ModelSpec()).embed_ahead([["a", "b"], ["c"], ["broken"], ["d"]], progress=told.append)
    assert [next(batches), next(batches)] == [["vectors of a"], ["vectors of c"]]
    with pytest.raises(RuntimeError, match="failed on this batch"):
        next(batches)
    batches.close()
    assert told == [2, 1] and Counting.threads == {"memvault-embed_0"}
