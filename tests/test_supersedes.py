"""`add --supersedes ID`: current truth kept apart from history. Both facts stay; search and context
list the newer first and mark the older; show and history give the chain; bad links write nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from support.git import commit_count, git, is_clean, snapshot

from memvault.errors import InvalidInput
from memvault.formats.facts import Fact, format_item, parse_log


def test_the_link_rides_in_the_log_line_and_reads_back(tmp_path):
    at = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    fact = Fact(id="1k0w8a78q5y9c48y", text="Alice lives in Lyon\n  now", at=at, supersedes="1k0w82bqgrc6ntb7",
                path="logs/2026/2026-03-01.md")
    item = format_item(fact)
    assert '"supersedes":"1k0w82bqgrc6ntb7"' in item.split("\n")[0]
    parsed, problems = parse_log("# 2026-03-01\n\n" + item, fact.path)
    assert problems == [] and parsed[0].supersedes == "1k0w82bqgrc6ntb7" and parsed[0].text == fact.text
    # a line of an older vault, without the field, reads as superseding nothing, and is written back the same
    older = ('- Alice lives in Paris <!-- mv {"id":"1k0w82bqgrc6ntb7","at":"2026-01-10T09:00:00+00:00",'
             '"category":"fact"} -->\n')
    (read,), _ = parse_log(older, fact.path)
    assert read.supersedes is None and format_item(read) == older


def test_search_and_context_put_the_newer_state_first_and_mark_the_older(vault, cli, vault_dir):
    paris = vault.add("Alice lives in Paris", at="2026-01-10T09:00:00")
    vault.add("Bob lives in Rome", at="2026-01-11T09:00:00")
    added = cli("add", "Alice moved to Lyon", "--supersedes", paris.id.upper().replace("0", "O"), "--json")
    assert added.exit_code == 0, added.stderr
    lyon = json.loads(added.stdout)
    assert lyon["supersedes"] == paris.id   # typed in any case, with O for 0: stored as the id
    line = next(item for item in (vault_dir / lyon["path"]).read_text().splitlines() if lyon["id"] in item)
    assert f'"supersedes":"{paris.id}"' in line
    # found by its own words or not, the newer is listed just above the older, which is marked
    for query in ("where does Alice live", "Alice Paris"):
        found = vault.search(query, lexical_only=True)
        assert [(h.text, h.supersedes, h.superseded_by) for h in found[:2]] == [
            ("Alice moved to Lyon", paris.id, None), ("Alice lives in Paris", None, lyon["id"])], query
    paris_only = vault.search("Paris", lexical_only=True, explain=True)
    assert [h.id for h in paris_only] == [lyon["id"], paris.id]
    assert paris_only[0].explain["current_state"]["over"] == paris.id
    # a question about the past keeps the plain order, still marking the older one
    past = vault.search("where did Alice live before, in Paris", lexical_only=True)
    assert past[0].text == "Alice lives in Paris" and past[0].superseded_by == lyon["id"]
    # facts true in January: the older one, not its successor from March
    assert [h.text for h in vault.search("Alice", lexical_only=True, until="2026-01-31")] == ["Alice lives in Paris"]
    text = cli("search", "Paris", "--lexical", "--explain").stdout
    assert "current_state" in text
    shown = cli("search", "Paris", "--lexical").stdout  # the terminal's table marks it too
    assert f"(superseded by {lyon['id']}) Alice lives in Paris" in shown
    assert "(superseded" not in next(line for line in shown.splitlines() if "Alice moved to Lyon" in line)
    bundle = vault.context("Alice Paris")
    facts = [(item.id, item.superseded_by) for item in bundle.items if item.kind == "fact"]
    assert facts[:2] == [(lyon["id"], None), (paris.id, lyon["id"])]
    assert f"`{paris.id}` [fact] (superseded by `{lyon['id']}`) Alice lives in Paris" in bundle.markdown
    recent = {item.id: item.superseded_by for item in vault.context(relevant=0).items if item.kind == "fact"}
    assert recent[paris.id] == lyon["id"] and recent[lyon["id"]] is None


def test_show_and_history_give_the_chain(vault, cli):
    first = vault.add("The office is on floor 2", at="2026-01-10T09:00:00")
    second = vault.add("The office moved to floor 5", supersedes=first.id)
    third = vault.add("The office is on floor 7 now", supersedes=second.id)
    view = vault.show(second.id)
    assert view.superseded_by == third.id and view.chain == (first.id, second.id, third.id)
    shown = json.loads(cli("show", first.id, "--json").stdout)
    assert shown["superseded_by"] == second.id and shown["chain"] == [first.id, second.id, third.id]
    text = cli("show", second.id).stdout
    assert f"supersedes: {first.id}" in text and f"superseded: by {third.id}" in text
    assert f"chain:      {first.id} -> {second.id} -> {third.id}" in text
    history = [c["message"] for c in vault.history(first.id)]
    assert history == [f"add: {first.id} The office is on floor 2", f"add: {second.id} The office moved to floor 5"]


def test_forgetting_the_newer_fact_makes_the_older_current_again(vault):
    paris = vault.add("Alice lives in Paris")
    lyon = vault.add("Alice lives in Lyon", supersedes=paris.id)
    vault.forget(lyon.id, "a mistake")
    assert vault.show(paris.id).superseded_by is None
    assert [(h.text, h.superseded_by) for h in vault.search("Alice lives", lexical_only=True)] == [
        ("Alice lives in Paris", None)]
    # and it can be superseded again
    assert vault.add("Alice lives in Nice", supersedes=paris.id).supersedes == paris.id


def test_bad_supersedes_is_one_line_exit_2_and_nothing_written(vault, cli, vault_dir):
    paris = vault.add("Alice lives in Paris")
    lyon = vault.add("Alice lives in Lyon", supersedes=paris.id)
    gone = vault.add("Bob lives in Rome")
    vault.forget(gone.id)
    before, commits = snapshot(vault_dir), commit_count(vault_dir)
    cases = [
        (["add", "x", "--supersedes", "zzzzzzzzzzzzzzzz"], "supersedes 'zzzzzzzzzzzzzzzz': no fact with that id"),
        (["add", "x", "--supersedes", gone.id], f"supersedes {gone.id}: that fact was forgotten"),
        (["add", "x", "--supersedes", paris.id], f"already superseded by {lyon.id}; supersede {lyon.id} instead"),
        (["add", "x", "--supersedes", " "], "supersedes must be a fact id"),
        (["add", "--stdin", "--supersedes", paris.id], "give \"supersedes\" in the records"),
    ]
    for args, words in cases:
        result = cli(*args, input="y\n")
        assert result.exit_code == 2 and words in result.stderr and len(result.stderr.splitlines()) == 1, \
            (args, result.stderr)
    batch = "\n".join([json.dumps({"text": "one", "supersedes": lyon.id}),
                       json.dumps({"text": "two", "supersedes": lyon.id})])
    result = cli("add", "--stdin", input=batch)
    assert result.exit_code == 2 and result.stderr.startswith("memvault: line 2: supersedes") and \
        "as fact 1 of this batch does" in result.stderr
    result = cli("add", "--stdin", input=json.dumps({"text": "three", "supersedes": 42}))
    assert result.exit_code == 2 and "line 1: supersedes must be a fact id" in result.stderr
    with pytest.raises(InvalidInput, match="no fact with that id"):
        vault.add("x", supersedes="nosuchfact000000")
    assert snapshot(vault_dir) == before and commit_count(vault_dir) == commits and is_clean(vault_dir)


def test_a_loop_made_by_hand_is_refused(vault, vault_dir):
    a = vault.add("The door code is old")
    b = vault.add("The door code is new", supersedes=a.id)
    log = vault_dir / a.path
    # a hand edit makes the first fact supersede the second: a loop
    log.write_text(log.read_text().replace(f'"id":"{a.id}"', f'"id":"{a.id}","supersedes":"{b.id}"'))
    git(vault_dir, "commit", "-qam", "hand edit")
    view = vault.show(a.id)
    assert set(view.chain) == {a.id, b.id}    # shown, cut where it closes
    with pytest.raises(InvalidInput, match="form a loop"):
        vault.add("The door code is newest", supersedes=b.id)


def test_a_purged_fact_cannot_be_superseded(vault, vault_dir):
    fact = vault.add("The safe combination is written on the fridge")
    vault.purge([fact.id])
    with pytest.raises(InvalidInput, match=f"supersedes {fact.id}: that fact was purged"):
        vault.add("x", supersedes=fact.id)


def test_a_retried_add_with_a_key_and_supersedes_returns_the_first_fact_and_writes_nothing(vault, cli, vault_dir):
    """The retry of `add --key K --supersedes OLD` finds OLD superseded by its own first attempt: the
    key answers first, so the retry is not refused as a second supersede."""
    paris = vault.add("Alice lives in Paris")
    first = cli("add", "Alice moved to Lyon", "--supersedes", paris.id, "--key", "move-1")
    assert first.exit_code == 0 and first.stderr == "", first.stderr
    lyon = first.stdout.strip()
    commits, before = commit_count(vault_dir), snapshot(vault_dir)
    again = cli("add", "Alice moved to Lyon", "--supersedes", paris.id, "--key", "move-1")
    assert again.exit_code == 0 and again.stdout == first.stdout, again.stderr
    assert again.stderr == f"memvault: key 'move-1' (fact {lyon}) is already stored; nothing was added\n"
    batch = "\n".join([json.dumps({"text": "Alice moved to Lyon", "supersedes": paris.id, "key": "move-1"}),
                       json.dumps({"text": "Alice moved to Lyon", "supersedes": paris.id, "key": "move-1"})])
    retried = cli("add", "--stdin", input=batch)
    assert retried.exit_code == 0 and retried.stdout.split() == [lyon, lyon], retried.stderr
    assert commit_count(vault_dir) == commits and snapshot(vault_dir) == before
    # another key is another fact: that one is refused, paris being superseded already
    other = cli("add", "Alice moved to Nice", "--supersedes", paris.id, "--key", "move-2")
    assert other.exit_code == 2 and f"already superseded by {lyon}" in other.stderr
    assert vault.show(paris.id).superseded_by == lyon and commit_count(vault_dir) == commits


def test_an_imported_record_may_supersede_a_stored_fact(vault, cli, vault_dir, tmp_path):
    """memvault's own JSONL carries `supersedes` as `add --stdin` does; the other formats have no such link."""
    paris = vault.add("Alice lives in Paris")
    source = tmp_path / "moves.jsonl"
    source.write_text(json.dumps({"text": "Alice moved to Lyon", "supersedes": paris.id.upper()}) + "\n")
    first = cli("import", str(source), "--json")
    assert first.exit_code == 0, first.stderr
    assert json.loads(first.stdout)["new"] == 1
    (lyon,) = [fact for fact in vault.recent() if fact.text == "Alice moved to Lyon"]
    assert lyon.supersedes == paris.id and vault.show(paris.id).superseded_by == lyon.id
    commits = commit_count(vault_dir)
    again = cli("import", str(source))
    assert again.exit_code == 0 and again.stdout.startswith("nothing new to import"), again.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"text": "Alice moved to Nice", "supersedes": paris.id}) + "\n")
    refused = cli("import", str(bad))
    assert refused.exit_code == 2 and refused.stderr.startswith(f"memvault: bad.jsonl:1: supersedes {paris.id}")
    assert f"already superseded by {lyon.id}" in refused.stderr and len(refused.stderr.splitlines()) == 1
    assert commit_count(vault_dir) == commits and is_clean(vault_dir)


def test_writers_superseding_one_fact_at_once_leave_one_successor(vault, vault_dir):
    """Four processes (and four threads of one Vault) each added `--supersedes B` at the same moment,
    and all four were written: each checked before the write lock, so the chain forked. The check is
    made again under the lock: one is written, the others refused with exit 2."""
    import subprocess
    import sys
    from concurrent.futures import ThreadPoolExecutor

    from memvault import Vault

    bob = vault.add("Bob lives in Paris")
    writers = [subprocess.Popen([sys.executable, "-m", "memvault", "--vault", str(vault_dir), "add",
                                 f"Bob lives in city {i}", "--supersedes", bob.id],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(4)]
    results = [(w.wait(timeout=120), w.stderr.read()) for w in writers]
    assert sorted(code for code, _ in results) == [0, 2, 2, 2], results
    assert all("already superseded" in err for code, err in results if code == 2), results
    assert sum(1 for f in vault.iter_facts() if f.supersedes == bob.id) == 1
    assert is_clean(vault_dir)

    dora = vault.add("Dora lives in Oslo")

    def supersede(i: int) -> str:
        try:
            Vault(vault_dir).add(f"Dora lives in town {i}", supersedes=dora.id)
            return "written"
        except InvalidInput as e:
            return str(e)

    with ThreadPoolExecutor(4) as pool:
        outcomes = list(pool.map(supersede, range(4)))
    assert outcomes.count("written") == 1, outcomes
    assert sum(1 for f in vault.iter_facts() if f.supersedes == dora.id) == 1
