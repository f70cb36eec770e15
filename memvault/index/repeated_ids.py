"""One document per fact id, however often a hand edit or a bad merge repeated the id in the logs.

The first copy in the earliest daily log wins (log paths sort by day), as in FactLog.iter_facts;
a repeated copy is left out of the index here and reported by doctor.
"""

from __future__ import annotations

import re
from typing import Any

from memvault.formats.facts import stored_id
from memvault.formats.layout import LOGS_DIR
from memvault.index.catalog import Catalog
from memvault.index.corpus import Corpus

# A key `stored_id` writes as "key" itself, and each such quoted word of a text (overlapping ones too).
_PLAIN_KEY = re.compile(r"[0-9A-Za-z_.:+-]+")
_QUOTED_KEY = re.compile(r'"(?=([0-9A-Za-z_.:+-]+)")')


def one_copy_per_id(corpus: Corpus, contents: dict[str, list], catalog: Catalog, tombstoned: set[str],
                    gone: set[str]) -> dict[str, dict[str, Any]]:
    """The documents each re-read file keeps (file -> id -> document), one per id."""
    while True:
        holders = catalog.files_of({doc.key for docs in contents.values() for doc in docs})
        claimed = _first_claims(contents)
        kept = {rel: _kept_by(rel, docs, claimed, holders, contents, gone) for rel, docs in contents.items()}
        # An id a re-read log lost (a hand edit removed a copy) may still be in another log whose
        # copy was left out as a repeat: read that log again too. Rare, and once per pass.
        lost = {key for rel in [*contents, *gone] for key in catalog.doc_hashes(rel)
                if key not in claimed and key not in tombstoned}
        more = logs_holding(corpus, lost, skip=set(contents) | gone) if lost else {}
        if not more:
            return kept
        for rel, content in more.items():
            contents[rel] = corpus.live_documents(rel, content, tombstoned)


def _first_claims(contents: dict[str, list]) -> dict[str, str]:
    """Each id's first re-read file, in path (day) order."""
    claimed: dict[str, str] = {}
    for rel in sorted(contents):
        for doc in contents[rel]:
            claimed.setdefault(doc.key, rel)
    return claimed


def _kept_by(rel: str, docs: list, claimed: dict[str, str], holders: dict[str, str], contents: dict[str, list],
             gone: set[str]) -> dict[str, Any]:
    """The documents `rel` keeps: the ids it claims first, unless an earlier log not re-read holds them."""
    mine: dict[str, Any] = {}
    for doc in docs:
        holder = holders.get(doc.key)
        earlier_unchanged = holder is not None and holder < rel and holder not in contents and holder not in gone
        if claimed[doc.key] == rel and not earlier_unchanged:
            mine.setdefault(doc.key, doc)
    return mine


def logs_holding(corpus: Corpus, keys: set[str], skip: set[str]) -> dict[str, str]:
    """Daily logs (not in `skip`) whose text mentions one of `keys` as a fact id."""
    # Ids as memvault makes them are found by one pass over each log (every quoted word of that
    # shape), not one pass per id: thousands of ids are lost at once when whole logs go (an
    # index seeded from a later state of the vault, memvault.index.seed).
    plain = {key for key in keys if _PLAIN_KEY.fullmatch(key)}
    needles = [stored_id(key) for key in keys - plain]
    found = {}
    for rel in corpus.stat_files():
        if rel in skip or not rel.startswith(LOGS_DIR + "/"):
            continue
        content = corpus.read(rel)
        if content is not None and (any(needle in content for needle in needles)
                                    or not plain.isdisjoint(_QUOTED_KEY.findall(content))):
            found[rel] = content
    return found
