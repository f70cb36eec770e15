"""`--as-of WHEN`: the vault as it stood at a moment, read from git, on vaults whose commits span months.

Each commit gets its date (GIT_AUTHOR_DATE / GIT_COMMITTER_DATE), so the moments asked about fall
between real commits: before and after a forget, a supersede, a dream, a dream undo, a purge, and
on two clones after a sync.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest
from support.git import git, is_clean, snapshot

from memvault import Vault
from memvault.errors import InvalidInput, NotFound


def on(vault: Vault, when: str) -> None:
    """The next commits of `vault` are dated `when` (the dates every test below reasons about)."""
    vault.storage.git.env["GIT_AUTHOR_DATE"] = vault.storage.git.env["GIT_COMMITTER_DATE"] = when


def texts(facts) -> list[str]:
    return [fact.text for fact in facts]


def hits(memory, query: str, **options) -> list[str]:
    return [hit.text for hit in memory.search(query, lexical_only=True, include_all=True, **options)]


@pytest.fixture
def months(vault):
    """Alice in January, Bob in February (forgotten in March), Carol added in May but dated January."""
    on(vault, "2026-01-10T10:00:00+00:00")
    alice = vault.add("Alice lives in Paris", at="2026-01-10T09:00:00")
    on(vault, "2026-02-10T10:00:00+00:00")
    bob = vault.add("Bob drinks strong coffee", at="2026-02-10T09:00:00")
    on(vault, "2026-03-10T10:00:00+00:00")
    vault.forget(bob.id, "not Bob")
    on(vault, "2026-05-10T10:00:00+00:00")
    carol = vault.add("Carol joined the choir", at="2026-01-05T09:00:00")
    return {"alice": alice, "bob": bob, "carol": carol}


def test_facts_count_from_their_commit_and_forgets_from_the_tombstones(vault, months):
    february, april, june = vault.as_of("2026-02-15"), vault.as_of("2026-04-15"), vault.as_of("2026-06-01")
    assert texts(february.recent()) == ["Bob drinks strong coffee", "Alice lives in Paris"]
    assert hits(february, "coffee") == ["Bob drinks strong coffee"]   # forgotten later: found before
    assert hits(april, "coffee") == []                                 # forgotten before: not found
    assert texts(april.recent()) == ["Alice lives in Paris"]           # Carol, dated January, came in May
    with pytest.raises(NotFound, match="was not in the vault yet as of 2026-04-15.*added later"):
        april.show(months["carol"].id)
    assert texts(june.recent()) == ["Alice lives in Paris", "Carol joined the choir"]
    with pytest.raises(NotFound):
        vault.show(months["bob"].id, as_of="2026-01-31")
    assert february.show(months["bob"].id).forgotten is None
    assert april.show(months["bob"].id).forgotten.reason == "not Bob"
    # which commit answered: the newest one made by then
    assert february.moment.commit.message == f"add: {months['bob'].id} Bob drinks strong coffee"
    assert april.moment.commit.message == f"forget: {months['bob'].id} (not Bob)"
    assert february.status()["facts"] == {"total": 2, "live": 2, "forgotten": 0, "purged": 0, "unreadable": 0}
    assert april.status()["facts"] == {"total": 2, "live": 1, "forgotten": 1, "purged": 0, "unreadable": 0}


def test_since_and_until_still_filter_by_the_facts_own_time(vault, months):
    """'Facts about January that the memory held' on April 15th, then on June 1st."""
    january = {"since": "2026-01-01", "until": "2026-01-31"}
    assert hits(vault.as_of("2026-04-15"), "Alice Carol", **january) == ["Alice lives in Paris"]
    assert sorted(hits(vault.as_of("2026-06-01"), "Alice Carol", **january)) == [
        "Alice lives in Paris", "Carol joined the choir"]
    from memvault.base.dates import parse_range

    lower, upper = parse_range(january["since"], january["until"], vault.tz)
    assert texts(vault.recent(since=lower, until=upper, as_of="2026-04-15")) == ["Alice lives in Paris"]


def test_a_commit_answers_as_its_date_does_and_bad_moments_are_refused(vault, vault_dir, months):
    commit = git(vault_dir, "log", "-1", "--format=%H", "--grep", "forget:").strip()
    by_commit = vault.as_of(commit[:7])
    assert by_commit.moment.commit.sha == commit
    assert texts(by_commit.recent()) == texts(vault.recent(as_of="2026-04-15"))
    before = snapshot(vault_dir)
    for bad, words in (("2025-06-01", "had no commit yet"), ("not a date", "neither a date"),
                       ("deadbeefdeadbeef", "no commit deadbeefdeadbeef"), ("", "as_of must be")):
        with pytest.raises(InvalidInput, match=words):
            vault.as_of(bad)
    # a commit git holds that is not in the vault's history (made aside, as a rewritten one would be)
    tree = git(vault_dir, "rev-parse", "HEAD^{tree}").strip()
    aside = subprocess.run(["git", "-C", str(vault_dir), "commit-tree", tree, "-m", "aside"], check=True,
                           capture_output=True, text=True).stdout.strip()
    with pytest.raises(InvalidInput, match="not in the history"):
        vault.as_of(aside)
    assert snapshot(vault_dir) == before and is_clean(vault_dir)


def test_head_n_goes_back_n_commits_on_the_branch(cli, vault, vault_dir):
    """HEAD~N, git's spelling: the memory before the last N changes (a fresh vault's tour has no
    date old enough yet, and a sha must first be looked up)."""
    vault.add("Alice prefers green tea")
    vault.add("Alice now prefers coffee")
    line = git(vault_dir, "log", "--first-parent", "--format=%H").split()
    assert vault.as_of("HEAD~1").moment.commit.sha == line[1]
    assert texts(vault.as_of("HEAD~1").recent()) == ["Alice prefers green tea"]
    assert texts(vault.recent(as_of="HEAD~0")) == texts(vault.recent())
    result = cli("recent", "--as-of", "HEAD~1", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["as_of"]["commit"] == line[1]
    too_far = cli("recent", "--as-of", f"HEAD~{len(line)}")
    assert too_far.exit_code == 2 and too_far.stderr.count("\n") == 1
    assert f"the vault has {len(line)} commit(s), so HEAD~{len(line) - 1} at most" in too_far.stderr
    for bad in ("HEAD~", "HEAD~-1", "HEAD^", "HEAD~1~1"):
        assert cli("recent", "--as-of", bad).exit_code == 2, bad
    # HEAD alone and any case are git's too; a huge N is told the range, not "neither a date nor a commit"
    assert vault.as_of("head~1").moment.commit.sha == line[1] and vault.as_of("HEAD").moment.commit.sha == line[0]
    for huge in ("HEAD~99999999999999999999999", "HEAD~" + "9" * 5000):
        refused = cli("recent", "--as-of", huge)
        assert refused.exit_code == 2 and f"HEAD~{len(line) - 1} at most" in refused.stderr, refused.stderr[:300]


def test_the_live_index_and_the_working_tree_are_never_touched(vault, vault_dir, months):
    vault.search("Alice")  # the live index exists
    index = vault_dir / ".memvault" / "index"
    state = {p: p.stat().st_mtime_ns for p in index.rglob("*")}
    files = snapshot(vault_dir)
    assert hits(vault.as_of("2026-02-15"), "coffee") == ["Bob drinks strong coffee"]
    assert {p: p.stat().st_mtime_ns for p in index.rglob("*")} == state
    assert snapshot(vault_dir) == files and is_clean(vault_dir)
    kept = [p.name for p in (vault_dir / ".memvault" / "asof").iterdir() if p.is_dir()]
    assert kept == [vault.as_of("2026-02-15").moment.commit.sha]


def test_a_moment_started_from_the_vaults_index_answers_as_one_built_from_the_files(vault, vault_dir, months):
    """The moment's index begins as a copy of the vault's, which dropped Bob (forgotten in March)
    and holds Carol (added in May): the answers are those of an index built from that commit alone."""
    import shutil

    on(vault, "2026-06-10T10:00:00+00:00")
    log = vault_dir / months["alice"].path  # a hand edit after the fact, committed
    log.write_text(log.read_text().replace("Alice lives in Paris", "Alice lives in Paris, rue Oberkampf"))
    git(vault_dir, "commit", "-qam", "hand edit")
    queries = ["coffee", "Alice Paris", "choir", "Bob Carol Alice"]
    moments = ["2026-02-15", "2026-04-15", "2026-06-01"]

    def answers():
        # (as sets: Tantivy counts a deleted document's words until it merges segments, so two near
        # ties may swap, as in the vault's own index after deletes)
        return {(m, q): {(h.id, h.text) for h in vault.search(q, include_all=True, as_of=m)}
                for m in moments for q in queries}

    vault.search("Alice")                                    # the vault's index: seeds every moment
    seeded = answers()
    assert "Bob drinks strong coffee" in {text for _id, text in seeded[("2026-02-15", "coffee")]}
    assert "Alice lives in Paris" in {text for _id, text in seeded[("2026-04-15", "Alice Paris")]}
    assert "Alice lives in Paris, rue Oberkampf" not in {text for _id, text in seeded[("2026-06-01", "Alice Paris")]}
    assert all("choir" not in text for _id, text in seeded[("2026-04-15", "choir")])
    vault.close()
    shutil.rmtree(vault_dir / ".memvault" / "asof")
    shutil.rmtree(vault_dir / ".memvault" / "index")         # no index: every moment built from its files
    assert answers() == seeded


def test_the_folder_of_past_moments_keeps_the_most_recently_used(vault, vault_dir, months, monkeypatch):
    from memvault.recall import asof

    monkeypatch.setattr(asof, "MAX_SNAPSHOTS", 2)
    moments = ["2026-01-15", "2026-02-15", "2026-04-15"]
    shas = [vault.as_of(m).moment.commit.sha for m in moments]
    for moment in moments:
        vault.recent(as_of=moment)
    kept = {p.name for p in (vault_dir / ".memvault" / "asof").iterdir() if p.is_dir()}
    assert kept == set(shas[1:])
    assert texts(vault.recent(as_of="2026-01-15")) == ["Alice lives in Paris"]  # made again
    kept = {p.name for p in (vault_dir / ".memvault" / "asof").iterdir() if p.is_dir()}
    assert kept == {shas[0], shas[2]}


def test_a_moment_being_read_is_never_evicted(vault, vault_dir, months, monkeypatch):
    from memvault.recall import asof

    monkeypatch.setattr(asof, "MAX_SNAPSHOTS", 1)
    first = vault.as_of("2026-01-15").moment.commit.sha
    with asof.past(vault.storage, "2026-01-15") as reading:
        vault.recent(as_of="2026-02-15")        # makes room: the moment being read stays
        assert (vault_dir / ".memvault" / "asof" / first).is_dir()
        assert [f.text for f in reading.facts.iter_facts()] == ["Alice lives in Paris"]
    vault.recent(as_of="2026-04-15")            # no longer read: it goes now
    assert not (vault_dir / ".memvault" / "asof" / first).exists()


def test_two_processes_asking_about_one_moment_at_once_both_answer(vault, vault_dir, months):
    from support.cli import run_memvault

    vault.search("warm the index up")
    command = [sys.executable, "-m", "memvault", "search", "coffee", "--lexical", "--as-of", "2026-02-15",
               "--json", "--vault", str(vault_dir)]
    runs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    answers = [run.communicate(timeout=120) for run in runs]
    assert [run.returncode for run in runs] == [0, 0, 0], [err for _out, err in answers]
    found = {tuple(h["text"] for h in json.loads(out)["hits"]) for out, _err in answers}
    assert found == {("Bob drinks strong coffee",)}
    folders = [p.name for p in (vault_dir / ".memvault" / "asof").iterdir()]
    assert [name for name in folders if not name.endswith((".lock", ".json"))] == [
        vault.as_of("2026-02-15").moment.commit.sha]
    assert run_memvault("search", "coffee", "--as-of", "2026-02-15", "--vault", str(vault_dir)).returncode == 0


def test_cli_says_which_commit_answered_in_text_and_json(cli, vault_dir, monkeypatch):
    for when, text in (("2026-01-10T10:00:00+00:00", "Alice lives in Paris"),
                       ("2026-02-10T10:00:00+00:00", "Bob drinks strong coffee")):
        monkeypatch.setenv("GIT_AUTHOR_DATE", when)
        monkeypatch.setenv("GIT_COMMITTER_DATE", when)
        assert cli("add", text, "--at", when[:10]).exit_code == 0
    sha = git(vault_dir, "log", "-1", "--format=%H", "--grep", "Alice").strip()
    found = cli("search", "Alice Bob", "--lexical", "--all", "--as-of", "2026-01-31", "--json")
    assert found.exit_code == 0, found.stderr
    data = json.loads(found.stdout)
    assert data["as_of"] == {"asked": "2026-01-31", "commit": sha, "at": "2026-01-10T10:00:00+00:00",
                             "message": data["as_of"]["message"]}
    assert [hit["text"] for hit in data["hits"]] == ["Alice lives in Paris"]
    shown = cli("recent", "--as-of", "2026-01-31")
    assert shown.exit_code == 0 and "Bob" not in shown.stdout and "Alice lives in Paris" in shown.stdout
    assert shown.stderr == f"memvault: as of 2026-01-31: commit {sha[:10]} of 2026-01-10T10:00:00+00:00 " \
                           f"({data['as_of']['message']})\n"
    listed = json.loads(cli("recent", "--as-of", sha[:12], "--json").stdout)
    assert listed["as_of"]["commit"] == sha and [f["text"] for f in listed["facts"]] == ["Alice lives in Paris"]
    status = cli("status", "--as-of", "2026-01-31")
    assert "facts       1 (0 forgotten, 0 purged)" in status.stdout and f"commit {sha[:10]}" in status.stdout
    assert "index" not in status.stdout
    status_json = json.loads(cli("status", "--as-of", "2026-01-31", "--json").stdout)
    assert status_json["facts"]["live"] == 1 and "index" not in status_json and status_json["as_of"]["commit"] == sha
    bundle = json.loads(cli("context", "--as-of", "2026-01-31", "--json").stdout)
    facts = [item["text"] for item in bundle["items"] if item["kind"] == "fact"]
    assert facts == ["Alice lives in Paris"] and bundle["as_of"]["commit"] == sha
    lines = cli("search", "--stdin", "--lexical", "--all", "--json",
                input='{"query": "Bob", "as-of": "2026-01-31"}\n{"query": "Bob"}\n')
    first, second = (json.loads(line) for line in lines.stdout.splitlines())
    assert first["hits"] == [] and first["as_of"]["commit"] == sha
    assert [hit["text"] for hit in second["hits"]] == ["Bob drinks strong coffee"] and "as_of" not in second
    before = snapshot(vault_dir)
    for bad in ("soon", "2025-01-01", "abcdef0123456"):
        refused = cli("search", "Alice", "--as-of", bad)
        assert refused.exit_code == 2 and refused.stdout == "" and len(refused.stderr.splitlines()) == 1, bad
        assert cli("show", "x", "--as-of", bad).exit_code == 2
    assert snapshot(vault_dir) == before


def test_a_supersede_counts_from_its_commit_and_a_question_about_the_past_finds_the_older(vault):
    on(vault, "2026-01-10T10:00:00+00:00")
    paris = vault.add("Alice lives in Paris", at="2026-01-10T09:00:00")
    on(vault, "2026-03-10T10:00:00+00:00")
    lyon = vault.add("Alice lives in Lyon now", at="2026-03-10T09:00:00", supersedes=paris.id)
    before = vault.search("Alice lives", lexical_only=True, as_of="2026-02-01")
    assert [(h.text, h.superseded_by) for h in before] == [("Alice lives in Paris", None)]
    after = vault.search("Alice lives", lexical_only=True, as_of="2026-04-01")
    assert [(h.text, h.superseded_by) for h in after] == [("Alice lives in Lyon now", None),
                                                          ("Alice lives in Paris", lyon.id)]
    # the facts true in February, as known today: the older one, marked
    february = vault.search("Alice lives", lexical_only=True, until="2026-02-28")
    assert [(h.text, h.superseded_by) for h in february] == [("Alice lives in Paris", lyon.id)]
    assert vault.show(paris.id, as_of="2026-02-01").superseded_by is None
    assert vault.show(paris.id, as_of="2026-04-01").chain == (paris.id, lyon.id)


def test_before_and_after_a_dream_and_its_undo(vault, monkeypatch):
    from support.dream import settings
    from support.fake_llm import FakeLLM, consolidate_everything

    on(vault, "2026-01-10T10:00:00+00:00")
    tea = vault.add("Alice drinks green tea", at="2026-01-10T09:00:00")
    on(vault, "2026-02-01T03:00:00+00:00")
    with FakeLLM(default=consolidate_everything("wiki/topics/drinks.md", "Drinks")) as fake:
        assert vault.dream(llm=settings(fake), today=date(2026, 2, 1)).batches[0].outcome == "ok"
    on(vault, "2026-03-01T10:00:00+00:00")
    vault.dream_undo()
    before, between, after = (vault.as_of(m) for m in ("2026-01-20", "2026-02-15", "2026-03-15"))
    assert [h.kind for h in before.search("green tea", lexical_only=True)] == ["fact"]
    assert [h.id for h in between.search("green tea", lexical_only=True)] == ["wiki/topics/drinks.md#notes"]
    assert [h.kind for h in after.search("green tea", lexical_only=True)] == ["fact"]
    summary = "- Drinks: Alice drinks green tea — [Drinks](wiki/topics/drinks.md)"  # the runner's MEMORY.md line
    assert summary not in before.context().markdown
    bundle = between.context("green tea")
    assert [item.kind for item in bundle.items][:2] == ["memory", "page"] and summary in bundle.markdown
    assert between.status()["watermark"] == "2026-01-10" and after.status()["watermark"] is None
    assert summary not in after.context().markdown and "wiki/topics/drinks.md" not in after.context("tea").markdown
    assert between.show(tea.id).fact.text == "Alice drinks green tea"


def test_a_purge_takes_the_text_from_every_moment_and_every_kept_copy(vault, vault_dir):
    on(vault, "2026-01-10T10:00:00+00:00")
    passport = vault.add("Alice keeps her passport in the blue drawer", at="2026-01-10T09:00:00")
    on(vault, "2026-02-10T10:00:00+00:00")
    vault.add("Bob owns a red bicycle", at="2026-02-10T09:00:00")
    old = vault.as_of("2026-02-15")
    assert hits(old, "passport") == ["Alice keeps her passport in the blue drawer"]
    kept = vault_dir / ".memvault" / "asof"
    assert any(b"blue drawer" in p.read_bytes() for p in kept.rglob("*") if p.is_file())
    on(vault, "2026-03-10T10:00:00+00:00")
    vault.purge([passport.id])
    assert not any(b"blue drawer" in p.read_bytes() for p in kept.rglob("*") if p.is_file())
    february = vault.as_of("2026-02-15")
    assert february.moment.commit.sha != old.moment.commit.sha   # the history was rewritten
    assert hits(february, "passport") == [] and texts(february.recent()) == ["Bob owns a red bicycle"]
    with pytest.raises(NotFound, match="purged"):
        february.show(passport.id)
    with pytest.raises(InvalidInput, match="not in the history|no commit"):
        vault.as_of(old.moment.commit.sha)
    assert not any(b"blue drawer" in p.read_bytes() for p in kept.rglob("*") if p.is_file())


def test_a_purge_taken_with_plain_git_empties_the_kept_moments_too(tmp_path):
    """A clone that takes a purge with `git fetch` and `git reset` instead of `memvault sync` never
    runs purge's clean-up: the next question about the past finds the vault knowing a purge its kept
    moments were made without, and deletes them."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    a = Vault.init(tmp_path / "a")
    on(a, "2026-01-10T10:00:00+00:00")
    secret = a.add("Dana's locker code is in the grey notebook", at="2026-01-10T09:00:00")
    on(a, "2026-02-10T10:00:00+00:00")
    a.add("Erin plays chess", at="2026-02-10T09:00:00")
    a.set_remote(str(remote))
    a.sync()
    b = Vault.clone(str(remote), tmp_path / "b")
    assert hits(b.as_of("2026-02-15"), "locker") == ["Dana's locker code is in the grey notebook"]
    on(a, "2026-03-10T10:00:00+00:00")
    a.purge([secret.id])
    a.sync()
    git(b.root, "fetch", "-q", "origin")
    git(b.root, "reset", "-q", "--hard", "origin/main")
    assert hits(b.as_of("2026-02-15"), "locker") == []
    kept = b.root / ".memvault" / "asof"
    assert not any(b"grey notebook" in p.read_bytes() for p in kept.rglob("*") if p.is_file())


def test_two_clones_after_a_sync_answer_the_same(tmp_path):
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    a = Vault.init(tmp_path / "a")
    on(a, "2026-01-10T10:00:00+00:00")
    a.add("Alice lives in Paris", at="2026-01-10T09:00:00")
    a.set_remote(str(remote))
    on(a, "2026-01-11T10:00:00+00:00")
    a.sync()
    b = Vault.clone(str(remote), tmp_path / "b")
    on(a, "2026-03-01T10:00:00+00:00")
    a.add("Alice bought a piano", at="2026-03-01T09:00:00")
    on(b, "2026-03-02T10:00:00+00:00")
    b.add("Bob moved to Rome", at="2026-03-02T09:00:00")
    on(b, "2026-03-02T11:00:00+00:00")
    b.sync()
    on(a, "2026-03-03T10:00:00+00:00")
    assert a.sync().merged          # a merge commit: a's own line is its first parent
    on(b, "2026-03-04T10:00:00+00:00")
    b.sync()                        # a fast-forward to a's merge
    assert git(a.root, "rev-parse", "HEAD") == git(b.root, "rev-parse", "HEAD")
    for moment, expected in (("2026-02-01", ["Alice lives in Paris"]),
                             ("2026-03-02T12:00:00", ["Alice bought a piano", "Alice lives in Paris"]),
                             ("2026-03-05", ["Bob moved to Rome", "Alice bought a piano", "Alice lives in Paris"])):
        seen = [(v.as_of(moment).moment.commit.sha, texts(v.recent(as_of=moment))) for v in (a, b)]
        assert seen[0] == seen[1] and seen[0][1] == expected, moment


def test_as_of_through_the_python_api_keywords_and_view_agree(vault, months):
    view = vault.as_of(date(2026, 2, 15))
    assert texts(view.recent()) == texts(vault.recent(as_of="2026-02-15"))
    assert view.context("coffee").to_dict()["items"] == vault.context("coffee", as_of="2026-02-15").to_dict()["items"]
    assert view.status()["as_of"]["commit"] == view.moment.commit.sha
    with pytest.raises(InvalidInput):
        vault.search("x", as_of=12)


def test_a_read_only_view_of_the_vault_keeps_its_moments_in_the_users_cache(vault, vault_dir, months, tmp_path):
    """The vault seen through a read-only bind mount: a question about the past writes nothing
    there; the moment is kept beside the index's copy in the user's cache."""
    from support.cli import run_memvault

    view = tmp_path / "view"
    view.mkdir()
    try:
        bound = subprocess.run(["mount", "--bind", str(vault_dir), str(view)], capture_output=True, text=True)
    except FileNotFoundError:
        pytest.skip("no `mount` command here: this test needs a read-only bind mount (and root)")
    if bound.returncode != 0:
        pytest.skip(f"cannot bind-mount here ({bound.stderr.strip() or 'refused'}); this test needs root")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(view)], check=True, capture_output=True)
        found = run_memvault("search", "coffee", "--lexical", "--as-of", "2026-02-15", "--json", "--vault", str(view))
        assert found.returncode == 0, found.stderr
        assert [hit["text"] for hit in json.loads(found.stdout)["hits"]] == ["Bob drinks strong coffee"]
        assert not (vault_dir / ".memvault" / "asof").exists()
        copies = list(Path(os.environ["HOME"], ".cache", "memvault", "vaults").iterdir())
        assert [(copy / "asof").is_dir() for copy in copies] == [True]
    finally:
        subprocess.run(["umount", "-l", str(view)], capture_output=True)


def test_a_moments_copy_damaged_by_hand_is_made_again(vault, vault_dir, months):
    """The folder of a past moment, once made, was trusted for ever: a log emptied or removed there
    answered "nothing to show" without a word. A new process checks it against the commit."""
    from support.cli import run_memvault

    sha = vault.as_of("2026-02-15").moment.commit.sha
    assert texts(Vault(vault_dir).as_of("2026-02-15").recent()) == ["Bob drinks strong coffee", "Alice lives in Paris"]
    folder = vault_dir / ".memvault" / "asof" / sha
    for damage in (lambda log: log.write_text(""), lambda log: log.unlink()):
        log = next(folder.glob("logs/*/2026-02-10.md"))
        damage(log)
        done = run_memvault("recent", "--as-of", "2026-02-15", "--json", "--vault", str(vault_dir))
        assert done.returncode == 0 and "was changed since it was made" in done.stderr, done.stderr
        assert [f["text"] for f in json.loads(done.stdout)["facts"]] == ["Bob drinks strong coffee",
                                                                          "Alice lives in Paris"]
        assert "Bob drinks strong coffee" in log.read_text()
