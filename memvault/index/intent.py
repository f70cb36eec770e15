"""What a query says about time, read from its words (no model): about now or the past, dates it names.

Ranking uses it twice: a question about now ranks the newest state of a thing first, and a day
or month the question names lifts the facts of that day or month. The rules are plain English
word lists and date patterns, so an agent can predict them; anything else counts as neither.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

_MONTHS = {name: number for number, names in enumerate((
    ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
    ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"),
    ("october", "oct"), ("november", "nov"), ("december", "dec"),
), start=1) for name in names}
_MONTH = r"(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_ORDINAL = r"(\d{1,2})(?:st|nd|rd|th)?"
_DAY_MONTH_YEAR = re.compile(rf"\b{_ORDINAL}\s+(?:of\s+)?{_MONTH},?\s+(\d{{4}})\b", re.IGNORECASE)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\s+{_ORDINAL},?\s+(\d{{4}})\b", re.IGNORECASE)
_MONTH_YEAR = re.compile(rf"\b{_MONTH},?\s+(\d{{4}})\b", re.IGNORECASE)
_ISO_DAY = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")

# Words that put a question in the present: "what desk do I use now", "where is she currently".
_NOW = re.compile(r"\b(now|nowadays|currently|current|latest|today|still|anymore|any more|newest|"
                  r"these days|at the moment|at present|most recent|up to date)\b", re.IGNORECASE)
# Words that put it in the past: "what did I use before", "where was he living in 2019".
_PAST = re.compile(r"\b(did|didn't|was|wasn't|were|weren't|had|used to|before|previously|formerly|"
                   r"originally|earlier|ago|at first|back then|back in|former|old|first|last (?:year|month|"
                   r"week|time|summer|winter|spring|autumn|fall)|(?:19|20)\d\d)\b", re.IGNORECASE)
# Present-tense auxiliaries: "what kind of desk do I use", "where does Alice live".
_PRESENT = re.compile(r"\b(do|does|don't|doesn't|is|isn't|are|aren't|am|what's|who's|where's|how's|it's|he's|"
                      r"she's|that's|i'm|you're|we're|they're)\b", re.IGNORECASE)


@dataclass(frozen=True)
class TimeIntent:
    """`tense` is "now" (a word says so), "present" (the tense alone), "past" or "any"; `days` and
    `months` ((year, month)) are the dates the query names."""

    tense: str = "any"
    days: tuple[date, ...] = ()
    months: tuple[tuple[int, int], ...] = ()


NO_INTENT = TimeIntent()


def read_intent(text: str) -> TimeIntent:
    """Read a query's time intent: a word about now wins over the past, the past over the tense."""
    days: list[date] = []
    months: list[tuple[int, int]] = []
    rest = text
    for pattern, order in ((_DAY_MONTH_YEAR, "dmy"), (_MONTH_DAY_YEAR, "mdy")):
        for match in pattern.finditer(rest):
            first, second, year = match.groups()
            day, month = (first, second) if order == "dmy" else (second, first)
            try:
                days.append(date(int(year), _MONTHS[month.lower()], int(day)))
            except ValueError:
                continue  # "31 February 2026" names no day
        rest = pattern.sub(" ", rest)
    for match in _ISO_DAY.finditer(rest):
        try:
            days.append(date(int(match.group(1)), int(match.group(2)), int(match.group(3))))
        except ValueError:
            continue
    for match in _MONTH_YEAR.finditer(rest):
        months.append((int(match.group(2)), _MONTHS[match.group(1).lower()]))
    if _NOW.search(text):
        tense = "now"
    elif _PAST.search(text) or days or months:
        tense = "past"
    elif _PRESENT.search(text):
        tense = "present"
    else:
        tense = "any"
    return TimeIntent(tense, tuple(dict.fromkeys(days)), tuple(dict.fromkeys(months)))
