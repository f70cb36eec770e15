"""The index is written in batches of documents (issue 35: a first build of a million facts must
not hold them all): the batches give the same index as one pass, whatever falls on a boundary."""

from __future__ import annotations

import pytest
from support.git import git

from memvault.index import refresh

WORDS = [f"{a}{b}" for a in ("kiwi", "plum", "fig", "lime", "pear") for b in ("cart", "desk", "lamp", "rope",
                                                                             "sail", "tent", "vase", "wick")]


def _vault_with_edge_cases(vault):
    facts = [vault.add(f"note {WORDS[n]} about tea", at=f"2026-10-{1 + n % 9:02d}T09:00:00") for n in range(40)]
    vault.forget(facts[3].id, "wrong")
    # a fact copied by hand into a later day's log, its text changed: the first copy counts
    first = facts[10]
    line = next(li for li in (vault.root / first.path).read_text().splitlines(keepends=True) if first.id in li)
    later = vault.root / "logs" / "2026" / "2026-10-20.md"
    later.write_text("# 2026-10-20\n\n" + line.replace("about tea", "about oolong"))
    git(vault.root, "add", "-A")
    git(vault.root, "commit", "-qm", "edit: copied an item by hand")
    return facts


def _answers(vault) -> list:
    """What each fact's own word and the copy's changed word find."""
    return [[(h.id, h.text) for h in vault.search(word, lexical_only=True)] for word in [*WORDS, "oolong", "fresh"]]


@pytest.mark.parametrize("per_batch", [1, 7])
def test_batched_build_and_refresh_match_one_pass(vault, monkeypatch, per_batch):
    facts = _vault_with_edge_cases(vault)
    vault.reindex(clear=True)
    whole, whole_documents = _answers(vault), vault.index_status()["documents"]
    assert sum(map(bool, whole)) == 39  # every word but the forgotten fact's
    monkeypatch.setattr(refresh, "DOCS_PER_BATCH", per_batch)
    vault.reindex(clear=True)
    assert _answers(vault) == whole
    assert vault.index_status()["documents"] == whole_documents
    assert vault.search(WORDS[3], lexical_only=True) == []
    assert vault.search("oolong", lexical_only=True) == []
    assert [h.text for h in vault.search(WORDS[10], lexical_only=True)] == [f"note {WORDS[10]} about tea"]
    # a refresh that reads many files again, batched too: a forget, a new day, a log deleted by hand
    vault.forget(facts[5].id)
    vault.add("a fresh day", at="2026-10-25T09:00:00")
    (vault.root / "logs" / "2026" / "2026-10-20.md").unlink()
    git(vault.root, "commit", "-qam", "edit: removed a log")
    batched = _answers(vault)
    monkeypatch.setattr(refresh, "DOCS_PER_BATCH", 10**9)
    vault.reindex(clear=True)
    assert batched == _answers(vault)


def _ranked(vault) -> list:
    """What each word finds by meaning and words together, scores included (a vector in the wrong
    slot, or one missing, changes them)."""
    return [[(h.id, round(h.score, 6)) for h in vault.search(word, min_score=0)] for word in WORDS[:12]]


def test_vectors_stored_in_parts_score_as_one_store(vault, monkeypatch):
    """A rebuild hands its vectors to the vector file every FLUSH_EVERY (a million facts held all of
    them until the end): from the model and from the embedding cache alike, texts repeated across a
    boundary included, it gives the index one store gives."""
    from memvault.index import pending

    for n in range(60):
        vault.add(f"note {WORDS[n % len(WORDS)]} about tea", at=f"2026-10-{1 + n % 9:02d}T09:00:00")
    vault.reindex(clear=True)
    whole, status = _ranked(vault), vault.index_status()
    assert status["pending_embeddings"] == 0 and status["documents"] >= 60
    monkeypatch.setattr(pending, "CACHE_EVERY", 5)
    monkeypatch.setattr(pending, "CACHE_READ_BLOCK", 5)
    monkeypatch.setattr(pending, "FLUSH_EVERY", 7)
    stored = []
    real = pending._store_vectors
    monkeypatch.setattr(pending, "_store_vectors", lambda *a: stored.append(len(a[2])) or real(*a))
    vault.reindex(clear=True)  # from the embedding cache
    assert len(stored) > 3 and max(stored) < 14
    assert _ranked(vault) == whole and vault.index_status() == status
    stored.clear()
    (vault.root / ".memvault" / "cache" / "embeddings.sqlite").unlink()
    vault.reindex(clear=True)  # from the model
    assert len(stored) > 3
    assert _ranked(vault) == whole and vault.index_status() == status
