"""An import run: read a source, leave out what the vault holds already, check the rest, write it as
one commit.

Checking and writing facts are the vault's add path (`Vault._checked`, `Vault._write`): the run is
handed them rather than a second copy of the add rules, so an imported fact is checked exactly as
an added one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from memvault.errors import InvalidInput, InvalidItem
from memvault.formats.facts import Fact
from memvault.importers.records import Progress, Record
from memvault.storage.store import Storage

# The fields of each fact -> the facts, checked (InvalidItem numbered from 1 for the first bad one).
Check = Callable[[list[Mapping[str, Any]]], list[Fact]]
# Checked facts and the import's name for the commit -> the ids written (a key stored meanwhile is not).
Write = Callable[[list[Fact], str], set[str]]


@dataclass
class ImportReport:
    """What `import_source` did (or, with dry_run, would do): facts added, records already in the
    vault (their key stored), records skipped by reason, and the commit."""

    format: str
    source: str
    new: int
    already: int
    skipped: dict[str, int]
    dry_run: bool
    commit: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"format": self.format, "source": self.source, "new": self.new, "already": self.already,
                "skipped": self.skipped, "dry_run": self.dry_run, "commit": self.commit}


def run_import(storage: Storage, source: os.PathLike[str] | str, *, format: str | None, check: Check, write: Write,
               dry_run: bool = False, skip_secrets: bool = False, progress: Progress | None = None) -> ImportReport:
    """Import `source` (memvault.importers.FORMATS; `format` guessed when None). A bad record raises
    InvalidInput naming its place, and nothing is written; `dry_run` checks everything, writes nothing."""
    from memvault.importers.sources import read_source

    tell = progress or (lambda _phase, _done, _total: None)
    batch = read_source(source, format, tell, categories=storage.config.categories)
    stored = storage.facts.stored_keys(record.key for record in batch.records)
    fresh, taken = [], set(stored)
    for record in batch.records:
        if record.key not in taken:
            fresh.append(record)
            taken.add(record.key)
    report = ImportReport(batch.format, str(source), 0, len(batch.records) - len(fresh), dict(batch.skipped),
                          dry_run)
    if skip_secrets and fresh:
        fresh = _without_secrets(fresh, report)
    if not fresh:
        return report
    tell("checking", 0, len(fresh))
    try:
        facts = check([record.fields for record in fresh])
    except InvalidItem as e:
        raise InvalidInput(f"{fresh[e.item - 1].place}: {e.reason}") from None
    tell("checking", len(fresh), len(fresh))
    if dry_run:
        report.new = len(facts)
        return report
    tell("writing", 0, len(facts))
    written = write(facts, batch.origin)
    tell("writing", len(facts), len(facts))
    report.new = len(written)
    report.already += len(facts) - len(written)
    report.commit = storage.git.head() if written else None
    return report


def _without_secrets(records: list[Record], report: ImportReport) -> list[Record]:
    from memvault.base.credentials import find_credentials

    found = find_credentials([record.fields["text"] for record in records])
    if found:
        report.skipped["holds a credential (--skip-secrets)"] = len(found)
    return [record for i, record in enumerate(records) if i not in found]
