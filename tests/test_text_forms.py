"""Hostile and unusual text: unicode forms and invisible characters, found by words, kept as typed."""

from __future__ import annotations

import json
import unicodedata

import pytest


def _lexical_hits(cli, query: str) -> dict[str, str]:
    result = cli("search", query, "--lexical", "--all", "--json")
    assert result.exit_code == 0, result.stderr
    return {hit["id"]: hit["text"] for hit in json.loads(result.stdout or "[]")}


@pytest.mark.parametrize("stored_form, query_form", [("NFD", "NFC"), ("NFC", "NFD")])
def test_a_fact_is_found_by_its_words_in_either_unicode_form(cli, stored_form, query_form):
    # macOS file names and some keyboards give "é" as e + U+0301 (NFD); the tokenizer cut such a
    # word in two ("r", "sum"), so the lexical half never matched a query typed the other way.
    text = unicodedata.normalize(stored_form, "Le résumé de Zoë pour la crème brûlée")
    fact_id = cli("add", text).stdout.strip()
    for words in ("résumé", "crème brûlée", "resume"):
        hits = _lexical_hits(cli, unicodedata.normalize(query_form, words))
        assert fact_id in hits, words
        assert hits[fact_id] == text  # shown as it was typed, never normalised
    shown = json.loads(cli("show", fact_id, "--json").stdout)["text"]
    assert shown == text


@pytest.mark.parametrize("invisible", ["\u200b", "\u200d", "\u00ad", "\u2060", "\ufeff", "\u202e"])
def test_an_invisible_character_inside_a_word_does_not_hide_it(cli, invisible):
    text = f"Rotate the pass{invisible}word of the staging database"
    fact_id = cli("add", text).stdout.strip()
    hits = _lexical_hits(cli, "password")
    assert fact_id in hits and hits[fact_id] == text
