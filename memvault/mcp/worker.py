"""The threads that own the server's vault: reads on one, writes on another, off the event loop.

Vault methods block (git, the write lock, embedding) and the open search index serves one call at
a time (a Vault's index calls take turns). So every read (search, context, recent, show, status,
MEMORY.md) goes to one thread that owns the warm Vault, in order. Writes (add, forget) go to a
second thread with a Vault of their own: a write waiting for the write lock held by another
process (a dream, a sync, another agent) then delays only the writes behind it, never a search.
The two Vaults share nothing but the files: the reads see a write as they see another process's,
by the index's freshness check.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from memvault.errors import NotAVault
from memvault.formats.layout import CONFIG_FILE
from memvault.vault import Vault, explained_if_broken

T = TypeVar("T")


class VaultWorker:
    """Opens the vault, then runs `call(vault)` requests on its threads; collects each call's notices."""

    def __init__(self, path: Path | None):
        self._reads = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memvault-reads")
        self._writes = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memvault-writes")
        self._calls = threading.local()  # each thread runs one call at a time: its notices are its own
        try:
            self.vault: Vault = self._reads.submit(Vault.open, path, notify=self.notify).result()
            # Opened now, not on the first write: a vault broken or moved since must not surface as a
            # write's surprise, and the constructor's checks are the same as the reads' Vault passed.
            self._writer: Vault = self._writes.submit(Vault, self.vault.root, notify=self.notify).result()
        except BaseException:
            self._shutdown()
            raise
        if self.vault.created:
            self.notify(f"created a new vault at {self.vault.root}")

    def notify(self, text: str) -> None:
        """A notice for the person running the server (stderr) and for the current call's result."""
        sys.stderr.write(f"memvault: {text}\n")
        sys.stderr.flush()
        notices = getattr(self._calls, "notices", None)
        if notices is not None:
            notices.append(text)

    async def run(self, call: Callable[[Vault], T], *, write: bool = False) -> tuple[T, list[str]]:
        """`call(vault)` on the reads' thread (or the writes' one), and the notices it raised."""
        thread, vault = (self._writes, self._writer) if write else (self._reads, self.vault)
        return await asyncio.get_running_loop().run_in_executor(thread, self._run, call, vault)

    def _run(self, call: Callable[[Vault], T], vault: Vault) -> tuple[T, list[str]]:
        notices: list[str] = []
        self._calls.notices = notices
        try:
            if not (vault.root / CONFIG_FILE).is_file():
                # Moved or deleted while the server ran: answering from what is left (an empty list, a
                # git error) or re-creating its state folder at the old path would mislead the agent.
                raise NotAVault(f"{vault.root} is no longer a memvault vault (moved or deleted while the server "
                                "ran); restart the server with the vault's path")
            # .git broken while the server runs: said as the CLI says it, not as git's failure.
            with explained_if_broken(vault.root):
                return call(vault), notices
        finally:
            self._calls.notices = None

    def close(self) -> None:
        """Close both Vaults after the calls under way (a write is finished, never cut)."""
        for thread, name in ((self._reads, "vault"), (self._writes, "_writer")):
            vault = getattr(self, name, None)
            if vault is not None:
                thread.submit(vault.close).result()
        self._shutdown()

    def _shutdown(self) -> None:
        self._reads.shutdown()
        self._writes.shutdown()
