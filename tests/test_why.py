"""`memvault why TARGET`: from a MEMORY.md line, a page section or a fact back to the facts and the
commits that added, consolidated, superseded and forgot them, on a vault dreamed by the fake model."""

from __future__ import annotations

import json
from datetime import date

import pytest
from support.git import commit_count, git, snapshot

from memvault.errors import InvalidInput, NotFound

PAGE = "wiki/topics/journal.md"


def on(vault, when: str) -> None:
    vault.storage.git.env["GIT_AUTHOR_DATE"] = vault.storage.git.env["GIT_COMMITTER_DATE"] = when


@pytest.fixture
def dreamed(vault):
    """Two facts in January, dreamed into a page on February 1st; the tea superseded in March and
    the tap forgotten in April."""
    from support.dream import settings
    from support.fake_llm import FakeLLM, consolidate_everything

    on(vault, "2026-01-10T10:00:00+00:00")
    tea = vault.add("Alice drinks green tea", at="2026-01-10T09:00:00", source="chat-agent", session="s-1")
    on(vault, "2026-01-11T10:00:00+00:00")
    tap = vault.add("Bob fixed the kitchen tap", at="2026-01-11T09:00:00")
    on(vault, "2026-02-01T03:00:00+00:00")
    with FakeLLM(default=consolidate_everything(PAGE, "Journal")) as fake:
        report = vault.dream(llm=settings(fake), today=date(2026, 2, 1))
    on(vault, "2026-03-01T10:00:00+00:00")
    coffee = vault.add("Alice drinks black coffee now", at="2026-03-01T09:00:00", supersedes=tea.id)
    on(vault, "2026-04-01T10:00:00+00:00")
    vault.forget(tap.id, "wrong tap")
    commits = {line.split(" ", 1)[1]: line.split(" ", 1)[0]
               for line in git(vault.root, "log", "--format=%H %s").splitlines()}
    return {"tea": tea, "tap": tap, "coffee": coffee, "dream": report.batches[0].commit, "commits": commits}


def test_a_memory_line_traces_to_its_page_facts_and_commits(vault, dreamed, cli):
    lines = (vault.root / "MEMORY.md").read_text().split("\n")
    number = next(n for n, line in enumerate(lines, start=1) if f"]({PAGE})" in line)
    report = vault.why(str(number)).to_dict()
    assert report["kind"] == "memory" and report["memory_line"] == {"number": number, "text": lines[number - 1],
                                                                     "page": PAGE}
    assert report["page"]["path"] == PAGE and report["page"]["written"]["commit"] == dreamed["dream"]
    assert [s["id"] for s in report["sections"]] == [f"{PAGE}#notes"]
    assert report["sections"][0]["cites"] == [dreamed["tea"].id, dreamed["tap"].id]
    tea, tap = report["facts"]
    assert tea["text"] == "Alice drinks green tea" and tea["source"] == "chat-agent" and tea["session"] == "s-1"
    assert tea["added"]["commit"] == dreamed["commits"][f"add: {dreamed['tea'].id} Alice drinks green tea"]
    assert tea["added"]["at"] == "2026-01-10T10:00:00+00:00"
    assert tea["consolidated"]["commit"] == dreamed["dream"] and tea["consolidated"]["how"] == "cited"
    assert tea["consolidated"]["batch"] == "2026-01-10..2026-01-11" and tea["consolidated"]["outcome"] == "ok"
    assert tea["superseded_by"]["id"] == dreamed["coffee"].id
    assert tea["superseded_by"]["commit"]["at"] == "2026-03-01T10:00:00+00:00" and tea["forgotten"] is None
    assert tap["forgotten"]["reason"] == "wrong tap" and tap["forgotten"]["commit"]["at"] == "2026-04-01T10:00:00+00:00"
    # the same by words, and through the CLI
    assert vault.why("journal").to_dict() == {**report, "target": "journal"}
    text = cli("why", str(number))
    assert text.exit_code == 0, text.stderr
    assert f"MEMORY.md:{number}" in text.stdout and f"section {PAGE}#notes" in text.stdout
    assert "superseded by 2026-03-01T10:00:00+00:00" in text.stdout and f"by {dreamed['coffee'].id}" in text.stdout
    assert "forgotten     2026-04-01T10:00:00+00:00" in text.stdout
    assert json.loads(cli("why", str(number), "--json").stdout) == report


def test_a_section_id_and_a_fact_id_trace_back_too(vault, dreamed):
    # (the page cites a forgotten fact: search withholds it until the next dream; why still reads it)
    section = vault.why(f"{PAGE}#notes").to_dict()
    assert section["kind"] == "section" and [s["id"] for s in section["sections"]] == [f"{PAGE}#notes"]
    fact = vault.why(dreamed["coffee"].id).to_dict()
    assert fact["kind"] == "fact" and [f["id"] for f in fact["facts"]] == [dreamed["tea"].id, dreamed["coffee"].id]
    assert fact["facts"][1]["supersedes"] == dreamed["tea"].id and fact["facts"][1]["consolidated"] is None
    assert [s["id"] for s in fact["sections"]] == [f"{PAGE}#notes"]   # cites the older of the chain
    assert vault.why(PAGE).to_dict()["kind"] == "page"


def test_a_purged_fact_keeps_its_record_and_commits(vault, dreamed):
    vault.purge([dreamed["tap"].id])
    trail = vault.why(dreamed["tap"].id).to_dict()["facts"][0]
    assert trail["found"] is False and trail["text"] is None and trail["forgotten"]["purged"] is True


def test_bad_targets_say_why_in_one_line_and_change_nothing(vault, vault_dir, dreamed, cli):
    before, commits = snapshot(vault_dir), commit_count(vault_dir)
    for target, code, words in (("1", 2, "line 1 of MEMORY.md links no page"),
                                ("999", 3, "MEMORY.md has no line 999"),
                                (f"{PAGE}#nope", 3, "has no section #nope; its sections: #notes"),
                                ("wiki/topics/none.md", 3, "no wiki page wiki/topics/none.md"),
                                ("no such words anywhere", 3, "no line of MEMORY.md linking a page holds those words"),
                                (" ", 2, "why needs a target")):
        result = cli("why", target)
        assert result.exit_code == code and words in result.stderr and len(result.stderr.splitlines()) == 1, \
            (target, result.stderr)
    with pytest.raises(InvalidInput):
        vault.why("")
    with pytest.raises(NotFound):
        vault.why("zzzzzzzzzzzzzzzz")
    assert snapshot(vault_dir) == before and commit_count(vault_dir) == commits


def test_words_on_several_memory_lines_ask_for_a_number(vault, dreamed):
    memory = vault.root / "MEMORY.md"
    memory.write_text(memory.read_text() + f"- more journal entries — [Journal]({PAGE})\n")
    with pytest.raises(InvalidInput, match="2 lines of MEMORY.md hold those words"):
        vault.why("journal")


def test_after_an_undo_the_fact_is_not_consolidated_and_a_blank_line_links_no_page(vault, dreamed, cli):
    """Found by a hostile pass: after `dream --undo`, why still named the reverted batch as the one
    that consolidated the fact; `why N` on a blank line said the line did not exist (exit 3)."""
    memory = (vault.root / "MEMORY.md").read_text().split("\n")
    blank = next(n for n, line in enumerate(memory, start=1) if not line.strip() and n < len(memory))
    result = cli("why", str(blank))
    assert result.exit_code == 2 and f"line {blank} of MEMORY.md links no page" in result.stderr, result.stderr
    assert vault.why(dreamed["tea"].id).to_dict()["facts"][0]["consolidated"]["commit"] == dreamed["dream"]
    vault.dream_undo()
    assert vault.why(dreamed["tea"].id).to_dict()["facts"][0]["consolidated"] is None
    (vault.root / "MEMORY.md").unlink()
    with pytest.raises(NotFound, match="the vault has no MEMORY.md"):
        vault.why("3")
