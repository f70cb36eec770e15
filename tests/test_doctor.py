"""`memvault doctor`: checks that explain, and `--fix` repairs that say what they did."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from support.cli import run_memvault
from support.git import commit_count, git, is_clean


def _checks(result) -> dict[str, dict]:
    return {c["name"]: c for c in json.loads(result.stdout)["checks"]}


def test_healthy_vault_passes(cli, vault):
    vault.add("Alice prefers green tea")
    result = cli("doctor", "--json")
    assert result.exit_code == 0, result.stdout
    checks = _checks(result)
    assert all(c["status"] in ("ok", "warn") for c in checks.values())
    assert checks["merge driver"]["status"] == "ok"
    assert checks["git identity"]["status"] == "ok" and "author@example.test" in checks["git identity"]["message"]
    model = checks["embedding model"]
    assert model["status"] == "ok" and os.environ["MEMVAULT_EMBED_MODEL_PATH"] in model["message"]
    assert checks["LLM"]["status"] == "warn" and "MEMVAULT_MODEL" in checks["LLM"]["message"]
    assert checks["settings"]["status"] == "ok"


def test_every_setting_the_template_shows_is_one_memvault_reads():
    """The template's keys, its commented-out ones too, and the settings memvault reads agree."""
    import re

    from memvault.base.config import unknown_settings

    template = (Path(__file__).parent.parent / "vault-template" / "memvault.toml").read_text()
    uncommented = re.sub(r"(?m)^# (\w+ = )", r"\1", template)
    assert uncommented != template and unknown_settings(uncommented) == []


def test_a_mistyped_setting_is_named_with_the_one_meant_and_changes_nothing(cli, vault):
    """A typo in memvault.toml leaves its setting at the default: doctor says which key and what it
    probably meant. It is a warning, not an error: a newer memvault's settings are not refused."""
    config = vault.root / "memvault.toml"
    text = config.read_text().replace("lock_timeout = 10", "lock_timout = 3")
    text = text.replace("[dream]\n", "[dream]\nnightly = 1\n")
    assert "lock_timout" in text and "nightly" in text
    config.write_text('tymezone = "Europe/Paris"\n' + text + "\n[reranker]\nenabled = false\n")
    git(vault.root, "commit", "-q", "-am", "settings edited by hand")
    before = config.read_bytes()
    result = cli("doctor", "--json")
    assert result.exit_code == 0, [c for c in _checks(result).values() if c["status"] == "fail"]
    settings = _checks(result)["settings"]
    assert settings["status"] == "warn"
    for said in ("tymezone (did you mean vault.timezone?)", "vault.lock_timout (did you mean vault.lock_timeout?)",
                 "reranker (did you mean [rerank]?)", "dream.nightly"):
        assert said in settings["message"], settings["message"]
    assert "dream.nightly (" not in settings["message"]  # nothing near it: no guess
    assert cli("status").exit_code == 0 and cli("search", "tea").exit_code == 0
    assert config.read_bytes() == before


def test_doctor_finds_problems_and_fix_repairs_the_safe_ones(cli, vault):
    """Broken on purpose: a hand-mangled log line, a page citing a fact that does not exist, an
    uncommitted hand edit, the merge driver removed from git config, a stale .git/index.lock."""
    fact = vault.add("Alice prefers green tea", at="2026-11-01T09:00:00")
    log = vault.root / fact.path
    with open(log, "a") as f:
        f.write("- typed by hand without metadata\n")
    page = vault.root / "wiki" / "people" / "alice.md"
    page.write_text(f"---\ntitle: Alice\n---\n# Alice\n\nTea [^{fact.id}], coffee [^zzzzzzzzzzzzzzzz].\n")
    git(vault.root, "config", "--unset", "merge.union.driver")
    lock = vault.root / ".git" / "index.lock"
    lock.write_text("")
    old = time.time() - 3600
    os.utime(lock, (old, old))

    result = cli("doctor", "--json")

    assert result.exit_code == 1
    checks = _checks(result)
    assert "logs/2026/2026-11-01.md:4" in checks["daily logs"]["details"][0]
    assert checks["daily logs"]["status"] == "fail"
    assert checks["citations"]["status"] == "fail"
    assert "wiki/people/alice.md cites zzzzzzzzzzzzzzzz" in checks["citations"]["details"][0]
    assert checks["uncommitted changes"]["status"] == "fail"
    assert set(checks["uncommitted changes"]["details"]) == {fact.path, "wiki/people/alice.md"}
    assert checks["merge driver"]["status"] == "fail"
    # Every command, doctor included, clears a stale git lock at once and says so.
    assert not lock.exists() and ".git/index.lock" in result.stderr
    assert checks["locks"]["status"] == "ok"
    text = cli("doctor")
    assert "FAIL   daily logs" in text.stdout and "doctor --fix` would" in text.stdout
    commits = commit_count(vault.root)

    fixed = cli("doctor", "--fix", "--json")

    assert fixed.exit_code == 1  # the log line and the citation need a person
    report = json.loads(fixed.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    for name in ("uncommitted changes", "merge driver"):
        assert checks[name]["status"] == "fixed", checks[name]
    assert any("committed 2 leftover change(s)" in line for line in report["fixed"])
    assert checks["daily logs"]["status"] == "fail" and checks["citations"]["status"] == "fail"
    assert not lock.exists() and is_clean(vault.root)
    assert commit_count(vault.root) == commits + 1
    assert "memvault.remote.union_merge" in git(vault.root, "config", "--get", "merge.union.driver")


def test_llm_and_embedding_configuration_are_checked_without_network(cli, vault, monkeypatch, tmp_path):
    """Bad inputs tried: a model whose provider key is missing (a warning: it fails only `dream`),
    an embedding path with no model."""
    monkeypatch.setenv("MEMVAULT_MODEL", "openai/gpt-4o-mini")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("MEMVAULT_EMBED_MODEL_PATH", str(tmp_path / "no-model"))
    result = cli("doctor", "--json")
    assert result.exit_code == 1
    checks = _checks(result)
    # a warning, not a failure: a clone that never dreams (dream runs on one machine) needs no key
    assert checks["LLM"]["status"] == "warn" and "OPENAI_API_KEY" in checks["LLM"]["message"]
    assert checks["embedding model"]["status"] == "fail"
    assert "no-model" in checks["embedding model"]["message"]

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    monkeypatch.delenv("MEMVAULT_EMBED_MODEL_PATH")
    checks = _checks(cli("doctor", "--json"))
    assert checks["LLM"]["status"] == "ok" and "not contacted" in checks["LLM"]["message"]


def test_fix_reindexes_a_drifted_index(cli, vault):
    vault.add("Alice prefers green tea")
    vault.reindex()
    vault.add("Bob moved to Lyon")
    checks = _checks(cli("doctor", "--json"))
    assert checks["search index"]["status"] == "warn" and "changed since indexing" in checks["search index"]["message"]
    checks = _checks(cli("doctor", "--fix", "--json"))
    assert checks["search index"]["status"] == "fixed"
    assert vault.index_status()["drift"] == 0


def test_doctor_finds_the_model_where_download_model_puts_it(cli, vault, monkeypatch, tmp_path, tiny_model_path):
    """No MEMVAULT_EMBED_MODEL_PATH: doctor warns (naming `reindex --download-model`) while the model
    cache is empty, and says ok once the model is in the cache search loads it from."""
    from memvault import Vault
    from memvault.index.embedder import model_cache_dir

    monkeypatch.delenv("MEMVAULT_EMBED_MODEL_PATH", raising=False)
    monkeypatch.delenv("FASTEMBED_CACHE_PATH", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    check = _checks(cli("doctor", "--json"))["embedding model"]
    assert check["status"] == "warn" and "memvault reindex --download-model" in check["message"]

    # The hub's cache layout, as `reindex --download-model` leaves it (files linked, not copied).
    repo = model_cache_dir() / "models--Qdrant--all-MiniLM-L6-v2-onnx"
    snapshot = repo / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0" * 40)
    for file in Path(tiny_model_path).iterdir():
        (snapshot / file.name).symlink_to(file)
    check = _checks(cli("doctor", "--json"))["embedding model"]
    assert check["status"] == "ok" and str(model_cache_dir()) in check["message"]

    # ... and search really loads it from there (the dense half answers).
    fresh = Vault.open(vault.root)
    fresh.add("Ines collects antique maps")
    hits = fresh.search("antique maps", explain=True)
    assert hits and "dense" in hits[0].explain


def test_doctor_fails_a_model_file_that_does_not_load(vault, tmp_path, monkeypatch):
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "model.onnx").write_bytes(b"not an onnx model")
    monkeypatch.setenv("MEMVAULT_EMBED_MODEL_PATH", str(broken))
    from memvault import Vault

    check = next(c for c in Vault.open(vault.root).doctor().checks if c.name == "embedding model")
    assert check.status == "fail" and "does not load" in check.message


def test_fix_commits_only_the_vaults_own_files(cli, vault):
    """After a killed sync: git's .merge_file_* temp copies and a killed atomic write's temp file are
    deleted, never committed; a note the user keeps in the folder is left alone; the hand edit of a
    daily log is committed."""
    fact = vault.add("Alice prefers green tea", at="2026-11-01T09:00:00")
    log = vault.root / fact.path
    with open(log, "a") as f:
        f.write("- typed by hand <!-- mv {\"id\":\"aaaaaaaaaaaaaaaa\",\"at\":\"2026-11-01T10:00:00+00:00\"} -->\n")
    (vault.root / ".merge_file_Ab12Cd").write_text("half a merge\n")
    (vault.root / "MEMORY.md.4242.tmp").write_text("torn\n")
    (vault.root / "notes.txt").write_text("my own notes\n")
    checks = _checks(cli("doctor", "--json"))
    assert checks["uncommitted changes"]["status"] == "fail"
    assert any(".merge_file_Ab12Cd" in d for d in checks["uncommitted changes"]["details"])

    result = cli("doctor", "--fix", "--json")
    assert result.exit_code == 0, result.stdout
    committed = git(vault.root, "show", "--name-only", "--format=", "HEAD").split()
    assert committed == [fact.path]
    assert not (vault.root / ".merge_file_Ab12Cd").exists()
    assert not (vault.root / "MEMORY.md.4242.tmp").exists()
    assert (vault.root / "notes.txt").read_text() == "my own notes\n"
    tree = git(vault.root, "ls-tree", "-r", "--name-only", "HEAD")
    assert "notes.txt" not in tree and ".merge_file" not in tree
    after = _checks(cli("doctor", "--json"))["uncommitted changes"]
    assert after["status"] == "warn" and after["details"] == ["notes.txt"]


def test_without_the_model_doctor_does_not_offer_a_reindex_that_cannot_help(vault, tmp_path):
    """Documents left without a vector (the model is not on this machine) were a warning whose
    advice, `doctor --fix` would reindex, changed nothing: the next doctor gave it again."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "empty-cache"), "MEMVAULT_EMBED_MODEL_PATH": ""}
    vault.add("Alice prefers green tea")

    def memvault(*args: str):
        return run_memvault(*args, "--vault", str(vault.root), env=env)

    assert memvault("search", "green tea").returncode == 0  # builds the index by words only
    for _ in range(2):
        index = _checks(memvault("doctor", "--fix", "--json"))["search index"]
        assert index["status"] == "warn" and "until the embedding model is on this machine" in index["message"]
        assert "reindex" not in json.dumps(index)
    text = memvault("doctor").stdout
    assert "would reindex" not in text and "embedding model" in text


def test_a_write_under_way_in_another_process_is_not_called_uncommitted(vault_dir, vault):
    """Concurrency tried: `memvault doctor` (a cron health check) while agents add. An add appends
    to today's log, then commits; doctor looking in between used to fail (exit 1) "1 uncommitted
    change(s) to the vault's files", 2 runs in 6 beside four writers. The writer is caught here
    between its append and its commit and stopped there (SIGSTOP, its git children too): the
    changes its journal names are its own, under way, and doctor passes."""
    import signal
    import subprocess
    import sys

    first = vault.add("the first fact of the day")
    log = vault_dir / first.path
    journal = vault_dir / ".memvault" / "journal.json"
    for attempt in range(60):
        size = log.stat().st_size
        writer = subprocess.Popen([sys.executable, "-m", "memvault", "add", f"fact number {attempt}", "--vault",
                                   str(vault_dir)], start_new_session=True, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        caught = False
        while writer.poll() is None and not caught:
            if journal.exists() and log.stat().st_size > size:
                os.killpg(writer.pid, signal.SIGSTOP)
                # appended and not committed yet (else this attempt proves nothing: let it go on)
                caught = bool(git(vault_dir, "status", "--porcelain", "--", first.path).strip())
                if not caught:
                    os.killpg(writer.pid, signal.SIGCONT)
        if caught:
            break
        assert writer.wait(timeout=60) == 0
    else:
        raise AssertionError("never caught a writer between its append and its commit")
    try:
        doctor = subprocess.run([sys.executable, "-m", "memvault", "doctor", "--json", "--vault", str(vault_dir)],
                                capture_output=True, text=True, timeout=120)
    finally:
        os.killpg(writer.pid, signal.SIGCONT)
    assert writer.wait(timeout=60) == 0
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["uncommitted changes"]["status"] == "ok", checks["uncommitted changes"]
    assert "under way" in checks["uncommitted changes"]["message"]
    assert doctor.returncode == 0, [c for c in checks.values() if c["status"] == "fail"]
    assert is_clean(vault_dir)
    # A change nobody is writing is still named.
    with open(log, "a", encoding="utf-8") as handle:
        handle.write("- a hand edit left uncommitted\n")
    after = subprocess.run([sys.executable, "-m", "memvault", "doctor", "--json", "--vault", str(vault_dir)],
                           capture_output=True, text=True, timeout=120)
    assert after.returncode == 1
    assert {c["name"]: c for c in json.loads(after.stdout)["checks"]}["uncommitted changes"]["status"] == "fail"


def test_a_forget_record_that_does_not_parse_is_named(cli, vault):
    """A garbage line in tombstones.jsonl (a hand edit, a merge by plain git) forgets nothing, and
    doctor said every check was ok."""
    fact = vault.add("Alice prefers green tea")
    vault.forget(fact.id, "wrong")
    with open(vault.root / "tombstones.jsonl", "a") as f:
        f.write("garbage not json\n")
    git(vault.root, "commit", "-qam", "hand edit")
    checks = _checks(cli("doctor", "--json"))
    assert checks["forget records"]["status"] == "warn" and checks["forget records"]["details"] == ["garbage not json"]
    assert "1 line(s) of tombstones.jsonl" in checks["forget records"]["message"]
