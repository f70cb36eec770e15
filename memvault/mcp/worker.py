"""The one thread that owns the server's Vault: tool calls run there, one at a time, off the event loop.

Vault methods block (git, the write lock, embedding) and the open search index is not meant for
concurrent use; its embedding cache is a sqlite connection tied to the thread that opened it. So
every call goes to the same single thread, in order, while the event loop keeps the protocol alive.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from memvault.errors import NotAVault
from memvault.storage.layout import CONFIG_FILE
from memvault.vault import Vault, explained_if_broken

T = TypeVar("T")


class VaultWorker:
    """Opens the vault, then runs `call(vault)` requests on its own thread; collects each call's notices."""

    def __init__(self, path: Path | None):
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memvault-vault")
        self._notices: list[str] = []
        try:
            self.vault: Vault = self._thread.submit(Vault.open, path, notify=self.notify).result()
        except BaseException:
            self._thread.shutdown()
            raise
        if self.vault.created:
            self.notify(f"created a new vault at {self.vault.root}")

    def notify(self, text: str) -> None:
        """A notice for the person running the server (stderr) and for the current call's result."""
        sys.stderr.write(f"memvault: {text}\n")
        sys.stderr.flush()
        self._notices.append(text)

    async def run(self, call: Callable[[Vault], T]) -> tuple[T, list[str]]:
        """`call(vault)` on the vault's thread, and the notices it raised."""
        return await asyncio.get_running_loop().run_in_executor(self._thread, self._run, call)

    def _run(self, call: Callable[[Vault], T]) -> tuple[T, list[str]]:
        self._notices = []
        if not (self.vault.root / CONFIG_FILE).is_file():
            # Moved or deleted while the server ran: answering from what is left (an empty list, a
            # git error) or re-creating its state folder at the old path would mislead the agent.
            raise NotAVault(f"{self.vault.root} is no longer a memvault vault (moved or deleted while the server "
                            "ran); restart the server with the vault's path")
        # .git broken while the server runs: said as the CLI says it, not as git's failure.
        with explained_if_broken(self.vault.root):
            return call(self.vault), self._notices

    def close(self) -> None:
        self._thread.submit(self.vault.close).result()
        self._thread.shutdown()
