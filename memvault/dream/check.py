"""Every statement a model proposes is checked against the facts it cites, before anything is applied.

Three checks, each with its reason (said to the model in a repair turn, and in log.md when a
statement is dropped):
- specifics: the names, numbers, dates, months, weekdays and places a statement holds must appear
  in the cited facts (their text, tags and source) or follow from their times (year, month, day,
  weekday). This is what catches invented details ("Age: 30", "married to John").
- meaning: a statement about something else than its facts fails: the cosine of statement and
  facts under the embedding model search already uses, against a threshold measured for that
  model (bench/dream_check.py); without a calibrated model, the share of the statement's content
  words found in the facts (a lexical fallback, measured the same way). Never unchecked.
- person: a fact filed on a page of the people zone, and the statement written there, must be
  about that person: naming another known person and not the page's subject fails.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy loads with the embedding model only
    import numpy as np

    from memvault.dream.prompt import Handles

from memvault.dream.words import (
    COMMON,
    MONTHS,
    WEEKDAYS,
    common_shape,
    content_words,
    fold,
    folded_words,
    numbers,
    plain,
    tokens,
)
from memvault.formats.pages import CITATION

PEOPLE_ZONE = "people"
# Cosine of statement and cited facts below which a statement is about something else, per
# embedding model, known people's names masked (bench/dream_check.py; docs/dream.md "The statement
# check"): the live model's restatements of LoCoMo facts scored 0.62-0.99 against their fact, and
# 0.00-0.66 (median 0.33) against another fact of the same person and day. A statement of part
# of a fact scores lower than a restatement of all of it, hence the margin below 0.62; what a
# threshold lets through, the specifics and the swap check (closer to another fact) still judge.
THRESHOLDS = {"sentence-transformers/all-MiniLM-L6-v2": 0.45}
# A threshold holds only for the model it was measured on: three pairs and the cosines that model
# gives them (int8 and fp32 builds alike, within PROBE_TOLERANCE). Another model under the same
# name (a fine-tune, a stand-in) gets the lexical check instead.
PROBES = {"sentence-transformers/all-MiniLM-L6-v2": [
    ("Alice moved to Lyon last spring.", "Alice relocated to France this year.", 0.77),
    ("Bob plays the violin in an orchestra.", "The weather was cold and rainy all week.", -0.04),
    ("Caroline adopted two children.", "Caroline became a mother through adoption.", 0.85)]}
PROBE_TOLERANCE = 0.1
# The lexical fallback: share of the statement's content words found in its facts (restatements:
# 98.6% at 0.20 or more; another fact of the same person: 12.5%), for statements of 3 content
# words or more (fewer say too little to judge by words).
LEXICAL_THRESHOLD = 0.20
LEXICAL_MIN_WORDS = 3


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str = ""
    kind: str = ""              # specifics | meaning | person | form
    word: str | None = None     # the offending word, shown in the repair turn
    page: str | None = None     # person: the page of the person the fact names, if one exists

    def __bool__(self) -> bool:
        return self.ok


PASS = Verdict(True)


def fact_words(facts: Sequence) -> set[str]:
    """What the cited facts state, folded: words of their text, tags and source, and the words
    their times make true (month, weekday)."""
    texts = [f.text for f in facts] + [t for f in facts for t in f.tags] + [f.source or "" for f in facts]
    found = folded_words(texts)
    for fact in facts:
        found.add(MONTHS[fact.at.month - 1])
        found.add(WEEKDAYS[fact.at.weekday()])
    return found


def fact_numbers(facts: Sequence) -> set:
    found: set = set()
    for fact in facts:
        found |= numbers(fact.text) | numbers(" ".join(fact.tags)) | numbers(fact.source or "")
        found |= {fact.at.year, fact.at.month, fact.at.day, fact.at.year % 100}
    return found


def specifics(statement: str, facts: Sequence, common: Collection[str] = (), names: Collection[str] = ()) -> Verdict:
    """Names and numbers of the statement that its facts do not hold.

    A capitalised word inside a sentence is a name. One opening a sentence is a name when it is an
    acronym or one of `names` (the vault's names: words its facts capitalise inside a sentence, its
    tags, its people), or when it is no common word: not a function word (words.COMMON), not of a
    common shape (-ing, -ed, -ly, ...), not one of `common` (the words the vault's facts use in
    lower case and the embedding model's vocabulary)."""
    known = fact_words(facts)
    for token in tokens(statement):
        word = fold(token.text)
        if not token.capital or word in known or token.text == "I":
            continue
        if token.start and not _name_opening(token.text, word, common, names):
            continue  # "The", "She", "Recently", "Lives": an opening word, not a name
        return Verdict(False, f"it names {token.text!r}, which its fact does not", "specifics", token.text)
    stated = numbers(plain(statement))
    extra = sorted(stated - fact_numbers(facts), key=str)
    if extra:
        shown = _number_text(statement, extra[0])
        return Verdict(False, f"it says {shown!r}, which its fact does not", "specifics", shown)
    return PASS


def _name_opening(text: str, word: str, common: Collection[str], names: Collection[str]) -> bool:
    if (text.isupper() and len(text) > 1) or word in names:
        return True
    return not (word in COMMON or text.lower() in common or common_shape(text))


def _number_text(statement: str, value) -> str:
    """The words of the statement that gave `value` (for the repair turn), else the value."""
    for token in tokens(statement):
        if value in numbers(token.text):
            return token.text
    return str(value)


# -- people -----------------------------------------------------------------------------------

def subject_names(path: str, title: str | None = None) -> set[str]:
    """The folded names a people page is about: its slug's words and its title's capitalised words
    (common words and single letters left out)."""
    slug = path.rsplit("/", 1)[-1].removesuffix(".md")
    names = {fold(w) for w in slug.split("-") if len(w) > 1 and not w.isdigit()}
    if title:
        names |= {fold(t.text) for t in tokens(title) if t.capital and len(t.text) > 1}
    return {n for n in names if n not in COMMON}


def named(text: str, tags: Iterable[str] = ()) -> set[str]:
    """The folded capitalised words of a text, and its tags: who and what it names."""
    return {fold(t.text) for t in tokens(text) if t.capital} | {fold(t) for t in tags}


@dataclass
class People:
    """The people pages a batch knows: existing ones and those its answer creates."""

    pages: dict[str, set[str]] = field(default_factory=dict)  # path -> subject names

    @property
    def names(self) -> set[str]:
        """Every known person's names, folded."""
        return {n for names in self.pages.values() for n in names}

    def add(self, path: str, title: str | None = None) -> None:
        if _zone(path) == PEOPLE_ZONE and path not in self.pages:
            names = subject_names(path, title)
            if names:
                self.pages[path] = names

    def page_naming(self, text: str, tags: Iterable[str] = ()) -> str | None:
        """The people page whose subject a text names (the first, when it names several)."""
        said = named(text, tags)
        return next((path for path, names in self.pages.items() if said & names), None)

    def check(self, path: str, text: str, tags: Iterable[str] = (), what: str = "the fact") -> Verdict:
        """A text filed on `path` must not name another known person without naming its subject."""
        subject = self.pages.get(path)
        if _zone(path) != PEOPLE_ZONE or not subject:
            return PASS
        said = named(text, tags)
        if said & subject:
            return PASS
        for other, names in self.pages.items():
            hit = (said & names) - subject
            if other != path and hit:
                who = sorted(hit)[0].title()
                return Verdict(False, f"{what} is about {who}, not the subject of {path}: it belongs on "
                               f"{other}", "person", who, other)
        return PASS


def _zone(path: str) -> str:
    parts = path.split("/")
    return parts[1] if len(parts) == 3 else ""


# -- meaning ----------------------------------------------------------------------------------

class Meaning:
    """How close a statement is to its facts: embeddings when the model is calibrated, else words."""

    def __init__(self, embedder=None, model_name: str | None = None):
        self.threshold = THRESHOLDS.get(model_name or "")
        self.probes = PROBES.get(model_name or "", [])
        self.embedder = embedder if self.threshold is not None else None
        self.method = "embedding" if self.embedder is not None else "words"
        self._vectors: dict[str, np.ndarray] = {}
        self._probed = False

    def _probe(self) -> None:
        """Fall back to words unless the model scores the probe pairs as the measured one did."""
        self._probed = True
        texts = [t for a, b, _ in self.probes for t in (a, b)]
        self._embed(texts)
        if self.embedder is None:
            return
        for a, b, expected in self.probes:
            if abs(float(self._vectors[a] @ self._vectors[b]) - expected) > PROBE_TOLERANCE:
                self.embedder, self.method = None, "words"
                return

    def prepare(self, texts: Iterable[str]) -> None:
        """Embed the texts of a batch in one call (statements and facts)."""
        if self.embedder is not None and not self._probed:
            self._probe()
        self._embed(texts)

    def _embed(self, texts: Iterable[str]) -> None:
        if self.embedder is None:
            return
        todo = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if not todo:
            return
        try:
            vectors = self.embedder.embed(todo)
        except Exception:  # noqa: BLE001 - the model could not load: the word check stands in
            self.embedder, self.method = None, "words"
            return
        self._vectors.update(zip(todo, vectors, strict=True))

    def vocabulary(self) -> frozenset[str]:
        """The lower-case whole words the embedding model's tokenizer knows (none without the model):
        common words, to tell a name opening a sentence from them."""
        if self.embedder is None:
            return frozenset()
        try:
            vocab = self.embedder.load().model.tokenizer.get_vocab()
        except Exception:  # noqa: BLE001 - another model class, or none loaded: the other lists stand
            return frozenset()
        return frozenset(w for w in vocab if w.isalpha() and w.islower() and len(w) > 1)

    def score(self, statement: str, fact_texts: Sequence[str], people: Collection[str] = ()) -> float:
        """How close the statement is to its facts, `people` (folded names) masked on both sides:
        who a text is about is the person check's to say, and a name weighs so much in an
        embedding that a fact's words under the other person's name scored closer to that person's
        facts than to its own (bench/dream_check.py)."""
        statement = mask(" ".join(plain(statement).split()), people)  # no citation, no markup
        fact_texts = [mask(t, people) for t in fact_texts]
        if self.embedder is not None:
            wholes = [statement, *fact_texts, " ".join(fact_texts)]
            self.prepare(wholes)
        if self.embedder is None:
            return lexical_score(statement, fact_texts)
        vector = self._vectors[statement]
        targets = [*fact_texts, " ".join(fact_texts)] if len(fact_texts) > 1 else list(fact_texts)
        return max(float(vector @ self._vectors[t]) for t in targets)

    def check(self, statement: str, fact_texts: Sequence[str], people: Collection[str] = ()) -> Verdict:
        score = self.score(statement, fact_texts, people)
        # an embedder is kept only with a calibrated threshold (__init__)
        limit = self.threshold if self.embedder is not None and self.threshold is not None else LEXICAL_THRESHOLD
        if score >= limit:
            return PASS
        return Verdict(False, f"it does not say what its fact says (similarity {score:.2f} < {limit:.2f})",
                       "meaning")


def mask(text: str, people: Collection[str]) -> str:
    """The text with each of these names (folded) said as "someone"."""
    if not people:
        return text
    pattern = re.compile(r"\b(?:" + "|".join(re.escape(p) for p in sorted(people, key=len, reverse=True))
                         + r")(?:['’]s?)?\b", re.IGNORECASE)
    return pattern.sub("someone", text)


def lexical_score(statement: str, fact_texts: Sequence[str]) -> float:
    """Share of the statement's content words that its facts hold (1.0 for a statement of fewer
    than LEXICAL_MIN_WORDS: too little to judge by words)."""
    words = content_words(statement)
    if len(words) < LEXICAL_MIN_WORDS:
        return 1.0
    known = folded_words(fact_texts)
    return len(words & known) / len(words)


# -- all together -----------------------------------------------------------------------------

@dataclass
class Checker:
    """The three checks for one batch."""

    meaning: Meaning
    people: People = field(default_factory=People)
    handles: Handles | None = None  # fact ids as the model knows them, in reasons
    common: Collection[str] = ()  # common words: no name when opening a sentence (see specifics)
    names: Collection[str] = ()   # the vault's names, folded: a name wherever it stands

    def statement(self, statement: str, facts: Sequence, page: str | None = None) -> Verdict:
        """A statement citing `facts`, to be written on `page`."""
        if not facts:
            return Verdict(False, "it cites no fact", "form")
        verdict = specifics(statement, facts, self.common, self.names)
        if verdict.ok and page:
            verdict = self.people.check(page, statement, what="the statement")
        if verdict.ok and page:
            for fact in facts:
                told = self.handles.short.get(fact.id, fact.id) if self.handles else fact.id
                verdict = self.people.check(page, fact.text, fact.tags, what=f"fact {told}")
                if not verdict.ok:
                    break
        if verdict.ok:
            verdict = self.meaning.check(statement, [f.text for f in facts], self.people.names)
        return verdict

    def reason(self, text: str, facts: Sequence) -> str | None:
        """A conflict's reason for a person to read, its handles (`f7`) made citations; None when it
        holds a name or number its facts do not, or cites another fact (no meaning check: a reason
        says how facts differ, not what one says)."""
        if self.handles is not None:
            full = self.handles.full
            text = re.sub(rf"\b{self.handles.prefix}\d+\b",
                          lambda m: f"[^{full[m.group(0)]}]" if m.group(0) in full else m.group(0), text)
        if any(cited not in {fact.id for fact in facts} for cited in CITATION.findall(text)):
            return None  # it cites a fact that is not in the conflict
        return text if facts and specifics(text, facts, self.common, self.names).ok else None

    def swapped(self, statement: str, facts: Sequence, others: Sequence) -> Verdict:
        """Does the statement say what one of `others` (the batch's other facts) says instead?"""
        return _swapped(self, statement, facts, others)


def vault_words(facts: Iterable) -> tuple[frozenset[str], frozenset[str]]:
    """(the words the facts use in lower case, the names they use: words they capitalise inside a
    sentence, folded, and their tags): what tells a name opening a sentence from a common word."""
    common, names = set(), set()
    for fact in facts:
        for token in tokens(fact.text):
            if token.text.islower():
                common.add(token.text)
            elif token.capital and not token.start:
                names.add(fold(token.text))
        names.update(fold(t) for t in fact.tags)
    return frozenset(common), frozenset(names - COMMON)


SWAP_MARGIN = {"embedding": 0.10, "words": 0.25}


def _swapped(checker: Checker, statement: str, facts: Sequence, others: Sequence) -> Verdict:
    """A statement closer to another fact of its batch than to the facts it cites says what that
    fact says (by SWAP_MARGIN: no restatement of a LoCoMo fact came that close to another fact of
    its day; bench/dream_check.py)."""
    meaning, people = checker.meaning, checker.people.names
    own = meaning.score(statement, [f.text for f in facts], people)
    best, score = None, own + SWAP_MARGIN[meaning.method]
    for other in others:
        s = meaning.score(statement, [other.text], people)
        if s > score:
            best, score = other, s
    if best is None:
        return PASS
    told = checker.handles.short.get(best.id, best.id) if checker.handles else best.id
    return Verdict(False, f"it says what fact {told} says, not what the fact it cites says", "meaning")


def known_people(pages: Mapping[str, str | None]) -> People:
    """People of `pages` (path -> title)."""
    people = People()
    for path, title in pages.items():
        people.add(path, title)
    return people
