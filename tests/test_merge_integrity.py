"""No fact is lost in a merge: the merge driver cuts daily logs by the parser's own rule.

str.splitlines() also breaks at "\\r", "\\x0b", "\\x0c", "\\x1c"-"\\x1e", "\\x85", U+2028 and U+2029;
the log format only at "\\n". Texts full of those characters are added on two real clones and
synced both ways; every fact must arrive on both sides once, byte for byte.
"""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.git import git, is_clean

from memvault import Vault
from memvault.formats.facts import Fact, format_item, log_header, new_fact_id, parse_log
from memvault.remote.union_merge import merge

BREAKERS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\n"
DAY = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
PATH = "logs/2026/2026-11-20.md"

# Texts that lean on the characters splitlines() breaks at, mixed with anything else.
texts = st.text(alphabet=st.one_of(st.sampled_from(BREAKERS + "ab -#<>`"),
                                   st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",))),
                min_size=1, max_size=60).filter(lambda t: t.strip())


def _log(facts: list[Fact]) -> str:
    return log_header(DAY.date()) + "".join(format_item(f) for f in facts)


def _fact(text: str) -> Fact:
    return Fact(id=new_fact_id(), text=text, at=DAY, path=PATH)


@settings(max_examples=300, deadline=None)
@given(shared=st.lists(texts, max_size=3), ours=st.lists(texts, max_size=4), theirs=st.lists(texts, max_size=4),
       prefix=st.sampled_from(["", "Alice "]))
def test_the_driver_keeps_every_fact_of_both_sides_byte_exact(shared, ours, theirs, prefix):
    """Facts sharing their first words (the prefix) and full of line-break characters."""
    base = [_fact(prefix + t) for t in shared]
    mine, other = [_fact(prefix + t) for t in ours], [_fact(prefix + t) for t in theirs]
    merged = merge(_log(base), _log(base + mine), _log(base + other), PATH)
    facts, problems = parse_log(merged, PATH)
    assert problems == []
    assert [(f.id, f.text) for f in facts] == [(f.id, f.text) for f in base + mine + other]
    # and the merge of the tombstone lines does not cut a reason holding U+2028 either
    line = '{"id": "a", "reason": "x\u2028y\u0085z"}\n'
    assert merge("", line, '{"id": "b"}\n', "tombstones.jsonl") == line + '{"id": "b"}\n'


def _clones(root: Path) -> tuple[Path, Path]:
    remote = root / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    a = Vault.init(root / "a")
    a.set_remote(str(remote))
    a.sync()
    b = Vault.clone(str(remote), root / "b")
    return a.root, b.root


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ours=st.lists(texts, min_size=1, max_size=3), theirs=st.lists(texts, min_size=1, max_size=3))
def test_two_clones_adding_unicode_facts_sync_to_the_same_bytes(tmp_path_factory, ours, theirs):
    """Both machines add facts the same day (texts with every character splitlines() breaks at,
    sharing first words), then sync A, B, A: both hold every fact once, text byte-exact."""
    global _MACHINES
    if _MACHINES is None:
        _MACHINES = _clones(tmp_path_factory.mktemp("merge"))
    a_root, b_root = _MACHINES
    a, b = Vault(a_root), Vault(b_root)
    at = DAY.isoformat()
    added = a.add_many([{"text": "Alice " + t, "at": at} for t in ours])
    added += b.add_many([{"text": "Alice " + t, "at": at} for t in theirs])
    for vault in (a, b, a):
        vault.sync()
    for vault in (a, b):
        facts = {f.id: f.text for f in vault.iter_facts()}
        assert all(facts.get(f.id) == f.text for f in added)
        assert vault.problems() == [] and is_clean(vault.root)
    assert git(a_root, "rev-parse", "HEAD") == git(b_root, "rev-parse", "HEAD")


_MACHINES: tuple[Path, Path] | None = None


def test_a_daily_log_saved_with_crlf_keeps_every_fact(vault):
    """A log re-saved by an editor with CRLF line ends (multi-line and blank-line facts included):
    recent, search and dream's plan still see every fact with its text unchanged, and a fact
    that really holds "\\r\\n" in an LF file is not mistaken for one."""
    kept = [vault.add("Alice prefers green tea", at="2026-11-20T09:00:00"),
            vault.add("Meeting notes:\n\n## decisions\nship Friday", at="2026-11-20T10:00:00")]
    log = vault.root / kept[0].path
    log.write_bytes(log.read_bytes().replace(b"\n", b"\r\n"))
    vault.git.commit([kept[0].path], "edit: saved on Windows")
    assert sorted(f.text for f in vault.recent()) == sorted(f.text for f in kept)
    assert vault.problems() == []
    assert [h.id for h in vault.search("green tea", lexical_only=True, include_all=True)] == [kept[0].id]
    from memvault.dream.planner import make_plan

    plan = make_plan(vault.storage, today=datetime(2026, 11, 22).date())
    assert {f.id for b in plan.batches for f in b.facts} == {f.id for f in kept}
    # appending to the CRLF file keeps the old facts readable and the new one whole
    new = vault.add("Bob is on call", at="2026-11-20T11:00:00")
    assert {f.text for f in vault.recent()} == {f.text for f in [*kept, new]}
    real = vault.add("line one\r\nline two", at="2026-11-21T09:00:00")
    assert vault.show(real.id).fact.text == "line one\r\nline two"
