"""Words of a statement and of the facts it cites, folded so that the checks compare like with like.

Folding: case, accents, possessives ("Caroline's") and simple plurals ("kids") go, so a statement
that says "Caroline's kids" and a fact that says "the kids of Caroline" hold the same words.
Numbers are compared as values: digits, number words ("two children") and ordinals ("25th").
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

# Words that may open a sentence without naming anything: a capitalised word there is a name only
# when it is not one of these (or when the facts do not hold it anyway).
COMMON = frozenset("""
a about above across after afterwards again against ago all almost along already also although always am
among an and another any anyone anything are around as at back be because been before being below
besides between both but by can could currently despite did do does doing done down during each
either else even eventually ever every everyone everything except few finally first for from further
had has have having he her here hers herself him himself his how however i if in including instead into
is it its itself just last lately later least less like many may maybe me meanwhile might more moreover
most mostly much must my myself neither never nevertheless new next no nobody none nor not nothing now
of off often on once one only or other others otherwise our ours ourselves out over overall own per
perhaps quite rather really recently same several she should since so some someone something sometimes
soon still such than that the their theirs them themselves then there therefore these they this those
though through throughout thus to today together tomorrow too toward towards under unless until up
upon us usually very was we well were what whatever when whenever where whether which while who whoever
whom whose why will with within without would yesterday yet you your yours yourself yourselves
according additionally again also although anyway apparently as basically besides certainly clearly
consequently especially generally hence indeed initially later likewise mainly notably now originally
particularly personally previously similarly specifically subsequently therefore typically ultimately
""".split())

NUMBER_WORDS = {
    "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
    "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
    "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
    "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100, "thousand": 1000,
    "million": 1_000_000, "billion": 1_000_000_000, "dozen": 12, "twice": 2, "thrice": 3, "third": 3,
    "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8, "ninth": 9, "tenth": 10,
    "twelfth": 12, "twentieth": 20, "hundredth": 100, "couple": 2, "pair": 2,
}
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
          "october", "november", "december")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")

_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*", re.UNICODE)
_NUMBER = re.compile(r"\d+(?:[,.]\d+)*")
_THOUSANDS = re.compile(r"^\d{1,3}(?:,\d{3})+$")
_MARKUP = re.compile(r"\[\^[^\]]*\]|\]\([^)]*\)|[*_`#>|~]")
_SENTENCE_END = re.compile(r"[.!?:;]\s*$|^\s*$|[\n•]\s*$|(?:^|\s)[-*+]\s*$|^\s*\d+[.)]\s*$")


def fold(word: str) -> str:
    """A word as the checks compare it: lower case, no accents, no possessive, no simple plural."""
    text = unicodedata.normalize("NFKD", word).encode("ascii", "ignore").decode().lower()
    text = re.sub(r"['’]s?$", "", text)
    if len(text) > 4 and text.endswith("ies"):
        return text[:-3] + "y"
    if len(text) > 4 and text.endswith(("ches", "shes", "sses", "xes")):
        return text[:-2]
    if len(text) > 3 and text.endswith("s") and not text.endswith(("ss", "us", "is")):
        return text[:-1]
    return text


def plain(text: str) -> str:
    """Text without markdown marks and citations: what a reader reads."""
    return _MARKUP.sub(" ", text)


@dataclass(frozen=True)
class Token:
    text: str
    start: bool      # opens a sentence, a list item or a label's value
    capital: bool    # starts with an upper-case letter


def tokens(text: str) -> list[Token]:
    """The words of a text, each knowing whether it opens a sentence."""
    text = plain(text)
    found = []
    for match in _WORD.finditer(text):
        word = match.group(0)
        before = text[: match.start()]
        found.append(Token(word, bool(_SENTENCE_END.search(before)) or not before.strip(),
                           word[:1].isupper()))
    return found


def numbers(text: str) -> set[int | float]:
    """The numbers a text states: digits (1,000 and 3.5 as values; each part of 2023-05-25 or
    10:30 alone), number words and ordinals ("25th", "third")."""
    found: set[int | float] = set()
    for match in _NUMBER.finditer(text):
        raw = match.group(0)
        if _THOUSANDS.match(raw):
            found.add(int(raw.replace(",", "")))
            continue
        for part in raw.split(","):
            try:
                value = float(part) if "." in part else int(part)
            except ValueError:
                continue
            found.add(int(value) if isinstance(value, float) and value.is_integer() else value)
    for match in _WORD.finditer(text):
        named = NUMBER_WORDS.get(match.group(0).lower())
        if named is not None:
            found.add(named)
    return found


_COMMON_SHAPE = re.compile(r"(?:ing|ed|ly|tion|sion|ness|ment|ful|ous|ive|able|ible|ity|ies|less)$", re.I)


def common_shape(word: str) -> bool:
    """A word whose ending says it is no name ("Recently", "Growing", "Excited")."""
    return len(word) > 3 and not word.isupper() and bool(_COMMON_SHAPE.search(word))


def folded_words(texts: Iterable[str]) -> set[str]:
    """Every word of the texts, folded (hyphenated parts apart)."""
    return {fold(t.text) for text in texts for t in tokens(text)}


def content_words(text: str) -> set[str]:
    """The words that carry meaning: folded, three letters or more, not a common word."""
    return {w for w in (fold(t.text) for t in tokens(text)) if len(w) >= 3 and w not in COMMON}
