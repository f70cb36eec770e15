"""Recall by session: `memvault sessions`, and `recent --source/--session` read as a thread."""

from __future__ import annotations

import json

import pytest
from support.git import commit_count


@pytest.fixture
def chats(vault):
    vault.add_many([
        {"text": "chat-1 opens", "at": "2026-11-10T09:00", "source": "claude", "session": "chat-1"},
        {"text": "chat-2 only", "at": "2026-11-12T09:00", "source": "cursor", "session": "chat-2"},
        {"text": "chat-1 middle", "at": "2026-11-14T09:00", "source": "claude", "session": "chat-1"},
        {"text": "chat-1 closes", "at": "2026-11-20T18:30", "source": "claude", "session": "chat-1"},
        {"text": "no label at all", "at": "2026-11-21T09:00"},
        {"text": "source only", "at": "2026-11-19T09:00", "source": "cron"},
    ])
    return vault


def _json(cli, *args):
    result = cli(*args, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_sessions_counts_and_first_last_times(chats, cli):
    rows = _json(cli, "sessions")
    assert [(r["source"], r["session"], r["facts"]) for r in rows] == [
        ("claude", "chat-1", 3), ("cron", None, 1), ("cursor", "chat-2", 1)]  # most recently active first
    assert rows[0]["first"] == "2026-11-10T09:00:00+00:00" and rows[0]["last"] == "2026-11-20T18:30:00+00:00"
    text = cli("sessions").stdout.splitlines()
    assert text[0].split("\t") == ["2026-11-10 09:00", "2026-11-20 18:30", "3", "claude", "chat-1"]


def test_sessions_since_and_source_filters(chats, cli):
    rows = _json(cli, "sessions", "--since", "2026-11-13")
    assert [(r["session"], r["facts"], r["first"][:10]) for r in rows if r["session"]] == [("chat-1", 2, "2026-11-14")]
    assert [r["source"] for r in _json(cli, "sessions", "--source", "cursor")] == ["cursor"]


def test_forgotten_facts_leave_the_counts(chats, cli):
    closing = next(f for f in chats.recent(None) if f.text == "chat-1 closes")
    chats.forget(closing.id)
    row = next(r for r in _json(cli, "sessions") if r["session"] == "chat-1")
    assert (row["session"], row["facts"], row["last"][:10]) == ("chat-1", 2, "2026-11-14")


def test_recent_reads_a_session_as_a_thread(chats, cli):
    """With --session the newest facts of the session come oldest first; --newest-first overrides."""
    assert [f["text"] for f in _json(cli, "recent", "--session", "chat-1")] == [
        "chat-1 opens", "chat-1 middle", "chat-1 closes"]
    # the window is still the newest facts: the last two of the thread, in order
    assert [f["text"] for f in _json(cli, "recent", "--session", "chat-1", "-n", "2")] == [
        "chat-1 middle", "chat-1 closes"]
    assert [f["text"] for f in _json(cli, "recent", "--source", "claude", "--newest-first", "-n", "2")] == [
        "chat-1 closes", "chat-1 middle"]
    assert _json(cli, "recent", "-n", "1")[0]["text"] == "no label at all"  # no filter: newest first
    assert [f.text for f in chats.recent(2, session="chat-1", oldest_first=True)] == ["chat-1 middle", "chat-1 closes"]


@pytest.mark.parametrize("args", [["--since", "last tuesday"], ["--until", "2026-13-01"], ["--since", "7x"]])
def test_nonsense_dates_are_refused(chats, cli, args):
    """Bad inputs tried: a phrase, an impossible month, an unknown unit."""
    before = commit_count(chats.root)
    result = cli("sessions", *args)
    assert result.exit_code == 2 and "is not a date" in result.stderr and result.stdout == ""
    assert commit_count(chats.root) == before
