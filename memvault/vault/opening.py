"""Opening a vault: finding, creating, adopting, cloning it, and repairing what an interrupted
command left behind; the half of the facade that makes a Vault before anything is asked of it."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Self

from memvault.base.arguments import checked
from memvault.errors import BrokenRepository, InvalidInput, NotAVault
from memvault.formats.layout import CONFIG_FILE
from memvault.storage import vault_dir
from memvault.storage.store import Storage
from memvault.storage.vault_dir import default_vault_path, explained_if_broken, locate

Notify = Callable[[str], None]


class Opening:
    """What makes a Vault (memvault.vault.facade.Vault, which adds what is asked of one): the
    constructor and its context manager, the class methods that find, create, adopt or clone a
    vault, recovery, and the two static helpers front ends call before asking anything."""

    @checked
    def __init__(self, root: os.PathLike[str] | str, *, notify: Notify | None = None):
        root = Path(root).resolve()
        vault_dir.check_vault_dir(root)
        self.storage = Storage(root, notify=notify)
        self.root = root
        self.config = self.storage.config
        self.created = False
        self.recovered: list[str] = []
        from memvault.remote.merge_driver import ensure_merge_driver

        with explained_if_broken(root):
            ensure_merge_driver(self.storage)  # a fresh clone lacks it: git config is not pushed

    @staticmethod
    def held_by(holder: dict) -> str:
        """A lock holder (`status()["lock"]`) in words: "held by pid N (command) since TIME"."""
        from memvault.storage.lock import held_by

        return held_by(holder)

    @staticmethod
    def search_on_one_thread() -> None:
        """For a long-lived process that answers searches beside other work (the MCP server): from
        now on numpy's products run on the calling thread alone (see index/vectors.py)."""
        from memvault.index.vectors import products_on_one_thread

        products_on_one_thread()

    @checked
    def close(self) -> None:
        """Release the search index this object keeps open between searches."""
        self.storage.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- finding and creating (memvault.storage.vault_dir) ------------------------------------

    @classmethod
    @checked
    def init(cls, path: os.PathLike[str] | str, *, notify: Notify | None = None) -> Self:
        """Create a vault from the template, with its own git repository and a first commit."""
        root = Path(path).expanduser().resolve()
        if vault_dir.holds_vault(root):
            try:
                return cls(root, notify=notify)  # idempotent: `created` stays False
            except BrokenRepository as e:
                raise InvalidInput(f"{root} is a vault, but {e.problem}; `memvault init --adopt {root}` "
                                   "re-creates the repository from the vault's files") from None
        vault_dir.refuse_inside_a_vault(root)
        vault_dir.make_vault(root)
        vault = cls(root, notify=notify)
        vault.created = True
        return vault

    @classmethod
    @checked
    def open(cls, path: os.PathLike[str] | str | None = None, *, create_default: bool = True,
             notify: Notify | None = None) -> Self:
        """Find the vault: explicit path > MEMVAULT_VAULT > enclosing vault of cwd > default vault."""
        root = locate(path)
        if not (path or os.environ.get("MEMVAULT_VAULT")) and not (root / CONFIG_FILE).exists():
            # No vault given or enclosing: the default vault, not created yet.
            if not create_default:
                raise NotAVault(f"no vault here and no default vault at {root}; run `memvault init`")
            vault = cls.init(root, notify=notify)
            vault.storage.notify(f"created a new vault at {vault.root}")
        else:
            vault = cls(root, notify=notify)
        with explained_if_broken(vault.root):
            vault.recover()
        return vault

    @classmethod
    @checked
    def adopt(cls, path: os.PathLike[str] | str, *, notify: Notify | None = None) -> Self:
        """Re-create the git repository of a vault whose .git is missing or broken, from its files, in
        one commit (`created` is then True). A vault with a healthy repository is left as it is."""
        root = Path(path).expanduser().resolve()
        done = vault_dir.recreate_if_broken(root)
        if done is None:
            return cls(root, notify=notify)
        vault = cls(root, notify=notify)
        for line in done:
            vault.storage.notify(line)
        vault.created = True
        return vault

    @classmethod
    @checked
    def clone(cls, url: str, path: os.PathLike[str] | str | None = None, *,
              notify: Notify | None = None) -> Self:
        """Set up a vault from a remote that holds one (default path: the default vault)."""
        from memvault.remote.clone import clone

        root = clone(url, Path(path).expanduser().resolve() if path else default_vault_path())
        vault = cls(root, notify=notify)  # installs the merge driver
        vault.created = True
        return vault

    @checked
    def recover(self) -> list[str]:
        """Repair what an interrupted command left behind; returns (and tells) what was done."""
        done = self.storage.recovery.recover()
        for line in done:
            self.storage.notify(line)
        self.recovered.extend(done)
        return done
