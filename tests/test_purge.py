"""`memvault purge`: facts' text removed from the logs, every commit, pages, the index and the
embedding cache; pushed with a lease by sync and adopted by other clones. Real git repositories,
a bare remote and real clones (memvault run as a process where the path matters)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support.cli import run_memvault
from support.git import git, is_clean, snapshot

from memvault import Vault
from memvault.errors import ExitCode, InvalidInput, NotFound
from memvault.formats.tombstones import parse_tombstones
from memvault.remote.purge_filter import needles_of, scrub_message, scrub_text

SECRET = "the vault door code is 7319-alpha-kilo"
OTHER = "Bob moved to Lyon last spring with his cat"
KEPT = "Alice prefers green tea every morning"


def _objects(repo: Path) -> bytes:
    """Every object git holds (loose and packed, reachable or not), with its content."""
    return subprocess.run(["git", "-C", str(repo), "cat-file", "--batch-all-objects", "--batch"],
                          capture_output=True, check=True).stdout


def _all_history(repo: Path) -> str:
    return git(repo, "log", "--all", "-p", "--format=%H%n%B")


def _files_under(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in path.rglob("*") if p.is_file())


def _assert_gone(repo: Path, *texts: str) -> None:
    history, objects = _all_history(repo), _objects(repo)
    for text in texts:
        assert text not in history
        assert text.encode() not in objects
    for name in ("ORIG_HEAD", "FETCH_HEAD", "COMMIT_EDITMSG"):
        path = repo / ".git" / name
        assert not path.exists() or all(t.encode() not in path.read_bytes() for t in texts)
    assert not (repo / ".git" / "filter-repo").exists()


def _vault_with_facts(root: Path) -> tuple[Vault, dict[str, str]]:
    vault = Vault.init(root)
    kept = vault.add(KEPT, at="2026-11-01", tags=["alice"])
    secret = vault.add(SECRET + "\nsecond line of the same secret fact", at="2026-11-02")
    other = vault.add(OTHER, at="2026-11-02")
    vault.add_many([{"text": "later fact one", "at": "2026-11-03"}, {"text": "later fact two", "at": "2026-11-03"}])
    vault.forget(other.id, reason="wrong person")
    page = root / "wiki" / "people" / "door.md"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(f"---\ntitle: Doors\nsources: [{secret.id}, {kept.id}]\n---\n# Doors\n\n"
                    f"- The code is 7319-alpha-kilo [^{secret.id}]\n- Alice likes tea [^{kept.id}]\n")
    (root / "MEMORY.md").write_text(f"# Memory\n\n- {SECRET}\n- tea for Alice\n")
    vault.git.commit(["wiki/people/door.md", "MEMORY.md"], "dream: 2026-11-01..2026-11-03 — 1 created")
    return vault, {"kept": kept.id, "secret": secret.id, "other": other.id}


def test_purge_removes_text_from_logs_every_commit_pages_index_and_cache(tmp_path):
    """Purged: a multi-line fact cited by a page and quoted verbatim in MEMORY.md, plus a fact that
    was forgotten first (its tombstone carried the text's hash). Checked: working tree, every
    commit, every object git holds (unreachable ones too), commit messages, the tombstones (no
    text, no hash), the search index and embedding cache files, search itself; the kept fact and
    its page statement survive; purging again changes nothing."""
    root = tmp_path / "v"
    vault, ids = _vault_with_facts(root)
    assert vault.search("vault door code", include_all=True)  # the index and cache exist, with the text
    assert SECRET.encode() in _files_under(root / ".memvault")
    plan = vault.purge_plan([ids["secret"], ids["other"].upper()])   # typed in another case
    assert [item.id for item in plan.facts] == [ids["secret"], ids["other"]]
    assert plan.commits >= 3 and plan.pages == ["wiki/people/door.md"]

    report = vault.purge([ids["secret"], ids["other"]])
    assert report.purged == [ids["secret"], ids["other"]] and report.commits_rewritten >= 3
    assert report.remote is None

    _assert_gone(root, SECRET, "second line of the same secret fact", OTHER, "7319-alpha-kilo")
    assert "[purged]" in git(root, "log", "--format=%s")
    tombstones = parse_tombstones((root / "tombstones.jsonl").read_text())
    for fact_id in (ids["secret"], ids["other"]):
        assert tombstones[fact_id].purged and tombstones[fact_id].hash == ""
    assert "sha256" not in (root / "tombstones.jsonl").read_text()
    for line in git(root, "log", "--all", "-p", "--", "tombstones.jsonl").splitlines():
        if ids["other"] in line:
            assert "sha256" not in line
    page = (root / "wiki/people/door.md").read_text()
    assert "Alice likes tea" in page and "7319" not in page
    # the page still lists the purged id in its sources: withheld until the next dream, not broken
    checks = {c["name"]: c for c in json.loads(run_memvault("doctor", "--json", "--vault", str(root)).stdout)["checks"]}
    assert checks["citations"]["status"] == "ok" and checks["pages citing forgotten facts"]["status"] == "warn"
    assert KEPT in (root / "logs/2026/2026-11-01.md").read_text()
    assert {f.id for f in vault.iter_facts(include_forgotten=True)} == {ids["kept"]} | {
        f.id for f in vault.iter_facts() if f.text.startswith("later")}
    assert SECRET.encode() not in _files_under(root / ".memvault")
    assert b"7319-alpha-kilo" not in _files_under(root / ".memvault")
    assert not [h for h in vault.search("vault door code alpha kilo", include_all=True, min_score=0)
                if "7319" in h.text]
    assert is_clean(root)
    with pytest.raises(NotFound, match="purged"):
        vault.show(ids["secret"])
    before = git(root, "rev-parse", "HEAD")
    again = vault.purge([ids["secret"]])
    assert again.purged == [] and again.already_purged == [ids["secret"]]
    assert git(root, "rev-parse", "HEAD") == before
    # forgetting a purged fact: already done, as `show` says, not an unknown id
    forgot = run_memvault("forget", ids["secret"], "--vault", str(root))
    assert forgot.returncode == 0 and f"fact {ids['secret']} was already purged at" in forgot.stderr
    assert git(root, "rev-parse", "HEAD") == before and is_clean(root)


def test_cli_refuses_without_yes_off_a_terminal_and_unknown_ids_change_nothing(tmp_path):
    """Tried: no --yes without a terminal (exit 2), an unknown id among good ones (exit 3, named,
    as forget and show say it), an empty id; each leaves files and HEAD exactly as before. Then
    --yes purges and says what the remote needs."""
    root = tmp_path / "v"
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    _vault, ids = _vault_with_facts(root)
    assert run_memvault("remote", "set", str(remote), "--vault", str(root)).returncode == 0
    before = snapshot(root)
    refused = run_memvault("purge", ids["secret"], "--vault", str(root))
    assert refused.returncode == ExitCode.USAGE and "--yes" in refused.stderr
    unknown = run_memvault("purge", ids["secret"], "zzzzzzzzzzzzzzzz", "--yes", "--vault", str(root))
    assert unknown.returncode == ExitCode.NOT_FOUND and "zzzzzzzzzzzzzzzz" in unknown.stderr
    assert len(unknown.stderr.strip().splitlines()) == 1
    empty = run_memvault("purge", " ", "--yes", "--vault", str(root))
    assert empty.returncode == ExitCode.USAGE
    assert snapshot(root) == before
    done = run_memvault("purge", ids["secret"], "--yes", "--vault", str(root))
    assert done.returncode == 0, done.stderr
    assert "purged 1 fact" in done.stdout and "memvault sync" in done.stdout
    _assert_gone(root, SECRET)


def test_purge_refuses_uncommitted_changes(tmp_path):
    """A hand edit not committed would be lost by the rewrite: refused, exit 2, nothing changed."""
    root = tmp_path / "v"
    vault, ids = _vault_with_facts(root)
    (root / "wiki/people/door.md").write_text("hand edit\n")
    head = git(root, "rev-parse", "HEAD")
    with pytest.raises(InvalidInput, match="uncommitted"):
        vault.purge([ids["secret"]])
    assert git(root, "rev-parse", "HEAD") == head
    assert (root / "wiki/people/door.md").read_text() == "hand edit\n"


def test_confirm_callback_can_refuse(tmp_path):
    root = tmp_path / "v"
    vault, ids = _vault_with_facts(root)
    head = git(root, "rev-parse", "HEAD")
    seen = []
    with pytest.raises(InvalidInput, match="not confirmed"):
        vault.purge([ids["secret"]], confirm=lambda plan: seen.append(plan) or False)
    assert seen[0].facts[0].words.startswith("the vault door code")
    assert git(root, "rev-parse", "HEAD") == head and SECRET.encode() in _objects(root)


def _machines(tmp_path: Path) -> tuple[Path, Path, Path, dict[str, str]]:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    a = tmp_path / "a"
    _vault, ids = _vault_with_facts(a)
    assert run_memvault("remote", "set", str(remote), "--vault", str(a)).returncode == 0
    assert run_memvault("sync", "--vault", str(a)).returncode == 0
    b = tmp_path / "b"
    assert run_memvault("clone", str(remote), str(b)).returncode == 0
    return remote, a, b, ids


def test_a_purge_whose_id_another_fact_quotes_is_still_adopted(tmp_path):
    """A later fact quotes the purged fact's id as JSON (`correction: fact "<id>" is outdated`),
    which the purge leaves (it removes the fact's item and text, not another fact's words). The
    check that refuses a purge record the remote's history does not bear out took that quote for
    the item and refused the honest purge on every other clone (exit 7). Only an item counts."""
    _remote, a, b, ids = _machines(tmp_path)
    Vault(a).add(f'correction: fact "{ids["secret"]}" is outdated', at="2026-11-04")
    assert run_memvault("sync", "--vault", str(a)).returncode == 0
    assert run_memvault("sync", "--vault", str(b)).returncode == 0
    assert run_memvault("purge", ids["secret"], "--yes", "--vault", str(a)).returncode == 0
    assert run_memvault("sync", "--vault", str(a)).returncode == 0
    Vault(b).add("b's own fact", at="2026-11-05")
    synced = run_memvault("sync", "--json", "--vault", str(b))
    assert synced.returncode == 0, synced.stderr
    assert json.loads(synced.stdout)["purged"] == [ids["secret"]]
    _assert_gone(b, SECRET)


def _remote_gc(remote: Path) -> None:
    subprocess.run(["git", "-C", str(remote), "reflog", "expire", "--expire=now", "--all"], check=True)
    subprocess.run(["git", "-C", str(remote), "gc", "-q", "--prune=now"], check=True)


def _texts(root: Path) -> set[str]:
    return {f.text for f in Vault(root).iter_facts()}


def test_sync_pushes_the_purge_with_a_lease_and_another_clone_adopts_it_keeping_its_facts(tmp_path):
    """A purges and syncs: the remote (after its own gc) holds the text nowhere. B had pulled the
    old history and has an unpushed fact; its sync adopts the purge, keeps its fact, pushes it,
    and B's own repository loses the text too. A then receives B's fact as a plain merge."""
    remote, a, b, ids = _machines(tmp_path)
    Vault(b).add("b's own unpushed fact", at="2026-11-04")
    done = run_memvault("purge", ids["secret"], "--yes", "--vault", str(a))
    assert done.returncode == 0, done.stderr
    synced = run_memvault("sync", "--json", "--vault", str(a))
    assert synced.returncode == 0, synced.stderr
    report = json.loads(synced.stdout)
    assert report["rewritten"] is True
    assert report["purged"] == []  # A's own purge, not one "made on another clone"
    _assert_gone(a, SECRET)
    _remote_gc(remote)
    assert SECRET.encode() not in _objects(remote)

    synced_b = run_memvault("sync", "--json", "--vault", str(b))
    assert synced_b.returncode == 0, synced_b.stderr
    report_b = json.loads(synced_b.stdout)
    assert report_b["purged"] == [ids["secret"]] and report_b["rewritten"] is False
    assert "b's own unpushed fact" in _texts(b)
    assert Vault(b).tombstones()[ids["secret"]].purged
    _assert_gone(b, SECRET, "7319-alpha-kilo")
    assert SECRET.encode() not in _files_under(b / ".memvault")
    assert is_clean(b)

    assert run_memvault("sync", "--vault", str(a)).returncode == 0
    assert "b's own unpushed fact" in _texts(a)
    assert run_memvault("sync", "--vault", str(b)).returncode == 0
    assert git(a, "rev-parse", "HEAD") == git(b, "rev-parse", "HEAD")
    _remote_gc(remote)
    assert SECRET.encode() not in _objects(remote)
    _assert_gone(a, SECRET)


def test_lease_keeps_commits_another_clone_pushed_after_the_purge(tmp_path):
    """Fault tried: B pushes a new fact on top of the OLD history after A purged but before A's
    sync. A's sync must not clobber it: the lease is on the sha A just fetched, B's commits are
    rewritten with the same filter and merged, and the remote ends with B's fact and without the
    text. A lease on a stale sha is refused by the remote (checked with git directly)."""
    remote, a, b, ids = _machines(tmp_path)
    old_remote = git(remote, "rev-parse", "refs/heads/main").strip()
    assert run_memvault("purge", ids["secret"], "--yes", "--vault", str(a)).returncode == 0
    Vault(b).add("pushed by b after the purge", at="2026-11-05")
    assert run_memvault("sync", "--vault", str(b)).returncode == 0   # b knows of no purge yet
    moved = git(remote, "rev-parse", "refs/heads/main").strip()
    assert moved != old_remote

    # a plain lease on what A saw before the purge is refused: the remote moved
    stale = subprocess.run(["git", "-C", str(a), "push", f"--force-with-lease=refs/heads/main:{old_remote}",
                            "origin", "HEAD:refs/heads/main"], capture_output=True, text=True)
    assert stale.returncode != 0 and git(remote, "rev-parse", "refs/heads/main").strip() == moved

    synced = run_memvault("sync", "--json", "--vault", str(a))
    assert synced.returncode == 0, synced.stderr
    assert json.loads(synced.stdout)["rewritten"] is True
    assert "pushed by b after the purge" in _texts(a)
    _remote_gc(remote)
    assert SECRET.encode() not in _objects(remote)
    _assert_gone(a, SECRET)
    # B adopts in turn and ends at the same history
    assert run_memvault("sync", "--vault", str(b)).returncode == 0
    assert "pushed by b after the purge" in _texts(b)
    _assert_gone(b, SECRET)


def test_a_clone_made_after_the_purge_has_nothing_to_rewrite(tmp_path):
    remote, a, _b, ids = _machines(tmp_path)
    assert run_memvault("purge", ids["secret"], "--yes", "--vault", str(a)).returncode == 0
    assert run_memvault("sync", "--vault", str(a)).returncode == 0
    c = tmp_path / "c"
    assert run_memvault("clone", str(remote), str(c)).returncode == 0
    head = git(c, "rev-parse", "HEAD")
    synced = run_memvault("sync", "--json", "--vault", str(c))
    assert synced.returncode == 0, synced.stderr
    assert json.loads(synced.stdout)["purged"] == [] and git(c, "rev-parse", "HEAD") == head


def test_filter_units():
    """The filter on its own: items with continuation lines (metadata as written and re-spaced by
    hand), a fact id in a page citation, a tombstone hash, messages (single add, group body,
    forget with reason, the purge commit), a short text that must not become a needle,
    idempotence."""
    fid, keep = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"
    log = (f'# 2026-11-02\n\n- secret words here <!-- mv {{"id":"{fid}","at":"x"}} -->\n  more secret\n'
           f'- kept <!-- mv {{"id":"{keep}","at":"x"}} -->\n')
    path = "logs/2026/2026-11-02.md"
    assert scrub_text(log, {fid}, [], path) == f'# 2026-11-02\n\n- kept <!-- mv {{"id":"{keep}","at":"x"}} -->\n'
    spaced = log.replace('{"id":"', '{ "id" : "')  # a hand edit re-spaced the metadata: still its item
    assert scrub_text(spaced, {fid}, [], path) == f'# 2026-11-02\n\n- kept <!-- mv {{ "id" : "{keep}","at":"x"}} -->\n'
    tomb = json.dumps({"at": "t", "hash": "sha256:ab", "id": fid, "reason": None}, sort_keys=True) + "\n"
    assert '"hash": ""' in scrub_text(tomb, {fid}, [], "tombstones.jsonl")
    assert needles_of(["yes", "a much longer secret text"]) == ["a much longer secret text"]
    message = f"add: 2 facts from 2 writers ({fid}..{keep})\n\n{fid} secret words here\n{keep} kept"
    scrubbed = scrub_message(message.encode(), {fid}, []).decode()
    assert "secret words" not in scrubbed and f"{keep} kept" in scrubbed
    assert scrub_message(scrubbed.encode(), {fid}, []).decode() == scrubbed
    assert scrub_message(f"forget: {fid} (secret words)".encode(), {fid}, []) == f"forget: {fid} [purged]".encode()
    purge_message = f"purge: 1 fact removed from the history\n\n{fid}".encode()
    assert scrub_message(purge_message, {fid}, []) == purge_message
    assert scrub_text("nothing to see\n", {fid}, ["needle text long"], "MEMORY.md") == "nothing to see\n"


def test_filter_never_takes_another_fact_or_the_vaults_structure_with_a_purged_text():
    """A purged text also held inside other facts, a config line, a metadata comment or dream's
    journal: only its words become [purged]; no other fact, line or record goes."""
    fid, bob, notes, trap = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb", "cccccccccccccccc", "dddddddddddddddd"
    needles = needles_of(["Alice moved to Lyon", 'logs/** merge=union', ',"category":"fact"} -->'])
    log = (f'# 2026-11-02\n\n- Alice moved to Lyon <!-- mv {{"id":"{fid}","category":"fact"}} -->\n'
           f'- Bob said Alice moved to Lyon last spring <!-- mv {{"id":"{bob}","category":"fact"}} -->\n'
           f'  and other stuff\n'
           f'- Meeting notes <!-- mv {{"id":"{notes}","category":"fact"}} -->\n'
           f'  Alice moved to Lyon\n  keep this line\n'
           f'- ,"category":"fact"}} --> <!-- mv {{"id":"{trap}","category":"fact"}} -->\n')
    scrubbed = scrub_text(log, {fid, trap}, needles, "logs/2026/2026-11-02.md")
    assert scrubbed == (f'# 2026-11-02\n\n'
                        f'- Bob said [purged] last spring <!-- mv {{"id":"{bob}","category":"fact"}} -->\n'
                        f'  and other stuff\n'
                        f'- Meeting notes <!-- mv {{"id":"{notes}","category":"fact"}} -->\n'
                        f'  [purged]\n  keep this line\n')
    attributes = "logs/** merge=union\n"
    assert scrub_text(attributes, {fid}, needles, ".gitattributes") == attributes
    memory = "# Memory\n\n- Alice moved to Lyon\n- Bob said Alice moved to Lyon last spring\n- tea\n"
    assert scrub_text(memory, {fid}, needles, "MEMORY.md") == "# Memory\n\n- Bob said [purged] last spring\n- tea\n"
    journal = ("- 2026-11-22T03:00:05+01:00 dream ok 2026-11-01..2026-11-14 watermark=2026-11-14 · "
               "dropped Alice moved to Lyon\n  settled: bbbbbbbbbbbbbbbb\n")
    hostile = needles_of(["dream ok 2026-11-01..2026-11-14 watermark=2026-11-14"]) + needles
    assert scrub_text(journal, {fid}, hostile, "log.md") == journal.replace("Alice moved to Lyon", "[purged]")
    tomb = json.dumps({"at": "t", "hash": "", "id": bob, "reason": "Alice moved to Lyon, not Bob"}) + "\n"
    assert json.loads(scrub_text(tomb, {fid}, needles, "tombstones.jsonl"))["reason"] == "[purged], not Bob"


def _on_a_terminal(args: list[str], answer: str) -> tuple[int, str]:
    """memvault with its stdin and stderr on a pseudo-terminal, answering the question."""
    import os
    import pty
    import sys
    import time

    main, side = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "memvault", *args], stdin=side, stdout=subprocess.PIPE,
                            stderr=side, env=os.environ.copy())
    os.close(side)
    seen = b""
    deadline = time.monotonic() + 60
    while b"purge?" not in seen and time.monotonic() < deadline and proc.poll() is None:
        try:
            seen += os.read(main, 4096)
        except OSError:
            break
    os.write(main, answer.encode())
    proc.wait(timeout=120)
    with_rest = seen
    try:
        while True:
            chunk = os.read(main, 4096)
            if not chunk:
                break
            with_rest += chunk
    except OSError:
        pass
    os.close(main)
    return proc.returncode, with_rest.decode("utf-8", "replace")


def test_on_a_terminal_it_shows_the_plan_and_asks(tmp_path):
    """On a terminal without --yes: the ids, first words, commits to rewrite and pages are shown;
    "n" changes nothing (exit 2), "y" purges."""
    root = tmp_path / "v"
    _vault, ids = _vault_with_facts(root)
    head = git(root, "rev-parse", "HEAD")
    code, shown = _on_a_terminal(["purge", ids["secret"], "--vault", str(root)], "n\n")
    assert code == ExitCode.USAGE, shown
    assert ids["secret"] in shown and "the vault door code" in shown and "commit(s) to rewrite" in shown
    assert "wiki/people/door.md" in shown
    assert git(root, "rev-parse", "HEAD") == head
    code, shown = _on_a_terminal(["purge", ids["secret"], "--vault", str(root)], "y\n")
    assert code == 0, shown
    _assert_gone(root, SECRET)


def _noted(root, fact_id: str) -> bool:
    """Has a purge under way noted `fact_id` in .memvault/purge.json?"""
    try:
        return fact_id in (root / ".memvault" / "purge.json").read_text()
    except OSError:
        return False


@pytest.mark.slow
def test_a_purge_killed_at_any_moment_is_finished_by_running_it_again(tmp_path):
    """Fault tried: SIGKILL of `memvault purge` at 6 seeded moments (before, during and after the
    history rewrite). doctor names the unfinished purge; an add meanwhile commits only its own fact
    (the half-purged files are put back to HEAD first); running the same command again finishes
    it: the text is gone from every commit and object, the tombstone has no text, the vault is clean."""
    import os
    import random
    import signal
    import sys
    import time

    rng = random.Random(7)
    root = tmp_path / "v"
    vault, ids = _vault_with_facts(root)
    started = time.monotonic()
    measured = run_memvault("purge", ids["other"], "--yes", "--vault", str(root))
    assert measured.returncode == 0, measured.stderr
    window = time.monotonic() - started
    interrupted = 0
    for round_ in range(6):
        if round_:
            vault = Vault(root)
            ids["secret"] = vault.add(f"{SECRET} round {round_}", at="2026-11-02").id
        proc = subprocess.Popen([sys.executable, "-m", "memvault", "purge", ids["secret"], "--yes", "--vault",
                                 str(root)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={**os.environ})
        if round_ % 2:
            # Half the kills land once the purge has noted its ids, wherever the rest of the window
            # falls: on a loaded machine every kill timed from the start once landed before it.
            while proc.poll() is None and not _noted(root, ids["secret"]):
                time.sleep(0.001)
        try:
            proc.wait(timeout=rng.uniform(0.2, window) / (2 if round_ % 2 else 1))
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        # a killed git may still be at work: the next command waits for it (as after any kill)
        doctor = run_memvault("doctor", "--json", "--vault", str(root))
        purge_check = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}["purge"]
        interrupted += purge_check["status"] == "fail"
        # an add meanwhile (same day's log) must not commit the half-purged files' old text again
        head = git(root, "rev-parse", "HEAD").strip()
        added = run_memvault("add", f"written after kill {round_}", "--at", "2026-11-02", "--vault", str(root))
        assert added.returncode == 0, added.stderr
        assert not [line for line in git(root, "log", "-p", f"{head}..HEAD").splitlines()
                    if line.startswith("+") and SECRET in line]
        recorded = parse_tombstones((root / "tombstones.jsonl").read_text()).get(ids["secret"])
        again = run_memvault("purge", ids["secret"], "--yes", "--vault", str(root))
        assert again.returncode == 0, (purge_check, again.stderr)
        if purge_check["status"] == "fail" and recorded and recorded.purged:
            # killed after its records were committed: it says it finished it, not "already purged"
            assert again.stdout.startswith("finished the interrupted purge of 1 fact"), again
        _assert_gone(root, SECRET)
        tombstone = parse_tombstones((root / "tombstones.jsonl").read_text())[ids["secret"]]
        assert tombstone.purged and not tombstone.hash
        assert is_clean(root), git(root, "status", "--short")
        assert {c["name"]: c for c in json.loads(run_memvault("doctor", "--json", "--vault", str(root)).stdout)
                ["checks"]}["purge"]["status"] == "ok"
    texts = {f.text for f in Vault(root).iter_facts()}
    assert KEPT in texts and {f"written after kill {n}" for n in range(6)} <= texts
    assert interrupted, "no kill landed while the purge was under way"


def test_sync_waits_for_an_interrupted_purge_to_be_finished(tmp_path):
    """Fault tried: a purge killed after noting its ids: until it is run again, the history may
    still hold the text, so sync pushes nothing (one line naming the command that finishes it)."""
    remote, a, _b, ids = _machines(tmp_path)
    (a / ".memvault" / "purge.json").write_text(json.dumps({"pending": [ids["secret"]]}))
    head = git(remote, "rev-parse", "main")
    refused = run_memvault("sync", "--vault", str(a))
    assert refused.returncode == ExitCode.USAGE and refused.stderr.count("\n") == 1, refused.stderr
    assert f"memvault purge {ids['secret']} --yes" in refused.stderr
    assert git(remote, "rev-parse", "main") == head
    assert run_memvault("purge", ids["secret"], "--yes", "--vault", str(a)).returncode == 0
    assert run_memvault("sync", "--vault", str(a)).returncode == 0


def test_a_purge_from_another_clone_of_a_text_shaped_like_the_logs_structure_takes_nothing_else(tmp_path):
    """Hostile remote: a clone adds a fact whose text is a piece of every log item's metadata
    comment, another that is a line of .gitattributes and one that is its daily log's header
    (which became "[purged]": doctor failed and dream stopped at that day), purges them and pushes. This clone's
    sync adopts the purge: every other fact, its metadata and the merge rule are still there, and
    a fact quoting a purged text keeps its other words."""
    remote, a, b, _ids = _machines(tmp_path)
    before = {f.id: f.text for f in Vault(a).iter_facts()}
    quoting = Vault(a).add("Bob wrote logs/** merge=union into the wrong file", at="2026-11-04")
    assert run_memvault("sync", "--vault", str(a)).returncode == 0
    assert run_memvault("sync", "--vault", str(b)).returncode == 0
    traps = [Vault(b).add(text, at="2026-11-04").id
             for text in (',"category":"fact"} -->', "logs/** merge=union", "# 2026-11-04")]
    assert run_memvault("sync", "--vault", str(b)).returncode == 0
    assert run_memvault("sync", "--vault", str(a)).returncode == 0   # a now holds the traps too
    done = run_memvault("purge", *traps, "--yes", "--vault", str(b))
    assert done.returncode == 0, done.stderr
    assert run_memvault("sync", "--vault", str(b)).returncode == 0
    attributes = (a / ".gitattributes").read_text()

    synced = run_memvault("sync", "--json", "--vault", str(a))
    assert synced.returncode == 0, synced.stderr
    assert sorted(json.loads(synced.stdout)["purged"]) == sorted(traps)
    after = {f.id: f.text for f in Vault(a).iter_facts()}
    assert {k: v for k, v in after.items() if k != quoting.id} == before
    assert all(f.category for f in Vault(a).iter_facts())
    assert after[quoting.id] == "Bob wrote [purged] into the wrong file"
    assert (a / ".gitattributes").read_text() == attributes
    assert (a / "logs/2026/2026-11-04.md").read_text().startswith("# 2026-11-04\n")
    doctor = run_memvault("doctor", "--vault", str(a))
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert is_clean(a)


def test_files_left_half_purged_by_a_kill_are_put_back_before_the_next_write(tmp_path):
    """The moment a kill can leave (found by a QA pass in 10 of 24 random kills): the history
    rewritten, the working tree and git's index still holding the old text. The next `add` used
    to commit that text again (and sync to push it). Now the half-done files go back to HEAD
    first, with a notice, and the purge run again finishes the job."""
    from memvault.remote.purge_history import rewrite_history

    root = tmp_path / "v"
    vault, ids = _vault_with_facts(root)
    old = git(root, "rev-parse", "HEAD").strip()
    (root / ".memvault" / "purge.json").write_text(json.dumps({"pending": [ids["secret"]], "before": old}))
    rewrite_history(vault.storage, [ids["secret"]], [SECRET])
    git(root, "read-tree", old)                      # the index and tree as the kill left them
    git(root, "checkout-index", "-a", "-f")
    assert SECRET in (root / "logs/2026/2026-11-02.md").read_text()
    head = git(root, "rev-parse", "HEAD").strip()
    # the user's own edits since are not the purge's to put back
    (root / "schema.md").write_text((root / "schema.md").read_text() + "- a line of mine\n")
    (root / "wiki" / "topics").mkdir(parents=True, exist_ok=True)
    (root / "wiki" / "topics" / "mine.md").write_text("# Mine\n")

    added = run_memvault("add", "written after the kill", "--at", "2026-11-02", "--vault", str(root))
    assert added.returncode == 0, added.stderr
    assert "put back the files an interrupted purge left half checked out" in added.stderr
    assert "- a line of mine" in (root / "schema.md").read_text()
    assert (root / "wiki" / "topics" / "mine.md").read_text() == "# Mine\n"
    refused = run_memvault("purge", ids["secret"], "--yes", "--vault", str(root))  # (they are not lost either)
    assert refused.returncode == ExitCode.USAGE and "schema.md" in refused.stderr
    assert run_memvault("doctor", "--fix", "--vault", str(root)).returncode in (0, 1)
    assert f"memvault purge {ids['secret']} --yes" in added.stderr
    assert SECRET not in git(root, "log", "-p", f"{head}..HEAD")
    assert SECRET not in git(root, "show", "HEAD:logs/2026/2026-11-02.md")
    assert run_memvault("purge", ids["secret"], "--yes", "--vault", str(root)).returncode == 0
    _assert_gone(root, SECRET)
    assert "written after the kill" in _texts(root)


@pytest.mark.slow
def test_searches_running_during_purges_all_answer(tmp_path):
    """Concurrency tried: three purges one after another (each deletes and rebuilds the index and
    checks out rewritten logs) while searches run in other processes, as agents would: every
    search answers, exit 0, with JSON (two in twenty used to crash on a vanished file or index)."""
    import sys
    import threading

    root = tmp_path / "v"
    vault = Vault.init(root)
    doomed = [vault.add(f"purgeable note {n} about the garden shed", at="2026-11-02").id for n in range(3)]
    vault.add_many([f"topic {n}: the garden shed needs a new roof" for n in range(40)])
    assert vault.search("garden shed")
    vault.close()
    purges: list[subprocess.CompletedProcess] = []

    def purge_all() -> None:
        for fact_id in doomed:
            purges.append(run_memvault("purge", fact_id, "--yes", "--vault", str(root), timeout=120))

    purging = threading.Thread(target=purge_all)
    purging.start()
    searches = []
    while purging.is_alive():
        batch = [subprocess.Popen([sys.executable, "-m", "memvault", "search", "garden shed", "--json", "--all",
                                   "--vault", str(root)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(3)]
        searches += [(proc, *proc.communicate(timeout=120)) for proc in batch]
    purging.join()
    assert [p.returncode for p in purges] == [0, 0, 0], [p.stderr for p in purges]
    for proc, out, err in searches:
        assert proc.returncode == 0, err
        assert isinstance(json.loads(out), list)
    assert len(searches) >= 6


def test_filter_leaves_ids_and_records_alone_and_finds_the_text_as_messages_and_json_hold_it():
    """Second hostile pass: a purged text that is a forgotten fact's id, or a time prefix, once
    rewrote the forget record (the fact came back); a text quoted by another fact survived in
    that fact's commit subject (spaces run together, cut at 60 characters); a text with quotes
    survived in a forget reason (JSON escapes it); overlapping texts gave different results in
    a different order."""
    forgotten, other = "cccccccccccccccc", "dddddddddddddddd"
    tomb = json.dumps({"at": "2026-11-24T02:05:10+00:00", "hash": "sha256:ab", "id": forgotten,
                       "reason": 'superseded by: the wifi password is "blue-otter-42"'}) + "\n"
    needles = needles_of([f"Dana asked to drop this one, see:\n{forgotten}", "2026-11-24T02:05",
                          'the wifi password is "blue-otter-42"'])
    scrubbed = json.loads(scrub_text(tomb, {other}, needles, "tombstones.jsonl"))
    assert scrubbed == {"at": "2026-11-24T02:05:10+00:00", "hash": "sha256:ab", "id": forgotten,
                        "reason": "superseded by: [purged]"}
    message = f"forget: {forgotten} (asked to forget)".encode()
    assert scrub_message(message, {other}, needles) == message
    secret = "the garage door code is 8841-2207-5531-9902-7734-1188-0045-6612"
    quoted = f"add: {other} Bob told me that the garage door code is 8841-2207-5531-9902…".encode()
    assert scrub_message(quoted, {"eeeeeeeeeeeeeeee"}, needles_of([secret])).decode() == \
        f"add: {other} Bob told me that [purged]…"
    page = f"- Dana asked to drop this one, see: [^{forgotten}]\n"
    assert scrub_text(page, {other}, needles, "wiki/people/dana.md") == f"- [purged] [^{forgotten}]\n"
    # an id-shaped token inside a secret (16 hex digits) goes like the rest of it
    hexed = needles_of(["wifi password is 3f9a8b7c6d5e4f3a"])
    assert scrub_text("- Bob said wifi password is 3f9a8b7c6d5e4f3a yesterday\n", set(), hexed, "MEMORY.md") == \
        "- Bob said [purged] yesterday\n"
    # front matter: the title is words (quoted when it becomes the mark), sources and dates are not
    front = (f"---\ntitle: Alice moved to Lyon\nsources: [{forgotten}]\nupdated: 2026-11-24T02:05:10\n---\n"
             f"# Alice\n- Alice moved to Lyon [^{forgotten}]\n")
    scrubbed_page = scrub_text(front, set(), needles_of(["Alice moved to Lyon", "2026-11-24T02:05", forgotten]),
                               "wiki/people/alice.md")
    assert scrubbed_page == (f'---\ntitle: "[purged]"\nsources: [{forgotten}]\nupdated: 2026-11-24T02:05:10\n'
                             f"---\n# Alice\n- [purged] [^{forgotten}]\n")
    # labels in a metadata comment are words too, its id and time are not; a user's text file too
    sheet = needles_of(["payroll-sheet-2026-q3.xlsx"])
    labelled = (f'- a fact <!-- mv {{"id":"{other}","at":"2026-11-24T02:05:10+00:00","category":"fact",'
                f'"source":"payroll-sheet-2026-q3.xlsx","tags":["payroll-sheet-2026-q3.xlsx","ok"]}} -->\n')
    assert scrub_text(labelled, set(), sheet, "logs/2026/2026-11-24.md") == labelled.replace(
        '"payroll-sheet-2026-q3.xlsx"', '"[purged]"')
    assert scrub_text("see payroll-sheet-2026-q3.xlsx\n", set(), sheet, "wiki/notes.txt") == "see [purged]\n"
    overlapping = ["alpha beta gamma delta", "beta gamma delta epsilon"]
    line = "- note: alpha beta gamma delta epsilon end\n"
    assert scrub_text(line, set(), needles_of(overlapping), "MEMORY.md") == \
        scrub_text(line, set(), needles_of(overlapping[::-1]), "MEMORY.md") == "- note: [purged] end\n"


def test_purging_a_text_that_names_a_forgotten_fact_keeps_that_fact_forgotten(tmp_path):
    """End to end, the first finding of the second hostile pass: after the purge, the forgotten
    fact stays forgotten, its forget commit still names it, and no record lost its id."""
    vault = Vault.init(tmp_path / "v")
    gone = vault.add("Dana's home address is 12 Elm St")
    vault.forget(gone.id, reason="asked to forget")
    quoting = vault.add(f"Dana asked to drop this one, see:\n{gone.id}")
    vault.add(gone.id)  # a fact that is only the id, purged too
    purged = [quoting.id, next(f.id for f in vault.iter_facts() if f.text == gone.id)]
    assert vault.purge(purged).purged == purged
    assert gone.id not in {f.id for f in vault.iter_facts()}
    assert set(vault.tombstones()) == {gone.id, *purged}
    assert f"forget: {gone.id} (asked to forget)" in git(vault.root, "log", "--format=%s")
    assert "Dana asked to drop" not in git(vault.root, "log", "--all", "-p")
    assert is_clean(vault.root)


def test_a_sync_killed_while_adopting_a_purge_leaves_it_to_finish_never_half_done(tmp_path):
    """Fault tried (found in 10 of 12 kills by a QA pass): a sync killed after it rewrote this
    clone's history for a purge made elsewhere, before it pruned the old objects. It now notes the
    purge first: the next sync refuses and names `memvault purge ID --yes`, which finishes it; no
    object holds the text afterwards."""
    from memvault.remote.purge_history import rewrite_history
    from memvault.remote.purge_state import record as _record

    _remote, a, b, ids = _machines(tmp_path)
    assert run_memvault("purge", ids["secret"], "--yes", "--vault", str(a)).returncode == 0
    assert run_memvault("sync", "--vault", str(a)).returncode == 0
    # b as the kill left it: noted, its history rewritten, the old objects not yet pruned
    vault = Vault(b)
    _record(vault.storage, (), pending=[ids["secret"]])
    rewrite_history(vault.storage, [ids["secret"]], [SECRET])
    assert SECRET.encode() in _objects(b)
    refused = run_memvault("sync", "--vault", str(b))
    assert refused.returncode == ExitCode.USAGE and f"memvault purge {ids['secret']} --yes" in refused.stderr
    done = run_memvault("purge", ids["secret"], "--yes", "--vault", str(b))
    assert done.returncode == 0, done.stderr
    _assert_gone(b, SECRET)
    assert run_memvault("sync", "--vault", str(b)).returncode == 0
    assert is_clean(b) and git(a, "rev-parse", "HEAD") != ""


def test_a_rewrite_that_fails_before_moving_any_ref_leaves_nothing_to_finish(tmp_path, monkeypatch):
    """Fault tried: the rewriting process failing at once (an old git-filter-repo, say). Nothing
    changed, so nothing is left noted as unfinished: sync and doctor are not held up by it."""
    import memvault.remote.purge_history as purge_module
    from memvault.errors import MemvaultError

    root = tmp_path / "v"
    vault, ids = _vault_with_facts(root)
    head = git(root, "rev-parse", "HEAD")

    def fails(*_args, **_kwargs):
        raise MemvaultError("rewriting the history failed: TypeError: unexpected keyword argument")

    monkeypatch.setattr(purge_module, "rewrite_history", fails)
    with pytest.raises(MemvaultError, match="rewriting the history failed"):
        vault.purge([ids["secret"]])
    assert vault.storage.recovery.unfinished_purge() == [] and git(root, "rev-parse", "HEAD") == head
    doctor = {c["name"]: c for c in json.loads(run_memvault("doctor", "--json", "--vault", str(root)).stdout)["checks"]}
    assert doctor["purge"]["status"] == "ok"


def test_the_rewriting_process_dies_with_a_killed_purge(tmp_path):
    """The mechanism on its own, with real processes: a parent started as purge starts its filter
    (preexec_fn=_die_with_parent) is SIGKILLed; its child goes with it, where it used to go on
    rewriting refs without the purge's locks."""
    import os
    import signal
    import sys
    import time

    if not Path("/proc").is_dir():
        pytest.skip("needs Linux (/proc, PR_SET_PDEATHSIG)")
    pid_file = tmp_path / "child.pid"
    parent = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys; from memvault.remote.purge_history import _die_with_parent; "
        f"child = subprocess.Popen(['sleep', '60'], preexec_fn=_die_with_parent); "
        f"open({str(pid_file)!r}, 'w').write(str(child.pid)); child.wait()")])
    deadline = time.monotonic() + 30
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.02)
    child = int(pid_file.read_text())
    parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=10)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{child}/stat").read_text().split(")")[-1].split()[0]
        except OSError:
            break  # gone and reaped
        if state in ("Z", "X"):
            break  # killed, waiting to be reaped by init
        time.sleep(0.02)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the child outlived its killed parent")


def test_two_purges_of_overlapping_texts_adopted_at_once_give_the_same_commits(tmp_path):
    """Found by a QA pass: A purges one text, syncs, purges another that overlaps it inside a
    third fact, syncs; B, which saw neither, adopts both in one sync. B replays them one purge
    at a time, so both clones hold the same commits: no commit twice, the third fact the same."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    a, b = tmp_path / "a", tmp_path / "b"
    vault = Vault.init(a)
    first = vault.add("alpha beta gamma delta", at="2026-11-01").id
    second = vault.add("beta gamma delta epsilon", at="2026-11-01").id
    quoting = vault.add("note: alpha beta gamma delta epsilon end", at="2026-11-01").id
    vault.add("later fact", at="2026-11-02")
    assert run_memvault("remote", "set", str(remote), "--vault", str(a)).returncode == 0
    assert run_memvault("sync", "--vault", str(a)).returncode == 0
    assert run_memvault("clone", str(remote), str(b)).returncode == 0
    for fact_id in (first, second):
        assert run_memvault("purge", fact_id, "--yes", "--vault", str(a)).returncode == 0
        assert run_memvault("sync", "--vault", str(a)).returncode == 0
    Vault(b).add("b's own fact", at="2026-11-03")
    done = run_memvault("sync", "--json", "--vault", str(b))
    assert done.returncode == 0, done.stderr
    assert sorted(json.loads(done.stdout)["purged"]) == sorted([first, second])
    assert run_memvault("sync", "--json", "--vault", str(a)).returncode == 0
    for root in (a, b):
        texts = {f.id: f.text for f in Vault(root).iter_facts()}
        assert texts[quoting] == "note: [purged] epsilon end"
        assert git(root, "log", "--format=%s").count("later fact") == 1
    assert git(a, "rev-parse", "HEAD") == git(b, "rev-parse", "HEAD")


def test_purges_a_moment_apart_replay_as_two(tmp_path):
    """Found by a QA pass: two purges made within one second were taken for one by another clone
    (records carried whole seconds), and replayed in one pass. A purge's records now carry its
    time to the microsecond: each purge is its own group, in the order made."""
    vault = Vault.init(tmp_path / "v")
    first, second = vault.add("a first text to purge now").id, vault.add("a second text to purge now").id
    vault.purge([first])
    vault.purge([second])
    records = parse_tombstones((vault.root / "tombstones.jsonl").read_text())
    assert records[first].at != records[second].at and "." in records[first].at
    from memvault.remote.purge_adoption import purge_groups

    assert purge_groups(vault.storage, None, {first, second}) == [[first], [second]]


def _words_indexed(vault: Path, word: str) -> int:
    """How many documents of every generation under the vault's index hold `word` in their text or
    thread context, deleted ones included: Tantivy keeps a deleted document's words in its
    segments until a merge, and stores no text, so grepping its files would find nothing."""
    import tantivy

    total = 0
    for generation in (vault / ".memvault" / "index").glob("gen-*"):
        searcher = tantivy.Index.open(str(generation / "lexical")).searcher()
        total += searcher.doc_freq("text", word) + searcher.doc_freq("context", word)
    return total


def _vector_cached(vault: Path, text: str) -> bool:
    import sqlite3

    from memvault.index.documents import Document
    from memvault.index.embedder import content_hash

    digest = content_hash(Document(key="", kind="fact", text=text, file="").search_text)
    with sqlite3.connect(vault / ".memvault" / "cache" / "embeddings.sqlite") as db:
        return db.execute("SELECT count(*) FROM vectors WHERE hash = ?", (digest,)).fetchone()[0] > 0


def _take_by_plain_git(clone: Path) -> None:
    git(clone, "fetch", "-q", "origin")
    git(clone, "reset", "-q", "--hard", "origin/main")


PURGED_NOTICE = "facts were purged from the vault since the search index was built; rebuilding it without them"


def test_a_purge_that_reaches_a_clone_without_sync_leaves_no_text_in_its_index(tmp_path):
    """Fault tried: B takes A's purged history with plain git (`fetch` + `reset --hard`) instead of
    `memvault sync`, after searching for the text. B's next search rebuilds the index without the
    purged fact and says so once; its vector leaves the embedding cache."""
    remote, a, b, ids = _machines(tmp_path)
    found = run_memvault("search", "door code", "--json", "--vault", str(b))
    assert ids["secret"] in [hit["id"] for hit in json.loads(found.stdout)]
    secret_text = SECRET + "\nsecond line of the same secret fact"
    assert _words_indexed(b, "kilo") > 0 and _vector_cached(b, secret_text)  # the index holds the text
    assert run_memvault("purge", ids["secret"], "--yes", "--vault", str(a)).returncode == 0
    assert run_memvault("sync", "--vault", str(a)).returncode == 0
    _take_by_plain_git(b)

    found = run_memvault("search", "door code", "--json", "--vault", str(b))
    assert found.returncode == 0, found.stderr
    assert found.stderr.strip() == f"memvault: {PURGED_NOTICE}"
    assert ids["secret"] not in [hit["id"] for hit in json.loads(found.stdout)]
    assert _words_indexed(b, "kilo") == 0 and SECRET.encode() not in _files_under(b / ".memvault")
    assert not _vector_cached(b, secret_text) and _vector_cached(b, KEPT)
    again = run_memvault("search", "tea", "--json", "--vault", str(b))
    assert again.stderr == "" and ids["kept"] in [hit["id"] for hit in json.loads(again.stdout)]


def test_a_fact_forgotten_then_purged_elsewhere_leaves_no_words_in_the_index(tmp_path):
    """B indexed the fact, then took its forget (its document was dropped, its words stay in
    Tantivy's segments), then the purge by plain git: the next search still rebuilds."""
    remote, a, b, ids = _machines(tmp_path)
    assert run_memvault("search", "door code", "--vault", str(b)).returncode == 0
    assert run_memvault("forget", ids["secret"], "--vault", str(a)).returncode == 0
    assert run_memvault("sync", "--vault", str(a)).returncode == 0
    assert run_memvault("sync", "--vault", str(b)).returncode == 0
    assert run_memvault("search", "door code", "--vault", str(b)).returncode == 0  # drops the document
    assert _words_indexed(b, "kilo") > 0
    assert run_memvault("purge", ids["secret"], "--yes", "--vault", str(a)).returncode == 0
    assert run_memvault("sync", "--vault", str(a)).returncode == 0
    _take_by_plain_git(b)
    found = run_memvault("search", "door code", "--vault", str(b))
    assert found.returncode == 0 and PURGED_NOTICE in found.stderr
    assert _words_indexed(b, "kilo") == 0


def test_a_reindex_first_after_a_purge_arrives_keeps_no_older_generation(tmp_path):
    """`reindex --clear` is the first command after the purge arrives by plain git: the generation
    it replaces (normally kept a while for readers) held the text, so it is deleted too. A purge
    of a fact this clone never indexed costs no rebuild at all."""
    remote, a, b, ids = _machines(tmp_path)
    assert run_memvault("search", "door code", "--vault", str(b)).returncode == 0
    assert run_memvault("purge", ids["secret"], "--yes", "--vault", str(a)).returncode == 0
    assert run_memvault("sync", "--vault", str(a)).returncode == 0
    _take_by_plain_git(b)
    assert run_memvault("reindex", "--clear", "--vault", str(b)).returncode == 0
    assert _words_indexed(b, "kilo") == 0 and len(list((b / ".memvault" / "index").glob("gen-*"))) == 1

    added = Vault(a).add("a passing secret 55-ZEBRA-91 purged before b saw it")
    assert run_memvault("purge", added.id, "--yes", "--vault", str(a)).returncode == 0
    assert run_memvault("sync", "--vault", str(a)).returncode == 0
    _take_by_plain_git(b)
    found = run_memvault("search", "tea", "--vault", str(b))
    assert found.returncode == 0 and found.stderr == ""


def test_a_reindex_whose_index_a_purge_deletes_midway_finishes_on_the_new_one(tmp_path):
    """Concurrency tried: `reindex --clear` (and `doctor --fix`, which reindexes) fills its new
    generation outside the index lock; a purge in another process deletes the whole index folder,
    that generation too, and rebuilds it. The reindex asks again on what is there now, as a
    search does, and answers; it used to fail with "unexpected error: FileNotFoundError:
    .../vectors-0.f32" (or Tantivy's "Failed to acquire Lockfile"), exit 1."""
    root = tmp_path / "v"
    vault = Vault.init(root)
    doomed = vault.add(SECRET).id
    vault.add_many([f"topic {n}: the garden shed needs a new roof" for n in range(100)])
    purges: list[subprocess.CompletedProcess] = []

    def purge_midway(_phase: str, _done: int, _total: int) -> None:
        # Called while the new generation is being filled (the embedding cache is cold): the purge
        # runs to its end in another process before the reindex goes on.
        if not purges:
            purges.append(run_memvault("purge", doomed, "--yes", "--vault", str(root), timeout=120))

    report = vault.reindex(clear=True, progress=purge_midway)
    assert purges and purges[0].returncode == 0, purges[0].stderr if purges else "the reindex never embedded"
    assert report["facts"] == 100
    assert doomed not in {hit.id for hit in vault.search("vault door code alpha kilo", min_score=0, include_all=True)}
    assert len(vault.search("garden shed roof", limit=200, min_score=0)) == 100
    vault.close()


def test_doctor_during_a_purge_says_it_is_under_way_not_interrupted(tmp_path):
    """A purge records its ids as pending until it has finished (so a killed one is named), and
    a live one holds the vault's locks all along. `doctor` run while it works (cron, another
    terminal) used to fail the check (exit 1), calling it interrupted and asking for the same
    purge to be run again; it says the purge is under way, exit 0."""
    root = tmp_path / "v"
    vault = Vault.init(root)
    doomed = vault.add(SECRET).id
    vault.add_many([f"topic {n}: the garden shed needs a new roof" for n in range(80)])
    assert vault.search("garden shed")  # an index, which the purge rebuilds
    (root / ".memvault" / "cache" / "embeddings.sqlite").unlink()  # so the rebuild embeds, telling progress
    doctors: list[subprocess.CompletedProcess] = []

    def doctor_midway(_phase: str, _done: int, _total: int) -> None:
        if not doctors:
            doctors.append(run_memvault("doctor", "--json", "--vault", str(root), timeout=120))

    vault.purge([doomed], progress=doctor_midway)
    assert doctors, "the purge's rebuild never reported progress"
    assert doctors[0].returncode == 0, doctors[0].stdout
    check = next(c for c in json.loads(doctors[0].stdout)["checks"] if c["name"] == "purge")
    assert check["status"] == "ok" and "under way" in check["message"], check
    after = run_memvault("doctor", "--json", "--vault", str(root))
    assert after.returncode == 0 and "no unfinished purge" in after.stdout
    vault.close()


def test_a_day_whose_facts_were_all_purged_is_not_pending(tmp_path):
    """The purged day's log is left holding its heading only. It counted as a pending day with 0
    facts (status, dream --status, the dry-run plan), and a dream of it alone asked for a model
    (exit 5 without one) to commit a watermark move. Now it is not pending: the days left are the
    ones with a fact to consolidate, and a vault whose only pending day was purged is caught up."""
    root = tmp_path / "v"
    vault = Vault.init(root)
    purged = vault.add("Door code is 7319-alpha-kilo", at="2025-03-01")
    vault.add("Alice prefers green tea", at="2025-03-02")
    vault.purge([purged.id])
    assert (root / "logs" / "2025" / "2025-03-01.md").exists()  # the heading stays: only the item went
    state = vault.dream_status()
    assert (state["pending_days"], state["pending_facts"], state["next_batch"]) == (1, 1, "2025-03-02..2025-03-02")
    status = json.loads(run_memvault("status", "--json", "--vault", str(root)).stdout)
    assert status["pending"]["days"] == 1 and status["pending"]["facts"] == 1

    alone = tmp_path / "alone"
    only = Vault.init(alone).add("Bob's PIN is 4432-beta", at="2025-03-01")
    Vault.open(alone).purge([only.id])
    assert Vault.open(alone).dream_status()["pending_days"] == 0
    assert "pending     0 day(s), 0 fact(s)" in run_memvault("status", "--vault", str(alone)).stdout
    before = snapshot(alone)
    plan = run_memvault("dream", "--dry-run", "--json", "--vault", str(alone))
    assert plan.returncode == 0 and json.loads(plan.stdout)["batches"] == []
    run = run_memvault("dream", "--json", "--vault", str(alone))  # no model configured: none needed
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["caught_up"] is True and snapshot(alone) == before


def test_a_purge_that_finds_another_running_names_it_and_changes_nothing(tmp_path, monkeypatch):
    """Two purges at once: the second was told "dream already running", which nothing was."""
    from memvault.formats.layout import DREAM_LOCK
    from memvault.storage.lock import OsLock

    root = tmp_path / "v"
    vault, ids = _vault_with_facts(root)
    before = snapshot(root)
    monkeypatch.setattr("sys.argv", ["memvault", "--vault", str(root), "purge", ids["secret"], "--yes"])
    first = OsLock(vault.storage.lock_path(DREAM_LOCK))   # the first purge, mid-rewrite
    assert first.acquire()
    try:
        done = run_memvault("purge", ids["secret"], "--yes", "--vault", str(root))
    finally:
        first.release()
    assert done.returncode == ExitCode.DREAM_RUNNING and "a purge is already running" in done.stderr, done.stderr
    assert snapshot(root) == before
