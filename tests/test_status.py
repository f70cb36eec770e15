"""`memvault status`: what the vault holds and where it stands."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from support.git import git


def test_status_counts_facts_days_pages_and_dream_progress(cli, vault):
    kept = vault.add("Alice prefers green tea", at="2026-11-01T09:00:00")
    gone = vault.add("Bob's phone is 555", at="2026-11-02T09:00:00")
    vault.add("Carol joined", at="2026-11-03T09:00:00")
    vault.forget(gone.id, "wrong")
    page = vault.root / "wiki" / "people" / "alice.md"
    page.write_text(f"---\ntitle: Alice\n---\n# Alice\n\nPrefers green tea [^{kept.id}].\n")
    with open(vault.root / "log.md", "a") as log:
        log.write("- 2026-11-02T03:00:00+00:00 dream ok 2026-11-01..2026-11-01 watermark=2026-11-01 · 1 fact\n")
        log.write("- 2026-11-03T03:00:00+00:00 dream failed 2026-11-03..2026-11-03 · attempt 1/3: bad answer\n")
    vault.git.commit(["."], "dream: 2026-11-01..2026-11-01 — 1 created")

    result = cli("status", "--json")

    assert result.exit_code == 0, result.stderr
    state = json.loads(result.stdout)
    assert state["path"] == str(vault.root)
    assert state["facts"] == {"total": 3, "live": 2, "forgotten": 1, "purged": 0, "unreadable": 0}
    assert state["days"] == 3 and state["pages"] == 1
    assert state["watermark"] == "2026-11-01"
    # the forgotten fact is not pending, nor its day, which holds nothing else to consolidate
    assert state["pending"] == {"days": 1, "facts": 1, "scrub_pages": 0}
    assert state["last_dream"]["outcome"] == "failed"
    assert state["failed_attempts"] == 1
    assert state["remote"] is None and state["lock"] is None
    assert state["git"]["uncommitted"] == 0
    text = cli("status").stdout
    assert "2 (1 forgotten, 0 purged) in 3 daily log(s)" in text and "watermark   2026-11-01" in text


def test_status_shows_the_lock_holder_and_ahead_behind(cli, vault, tmp_path):
    """A real process holds the write lock: status names its pid and command, and returns at once."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    vault.set_remote(str(remote))
    vault.add("first")
    vault.sync()
    vault.add("second, not yet synced")
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from memvault import Vault\n"
         "with Vault(sys.argv[1]).storage.write_lock():\n    print('held', flush=True); time.sleep(30)",
         str(vault.root)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        state = json.loads(cli("status", "--json").stdout)
        assert time.monotonic() - started < 5
        assert state["lock"]["pid"] == holder.pid
        assert "-c" in state["lock"]["command"]
        assert state["remote"]["url"] == str(remote)
        assert (state["remote"]["ahead"], state["remote"]["behind"]) == (1, 0)
    finally:
        holder.kill()
        holder.wait()
    assert json.loads(cli("status", "--json").stdout)["lock"] is None
    assert git(vault.root, "status", "--porcelain") == ""


def test_status_reports_a_missing_or_damaged_index_without_building_it(cli, vault_dir):
    """Bad states tried: no index yet, then a catalog overwritten with garbage. Status and doctor
    report each as it is, keep the same index fields, and neither builds nor repairs anything."""
    from support.cli import run_memvault

    from memvault import Vault

    Vault.open(vault_dir).add("Anna builds harpsichords")
    index = json.loads(cli("status", "--json").stdout)["index"]
    assert index["built"] is False and index["missing"] is True and index["damaged"] is None
    assert index["documents"] == 0 and index["drift"] == 1 and index["model"]
    assert not (vault_dir / ".memvault" / "index").exists()

    assert run_memvault("reindex", "--vault", str(vault_dir)).returncode == 0
    root = vault_dir / ".memvault" / "index"
    live = root / (root / "current").read_text().strip()
    (live / "catalog.sqlite").write_bytes(b"this is not a database" * 100)
    for extra in live.glob("catalog.sqlite-*"):
        extra.unlink()

    result = cli("status", "--json")
    assert result.exit_code == 0 and "rebuild" not in result.stderr
    index = json.loads(result.stdout)["index"]
    assert set(index) == {"built", "documents", "pending_embeddings", "drift", "model", "built_with", "missing",
                          "damaged", "unavailable", "rerank"}
    assert index["built_with"] is None
    assert index["built"] is True and index["damaged"] and index["documents"] is None
    assert "damaged" in cli("status").stdout
    check = {c["name"]: c for c in json.loads(cli("doctor", "--json").stdout)["checks"]}["search index"]
    assert check["status"] == "warn" and "damaged" in check["message"]
    # Nothing was rebuilt: the same generation is live and its catalog is still garbage.
    assert (root / "current").read_text().strip() == live.name
    assert (live / "catalog.sqlite").read_bytes().startswith(b"this is not a database")

    fixed = {c["name"]: c for c in json.loads(cli("doctor", "--fix", "--json").stdout)["checks"]}["search index"]
    assert fixed["status"] == "fixed" and "rebuilt" in fixed["message"]
    assert json.loads(cli("status", "--json").stdout)["index"]["documents"] == 1


def test_a_lock_holder_that_left_no_record_is_said_plainly(cli, vault):
    """A process holds the write lock but wrote no holder record (a `flock` of the file, or a
    memvault write whose disk was full): status and doctor said "held by pid None (None) since
    None"; now they say the holder is unknown."""
    lock_file = vault.root / ".memvault" / "locks" / "write.lock"
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, sys, time\nf = open(sys.argv[1], 'a')\nfcntl.flock(f, fcntl.LOCK_EX)\n"
         "print('held', flush=True)\ntime.sleep(30)", str(lock_file)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        status = cli("status").stdout
        doctor = cli("doctor").stdout
    finally:
        holder.kill()
        holder.wait()
    line = next(line for line in status.splitlines() if line.startswith("lock"))
    assert "None" not in line and "left no record" in line, line
    assert "pid None" not in doctor and "write lock held by a process that left no record" in doctor, doctor


def test_status_counts_purged_facts(cli, vault):
    """Seen: `facts 3 (0 forgotten)` after a purge, as if the purged fact had never been."""
    keep = [vault.add(f"fact {n}") for n in range(3)]
    gone = vault.add("the cellar code is 4471-OCELOT")
    vault.forget(keep[0].id)
    vault.purge([gone.id])
    state = vault.status()
    assert state["facts"] == {"total": 3, "live": 2, "forgotten": 1, "purged": 1, "unreadable": 0}
    assert "facts       2 (1 forgotten, 1 purged) in 1 daily log(s)" in cli("status").stdout
