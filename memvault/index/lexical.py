"""The lexical half of the index: Tantivy, English stop words and stemming, filter fields beside the text."""

from __future__ import annotations

import functools
import math
import re
import time
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from memvault.errors import INDEX_FILES, VaultBusy, no_room, unwritable
from memvault.index.documents import Document

ANALYZER = "memvault_en"
# Free space under which a failed Tantivy write is taken for a full disk (its segments are written
# in pieces of up to a few MB; what it wrote is freed again by the rollback).
NO_ROOM_MARGIN = 4 * 1024 * 1024
# Tantivy needs at least 15 MB of writer heap per thread; one thread keeps memory predictable.
WRITER_HEAP = 64_000_000
# How long a write waits for Tantivy's own writer lock, held by a process that does not take
# memvault's index lock (another program on the index): as long as for memvault's own lock.
WRITER_WAIT = 120.0
# The Snowball English stop words, plus the pieces the tokenizer leaves of contractions (don't ->
# don, t) and the words that only say "now" (read by memvault.index.intent instead). Question words
# ("what", "did", "when") are among them: they say nothing about the topic, and Tantivy's own list
# (33 words) kept them, so "what did Alice do" matched every question.
STOP_WORDS = """
i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her
hers herself it its itself they them their theirs themselves what which who whom this that these
those am is are was were be been being have has had having do does did doing would should could
ought a an the and but if or because as until while of at by for with about against between into
through during before after above below to from up down in out on off over under again further then
once here there when where why how all any both each few more most other some such no nor not only
own same so than too very can will just don s t d ll m re ve now nowadays currently
""".split()
# What Tantivy's query parser reads as syntax: every character but letters, digits, `_` and the
# space, and the operator words. The product promises plain text only, and the syntax misfires on
# ordinary text ("http:*" names a field that does not exist, "did NOT go" excludes "go") or crashes
# the process outright (a few thousand nested parentheses overflow the parser's stack).
_QUERY_SYNTAX = re.compile(r"[^\w ]|\b(?:AND|OR|NOT|IN)\b")


def fold(text: str) -> str:
    """Text as the tokenizer should see it, facts and queries alike: one unicode form (NFKC: an
    "é" typed as e + U+0301 is the "é" of a query typed on a French keyboard; the tokenizer cut
    the former in two) and no invisible format characters (a zero-width space, soft hyphen or
    bidi mark pasted inside "password" made it two words no query finds)."""
    text = unicodedata.normalize("NFKC", text)
    return "".join(c for c in text if unicodedata.category(c) != "Cf") if not text.isascii() else text


def literal_query(text: str) -> str:
    """`text` for Tantivy's query parser with every piece of syntax escaped, so it is read as words.

    Each run of whitespace becomes one space first, so words apart stay apart (an escaped newline
    would join its neighbours into one word). What the parser sees as one word is still matched as
    a phrase when it holds several (`foo-bar`, `http://x`), as before; nothing else has meaning.
    """
    return _QUERY_SYNTAX.sub(lambda m: "\\" + m.group(0), " ".join(text.split()))


@dataclass(frozen=True)
class Filters:
    """Restrictions every search path applies the same way (days are YYYYMMDD integers)."""

    category: str | None = None
    tag: str | None = None
    source: str | None = None
    session: str | None = None
    since: int | None = None
    until: int | None = None
    # Facts on or before this day are consolidated into the wiki and out of default scope...
    watermark: int | None = None
    # ...except these: facts of skipped dream batches and late (backdated) facts no page carries.
    unconsolidated: frozenset[str] = frozenset()

    @property
    def any(self) -> bool:
        values = (self.category, self.tag, self.source, self.session, self.since, self.until, self.watermark)
        return any(v is not None for v in values)


def _analyzer():
    import tantivy

    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(64))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .filter(tantivy.Filter.custom_stopword(STOP_WORDS))
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


_WORD = re.compile(r"\w+")


def matching_spans(text: str, query: str, most: int = 20) -> list[tuple[int, int]]:
    """The (start, end) in `text` of its first `most` words a search for `query` matches by words,
    read as the index reads them: folded, stemmed, stop words left out ("drinks" for "drink")."""
    analyzer = _shared_analyzer()
    wanted = set(analyzer.analyze(fold(query)))
    spans: list[tuple[int, int]] = []
    stems: dict[str, list[str]] = {}
    for found in _WORD.finditer(text) if wanted else ():
        word = found.group()
        if word not in stems:
            stems[word] = analyzer.analyze(fold(word))
        if wanted.intersection(stems[word]):
            spans.append(found.span())
            if len(spans) >= most:
                break
    return spans


@functools.cache
def _shared_analyzer():
    return _analyzer()


def _schema():
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("key", stored=True, tokenizer_name="raw")
    builder.add_text_field("file", tokenizer_name="raw")
    builder.add_text_field("kind", tokenizer_name="raw")
    builder.add_text_field("category", tokenizer_name="raw")
    builder.add_text_field("tag", tokenizer_name="raw")
    builder.add_text_field("source", tokenizer_name="raw")
    builder.add_text_field("session", tokenizer_name="raw")
    builder.add_text_field("text", tokenizer_name=ANALYZER)
    builder.add_text_field("context", tokenizer_name=ANALYZER)
    builder.add_integer_field("day", indexed=True, fast=True)
    return builder.build()


class LexicalIndex:
    """A Tantivy index directory. Writers must hold the index lock (Tantivy allows one writer)."""

    def __init__(self, path: Path):
        import tantivy

        self.path = path
        fresh = not (path / "meta.json").exists()
        path.mkdir(parents=True, exist_ok=True)
        self.schema = _schema()
        # Opening validates meta.json; a damaged directory raises here and the caller rebuilds.
        self.index = tantivy.Index(self.schema, path=str(path), reuse=not fresh)
        self.analyzer = _analyzer()
        self.index.register_tokenizer(ANALYZER, self.analyzer)

    def write(self, removed_keys: Iterable[str], added: Iterable[Document]) -> None:
        """Delete then add documents in one Tantivy commit."""
        import tantivy

        writer = self._writer()
        try:
            for key in removed_keys:
                writer.delete_documents_by_term("key", key)
            for doc in added:
                fields: dict[str, str | int | list[str]] = {
                    "key": doc.key,
                    "file": doc.file,
                    "kind": doc.kind,
                    "text": fold(doc.search_text + ("\n" + " ".join(doc.tags) if doc.tags else "")),
                }
                if doc.category:
                    fields["category"] = doc.category
                if doc.source:
                    fields["source"] = doc.source
                if doc.session:
                    fields["session"] = doc.session
                if doc.context:
                    fields["context"] = fold(doc.context)
                if doc.tags:
                    fields["tag"] = list(doc.tags)
                if doc.day is not None:
                    fields["day"] = doc.day
                writer.add_document(tantivy.Document(**fields))
            writer.commit()
            writer.wait_merging_threads()
        except BaseException as e:
            writer.rollback()
            # Tantivy words a full disk as "An index writer was killed ... (io::Error most likely)".
            number = no_room(self.path, NO_ROOM_MARGIN) if isinstance(e, ValueError) else None
            full = unwritable(OSError(number, str(e)), INDEX_FILES) if number is not None else None
            if full is not None:
                raise full from e
            raise
        self.index.reload()

    def _writer(self):
        """Tantivy's index writer, waiting while another process holds its lock."""
        deadline = time.monotonic() + WRITER_WAIT
        pause = 0.02
        while True:
            try:
                return self.index.writer(heap_size=WRITER_HEAP, num_threads=1)
            except ValueError as e:
                if "LockBusy" not in str(e):
                    raise
            if time.monotonic() >= deadline:
                raise VaultBusy(f"search index busy: another process held Tantivy's writer lock "
                                f"({self.path / '.tantivy-writer.lock'}) for over {WRITER_WAIT:g} s")
            time.sleep(pause)
            pause = min(pause * 2, 0.5)

    def count(self) -> int:
        return self.index.searcher().num_docs

    def reload(self) -> None:
        self.index.reload()

    def search(self, query: str, filters: Filters, limit: int,
               context: float = 0.5) -> tuple[list[tuple[str, float]], float]:
        """(key, BM25 score) best first, and the query's ideal score (see `ideal_score`).

        The query is plain text (see `literal_query`); it is matched against each fact's text and,
        at weight `context`, the text of the fact before it in its thread.
        """
        import tantivy

        query = fold(query)
        parsed, _errors = self.index.parse_query_lenient(literal_query(query), ["text", "context"],
                                                         field_boosts={"context": context})
        clauses = [(tantivy.Occur.Must, parsed)]
        clauses += [(tantivy.Occur.Must, q) for q in self._filter_queries(filters)]
        searcher = self.index.searcher()
        result = searcher.search(tantivy.Query.boolean_query(clauses), limit, count=False)
        hits = [(searcher.doc(address)["key"][0], score) for score, address in result.hits]
        return hits, self.ideal_score(searcher, query)

    def ideal_score(self, searcher, query: str) -> float:
        """The BM25 score of a fact of average length holding each query word once: the sum of
        the words' idf. A fact's score over it says how much of the query (rare words weigh more)
        it contains, on the same scale for every query; 0 when no word is left after stop words."""
        total = searcher.num_docs
        ideal = 0.0
        for term in set(self.analyzer.analyze(query)):
            found = searcher.doc_freq("text", term)
            # doc_freq still counts deleted documents until Tantivy merges their segment, as its
            # BM25 does; num_docs does not: never let a word be in more documents than there are.
            docs = max(total, found)
            # Tantivy's BM25 idf, so a fact holding every word once scores about `ideal`.
            ideal += math.log(1 + (docs - found + 0.5) / (found + 0.5))
        return ideal

    def _filter_queries(self, filters: Filters) -> list:
        import tantivy

        term, schema = tantivy.Query.term_query, self.schema
        queries = []
        for name in ("category", "tag", "source", "session"):
            value = getattr(filters, name)
            if value is not None:
                queries.append(term(schema, name, value))
        if filters.since is not None or filters.until is not None:
            queries.append(_day_range(schema, filters.since, filters.until))
        if filters.watermark is not None:
            newer = _day_range(schema, filters.watermark + 1, None)
            pages = term(schema, "kind", "page")
            scope = [(tantivy.Occur.Should, pages), (tantivy.Occur.Should, newer)]
            if filters.unconsolidated:
                stranded = tantivy.Query.term_set_query(schema, "key", sorted(filters.unconsolidated))
                scope.append((tantivy.Occur.Should, stranded))
            queries.append(tantivy.Query.boolean_query(scope))
        return queries


def _day_range(schema, since: int | None, until: int | None):
    import tantivy

    return tantivy.Query.range_query(schema, "day", tantivy.FieldType.Integer, since, until)
