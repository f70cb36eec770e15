"""Forgetting hides the forgotten text everywhere at once: page titles, slugs, MEMORY.md and
index.md lines written from it, not only the statements; no model ever receives it.

Through litellm's real call path against the scripted local server. Faults tried: a title and a
slug made from the forgotten fact, a MEMORY.md line repeating it, a scrub that fails (the day
batch of the same night then runs beside a page still citing the fact).
"""

from __future__ import annotations

import json

import pytest
from support.dream import answer, consolidated, dream
from support.fake_llm import fake_llm  # noqa: F401  (fixture: fake)
from support.git import is_clean

from memvault.storage.wiki import read_page

OLD = "wiki/people/alice-the-coffee-hater.md"
NEW = "wiki/people/alice.md"


@pytest.fixture
def forgotten(vault, fake):
    """A page titled and named after a fact, which is then forgotten."""
    tea = vault.add("Alice prefers green tea", at="2026-11-01T09:00:00", category="preference")
    coffee = vault.add("Alice secretly hates coffee", at="2026-11-01T10:00:00")
    fake.script = [answer(
        pages=[{"action": "create", "path": OLD, "title": "Alice the coffee hater", "tags": ["coffee"],
                "body": f"## Drinks\n\n- Prefers green tea [^{tea.id}]\n- Secretly hates coffee [^{coffee.id}]"}],
        facts=[consolidated(tea.id, OLD), consolidated(coffee.id, OLD)],
        memory=[{"text": "Alice secretly hates coffee", "page": OLD}],
    )]
    assert dream(vault, fake).ok and vault.watermark.isoformat() == "2026-11-01"
    assert any(h.path == OLD for h in vault.search("coffee hater"))
    vault.forget(coffee.id)
    return tea, coffee


def test_search_and_context_withhold_the_page_its_title_and_its_memory_lines(vault, forgotten):
    tea, _coffee = forgotten
    assert not any(h.kind == "page" for h in vault.search("coffee hater", min_score=0))
    assert not any(h.kind == "page" for h in vault.search("green tea", min_score=0))
    # the live fact the page drew from is back in the default scope (the watermark passed it)
    assert [h.id for h in vault.search("green tea") if h.kind == "fact"] == [tea.id]
    bundle = vault.context("what does Alice drink", budget=2000)
    assert "coffee" not in bundle.markdown.lower() and "Alice prefers green tea" in bundle.markdown


def test_no_model_request_carries_the_forgotten_text_and_the_scrub_renames_the_page(vault, fake, forgotten):
    tea, coffee = forgotten
    milk = vault.add("Alice takes oat milk", at="2026-11-05T09:00:00")
    day = answer(pages=[{"action": "create", "path": "wiki/people/milk.md", "title": "Milk",
                         "body": f"Oat milk [^{milk.id}]."}], facts=[consolidated(milk.id, "wiki/people/milk.md")])
    fake.script = [answer(pages=[])] * 3 + [day]  # the scrub fails: the day batch still runs beside the page
    first = dream(vault, fake)
    assert [(b.label, b.outcome) for b in first.batches] == [("scrub", "failed"), ("2026-11-05..2026-11-05", "ok")]
    requests = [json.dumps(r) for r in fake.requests[1:]]  # the first was the batch that wrote the page
    assert len(requests) == 4
    for sent in requests:  # three scrub turns and the day batch: titles, index.md, MEMORY.md included
        assert "coffee" not in sent.lower() and coffee.id not in sent and "alice-the-coffee" not in sent

    fake.script = [answer(pages=[{"action": "update", "path": OLD, "title": "Alice", "tags": ["drinks"],
                                  "body": f"## Drinks\n\n- Prefers green tea [^{tea.id}]"}])]
    assert dream(vault, fake).ok
    assert not (vault.root / OLD).exists() and is_clean(vault.root)
    page = read_page(vault.root, NEW)
    assert (page.title, page.tags, page.sources) == ("Alice", ["drinks"], [tea.id])
    memory, index = (vault.root / "MEMORY.md").read_text(), (vault.root / "index.md").read_text()
    assert f"- Alice — [Alice]({NEW})" in memory and "coffee" not in memory.lower()
    assert f"]({NEW})" in index and OLD not in index
    assert any(h.path == NEW for h in vault.search("green tea")) and vault.dream_status()["scrub_pages"] == []
