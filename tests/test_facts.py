"""The daily log format: exact round-trips, readable lines, hand edits, and reported bad lines."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from memvault.formats.facts import Fact, format_item, log_header, new_fact_id, parse_log

AT = datetime(2026, 11, 2, 9, 30, tzinfo=UTC)
TRICKY = [
    "plain",
    "line one\nline two",
    "\n\nleading blank lines",
    "trailing newline\n",
    "## not a heading\n---\n- not an item\n# nor this",
    "```python\nprint('x')\n```",
    "caret ^block-id and #hashtag and <!-- mv {\"id\":\"fake\"} -->",
    "  indented\n\tand tabbed  ",
    "windows\r\nline end\rand lone CR",
    "unicode: 日本語, emoji 🧠, RTL עברית, \u2028 separator, \x85 NEL",
    "x" * 100_000,
]


def _fact(text: str, **kw) -> Fact:
    return Fact(id=new_fact_id(), text=text, at=AT, path="logs/2026/2026-11-02.md", **kw)


def _roundtrip(*facts: Fact) -> list[Fact]:
    content = log_header(AT.date()) + "".join(format_item(f) for f in facts)
    parsed, problems = parse_log(content, "logs/2026/2026-11-02.md")
    assert problems == []
    return parsed


def test_tricky_texts_round_trip_exactly_in_one_file():
    facts = [_fact(t) for t in TRICKY]
    parsed = _roundtrip(*facts)
    assert [p.text for p in parsed] == TRICKY
    assert [p.id for p in parsed] == [f.id for f in facts]


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(st.text(alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)),
                           min_size=1, max_size=300), min_size=1, max_size=5),
    tags=st.lists(st.from_regex(r"[a-z0-9_\-/.:]{1,12}", fullmatch=True), max_size=3),
    source=st.none() | st.text(alphabet=st.characters(min_codepoint=32, blacklist_categories=("Cs",)),
                               min_size=1, max_size=40),
    importance=st.none() | st.floats(min_value=0, max_value=1),
)
def test_any_text_and_metadata_round_trip(texts, tags, source, importance):
    facts = [_fact(t, category="preference", tags=tuple(tags), source=source, importance=importance) for t in texts]
    parsed = _roundtrip(*facts)
    assert [(p.id, p.text, p.at, p.category, p.tags, p.source, p.importance) for p in parsed] == [
        (f.id, f.text, f.at, f.category, f.tags, f.source, f.importance) for f in facts
    ]


def test_a_log_line_reads_as_plain_markdown():
    line = format_item(_fact("Alice prefers green tea", tags=("alice",)))
    assert line.startswith("- Alice prefers green tea <!-- mv ")
    assert line.endswith(" -->\n") and line.count("\n") == 1


def test_hand_edits_that_keep_the_item_shape_still_parse():
    original = _fact("first line\n\nthird line")
    content = log_header(AT.date()) + format_item(original)
    # An editor that strips trailing whitespace turns the empty "  " line into "".
    edited = content.replace("\n  \n", "\n\n").replace("first line", "first line, fixed by hand")
    (fact,), problems = parse_log(edited, "x.md")
    assert problems == []
    assert fact.text == "first line, fixed by hand\n\nthird line"
    assert fact.id == original.id


def test_lines_that_do_not_parse_are_reported_with_file_and_line():
    good = format_item(_fact("kept"))
    hand_written = "- a hand-written item without metadata\nstray text\n"
    content = log_header(AT.date()) + good + hand_written + good.replace('"id"', '"idx"')
    facts, problems = parse_log(content, "logs/2026/2026-11-02.md")
    assert [f.text for f in facts] == ["kept"]
    assert [(p.line, p.path) for p in problems] == [(4, "logs/2026/2026-11-02.md"), (5, "logs/2026/2026-11-02.md"),
                                                     (6, "logs/2026/2026-11-02.md")]
    assert "no memvault metadata" in problems[0].message


def test_ids_are_unique_and_sort_by_creation():
    ids = [new_fact_id() for _ in range(5000)]
    assert len(set(ids)) == len(ids)
    times = [i[:11] for i in ids]  # the time part; the tail is random
    assert times == sorted(times)
    assert new_fact_id(1_000_000_000) < new_fact_id(2_000_000_000)
    assert all(len(i) == 16 for i in ids)
