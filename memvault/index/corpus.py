"""Which vault files feed the index, and how each becomes documents."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

from memvault.formats.citations import page_citations
from memvault.formats.facts import parse_log
from memvault.formats.layout import CONFIG_FILE, LOGS_DIR, TOMBSTONES_FILE, WIKI_DIR, is_log_name
from memvault.formats.tombstones import Tombstone
from memvault.index.documents import Document, fact_documents, page_documents
from memvault.storage.paths import inside
from memvault.storage.store import Storage


def _entries(path: str) -> Iterator[os.DirEntry]:
    try:
        with os.scandir(path) as entries:
            yield from entries
    except (FileNotFoundError, NotADirectoryError):
        return


class Corpus:
    """The vault's daily logs, wiki pages and tombstones, seen as index documents."""

    def __init__(self, storage: Storage):
        self.storage = storage
        self.root: Path = storage.root
        self.problems: list = []  # unparseable log lines met while reading, for one notice

    def files(self) -> list[str]:
        """Vault-relative paths of every file whose documents belong in the index."""
        found = [self.storage.relpath(p) for p in self.storage.facts.log_files()]
        return found + sorted(path for path in self.stat_files() if path.startswith(WIKI_DIR + "/"))

    def stat_files(self) -> dict[str, tuple[int, int]]:
        """(mtime_ns, size) of every indexed file and of tombstones.jsonl, by vault-relative path.

        Runs before every search, so it walks with os.scandir rather than pathlib: at a few
        hundred daily logs pathlib's object overhead was most of a warm search.
        """
        found: dict[str, tuple[int, int]] = {}
        root = str(self.root)
        for year in _entries(os.path.join(root, LOGS_DIR)):
            if not year.is_dir():
                continue
            for entry in _entries(year.path):
                # a symlinked log is listed as itself (never its target): reading it is refused
                if is_log_name(entry.name) and (entry.is_file() or entry.is_symlink()):
                    st = entry.stat(follow_symlinks=False)
                    found[f"{LOGS_DIR}/{year.name}/{entry.name}"] = (st.st_mtime_ns, st.st_size)
        for folder, dirs, names in os.walk(os.path.join(root, WIKI_DIR)):
            # another vault inside the wiki (cloned there by hand) is its own: its logs are no pages
            dirs[:] = [d for d in dirs if not os.path.exists(os.path.join(folder, d, CONFIG_FILE))]
            for name in names:
                if name.endswith(".md"):
                    path = os.path.join(folder, name)
                    try:
                        st = os.stat(path, follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    if stat.S_ISLNK(st.st_mode):
                        continue  # a symlinked page is never read (list_pages skips it too; doctor lists it)
                    found[os.path.relpath(path, root).replace(os.sep, "/")] = (st.st_mtime_ns, st.st_size)
        try:
            st = os.stat(os.path.join(root, TOMBSTONES_FILE), follow_symlinks=False)
            found[TOMBSTONES_FILE] = (st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            pass
        return found

    def read(self, rel: str) -> str | None:
        """A file's text as the index reads it (undecodable bytes replaced); None once it is gone."""
        try:
            with open(inside(self.root, rel), encoding="utf-8", newline="", errors="replace") as handle:
                return handle.read()
        except FileNotFoundError:
            return None

    def live_documents(self, rel: str, content: str, tombstoned: set[str]) -> list[Document]:
        """A file's documents less those of forgotten facts."""
        return [d for d in self.documents(rel, content, tombstoned) if d.key not in tombstoned]

    def documents(self, rel: str, content: str, forgotten: frozenset[str] | set[str] = frozenset()) -> list[Document]:
        if rel.startswith(WIKI_DIR + "/"):
            # A page citing a fact forgotten since the last dream is withheld until the scrub
            # rewrites it: its statements, title and slug may all repeat what the fact said.
            if forgotten and not forgotten.isdisjoint(page_citations(content)):
                return []
            return page_documents(content, rel)
        # The index takes every fact that parses; the lines that do not are told (see the indexer)
        # and listed in full by `doctor`.
        facts, problems = parse_log(content, rel)
        self.problems.extend(problems)
        return fact_documents(facts)

    def tombstones(self) -> dict[str, Tombstone]:
        return self.storage.tombstone_log.tombstones()
