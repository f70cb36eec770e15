"""The refresh's apply step: re-read the files a scan found changed and write their documents into
a generation, in batches (the caller holds the index lock)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memvault.formats.layout import TOMBSTONES_FILE, WIKI_DIR
from memvault.index.catalog import FileState, doc_hash
from memvault.index.corpus import Corpus
from memvault.index.generation import Generation
from memvault.index.repeated_ids import one_copy_per_id

Progress = Callable[[str, int, int], None]
Notify = Callable[[str], None]

# Documents read before they are written (one Tantivy commit, one catalog transaction each): about
# 100 MB of Python objects; a first build of 1M facts makes about 50 such commits.
DOCS_PER_BATCH = 20_000


@dataclass
class _Batch:
    """Files read and not yet written: their documents and the stat to record for each."""

    contents: dict[str, list] = field(default_factory=dict)
    states: dict[str, FileState] = field(default_factory=dict)
    documents: int = 0


@dataclass
class RefreshReport:
    added: int = 0
    removed: int = 0
    files: int = 0
    embedded: int = 0
    reused: int = 0

    def merge(self, other: RefreshReport) -> None:
        for name in ("added", "removed", "files", "embedded", "reused"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class Scan:
    stale: list[tuple[str, int, int]] = field(default_factory=list)  # (path, mtime_ns, size)
    gone: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.stale or self.gone)


def scan_files(corpus: Corpus, generation: Generation) -> Scan:
    """Files whose stat differs from the manifest; costs one stat per file, no reads."""
    found = Scan()
    current = corpus.stat_files()
    manifest = generation.manifest
    for rel, (mtime_ns, size) in current.items():
        known = manifest.get(rel)
        if known is None or known.mtime_ns != mtime_ns or known.size != size:
            found.stale.append((rel, mtime_ns, size))
    found.gone = [rel for rel in manifest if rel not in current]
    return found


def apply(corpus: Corpus, generation: Generation, scan: Scan, *, progress: Progress | None,
          notify: Notify) -> RefreshReport:
    """Re-read changed files and write their documents (caller holds the lock)."""
    tombstones = corpus.tombstones()
    tombstoned = set(tombstones)
    _record_purges(generation, {fact_id for fact_id, tombstone in tombstones.items() if tombstone.purged})
    corpus.problems = []  # only what this pass reads (a failed pass must not be told twice)
    reread = _pages_to_reread(corpus, scan)
    report = _read_and_write(corpus, generation, scan, reread, tombstoned, progress)
    problems, corpus.problems = corpus.problems, []
    if problems:
        notify(f"{len(problems)} line(s) in the daily logs are not facts memvault can read "
               f"(first: {problems[0].path}:{problems[0].line}); they are not searchable; "
               "see `memvault doctor --full`")
    return report


def _record_purges(generation: Generation, purged: set[str]) -> None:
    """Note the purges this generation now knows of, before any of their documents is removed."""
    catalog = generation.catalog
    if generation.fresh:
        catalog.begin()
        catalog.purges.set_clean_of(purged)  # read before any file: a purge arriving later is new to it
        catalog.commit()
        generation.fresh = False
    elif news := purged - catalog.purges.clean_of():
        catalog.begin()
        catalog.purges.note(news)  # before their documents are removed below
        catalog.commit()


def _pages_to_reread(corpus: Corpus, scan: Scan) -> set[str]:
    """New tombstones change what unchanged pages may show: every page is read again (and added to
    the scan) when tombstones.jsonl changed."""
    reread: set[str] = set()
    if any(rel == TOMBSTONES_FILE for rel, _, _ in scan.stale):
        stale = {rel for rel, _, _ in scan.stale}
        for rel, (mtime_ns, size) in corpus.stat_files().items():
            if rel.startswith(WIKI_DIR + "/"):
                reread.add(rel)
                if rel not in stale:
                    scan.stale.append((rel, mtime_ns, size))
    return reread


def _read_and_write(corpus: Corpus, generation: Generation, scan: Scan, reread: set[str], tombstoned: set[str],
                    progress: Progress | None) -> RefreshReport:
    """Read the stale files and write their documents a batch at a time."""
    # Files are written in batches of about DOCS_PER_BATCH documents, oldest log first, so a
    # first build holds one batch in memory rather than the vault (2.2 GB at 1M facts). The
    # earliest copy of a repeated id is met first, in the same batch or one already committed.
    scan.stale.sort()
    total = len(scan.stale)
    report = RefreshReport()
    batch = _Batch()
    for done, (rel, mtime_ns, size) in enumerate(scan.stale, 1):
        if progress:
            progress("reading files", done, total)
        content = corpus.read(rel)
        if content is None:
            scan.gone.append(rel)
            continue
        digest = hashlib.sha256(content.encode("utf-8", "surrogatepass")).digest()
        # The stat from before the read is stored: a write racing this read shows up as stale next time.
        batch.states[rel] = FileState(mtime_ns, size, digest)
        known = generation.manifest.get(rel)
        if rel == TOMBSTONES_FILE or (known is not None and known.hash == digest and rel not in reread):
            continue
        report.files += 1
        docs = corpus.live_documents(rel, content, tombstoned)
        batch.contents[rel] = docs
        batch.documents += len(docs)
        if batch.documents >= DOCS_PER_BATCH:
            report.merge(_write_batch(corpus, generation, batch, tombstoned, scan.gone, last=False))
            batch = _Batch()
    report.merge(_write_batch(corpus, generation, batch, tombstoned, scan.gone, last=True))
    return report


def _write_batch(corpus: Corpus, generation: Generation, batch: _Batch, tombstoned: set[str], gone: list[str], *,
                 last: bool) -> RefreshReport:
    """Write one batch of re-read files to Tantivy and the catalog; the files that are gone
    leave with the last batch."""
    catalog = generation.catalog
    removed: set[str] = set()
    added: dict[str, Any] = {}
    leaving = list(gone) if last else []
    for rel, docs in one_copy_per_id(corpus, batch.contents, catalog, tombstoned, set(gone)).items():
        old = catalog.doc_hashes(rel)
        for key, digest_old in old.items():
            if key not in docs or digest_old != doc_hash(docs[key]):
                removed.add(key)
        for key, doc in docs.items():
            if key not in old or old[key] != doc_hash(doc):
                added[key] = doc
    for rel in leaving:
        removed.update(catalog.doc_hashes(rel))
    # Forgotten ids leave the index whatever file they were in, and never come back.
    forgotten = catalog.tombstoned_present(tombstoned)
    removed.update(forgotten)
    for key in tombstoned:
        added.pop(key, None)
    # A changed document is deleted and re-added in Tantivy; in the catalog it is replaced.
    generation.lexical.write(removed | set(added), added.values())
    removed -= set(added)
    catalog.begin()
    try:
        catalog.purges.keep_dropped(forgotten)
        catalog.remove_docs(removed)
        catalog.put_docs(added.values())
        for rel in leaving:
            catalog.manifest.drop_file(rel)
        for rel, state in batch.states.items():
            catalog.manifest.set_file(rel, state)
        catalog.commit()
    except BaseException:
        catalog.rollback()
        raise
    return RefreshReport(added=len(added), removed=len(removed))
