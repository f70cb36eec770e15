"""Which vault files feed the index, and how each becomes documents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memvault.index.documents import Document, fact_document, page_documents

TOMBSTONES = "tombstones.jsonl"


class Corpus:
    """The vault's daily logs, wiki pages and tombstones, seen as index documents."""

    def __init__(self, vault: Any):
        self.vault = vault
        self.root: Path = vault.root

    def files(self) -> list[str]:
        """Vault-relative paths of every file whose documents belong in the index."""
        found = [self.vault.relpath(p) for p in self.vault.log_files()]
        wiki = self.root / "wiki"
        if wiki.is_dir():
            found += sorted(p.relative_to(self.root).as_posix() for p in wiki.rglob("*.md") if p.is_file())
        return found

    def documents(self, rel: str, content: str) -> list[Document]:
        if rel.startswith("wiki/"):
            return page_documents(content, rel)
        from memvault.facts import parse_log

        # Lines that do not parse are left to `doctor`; the index takes every fact that does.
        facts, _problems = parse_log(content, rel)
        return [fact_document(f) for f in facts]

    def tombstoned(self) -> set[str]:
        return set(self.vault.tombstones())
