"""A fact id repeated by a hand edit or a bad merge: doctor reports it, search and dream count the
first copy only (the oldest day's, then the first in its file), the same after a rebuild.

Faults tried: an item duplicated within a day's log with its text changed, an item copied into a
later day's log, and the first copy deleted by hand afterwards (the later one then counts).
"""

from __future__ import annotations

import json

from support.dream import TODAY, FakeLLM, dream, request_data
from support.fake_llm import consolidate_everything
from support.git import git


def _duplicate(vault):
    first = vault.add("Alice prefers green tea", at="2026-11-01T09:00:00")
    other = vault.add("Bob fixes bicycles", at="2026-11-01T10:00:00")
    log = vault.root / first.path
    lines = log.read_text().splitlines(keepends=True)
    item = next(line for line in lines if first.id in line)
    log.write_text(log.read_text() + item.replace("green tea", "oolong tea"))  # same day, text changed
    later = vault.root / "logs" / "2026" / "2026-11-03.md"
    copied = next(line for line in lines if other.id in line).replace("bicycles", "scooters")
    later.write_text("# 2026-11-03\n\n" + copied)
    git(vault.root, "add", "-A")
    git(vault.root, "commit", "-qm", "edit: copied items by hand")
    return first, other


def test_doctor_reports_every_repeated_id_and_where_the_counted_copy_is(vault, cli):
    first, other = _duplicate(vault)
    result = cli("doctor", "--json")
    check = {c["name"]: c for c in json.loads(result.stdout)["checks"]}["fact ids"]
    assert result.exit_code == 1 and check["status"] == "fail"
    assert any(d.startswith(f"{first.path}:5") and f"{first.id} again" in d and f"({first.path}:3)" in d
               for d in check["details"])
    assert any(d.startswith("logs/2026/2026-11-03.md:3") and other.id in d for d in check["details"])
    assert [f.text for f in vault.iter_facts()] == ["Alice prefers green tea", "Bob fixes bicycles"]
    assert vault.status()["facts"]["total"] == 2


def test_search_finds_the_first_copy_once_also_after_a_rebuild(vault):
    first, other = _duplicate(vault)
    for clear in (False, True):
        vault.reindex(clear=clear)
        tea = vault.search("tea", lexical_only=True)
        assert [(h.id, h.text) for h in tea] == [(first.id, "Alice prefers green tea")]
        assert vault.search("oolong", lexical_only=True) == []
        assert [h.text for h in vault.search("fixes", lexical_only=True)] == ["Bob fixes bicycles"]
        assert vault.search("scooters", lexical_only=True) == []


def test_deleting_the_first_copy_by_hand_lets_the_later_one_count(vault):
    first, other = _duplicate(vault)
    assert vault.search("scooters", lexical_only=True) == []
    log = vault.root / other.path
    log.write_text("".join(line for line in log.read_text().splitlines(keepends=True) if other.id not in line))
    found = vault.search("scooters", lexical_only=True)
    assert [(h.id, h.text) for h in found] == [(other.id, "Bob fixes scooters")]


def test_dream_sends_each_fact_once_and_its_answer_is_applied(vault):
    first, other = _duplicate(vault)
    with FakeLLM(default=consolidate_everything()) as fake:
        report = dream(vault, fake)
    assert report.ok and report.caught_up and TODAY.isoformat() > "2026-11-03"
    sent = [f for body in fake.requests for f in request_data(body)["facts"]]
    assert sorted(f["text"] for f in sent) == ["Alice prefers green tea", "Bob fixes bicycles"]
    # 2026-11-03's log holds only a copy that does not count: nothing to consolidate, not pending,
    # and every fact up to it is accounted for: the watermark passes it
    assert vault.watermark.isoformat() == "2026-11-03" and vault.dream_status()["pending_days"] == 0


def test_show_gives_the_counted_copy_of_an_id_copied_into_a_later_log(vault, cli):
    # `show` read the newest log first: it gave the scooters text that search, dream and doctor
    # pass over, from the later day's log.
    first, other = _duplicate(vault)
    shown = json.loads(cli("show", other.id, "--json").stdout)
    assert (shown["text"], shown["path"]) == ("Bob fixes bicycles", other.path)
    assert vault.show(other.id).fact.text == "Bob fixes bicycles"
    assert json.loads(cli("show", first.id, "--json").stdout)["text"] == "Alice prefers green tea"


def test_show_finds_the_oldest_copy_wherever_the_ids_time_points(vault, monkeypatch):
    """A lookup reads every log oldest first and decodes only those holding the id (decoding each
    of 2,000 logs was most of `show`'s time). The id's own time is no shortcut, so none is taken:
    a fact backdated sits in a log older than its id, and a hand copy may sit in an older log than
    the one of the id's day. Tried: both, and a log holding bytes that are not UTF-8 right before
    the id."""
    import memvault.storage.factlog as store

    fillers = vault.add_many([{"text": f"filler {day}", "at": f"2026-10-{day:02d}T09:00:00"} for day in range(1, 29)])
    backdated = vault.add("Carol moved to Oslo", at="2026-09-15T09:00:00")
    today = vault.add("Dan joined the choir")
    older = vault.root / "logs" / "2026" / "2026-09-01.md"
    item = next(line for line in (vault.root / today.path).read_text().splitlines(keepends=True) if today.id in line)
    older.write_bytes(b"# 2026-09-01\n\n- \xff\xfe stray bytes\n" + item.replace("choir", "orchestra").encode())
    git(vault.root, "add", "-A")
    git(vault.root, "commit", "-qm", "edit: an item copied into an older log by hand")
    shown = vault.show(today.id).fact
    assert (shown.text, shown.path) == ("Dan joined the orchestra", "logs/2026/2026-09-01.md")
    assert vault.show(backdated.id).fact.text == "Carol moved to Oslo"
    assert vault.show(today.id.upper()).fact.id == today.id  # read as Crockford: the same lookup

    decoded = []
    read_text = store.read_text

    def counted(path):
        if "logs" in path.parts:
            decoded.append(path.name)
        return read_text(path)

    monkeypatch.setattr(store, "read_text", counted)
    assert vault.show(fillers[-1].id).fact.text == "filler 28"
    assert decoded == ["2026-10-28.md"]  # the 29 logs before it searched, not decoded
