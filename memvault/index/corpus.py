"""Which vault files feed the index, and how each becomes documents."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator

from memvault.index.documents import Document, fact_document, page_documents
from memvault.tombstones import TOMBSTONES_FILE
from memvault.vault import _LOG_NAME


def _entries(path: str) -> Iterator[os.DirEntry]:
    try:
        with os.scandir(path) as entries:
            yield from entries
    except (FileNotFoundError, NotADirectoryError):
        return


class Corpus:
    """The vault's daily logs, wiki pages and tombstones, seen as index documents."""

    def __init__(self, vault: Any):
        self.vault = vault
        self.root: Path = vault.root
        self.problems: list = []  # unparseable log lines met while reading, for one notice

    def files(self) -> list[str]:
        """Vault-relative paths of every file whose documents belong in the index."""
        found = [self.vault.relpath(p) for p in self.vault.log_files()]
        wiki = self.root / "wiki"
        if wiki.is_dir():
            found += sorted(p.relative_to(self.root).as_posix() for p in wiki.rglob("*.md") if p.is_file())
        return found

    def stat_files(self) -> dict[str, tuple[int, int]]:
        """(mtime_ns, size) of every indexed file and of tombstones.jsonl, by vault-relative path.

        Runs before every search, so it walks with os.scandir rather than pathlib: at a few
        hundred daily logs pathlib's object overhead was most of a warm search.
        """
        found: dict[str, tuple[int, int]] = {}
        root = str(self.root)
        for year in _entries(os.path.join(root, "logs")):
            if not year.is_dir():
                continue
            for entry in _entries(year.path):
                if _LOG_NAME.match(entry.name) and entry.is_file():
                    st = entry.stat()
                    found[f"logs/{year.name}/{entry.name}"] = (st.st_mtime_ns, st.st_size)
        for folder, _dirs, names in os.walk(os.path.join(root, "wiki")):
            for name in names:
                if name.endswith(".md"):
                    path = os.path.join(folder, name)
                    try:
                        st = os.stat(path)
                    except FileNotFoundError:
                        continue
                    found[os.path.relpath(path, root).replace(os.sep, "/")] = (st.st_mtime_ns, st.st_size)
        try:
            st = os.stat(os.path.join(root, TOMBSTONES_FILE))
            found[TOMBSTONES_FILE] = (st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            pass
        return found

    def documents(self, rel: str, content: str, forgotten: set[str] = frozenset()) -> list[Document]:
        if rel.startswith("wiki/"):
            from memvault.citations import strip_forgotten_statements

            # A page may still carry a statement from a fact forgotten since the last dream; the
            # next dream rewrites the page, and until then search must not show that statement.
            return page_documents(strip_forgotten_statements(content, forgotten), rel)
        from memvault.facts import parse_log

        # The index takes every fact that parses; the lines that do not are told (see the indexer)
        # and listed in full by `doctor`.
        facts, problems = parse_log(content, rel)
        self.problems.extend(problems)
        return [fact_document(f) for f in facts]

    def tombstoned(self) -> set[str]:
        return set(self.vault.tombstones())
