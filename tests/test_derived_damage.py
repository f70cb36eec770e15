"""Damaged derived data (search index, vector file, embedding cache, catalog) is found, rebuilt
with a notice, and never gives an unexpected error or silently wrong scores.

Damages tried, each on a real index built by `memvault reindex` (vault files never touched):

- embedding cache overwritten with random bytes; truncated to a third of its size; one cached
  vector (a sound sqlite row) overwritten with same-length garbage; replaced by sound sqlite whose
  `vectors` table has other columns
- vector file overwritten with same-size random bytes; with same-size random *unit* vectors (they
  pass a norm check, only the checksum finds them); truncated
- `.memvault/index` replaced by a regular file
- Tantivy's meta.json overwritten with random bytes
- the catalog (catalog.sqlite) overwritten with same-size random bytes; from its second page on

Each is tried through the CLI in a subprocess: `add` then `search` (exit 0, a notice on stderr,
the same hits and scores as after a clean `reindex --clear`), `reindex --clear`, and `doctor`
(reports it) then `doctor --fix` (repairs it; the next doctor and search are quiet).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from support.cli import run_memvault
from support.git import snapshot

FACTS = [
    "Anna builds harpsichords in her workshop",
    "Bruno repairs sailing boats every summer",
    "Carla bakes sourdough bread on Sundays",
    "Dmitri collects old railway maps",
    "Elena teaches the cello to children",
    "Felix grows chillies on the windowsill",
    "Greta keeps bees on the roof",
    "Hugo restores vintage motorcycles",
]
QUERY = "harpsichord workshop"
NEW_FACT = "Ines tunes harpsichords for the orchestra"


def live(vault_dir: Path) -> Path:
    index = vault_dir / ".memvault" / "index"
    return index / (index / "current").read_text().strip()


def garbage(path: Path, size: int | None = None, start: int = 0) -> None:
    """Overwrite `path` from `start` with random bytes, keeping (or setting) its size."""
    size = path.stat().st_size if size is None else size
    with open(path, "r+b") as handle:
        handle.seek(start)
        handle.write(os.urandom(size - start))
        handle.truncate(size)


def cache_garbage(vault_dir: Path) -> None:
    garbage(vault_dir / ".memvault" / "cache" / "embeddings.sqlite")


def cache_truncated(vault_dir: Path) -> None:
    path = vault_dir / ".memvault" / "cache" / "embeddings.sqlite"
    with open(path, "r+b") as handle:
        handle.truncate(path.stat().st_size // 3)


def cache_foreign_table(vault_dir: Path) -> None:
    """Sound sqlite, but a `vectors` table memvault never wrote (another tool's, an old experiment)."""
    path = vault_dir / ".memvault" / "cache" / "embeddings.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    with sqlite3.connect(path) as db:
        db.executescript("CREATE TABLE vectors (a, b); INSERT INTO vectors VALUES (1, 2);")


def cache_row(vault_dir: Path) -> None:
    import numpy as np

    db = sqlite3.connect(vault_dir / ".memvault" / "cache" / "embeddings.sqlite")
    noise = np.random.default_rng(1).standard_normal(384).astype(np.float16) * 3  # (stored as float16)
    # Every cached vector: the index's own rows are recomputed only when something is re-embedded.
    db.execute("UPDATE vectors SET vector = ?", (noise.tobytes(),))
    db.commit()
    db.close()


def vector_file(vault_dir: Path) -> Path:
    files = list(live(vault_dir).glob("vectors-*.f32"))
    assert len(files) == 1
    return files[0]


def vectors_garbage(vault_dir: Path) -> None:
    garbage(vector_file(vault_dir))


def vectors_unit(vault_dir: Path) -> None:
    import numpy as np

    path = vector_file(vault_dir)
    rows = path.stat().st_size // (384 * 4)
    noise = np.random.default_rng(2).standard_normal((rows, 384)).astype(np.float32)
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    path.write_bytes(noise.tobytes())


def vectors_truncated(vault_dir: Path) -> None:
    path = vector_file(vault_dir)
    with open(path, "r+b") as handle:
        handle.truncate(path.stat().st_size // 2)


def index_is_a_file(vault_dir: Path) -> None:
    index = vault_dir / ".memvault" / "index"
    shutil.rmtree(index)
    index.write_text("not an index\n")


def tantivy_meta(vault_dir: Path) -> None:
    (live(vault_dir) / "lexical" / "meta.json").write_bytes(os.urandom(400))


def catalog_garbage(vault_dir: Path) -> None:
    catalog = live(vault_dir) / "catalog.sqlite"
    for extra in catalog.parent.glob("catalog.sqlite-*"):
        extra.unlink()
    garbage(catalog)


def catalog_pages(vault_dir: Path) -> None:
    catalog = live(vault_dir) / "catalog.sqlite"
    for extra in catalog.parent.glob("catalog.sqlite-*"):
        extra.unlink()
    garbage(catalog, start=4096)


# damage -> (what the notice of `add` + `search` says, the doctor check that reports it). A damaged
# cached vector is only read (and told) when its text is embedded again: by `reindex --clear`.
DAMAGES = {
    "cache-garbage": (cache_garbage, "embedding cache was damaged", "embedding cache"),
    "cache-truncated": (cache_truncated, "embedding cache was damaged", "embedding cache"),
    "cache-row": (cache_row, "", None),
    "cache-foreign-table": (cache_foreign_table, "embedding cache was damaged", "embedding cache"),
    "vectors-garbage": (vectors_garbage, "recomputing its vectors", "index rows"),
    "vectors-unit": (vectors_unit, "recomputing its vectors", "index rows"),
    "vectors-truncated": (vectors_truncated, "recomputing its vectors", "search index"),  # one stat finds it
    "index-is-a-file": (index_is_a_file, "not a directory", "search index"),
    "tantivy-meta": (tantivy_meta, "search index is damaged", "search index"),
    "catalog-garbage": (catalog_garbage, "search index is damaged", "search index"),
    "catalog-pages": (catalog_pages, "search index is damaged", "search index"),
}


# One built vault per test process, copied for each test (building it costs a few processes). It is
# built lazily inside a test's own fixtures (the model and git identity are set per test), in
# pytest's temporary folder, so the run's cleanup removes it.
_TEMPLATE: dict[str, object] = {}


@pytest.fixture
def built(tmp_path, tmp_path_factory) -> Path:
    """A vault indexed by `memvault reindex`, plus one fact added after: the next search embeds it,
    so it reads the embedding cache."""
    from memvault import Vault

    if "path" not in _TEMPLATE:
        template = tmp_path / "template"
        with Vault.init(template) as vault:
            vault.add_many(FACTS)
        result = run_memvault("reindex", "--vault", str(template))
        assert result.returncode == 0, result.stderr
        assert run_memvault("add", NEW_FACT, "--vault", str(template)).returncode == 0
        keep = tmp_path_factory.mktemp("derived-damage") / "vault"
        shutil.copytree(template, keep, symlinks=True)
        _TEMPLATE["path"] = keep
    target = tmp_path / "vault"
    shutil.copytree(_TEMPLATE["path"], target, symlinks=True)
    return target


def search(vault_dir: Path, query: str = QUERY):
    result = run_memvault("search", query, "--json", "--limit", "20", "--vault", str(vault_dir))
    assert result.returncode == 0, result.stderr
    assert "unexpected" not in result.stderr and "Traceback" not in result.stderr, result.stderr
    hits = [(h["id"], h["score"]) for h in json.loads(result.stdout)]
    return hits, result.stderr


def same(hits, expected) -> bool:
    """Same hits in the same order with the same scores (to float32 noise: a vector embedded alone
    and the same text embedded in a batch may differ in the last bits)."""
    return [k for k, _ in hits] == [k for k, _ in expected] and all(
        abs(a - b) < 1e-4 for (_, a), (_, b) in zip(hits, expected, strict=True))


def clean_hits(vault_dir: Path):
    """The hits a clean build from the template's files gives (computed once; the files are the same)."""
    if "clean" not in _TEMPLATE:
        other = vault_dir.parent / "clean-copy"
        shutil.copytree(_TEMPLATE["path"], other, symlinks=True)
        shutil.rmtree(other / ".memvault")
        _TEMPLATE["clean"] = search(other)[0]
        shutil.rmtree(other)
    return _TEMPLATE["clean"]


def checks(result) -> dict[str, dict]:
    assert result.returncode == 0, result.stderr
    assert "unexpected" not in result.stderr, result.stderr
    return {c["name"]: c for c in json.loads(result.stdout)["checks"]}


@pytest.mark.parametrize("name", DAMAGES)
def test_search_after_damage_rebuilds_with_a_notice_and_scores_as_a_clean_rebuild(built, name):
    damage, notice, _check = DAMAGES[name]
    damage(built)
    files = snapshot(built)
    hits, stderr = search(built)
    assert notice in stderr
    assert same(hits, clean_hits(built))
    again, stderr = search(built)
    assert again == hits and stderr == ""
    assert snapshot(built) == files


@pytest.mark.real_model
@pytest.mark.parametrize("name", ["vectors-garbage", "vectors-unit"])
def test_same_size_garbage_over_the_vectors_never_changes_scores_with_the_real_model(vault_dir, name):
    from memvault import Vault

    with Vault.open(vault_dir) as vault:
        vault.add_many(FACTS)
    built = vault_dir
    clean = search(built, "who makes musical instruments")[0]
    DAMAGES[name][0](built)
    hits, stderr = search(built, "who makes musical instruments")
    assert "does not match its checksum" in stderr and "recomputing its vectors" in stderr
    assert hits == clean  # recomputed from the cache: the very vectors of the clean build


REINDEX_NOTICES = {"cache-garbage": "embedding cache was damaged", "cache-truncated": "embedding cache was damaged",
                   "cache-foreign-table": "embedding cache was damaged (its vectors table has columns a, b)",
                   "cache-row": f"embedding cache held {len(FACTS)} damaged vector(s)",
                   "index-is-a-file": "not a directory"}


@pytest.mark.parametrize("name", DAMAGES)
def test_reindex_clear_after_damage_succeeds(built, name):
    damage, _notice, _check = DAMAGES[name]
    damage(built)
    files = snapshot(built)
    result = run_memvault("reindex", "--clear", "--vault", str(built))
    assert result.returncode == 0, result.stderr
    assert "unexpected" not in result.stderr
    assert REINDEX_NOTICES.get(name, "") in result.stderr
    assert f"indexed {len(FACTS) + 1} facts" in result.stdout
    hits, stderr = search(built)
    assert stderr == "" and same(hits, clean_hits(built))
    assert snapshot(built) == files


@pytest.mark.parametrize("name", [n for n, (_d, _n, check) in DAMAGES.items() if check])
def test_doctor_reports_damage_and_fix_repairs_it(built, name):
    damage, _notice, check = DAMAGES[name]
    damage(built)
    files = snapshot(built)
    found = checks(run_memvault("doctor", "--json", "--vault", str(built)))[check]
    assert found["status"] == "warn" and "damaged" in found["message"] and found["fix"], found
    # "fixed" means the check ran again after the repair and found nothing.
    fixed = checks(run_memvault("doctor", "--fix", "--json", "--vault", str(built)))
    assert fixed[check]["status"] == "fixed", fixed[check]
    assert {fixed[name]["status"] for name in ("search index", "embedding cache")} <= {"ok", "fixed"}
    hits, stderr = search(built)
    assert stderr == "" and same(hits, clean_hits(built))
    assert snapshot(built) == files


def test_doctor_fix_refills_a_deleted_cache_from_the_index(built):
    """A damaged cache is not only emptied: the index's verified vectors go back in, so the next
    full rebuild runs no model."""
    cache_garbage(built)
    fixed = checks(run_memvault("doctor", "--fix", "--json", "--vault", str(built)))["embedding cache"]
    assert fixed["status"] == "fixed" and f"refilled {len(FACTS)}" in fixed["message"]
    result = run_memvault("reindex", "--clear", "--vault", str(built))
    # (The fact added after the build was embedded by doctor's own catch-up of the index.)
    assert f"embedded 0, reused {len(FACTS) + 1} cached" in result.stdout, result.stdout


def test_a_long_lived_process_verifies_new_rows_and_hears_of_damage_as_a_notice(built):
    """In-process: notices go to the `notify` callback (never printed); rows appended by another
    process are verified before they are scored, though the rows before were verified already."""
    from memvault import Vault

    notices: list[str] = []
    with Vault.open(built, notify=notices.append) as vault:
        first = [h.id for h in vault.search(QUERY)]  # embeds the pending fact; verifies every row
        assert notices == []
        # Another process appends a row, then the appended bytes are damaged behind this one's back.
        assert run_memvault("add", "Jonas paints harpsichord lids", "--vault", str(built)).returncode == 0
        assert run_memvault("reindex", "--vault", str(built)).returncode == 0
        path = vector_file(built)
        garbage(path, start=path.stat().st_size - 384 * 4)
        hits = vault.search(QUERY, limit=20)
        assert any("does not match its checksum" in n for n in notices), notices
        assert first[0] in [h.id for h in hits[:3]]
    clean = built.parent / "clean"
    shutil.copytree(built, clean, symlinks=True)
    shutil.rmtree(clean / ".memvault")
    assert same([(h.id, h.score) for h in hits], search(clean)[0])


@pytest.mark.parametrize("damage", [vectors_garbage, vectors_truncated])
def test_vectors_verified_on_a_thread_of_their_own_still_catch_damage(built, monkeypatch, damage):
    """A large vector file is verified on a thread while the first search loads the model (0.3 s
    at 1M rows, saved from every cold search). What that thread finds is found again, and told, by
    the search: the same notice and hits as verifying in line. (Here every file counts as large.)"""
    from memvault import Vault
    from memvault.index import vectors

    monkeypatch.setattr(vectors, "AHEAD_MIN_ROWS", 1)
    started = []
    real = vectors.VectorFile._verify_quietly
    monkeypatch.setattr(vectors.VectorFile, "_verify_quietly", lambda self: started.append(1) or real(self))
    clean = built.parent / "clean"
    shutil.copytree(built, clean, symlinks=True)
    shutil.rmtree(clean / ".memvault")
    damage(built)
    notices: list[str] = []
    with Vault.open(built, notify=notices.append) as vault:
        hits = vault.search(QUERY, limit=20)
    assert started and any("recomputing its vectors" in n for n in notices), notices
    assert same([(h.id, h.score) for h in hits], search(clean)[0])


def _warm_search_across(vault_dir: Path, damage, query: str, *args: str) -> tuple[list[dict], int, str]:
    """One `search --stdin` process (warm, as an MCP server is): a first query, then `damage()`,
    then `query`; returns its hits, the exit code and stderr."""
    import subprocess
    import sys

    process = subprocess.Popen([sys.executable, "-m", "memvault", "search", "--stdin", "--json", *args, "--vault",
                                str(vault_dir)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        process.stdin.write("mountains 7\n")
        process.stdin.flush()
        assert json.loads(process.stdout.readline())["hits"]
        damage()
        process.stdin.write(query + "\n")
        process.stdin.flush()
        hits = json.loads(process.stdout.readline())["hits"]
        process.stdin.close()
        process.wait(timeout=300)
    finally:
        process.kill()
    return hits, process.returncode, process.stderr.read()


def test_a_vector_file_cut_short_under_a_warm_process_is_recomputed_not_a_crash(vault_dir):
    """Fault tried: the vector file truncated (a restore, a sync tool) between two searches of one
    warm process (`search --stdin`, as an MCP server keeps its index open). Its memory map then
    reached past the end of the file: SIGBUS, which ended a whole MCP server and its clients. Now
    the next search sees the file short, says so and recomputes the vectors."""
    assert run_memvault("add", "--stdin", "--vault", str(vault_dir),
                        input="\n".join(f"fact {i} about mountains {i}" for i in range(200))).returncode == 0

    def cut_short() -> None:
        with open(vector_file(vault_dir), "r+b") as handle:
            handle.truncate(0)

    hits, code, stderr = _warm_search_across(vault_dir, cut_short, "mountains 8")
    assert code == 0 and "fact 8 about mountains 8" in [hit["text"] for hit in hits]
    assert "shorter than the catalog says" in stderr


def test_tantivy_damaged_under_a_warm_process_is_rebuilt_not_an_error_each_search(vault_dir):
    """Fault tried: Tantivy's meta.json overwritten with random bytes while a warm process (an MCP
    server, `search --stdin`) has the index open, then a fact added. Every later search of that
    process was "unexpected error: ValueError: Data corrupted" until it was restarted; now the
    next one rebuilds the index with a notice and finds the new fact."""
    assert run_memvault("add", "--stdin", "--vault", str(vault_dir),
                        input="\n".join(f"fact {i} about mountains" for i in range(20))).returncode == 0

    def overwrite_meta_then_add() -> None:
        garbage(live(vault_dir) / "lexical" / "meta.json", 200)
        assert run_memvault("add", "a fresh fact about glaciers", "--vault", str(vault_dir)).returncode == 0

    hits, code, stderr = _warm_search_across(vault_dir, overwrite_meta_then_add, "glaciers", "--lexical")
    assert code == 0 and [hit["text"] for hit in hits] == ["a fresh fact about glaciers"]
    assert "search index is damaged (Data corrupted" in stderr
