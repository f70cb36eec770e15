"""Retrieval v2 as a user sees it: sessions as threads, the relevance floor, dates the question
names, and the newest state first for questions about now."""

from __future__ import annotations

import json
import sqlite3

import pytest
from support.cli import run_memvault
from support.git import commit_count, is_clean

from memvault.errors import InvalidInput


def texts(hits):
    return [h.text for h in hits]


def test_search_session_keeps_to_one_conversation_in_both_halves(vault, cli):
    """Bad inputs tried: an empty and a blank session, a session that is not a string (API and a
    --stdin line), `--session` with no value; none changes the vault."""
    vault.add("Kofi asked about the billing release date", session="chat-1")
    vault.add("The billing release moves to Friday", session="chat-2")
    vault.add("Billing release notes are in the wiki")
    assert texts(vault.search("billing release", session="chat-2")) == ["The billing release moves to Friday"]
    hits = vault.search("billing release")
    assert {h.session for h in hits} == {"chat-1", "chat-2", None}
    # The dense half filters too: no word in common with any fact (the tiny model reads letters).
    assert texts(vault.search("billingg releasse fridday", session="chat-2")) == ["The billing release moves to Friday"]
    assert vault.search("billingg releasse fridday", session="chat-9") == []

    result = cli("search", "billing", "--session", "chat-1", "--json")
    assert result.exit_code == 0
    assert [(h["text"], h["session"]) for h in json.loads(result.stdout)] == [
        ("Kofi asked about the billing release date", "chat-1")]
    lines = cli("search", "--stdin", "--json", input='{"query": "billing", "session": "chat-2"}\n'
                '{"query": "billing", "session": 7}\n')
    answers = [json.loads(line) for line in lines.stdout.splitlines()]
    assert texts_of(answers[0]["hits"]) == ["The billing release moves to Friday"]
    assert answers[1]["error"]["type"] == "InvalidInput" and lines.exit_code == 2

    before = commit_count(vault.root)
    for bad in ("", "   ", 7):
        with pytest.raises(InvalidInput):
            vault.search("billing", session=bad)
    assert cli("search", "billing", "--session", "").exit_code == 2
    assert cli("search", "billing", "--session").exit_code == 2
    assert commit_count(vault.root) == before and is_clean(vault.root)


def texts_of(hits: list[dict]) -> list[str]:
    return [h["text"] for h in hits]


def test_a_reply_is_found_by_the_words_of_what_it_answers(vault):
    """A fact of a session is read with the fact before it in its thread; a fact without a session
    is read alone, as before. Faults tried: the same reply without a session, two sessions
    interleaved in one log, and a reply backdated before its question (then it answers nothing)."""
    question = vault.add("Did you ever go to the Lisbon jazz festival?", session="s1", at="2025-06-01T10:00")
    vault.add("Deploy checklist reviewed", session="s2", at="2025-06-01T10:01")  # another thread between
    reply = vault.add("Yes, every summer with my sister", session="s1", at="2025-06-01T10:02")
    alone = vault.add("Yes, every summer with my brother", at="2025-06-01T10:03")
    early = vault.add("No, never with my cousin", session="s1", at="2025-06-01T09:00")

    found = [h.id for h in vault.search("Lisbon jazz festival", lexical_only=True)]
    assert found[0] == question.id  # its own words beat a neighbour's
    assert reply.id in found
    assert alone.id not in found and early.id not in found


def test_an_edited_question_changes_what_its_reply_is_found_by(vault):
    """The thread link is part of the index's faithful projection: a hand edit of the earlier fact
    is seen by the next search (fault: the log edited behind memvault's back)."""
    vault.add("Shall we book the Porto ferry?", session="trip")
    reply = vault.add("Booked it for Saturday", session="trip")
    assert reply.id in [h.id for h in vault.search("Porto ferry", lexical_only=True)]
    log = vault.root / reply.path
    log.write_text(log.read_text().replace("Porto ferry", "Douro cruise"))
    assert reply.id in [h.id for h in vault.search("Douro cruise", lexical_only=True)]
    assert vault.search("Porto ferry", lexical_only=True) == []


def test_a_named_day_lifts_the_facts_of_that_day(vault):
    """The question names a day (three spellings) or a month; an impossible date ("31 February")
    names nothing and leaves the plain order."""
    vault.add("Team lunch at the harbour, decided on the new logo", at="2026-03-02T12:00")
    chosen = vault.add("Team lunch at the harbour, decided the office move", at="2026-03-03T12:00")
    vault.add("Team lunch at the harbour, decided nothing much", at="2026-04-03T12:00")
    for question in ("what did we decide at lunch on 3 March 2026", "what did we decide at lunch on March 3rd, 2026",
                     "what did we decide at lunch on 2026-03-03"):
        assert vault.search(question, lexical_only=True)[0].id == chosen.id, question
    assert vault.search("lunch decisions in April 2026", lexical_only=True)[0].text.endswith("nothing much")
    plain = [h.id for h in vault.search("what did we decide at lunch", lexical_only=True)]
    impossible = vault.search("what did we decide at lunch on 31 February 2026", lexical_only=True, min_score=0)
    assert [h.id for h in impossible] == plain


def test_min_score_overrides_the_floor_and_bad_values_are_refused(cli, vault):
    """Bad inputs tried: a negative floor, text, NaN, infinity and a boolean (API), -1 and "high"
    on the command line and "high" in a --stdin line; nothing is written. `--min-score 0` shows
    every match."""
    vault.add("Lena plays the cello in an orchestra")
    vault.add("Lena's cello teacher lives in Graz")
    everything = vault.search("cello", min_score=0)
    assert len(everything) == 2
    cutoff = (everything[0].score + everything[1].score) / 2
    assert texts(vault.search("cello", min_score=cutoff)) == [everything[0].text]
    assert vault.search("cello", min_score=everything[0].score + 1) == []

    before = commit_count(vault.root)
    for bad in (-0.1, "0.2", float("nan"), float("inf"), True):
        with pytest.raises(InvalidInput):
            vault.search("cello", min_score=bad)
    for bad in ("-1", "high"):
        result = cli("search", "cello", "--min-score", bad)
        assert result.exit_code == 2 and result.stdout == ""
    lines = cli("search", "--stdin", "--json", input='{"query": "cello", "min-score": 0}\n'
                '{"query": "cello", "min-score": "high"}\n')
    answers = [json.loads(line) for line in lines.stdout.splitlines()]
    assert len(answers[0]["hits"]) == 2 and "min_score" in answers[1]["error"]["message"] and lines.exit_code == 2
    assert commit_count(vault.root) == before and is_clean(vault.root)


def test_an_index_of_the_previous_format_is_rebuilt_once_with_a_notice(vault_dir):
    """Fault tried: an index written by an older memvault (catalog schema 1)."""
    from memvault import Vault

    Vault.open(vault_dir).add("Anna builds harpsichords", session="workshop")
    assert run_memvault("reindex", "--vault", str(vault_dir)).returncode == 0
    index = vault_dir / ".memvault" / "index"
    catalog = index / (index / "current").read_text().strip() / "catalog.sqlite"
    with sqlite3.connect(catalog) as db:
        db.execute("UPDATE meta SET value = '1' WHERE name = 'schema'")
    result = run_memvault("search", "harpsichord", "--session", "workshop", "--json", "--vault", str(vault_dir))
    assert result.returncode == 0 and "Traceback" not in result.stderr
    assert "another memvault version" in result.stderr and "rebuilding" in result.stderr
    assert json.loads(result.stdout)[0]["session"] == "workshop"
    again = run_memvault("search", "harpsichord", "--vault", str(vault_dir))
    assert again.returncode == 0 and again.stderr == ""


@pytest.mark.real_model
def test_off_topic_and_nonsense_queries_answer_no_matches(cli, vault):
    """Queries tried: a topic the vault never mentions, random letters, and nonsense sharing one
    common word with a fact; a real paraphrase (no shared word) still passes the floor."""
    for text in ("Alice prefers green tea in the morning", "The team moved the database to Postgres",
                 "Bob is allergic to peanuts", "There is nothing left in the fridge"):
        vault.add(text)
    for query in ("quantum chromodynamics", "xkqzv wprlt mnbvc", "zzzqqq nothing"):
        result = cli("search", query, "--json")
        assert result.exit_code == 0 and json.loads(result.stdout) == [], query
        shown = cli("search", query)
        assert shown.exit_code == 0 and shown.stdout == "" and "no matches" in shown.stderr
    assert "relevance floor 0.05" in cli("search", "quantum chromodynamics", "--explain").stderr
    # The chance word is still there for whoever asks for every match.
    assert texts(vault.search("zzzqqq nothing", min_score=0)) == ["There is nothing left in the fridge"]
    assert texts(vault.search("which beverage does she like to drink"))[0] == "Alice prefers green tea in the morning"


@pytest.mark.real_model
def test_a_question_about_now_ranks_the_newest_state_first(vault):
    """Facts that disagree about the current state: now-words and a correction put the newer one
    first; questions about the past (a past tense, a year) still find the past first."""
    old_desk = vault.add("Uses a standing desk at the office", at="2025-03-01")
    new_desk = vault.add("Switched back to sitting; the standing desk hurt my knees", at="2026-02-10")
    vault.add("Bought a new monitor for the office", at="2025-06-01")
    old_day = vault.add("Deploys happen on Tuesdays", category="decision", at="2025-05-01")
    new_day = vault.add("Deploys moved to Wednesdays", category="correction", at="2026-01-15")
    vault.add("Alice prefers green tea", at="2025-01-01")

    def first_two(query):
        return [h.id for h in vault.search(query)][:2]

    assert first_two("what kind of desk do I use now") == [new_desk.id, old_desk.id]
    assert first_two("what desk did I use in 2025") == [old_desk.id, new_desk.id]
    assert first_two("which day do deploys happen") == [new_day.id, old_day.id]
    assert first_two("which day did deploys happen in 2025") == [old_day.id, new_day.id]
    hit = vault.search("what kind of desk do I use now", explain=True)[0]
    assert hit.explain["newer_state"]["over"] == old_desk.id
