"""The notes contract (the default `[dream] mode`): the model gives one item per fact, the runner
checks each and writes the pages, index.md and MEMORY.md itself. Through litellm's real call path
against the scripted local server.

Bad inputs tried: a statement naming a place and a number its fact does not hold (refused, quoted
back with the fact's words and a fixed item, then repeated: no third turn, a counted attempt); a
fact about one person filed on another's page; placeholders of the instructions copied as they
are; a server that refuses the `json_schema` response format (llama-cpp-python's HTTP 500); an
answer after a reasoning block; a run past its time budget.
"""

from __future__ import annotations

import json
from datetime import date

import pytest
from support.dream import FakeLLM, dream, log_lines, request_data
from support.fake_llm import file_every_fact
from support.git import is_clean

from memvault.storage.wiki import read_page

ALICE, BOB = "wiki/people/alice.md", "wiki/people/bob.md"
CAROLINE, MELANIE = "wiki/people/caroline.md", "wiki/people/melanie.md"


@pytest.fixture
def fake():
    with FakeLLM() as server:
        yield server


def add(vault, text, day, **kw):
    return vault.add(text, at=f"{day}T09:00:00", **kw)


def items(*entries: dict) -> str:
    return json.dumps({"facts": list(entries)})


def filed(handle: str, page: str, statement: str, section: str = "Notes", **more) -> dict:
    return {"id": handle, "do": "file", "page": page, "section": section, "statement": statement, **more}


def page_statements(body: dict) -> dict[str, str]:
    """Statement -> handle of the related pages the request shows (window of 16k tokens or more)."""
    out = {}
    for page in request_data(body).get("pages", []):
        for lines in page["sections"].values():
            for line in lines:
                handles, _, text = line.partition(": ")
                out[text] = handles
    return out


def test_the_runner_writes_each_statement_under_its_section_with_its_citation(vault, fake):
    tea = add(vault, "Alice prefers green tea", "2026-11-01", category="preference", tags=["alice"])
    lyon = vault.add("Alice moved to Lyon", at="2026-11-01T10:00:00", tags=["alice", "home"])
    fake.default = items(filed("f1", ALICE, "Alice prefers green tea.", "Drinks"),
                         filed("f2", ALICE, "Alice moved to Lyon.", "Home"))
    report = dream(vault, fake)

    assert report.ok and report.batches[0].created == [ALICE] and len(fake.requests) == 1
    page = read_page(vault.root, ALICE)
    assert page.title == "Alice" and page.tags == ["alice", "home"]  # from the slug, and the facts' tags
    assert page.body.startswith(f"## Drinks\n\n- Alice prefers green tea. [^{tea.id}]\n\n"
                                f"## Home\n\n- Alice moved to Lyon. [^{lyon.id}]")
    assert page.sources == [tea.id, lyon.id]
    assert f"[Alice]({ALICE})" in (vault.root / "index.md").read_text()
    memory = (vault.root / "MEMORY.md").read_text()
    assert f"- Alice: Alice moved to Lyon. Alice prefers green tea. — [Alice]({ALICE})" in memory  # newest first
    assert "(notes)" in log_lines(vault)[-1] and vault.watermark == date(2026, 11, 1) and is_clean(vault.root)


def test_the_answer_schema_asks_one_item_per_fact_in_order(vault, fake):
    """Sent as response_format to an OpenAI-compatible server at an api_base: a local server turns
    it into a grammar, so a small model cannot skip a fact, reorder them or invent a verb or id."""
    add(vault, "Alice prefers green tea", "2026-11-01")
    add(vault, "Bob fixes bicycles", "2026-11-01")
    fake.default = file_every_fact(lambda fact: "wiki/topics/notes.md")
    assert dream(vault, fake).ok
    fmt = fake.requests[0]["response_format"]
    assert fmt["type"] == "json_schema"
    facts = fmt["json_schema"]["schema"]["properties"]["facts"]
    assert facts["minItems"] == facts["maxItems"] == 2
    first, second = facts["prefixItems"]
    assert {v["properties"]["id"]["const"] for v in first["anyOf"]} == {"f1"}
    assert {v["properties"]["id"]["const"] for v in second["anyOf"]} == {"f2"}
    assert [v["properties"]["do"]["const"] for v in first["anyOf"]] == ["file", "duplicate", "noop", "conflict"]
    assert first["anyOf"][1]["properties"]["of"] == {"enum": ["f2"]}  # never itself
    page = first["anyOf"][0]["properties"]["page"]["pattern"]
    assert page == "^wiki/(people|projects|preferences|topics|events)/[a-z0-9][a-z0-9-]*[.]md$"


def test_a_server_refusing_the_json_schema_format_gets_the_schema_as_json_object_and_is_remembered(vault, fake):
    """Fault: llama-cpp-python's server answers `json_schema` with HTTP 500. The schema goes again
    at once as `json_object` with a "schema" (which it turns into a grammar): no outage, no
    failed attempt; the next run sends that first."""
    fake.accepts = ("text", "json_object")
    add(vault, "Alice prefers green tea", "2026-11-01")
    fake.default = file_every_fact(lambda fact: ALICE)
    report = dream(vault, fake)
    assert report.ok and len(fake.requests) == 2
    assert [r["response_format"]["type"] for r in fake.requests] == ["json_schema", "json_object"]
    assert fake.requests[1]["response_format"]["schema"]["properties"]["facts"]["minItems"] == 1
    assert [line.split(" dream ")[1].split()[0] for line in log_lines(vault) if line.startswith("- ")] == ["ok"]

    add(vault, "Alice moved to Lyon", "2026-11-02")
    assert dream(vault, fake, today=date(2026, 11, 23)).ok
    assert len(fake.requests) == 3 and fake.requests[2]["response_format"]["type"] == "json_object"
    assert json.loads((vault.root / ".memvault" / "dream-llm.json").read_text()) == {
        f"openai/fake-dream {fake.api_base}": "json_object_schema"}


def test_a_statement_naming_what_its_fact_does_not_is_quoted_back_with_the_fact_and_a_fixed_item(vault, fake):
    """Bad input: "Bob adopted two dogs in Berlin" for "Bob adopted a dog". The repair turn quotes
    the item, says what is wrong with the fact's own words, and shows an item that would pass; the
    model follows it and the fixed statement is applied after one repair turn."""
    dog = add(vault, "Bob adopted a dog from the shelter", "2026-11-01", tags=["bob"])
    wrong = filed("f1", BOB, "Bob adopted two dogs in Berlin.", "Pets")
    fake.script = [items(wrong), items(filed("f1", BOB, "Bob adopted a dog from the shelter.", "Pets"))]
    report = dream(vault, fake)

    assert report.ok and report.batches[0].repairs == 1 and len(fake.requests) == 2
    told = fake.requests[1]["messages"][-1]["content"]
    assert json.dumps(wrong) in told  # the item as the model gave it
    assert "it names 'Berlin', which its fact does not. The fact says: \"Bob adopted a dog from the shelter\"" in told
    fixed = json.loads(told.split("Accepted: ", 1)[1].splitlines()[0])
    assert fixed == {"id": "f1", "do": "file", "page": BOB, "section": "Pets",
                     "statement": "Bob adopted a dog from the shelter"}
    assert "one item for each of f1, in this order" in told
    body = read_page(vault.root, BOB).body
    assert f"- Bob adopted a dog from the shelter. [^{dog.id}]" in body and "Berlin" not in body


def test_a_refused_statement_repeated_stops_the_turns_and_counts_an_attempt_for_its_fact(vault, fake):
    dog = add(vault, "Bob adopted a dog from the shelter", "2026-11-01", tags=["bob"])
    fake.default = items(filed("f1", BOB, "Bob adopted two dogs in Berlin.", "Pets"))
    report = dream(vault, fake)

    assert not report.ok and len(fake.requests) == 2  # the answer again in the repair turn: no third
    assert [(b.outcome, b.attempt) for b in report.batches] == [("failed", 1)]
    assert "it names 'Berlin'" in report.error
    log = (vault.root / "log.md").read_text()
    assert f"  tried: {dog.id}" in log and "  problem: " in log and "Berlin" in log
    assert not (vault.root / BOB).exists() and vault.watermark is None and is_clean(vault.root)
    hits = vault.search("Bob dog shelter", lexical_only=True)
    assert any(h.kind == "fact" and h.id == dog.id for h in hits)  # still found as a raw fact


def test_what_passes_is_applied_and_a_fact_on_the_wrong_persons_page_is_asked_about_alone(vault, fake):
    """Bad input: a fact about Caroline filed on Melanie's page (the live model's mistake). The
    other facts are applied in one commit; that one is asked about alone, and on the right page
    it is applied too: the watermark passes the day only then."""
    race = add(vault, "Melanie ran a charity race for mental health", "2026-11-01", tags=["melanie"])
    group = add(vault, "Caroline attended an LGBTQ support group", "2026-11-01", tags=["caroline"])
    talk = add(vault, "Caroline gave a talk at a school event", "2026-11-01", tags=["caroline"])

    def model(body: dict) -> str:
        asked = [f["id"] for f in request_data(body)["facts"]]
        if len(asked) == 3 and len(body["messages"]) == 2:
            return items(filed("f1", MELANIE, "Melanie ran a charity race for mental health.", "Running"),
                         filed("f2", CAROLINE, "Caroline attended an LGBTQ support group.", "Support"),
                         filed("f3", MELANIE, "Caroline gave a talk at a school event.", "Talks"))
        if len(asked) == 3:  # the repair turn: the same mistake again
            return body["messages"][2]["content"]
        return items(filed("f1", CAROLINE, "Caroline gave a talk at a school event.", "Talks"))

    fake.default = model
    report = dream(vault, fake)

    assert report.ok and [b.outcome for b in report.batches] == ["ok", "ok"]
    first = report.batches[0]
    assert first.left == [talk.id] and first.watermark is None  # the day waits for its last fact
    assert any("is about Caroline, not the subject of wiki/people/melanie.md" in d for d in first.dropped)
    told = fake.requests[1]["messages"][-1]["content"]
    assert f'"page": "{CAROLINE}"' in told.split("Accepted: ", 1)[1]  # the fixed item names the right page
    assert vault.watermark == date(2026, 11, 1)
    assert talk.id in read_page(vault.root, CAROLINE).body and group.id in read_page(vault.root, CAROLINE).body
    assert race.id in read_page(vault.root, MELANIE).body and "Caroline" not in read_page(vault.root, MELANIE).body
    assert " dropped: " not in log_lines(vault)[-1] and is_clean(vault.root)


def test_placeholders_copied_from_the_instructions_are_refused(vault, fake):
    """Bad input: the reason "..." and the section "<its topic>" as the instructions wrote them; a
    fact that holds "<div>" itself may still be restated with it."""
    add(vault, "Alice prefers green tea", "2026-11-01")
    add(vault, "Alice dislikes coffee", "2026-11-01")
    html = add(vault, "Alice writes <div> tags by hand", "2026-11-01")
    fake.default = items({"id": "f1", "do": "noop", "reason": "..."},
                         {"id": "f2", "do": "file", "page": ALICE, "section": "<its topic>",
                          "statement": "Alice dislikes coffee."},
                         filed("f3", ALICE, "Alice writes <div> tags by hand.", "Web pages"))
    report = dream(vault, fake, max_batches=1)
    result = report.batches[0]
    assert result.outcome == "ok" and len(result.left) == 2
    assert any('"reason" is a placeholder' in d for d in result.dropped)
    assert any('"section" is a placeholder' in d for d in result.dropped)
    assert f"- Alice writes <div> tags by hand. [^{html.id}]" in read_page(vault.root, ALICE).body


def test_an_answer_after_a_reasoning_block_is_read(vault, fake):
    tea = add(vault, "Alice prefers green tea", "2026-11-01")
    fake.default = "<think>One fact, about Alice: her page.</think>\n" + items(
        filed("f1", ALICE, "Alice prefers green tea.", "Drinks"))
    assert dream(vault, fake).ok and tea.id in read_page(vault.root, ALICE).body


def test_a_statement_superseding_an_older_one_follows_it_and_the_older_line_is_marked(vault, fake):
    """With a 32k window the request shows the related pages' statements after their facts'
    handles: the model can say a new fact supersedes one, or that one says the same."""
    wide = {"context_window": 32_768, "max_output_tokens": 4096}
    tea = add(vault, "Alice prefers green tea", "2026-11-01", tags=["alice"])
    lyon = add(vault, "Alice moved to Lyon", "2026-11-01", tags=["alice"])
    fake.default = items(filed("f1", ALICE, "Alice prefers green tea.", "Drinks"),
                         filed("f2", ALICE, "Alice moved to Lyon.", "Home"))
    assert dream(vault, fake, llm=wide).ok

    paris = add(vault, "Alice moved to Paris", "2026-11-05", tags=["alice"])
    again = add(vault, "Alice prefers green tea", "2026-11-06", tags=["alice"])

    def model(body: dict) -> str:
        shown = page_statements(body)
        return items(filed("f1", ALICE, "Alice moved to Paris.", "Home", supersedes=shown["Alice moved to Lyon."]),
                     filed("f2", ALICE, "Alice prefers green tea.", "Drinks"))

    fake.default = model
    report = dream(vault, fake, llm=wide)
    assert report.ok and report.batches[0].updated == [ALICE]
    body = read_page(vault.root, ALICE).body
    assert f"- Alice prefers green tea. [^{tea.id}] [^{again.id}]\n" in body  # the same statement: one more citation
    assert (f"- Alice moved to Lyon. [^{lyon.id}] (until 2026-11-05 [^{paris.id}])\n"
            f"- Alice moved to Paris. [^{paris.id}]") in body
    memory = (vault.root / "MEMORY.md").read_text()
    assert "Paris" in memory and "Lyon" not in memory  # what holds now


def test_a_run_stops_when_its_time_budget_is_spent_and_the_rest_waits(vault, fake):
    toml = vault.root / "memvault.toml"
    toml.write_text(toml.read_text().replace("time_budget = 14400", "time_budget = 0.5")
                    .replace("max_days = 14", "max_days = 1"))
    from support.git import git

    git(vault.root, "commit", "-qam", "a short night")
    vault = type(vault).open(vault.root)
    add(vault, "Alice prefers green tea", "2026-11-01")
    add(vault, "Alice moved to Lyon", "2026-11-02")
    answer = file_every_fact(lambda fact: ALICE)
    fake.default = lambda body: {"delay": 1, "content": answer(body)}
    said = []
    report = dream(vault, fake, progress=said.append)

    assert report.ok and not report.caught_up and [b.label for b in report.batches] == ["2026-11-01..2026-11-01"]
    assert "time_budget" in report.stopped_early and report.deferred == ["2026-11-02..2026-11-02"]
    assert any("time budget" in line for line in said) and vault.watermark == date(2026, 11, 1)
    assert dream(vault, fake).caught_up  # the next run takes the rest


def test_a_conflict_reason_naming_facts_by_their_handles_reaches_the_inbox_citing_them(vault, fake):
    """The model knows facts as f1, f2: a reason saying "f2 says the 5th floor, f1 the 3rd" is kept,
    with the handles made citations a person can follow (their digits are no numbers to check)."""
    one = add(vault, "Dan's flat is on the 3rd floor", "2026-11-01")
    two = add(vault, "Dan's flat is on the 5th floor", "2026-11-01")
    fake.default = items(filed("f1", "wiki/people/dan.md", "Dan's flat is on the 3rd floor.", "Home"),
                         {"id": "f2", "do": "conflict", "with": ["f1"], "reason": "f2 says the 5th floor, f1 the 3rd"})
    assert dream(vault, fake).ok
    inbox = (vault.root / "wiki/0_Inbox/conflicts.md").read_text()
    assert f"[^{two.id}] says the 5th floor, [^{one.id}] the 3rd — new [^{two.id}] vs [^{one.id}]" in inbox


def test_a_persons_lines_on_a_page_survive_the_next_dream_and_its_undo(vault, fake):
    """Three ways a dream lost a person's words (found by a hostile QA pass): a line appended to a
    page (`echo >>` puts it below the fact sources block) was dropped when dream updated the page;
    an uncommitted edit of a page rode in the dream's commit, so undoing the dream took it away;
    and undo overwrote an uncommitted edit of a page its batch wrote, which git held no copy of."""
    from support.git import git

    fake.default = file_every_fact(lambda fact: ALICE)
    add(vault, "Alice prefers green tea", "2026-11-01")
    assert dream(vault, fake).ok
    page = vault.root / ALICE
    page.write_text(page.read_text() + "- Alice's shoe size is 38\n")      # below the sources block
    git(vault.root, "commit", "-qam", "hand: shoe size")
    memory = vault.root / "MEMORY.md"
    memory.write_text(memory.read_text() + "Hand note at the end of MEMORY\n")  # uncommitted
    add(vault, "Alice reads novels", "2026-11-02")
    assert dream(vault, fake).ok

    text = page.read_text()
    assert "shoe size is 38" in text and "reads novels" in text
    assert text.index("shoe size") < text.index("<!-- fact sources")  # read as the page's text now
    assert "Hand note at the end of MEMORY" in git(vault.root, "log", "-p", "--format=%s", "--", "MEMORY.md")
    assert git(vault.root, "log", "-1", "--format=%s", "HEAD~1").startswith("edit: MEMORY.md")
    assert is_clean(vault.root)

    page.write_text(page.read_text() + "- my uncommitted note\n")
    with pytest.raises(Exception, match="uncommitted") as refused:
        vault.dream_undo()
    assert type(refused.value).__name__ == "UndoRefused" and ALICE in str(refused.value)
    assert "my uncommitted note" in page.read_text() and vault.watermark == date(2026, 11, 2)
