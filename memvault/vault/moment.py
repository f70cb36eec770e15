"""`Vault.as_of`'s read-only view of a past moment, and the storage each reading method reads."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from memvault.formats.facts import Fact
from memvault.formats.reports import VaultStatus
from memvault.index.query import SearchQuery
from memvault.recall.lookup import FactView
from memvault.storage.store import Storage

if TYPE_CHECKING:
    from memvault.index.hits import Hit
    from memvault.recall.asof import Moment
    from memvault.recall.context import Bundle


class VaultAt:
    """The vault as it stood at one commit, read-only (`Vault.as_of`); `moment` says which commit
    answered, for what was asked."""

    def __init__(self, vault: Any, moment: Moment):  # the Vault (memvault.vault.facade imports this)
        self.vault = vault
        self.moment = moment

    def search(self, query: str | SearchQuery, **options: Any) -> list[Hit]:
        return self.vault.search(query, as_of=self.moment, **options)

    def context(self, query: str | None = None, **options: Any) -> Bundle:
        return self.vault.context(query, as_of=self.moment, **options)

    def recent(self, limit: int | None = 20, **options: Any) -> list[Fact]:
        return self.vault.recent(limit, as_of=self.moment, **options)

    def show(self, fact_id: str) -> FactView:
        return self.vault.show(fact_id, as_of=self.moment)

    def status(self) -> VaultStatus:
        return self.vault.status(as_of=self.moment)


@contextmanager
def reading(storage: Storage, as_of: Any) -> Iterator[Storage]:
    """The storage to read: the vault's own, or the vault as of a moment (memvault.recall.asof)."""
    if as_of is None:
        yield storage
        return
    from memvault.recall.asof import past

    with past(storage, as_of) as storage:
        yield storage
