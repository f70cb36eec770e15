"""The Python API refuses bad arguments as the CLI does: InvalidInput in one line, nothing written.

The property tests call every public method of `Vault` with values hypothesis draws: a value of a
kind the parameter does not take is refused naming the parameter; any value at all ends in a
result or a memvault error, never a raw exception, and a refused call changes no file and no commit.
"""

from __future__ import annotations

import os
from datetime import date, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.git import commit_count, snapshot

from memvault import InvalidInput, MemvaultError, SearchQuery, Vault
from memvault.formats.drafts import FactDraft

UNKNOWN_ID = "zzzzzzzzzzzzzzzz"


def test_a_string_given_for_tags_is_refused_not_split_into_letters(vault):
    """Seen: `add("x", tags="alice")` stored the tags a, l, i, c, e and committed them."""
    before = snapshot(vault.root)
    with pytest.raises(InvalidInput) as refused:
        vault.add("Alice prefers green tea", tags="alice")
    assert str(refused.value) == ("tags must be a list of strings, got a string: 'alice' "
                                  "(a string is not a list: give ['alice'])")
    assert snapshot(vault.root) == before
    assert vault.add("Alice prefers green tea", tags=("alice", "tea")).tags == ("alice", "tea")


def test_a_batch_given_as_one_string_or_one_mapping_is_refused(vault):
    """`add_many("hello")` would store five one-letter facts, `add_many({"text": ...})` its keys."""
    before = snapshot(vault.root)
    for drafts in ("hello", {"text": "Alice prefers green tea"}):
        with pytest.raises(InvalidInput, match=r"^drafts must be a list of FactDrafts, mappings or strings, got"):
            vault.add_many(drafts)
    assert snapshot(vault.root) == before


def test_recent_and_sessions_take_dates_in_every_form_the_cli_takes(vault):
    """Seen: `recent(5, since="7d")` raised a bare AttributeError."""
    old = vault.add("Alice moved to Lyon", at="2026-01-05", session="s1")
    new = vault.add("Bob is on call", session="s2")
    assert [f.id for f in vault.recent(5, since="7d")] == [new.id]
    assert [f.id for f in vault.recent(5, until="2026-01-05")] == [old.id]   # a date is its whole day
    assert [f.id for f in vault.recent(5, since=date(2026, 1, 5), until=date(2026, 1, 5))] == [old.id]
    assert [f.id for f in vault.recent(5, since=datetime.now() - timedelta(hours=1))] == [new.id]
    assert [s.session for s in vault.sessions(since="yesterday")] == ["s2"]
    with pytest.raises(InvalidInput, match=r"^since 'last week' is not a date: use ISO 8601"):
        vault.recent(5, since="last week")
    with pytest.raises(InvalidInput, match=r"^until must be a date \(a date or datetime, or text: 2026-11-01, "
                                           r"yesterday, 7d\) or None, got an integer: 5$"):
        vault.sessions(until=5)


def test_a_list_given_for_an_id_is_one_line_naming_the_argument(vault):
    """Seen: `forget(["x"])` raised a bare AttributeError."""
    before = snapshot(vault.root)
    for call in (vault.forget, vault.show, vault.history):
        with pytest.raises(InvalidInput) as refused:
            call(["x"])
        assert str(refused.value) == "fact_id must be a string, got a list: ['x']"
    assert snapshot(vault.root) == before


def test_a_flag_given_as_text_is_refused_rather_than_read_as_true(vault):
    """`allow_secret="no"` is a true value in Python: it would have stored the credential."""
    before = snapshot(vault.root)
    with pytest.raises(InvalidInput, match=r"^allow_secret must be True or False, got a string: 'no'$"):
        vault.add("db password: Xk9#mQ2vLp7!", allow_secret="no")
    assert snapshot(vault.root) == before


def test_a_date_object_backdates_a_fact_and_a_future_one_is_refused_as_the_cli_does(vault):
    assert vault.add("Alice moved to Lyon", at=date(2026, 1, 5)).at.isoformat() == "2026-01-05T00:00:00+00:00"
    for future in (datetime.now() + timedelta(days=30), date.today() + timedelta(days=30)):
        with pytest.raises(InvalidInput, match=r"is in the future; facts record what already happened$"):
            vault.add("Alice moved to Lyon", at=future)
    assert commit_count(vault.root) == 2


def test_an_unknown_keyword_is_one_line_naming_the_method(vault):
    with pytest.raises(InvalidInput, match=r"^Vault.recent\(\): got an unexpected keyword argument 'sinse'$"):
        vault.recent(sinse="7d")
    with pytest.raises(InvalidInput, match=r"^Vault.dream\(\): got an unexpected keyword argument 'max_batch'$"):
        vault.dream(max_batch=1)


# -- the property tests --------------------------------------------------------------------------

def text(v):
    return isinstance(v, str)


def flag(v):
    return isinstance(v, bool)


def count(v):
    return isinstance(v, int) and not isinstance(v, bool)


def number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def words(v):
    return isinstance(v, (list, tuple)) and all(isinstance(w, str) for w in v)


def moment(v):
    return isinstance(v, (str, date))


def day(v):
    return isinstance(v, date)


def function(v):
    return callable(v)


def maybe(kind):
    return lambda v: v is None or kind(v)


def either(*kinds):
    return lambda v: any(kind(v) for kind in kinds)


def draft_list(v):
    return isinstance(v, (list, tuple)) and all(isinstance(d, (str, dict, FactDraft)) for d in v)


def path(v):
    return isinstance(v, (str, os.PathLike))


# method -> parameter -> (the kinds it takes, a good value): each call below with good values only
# is harmless (a read, or an error other than bad input before anything is written).
METHODS = {
    "add": {"text": (text, "Alice prefers green tea"), "category": (text, "preference"), "tags": (words, ["alice"]),
            "source": (maybe(text), "agent"), "session": (maybe(text), "chat-1"),
            "importance": (maybe(number), 0.5), "at": (maybe(moment), "yesterday"),
            "allow_secret": (flag, False), "supersedes": (maybe(text), None), "key": (maybe(text), None)},
    "add_many": {"drafts": (draft_list, ["Bob is on call"]), "allow_secret": (flag, False)},
    "forget": {"fact_id": (text, UNKNOWN_ID), "reason": (maybe(text), "wrong person")},
    "show": {"fact_id": (text, UNKNOWN_ID)},
    "history": {"fact_id": (text, UNKNOWN_ID)},
    "purge_plan": {"fact_ids": (either(text, words), [UNKNOWN_ID])},
    "purge": {"fact_ids": (either(text, words), [UNKNOWN_ID]), "confirm": (maybe(function), None),
              "progress": (maybe(function), None)},
    "recent": {"limit": (maybe(count), 5), "since": (maybe(moment), "7d"), "until": (maybe(moment), None),
               "category": (maybe(text), None), "tag": (maybe(text), None), "source": (maybe(text), None),
               "session": (maybe(text), None), "oldest_first": (maybe(flag), None)},
    "sessions": {"since": (maybe(moment), "7d"), "until": (maybe(moment), None), "source": (maybe(text), None)},
    "search": {"query": (either(text, lambda v: isinstance(v, SearchQuery)), "green tea"),
               "limit": (count, 5), "category": (maybe(text), None), "tag": (maybe(text), None),
               "source": (maybe(text), None), "session": (maybe(text), None), "since": (maybe(moment), None),
               "until": (maybe(moment), None), "include_all": (flag, False), "lexical_only": (flag, True),
               "explain": (flag, False), "min_score": (maybe(number), None), "rerank": (flag, True),
               "progress": (maybe(function), None)},
    "context": {"query": (maybe(text), "green tea"), "budget": (count, 500), "recent": (count, 5),
                "relevant": (count, 5)},
    "reindex": {"clear": (flag, False), "progress": (maybe(function), None)},
    "dream": {"dry_run": (flag, True), "max_batches": (maybe(count), 1), "min_facts": (maybe(count), 1000),
              "model": (maybe(text), None), "progress": (maybe(function), None), "today": (maybe(day), None)},
    "set_remote": {"url": (text, "/nonexistent/remote.git")},  # (never called with good values only)
    "doctor": {"fix": (flag, False), "llm": (flag, False)},
    "iter_facts": {"include_forgotten": (flag, False)},
    "why": {"target": (lambda v: text(v) or count(v), "1")},  # a MEMORY.md line number may be an int
    "import_source": {"source": (path, "/nonexistent/notes.jsonl"), "format": (maybe(text), None),
                      "dry_run": (flag, True), "allow_secret": (flag, False), "skip_secrets": (flag, False),
                      "progress": (maybe(function), None)},
}
# Finding and opening a vault; `{vault}` stands for the test's vault.
OPENERS = {
    "open": {"path": (maybe(path), "{vault}"), "create_default": (flag, False), "notify": (maybe(function), None)},
    "init": {"path": (path, "{vault}"), "notify": (maybe(function), None)},
    "adopt": {"path": (path, "{vault}"), "notify": (maybe(function), None)},
    "diagnose": {"path": (maybe(path), "{vault}"), "fix": (flag, False), "llm": (flag, False),
                 "notify": (maybe(function), None)},
    "clone": {"url": (text, "/nonexistent/remote.git"), "path": (maybe(path), None), "notify": (maybe(function), None)},
    "__init__": {"root": (path, "{vault}"), "notify": (maybe(function), None)},
}
REQUIRED = {"text", "drafts", "fact_id", "fact_ids", "query", "url", "root"}  # (given even when None)

ANYTHING = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=30), st.binary(max_size=8),
    st.lists(st.integers(), max_size=3), st.lists(st.text(max_size=12), max_size=3),
    st.tuples(st.text(max_size=8)), st.dictionaries(st.text(max_size=6), st.integers(), max_size=2),
    st.dates(), st.datetimes(), st.just(object()), st.sampled_from([Path("relative/path"), 1j, b"", ...]),
)
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                            HealthCheck.too_slow])


def _call(vault: Vault, method: str, arguments: dict):
    if method in OPENERS:
        target = Vault if method == "__init__" else getattr(Vault, method)
        return target(**{k: (str(vault.root) if v == "{vault}" else v) for k, v in arguments.items()})
    result = getattr(vault, method)(**arguments)
    return list(result) if method == "iter_facts" else result


@st.composite
def one_bad_argument(draw):
    """A method, one of its parameters, and a value of a kind that parameter does not take."""
    table = draw(st.sampled_from([METHODS, OPENERS]))
    method = draw(st.sampled_from(sorted(table)))
    name = draw(st.sampled_from(sorted(table[method])))
    takes = table[method][name][0]
    value = draw(ANYTHING.filter(lambda v: not takes(v)))
    arguments = {k: good for k, (_takes, good) in table[method].items() if good is not None or k == name}
    arguments[name] = value
    return method, name, arguments


@PROPERTY
@given(case=one_bad_argument())
def test_every_public_method_refuses_an_argument_of_the_wrong_kind_in_one_line(vault, case):
    method, name, arguments = case
    before = snapshot(vault.root)
    with pytest.raises(InvalidInput) as refused:
        _call(vault, method, arguments)
    message = str(refused.value)
    assert "\n" not in message and name in message, message
    assert snapshot(vault.root) == before


# Values that may well be right (an id, a category, a date, a count) as well as wrong.
PLAUSIBLE = st.one_of(ANYTHING, st.sampled_from(["", " ", "7d", "yesterday", "2026-01-05", "2026-13-45", "0",
                                                 "preference", "Preference", "alice", "#x", "a,b", "\x00",
                                                 "\u2028", "\ud800", UNKNOWN_ID, "1K0W8A78Q5Y9C48Y", "-1"]),
                      st.integers(-2, 2), st.floats(-1, 2), st.lists(st.sampled_from(["alice", "a b", ""]), max_size=3))
CHEAP = ("add", "add_many", "forget", "show", "history", "purge_plan", "recent", "sessions", "search", "context")


@st.composite
def any_arguments(draw):
    method = draw(st.sampled_from(CHEAP))
    arguments = {}
    for name, (_takes, good) in METHODS[method].items():
        value = draw(st.one_of(st.just(good), PLAUSIBLE))
        if value is not None or name in REQUIRED:
            arguments[name] = value
    return method, arguments


@PROPERTY
@given(case=any_arguments())
def test_any_values_end_in_a_result_or_a_one_line_error_that_changed_nothing(vault, case):
    method, arguments = case
    before = snapshot(vault.root)
    try:
        _call(vault, method, dict(arguments))
    except MemvaultError as e:
        assert "\n" not in str(e) and str(e).strip(), repr(e)
        assert snapshot(vault.root) == before, (method, arguments)


def test_an_empty_or_nul_path_a_huge_importance_and_surplus_arguments_are_refused_in_one_line(vault, tmp_path,
                                                                                              monkeypatch):
    """Found by a hostile pass: `Vault.open("")` opened (on a fresh HOME created) the default vault,
    a NUL in a path and importance=10**400 raised ValueError and OverflowError from deep inside, and
    the methods without arguments raised TypeError for one given."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("MEMVAULT_VAULT", raising=False)
    before = snapshot(vault.root)
    for call, words in [
        (lambda: Vault.open(""), "path is empty"),
        (lambda: Vault.open("  "), "path is empty"),
        (lambda: Vault.init(str(tmp_path / "nul\x00x")), "path holds a NUL character"),
        (lambda: vault.add("x", importance=10**400), "importance must be between 0 and 1"),
        (lambda: vault.dream_undo(x=1), "Vault.dream_undo(): got an unexpected keyword argument 'x'"),
        (lambda: vault.dream_status(1), "Vault.dream_status(): too many positional arguments"),
    ]:
        with pytest.raises(InvalidInput) as refused:
            call()
        assert words in str(refused.value) and "\n" not in str(refused.value)
    assert not (tmp_path / "data").exists() and not (tmp_path / "home").exists()  # no default vault made
    assert snapshot(vault.root) == before
    with pytest.raises(MemvaultError) as as_text:
        vault.why("7")
    with pytest.raises(MemvaultError) as as_number:
        vault.why(7)  # a MEMORY.md line number, as the CLI takes it
    assert str(as_number.value) == str(as_text.value)
