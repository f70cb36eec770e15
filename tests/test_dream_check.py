"""The statement check (memvault.dream.check): what a statement may say, given the facts it cites.

Bad inputs tried: invented names, places, numbers (digits and words), a day of the month no fact
gives, a statement about the other person, statements that restate another fact of the batch,
and, from the live recordings, every statement a small model wrote about one person on the
other's page, whichever fact of the batch it were to cite.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memvault.dream.check import Checker, Meaning, People, specifics
from memvault.formats.facts import Fact

LIVE = Path(__file__).resolve().parent / "data" / "llm-transcripts" / "qwen2.5-coder-1.5b-q4km-live"
CAROLINE, MELANIE = "wiki/people/caroline.md", "wiki/people/melanie.md"


def fact(text: str, when: str = "2023-05-25T13:14:00", tags=(), fid: str | None = None) -> Fact:
    return Fact(id=fid or "a" * 16, text=text, at=datetime.fromisoformat(when).replace(tzinfo=UTC),
                tags=tuple(tags), source="locomo")


@pytest.mark.parametrize("statement", [
    "Melanie ran a charity race for mental health last Saturday.",  # the fact itself
    "Melanie's race was for mental health.",                        # possessive, fewer words
    "The race took place on a Saturday in May 2023.",               # what the fact's time says
    "On 2023-05-25 she said she ran a charity race.",               # the fact's date
    "She ran charity races for mental health.",                     # a plural
])
def test_a_statement_may_say_what_its_fact_says_and_what_its_time_says(statement):
    assert specifics(statement, [fact("Melanie ran a charity race for mental health last Saturday.")]).ok


@pytest.mark.parametrize("statement, word", [
    ("Melanie ran a charity race in Boston.", "Boston"),
    ("Melanie and John ran a charity race.", "John"),
    ("Melanie ran a charity race with two friends.", "two"),
    ("Melanie ran 10 km for mental health.", "10"),
    ("Melanie ran a race on May 20.", "20"),
    ("Melanie ran a race on a Sunday.", "Sunday"),
    ("**Age**: 30", "Age"),
    ("Melanie is 30.", "30"),
    ("UCLA graduate Melanie ran a race.", "UCLA"),
])
def test_a_name_or_number_the_fact_does_not_hold_is_named(statement, word):
    verdict = specifics(statement, [fact("Melanie ran a charity race for mental health last Saturday.")])
    assert not verdict.ok and verdict.word == word and word in verdict.reason


def test_a_word_opening_a_sentence_is_a_name_only_when_the_vault_knows_it_as_one():
    said = fact("Carol was born on May 3rd.")
    assert specifics("Born on May 3rd.", [said]).ok  # an opening word, not a name
    assert specifics("Lives in a flat.", [said], common={"lives"}).ok
    verdict = specifics("Alice was born on May 3rd.", [said], names={"alice"})
    assert not verdict.ok and verdict.word == "Alice"  # a name the vault's facts use: a name anywhere


def test_a_fact_or_statement_about_another_known_person_fails_on_a_people_page():
    people = People()
    people.add(CAROLINE, "Caroline")
    people.add(MELANIE, "Melanie")
    verdict = people.check(CAROLINE, "Melanie painted a lake sunrise.", ["melanie"])
    assert not verdict.ok and verdict.page == MELANIE and "is about Melanie" in verdict.reason
    assert people.check(CAROLINE, "Melanie is proud of Caroline.").ok  # names the subject too
    assert people.check("wiki/topics/painting.md", "Melanie painted a lake sunrise.").ok  # not a people page
    assert people.check(MELANIE, "Painting helps her relax.", ["melanie"]).ok  # by its tag


def test_without_a_calibrated_model_the_meaning_check_goes_by_words():
    meaning = Meaning()  # no embedding model
    assert meaning.method == "words"
    assert meaning.check("Melanie painted a lake sunrise which matters to her.",
                         ["Melanie painted a lake sunrise last year which holds special meaning to her."]).ok
    verdict = meaning.check("Caroline researches adoption agencies to start a family.",
                            ["Melanie painted a lake sunrise last year which holds special meaning to her."])
    assert not verdict.ok and verdict.kind == "meaning"


def test_a_model_that_is_not_the_one_measured_gets_the_word_check(tiny_model_path):
    """The tests' stand-in model carries the real model's name: its cosines are not the measured
    model's, so the calibrated threshold is not used with it."""
    from memvault.index.embedder import Embedder, ModelSpec

    name = "sentence-transformers/all-MiniLM-L6-v2"
    meaning = Meaning(Embedder(ModelSpec(name, tiny_model_path)), name)
    meaning.score("a statement", ["a fact"])
    assert meaning.method == "words"


def _recorded_batch(n: int) -> list[Fact]:
    text = json.loads((LIVE / f"{n:03d}.json").read_text())["request"]["messages"][1]["content"]
    records = json.loads(text[text.index("<data>\n") + 7:text.index("\n</data>")])["facts"]
    return [fact(r["text"], r["time"].replace(" ", "T"), r["tags"], fid=f"{i:016d}") for i, r in enumerate(records, 1)]


# Statements the live model wrote about one person on the other's page (calls 008/009 and 014):
# the text of a fact about Caroline with Melanie's name put in, and the reverse.
WRONG_PERSON = [
    (8, CAROLINE, "Melanie is currently managing kids and work and finds it overwhelming."),
    (8, CAROLINE, "Melanie is going swimming with the kids after the conversation."),
    (8, MELANIE, "Melanie is planning to continue her education and explore career options in counseling or "
                 "mental health to support those with similar issues."),
    (14, MELANIE, "Melanie's goals include creating a family for kids who need one, even though she anticipates "
                  "challenges as a single parent."),
]


def _checker(meaning: Meaning) -> Checker:
    people = People()
    people.add(CAROLINE, "Caroline")
    people.add(MELANIE, "Melanie")
    return Checker(meaning, people)


def _refused(checker: Checker, n: int, page: str, statement: str) -> list[str]:
    """The statement filed on `page`, citing in turn each fact of the recorded batch: how it fares."""
    facts = _recorded_batch(n)
    passed = []
    for cited in facts:
        verdict = checker.statement(statement, [cited], page)
        if verdict.ok:
            verdict = checker.swapped(statement, [cited], [f for f in facts if f is not cited])
        if verdict.ok:
            passed.append(cited.text)
    return passed


@pytest.mark.parametrize("n, page, statement", WRONG_PERSON)
def test_a_recorded_wrong_person_statement_fails_whichever_fact_it_cites_by_words(n, page, statement):
    assert _refused(_checker(Meaning()), n, page, statement) == []


@pytest.mark.real_model
@pytest.mark.parametrize("n, page, statement", WRONG_PERSON)
def test_a_recorded_wrong_person_statement_fails_whichever_fact_it_cites_by_meaning(n, page, statement):
    import os

    from memvault.index.embedder import Embedder, ModelSpec

    name = "sentence-transformers/all-MiniLM-L6-v2"
    path = os.environ.get("MEMVAULT_EMBED_MODEL_PATH")
    meaning = Meaning(Embedder(ModelSpec(name, path)), name)
    meaning.score("a statement", ["a fact"])
    assert meaning.method == "embedding"  # the measured model: the calibrated threshold
    assert _refused(_checker(meaning), n, page, statement) == []
