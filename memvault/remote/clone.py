"""Clone: set up a vault from a remote that holds one (`memvault clone URL DIR`)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import NoReturn

from memvault.base.text import shown
from memvault.errors import InvalidInput, RemoteError, SyncConflict
from memvault.formats.layout import CONFIG_FILE
from memvault.remote.origin import NETWORK_TIMEOUT_SECONDS, REMOTE, fetched_branches, vault_branches
from memvault.remote.sync_checks import config_problem
from memvault.remote.tree_checks import tree_problem
from memvault.storage.gitstore import GitStore, git_reason, require_git
from memvault.storage.vault_dir import refuse_inside_a_vault


def clone(url: str, root: Path) -> Path:
    """Set up a vault at `root` (absent or empty) from a remote that holds one; returns `root`."""
    require_git()
    url = (url or "").strip()
    _check_target(url, root)
    created = not root.exists()
    root.parent.mkdir(parents=True, exist_ok=True)
    store = _clone_repository(url, root, created)
    branch = _check_out(store, url, root, created)
    if not (root / CONFIG_FILE).is_file() or (root / CONFIG_FILE).is_symlink():
        _refuse_no_vault(store, url, root, created, branch)
    # As sync refuses to merge such settings: a clone no command could open is no vault set up.
    raw = (root / CONFIG_FILE).read_bytes()
    try:
        problem = config_problem(raw.decode("utf-8"))
    except UnicodeDecodeError:
        problem = f"{CONFIG_FILE} is not UTF-8 text"
    if problem is not None:
        _remove(root, created)
        raise SyncConflict(f"{url} holds a vault whose settings memvault cannot load ({problem}); nothing was "
                           f"cloned: fix {CONFIG_FILE} where it was pushed from")
    return root


def _check_target(url: str, root: Path) -> None:
    """A URL git takes as one, and a folder to clone into that is absent or empty (nothing changed)."""
    if not url or "\n" in url or url.startswith("-"):
        raise InvalidInput("remote URL must be one line and must not start with '-'")
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise InvalidInput(f"{root} already exists and is not empty; choose a new directory")
    refuse_inside_a_vault(root)
    blocker = next((p for p in root.parents if p.exists() and not p.is_dir()), None)
    if blocker is not None:  # git would fail making the folder: "unexpected error: FileExistsError"
        raise InvalidInput(f"cannot clone into {root}: {blocker} is not a directory")


def _clone_repository(url: str, root: Path, created: bool) -> GitStore:
    """The remote's commits, fetched and configured as a vault's repository, nothing checked out yet."""
    import git

    try:
        store = GitStore.clone(url, root, remote=REMOTE, timeout=NETWORK_TIMEOUT_SECONDS)
    except git.GitCommandError as e:
        _remove(root, created)
        raise RemoteError(f"cannot clone {url}: {git_reason(e)}") from None
    # Before anything is checked out: under a global core.autocrlf = true the files came out with
    # CRLF, and once the vault's own setting turned it off every one of them read as changed.
    store.configure()
    return store


def _check_out(store: GitStore, url: str, root: Path, created: bool) -> str | None:
    """Check out the branch holding the vault once its tree passed the checks; returns that branch
    when it is not the remote's HEAD (see `_vault_branch`)."""
    # The tree is checked before git writes any of it: a path git refuses (`..`) failed the
    # checkout itself, as if the remote could not be reached (exit 8), and a symlink was on disk.
    head = store.head()
    branch = _vault_branch(store, head)
    problem = tree_problem(store, f"{REMOTE}/{branch}" if branch else "HEAD") if head or branch else None
    if problem:
        _remove(root, created)
        raise SyncConflict(f"{url} {problem}; nothing was cloned")
    if branch:
        store.run("checkout", "-q", "-B", branch, "--track", f"{REMOTE}/{branch}")
    elif head is not None:
        store.run("reset", "-q", "--hard")
    return branch


def _refuse_no_vault(store: GitStore, url: str, root: Path, created: bool, branch: str | None) -> NoReturn:
    """What was cloned holds no vault: it goes, and the error says where one may be."""
    vaults = [] if branch else vault_branches(store, fetched_branches(store))
    _remove(root, created)
    if vaults:  # several, none named main, and HEAD names none of them
        raise InvalidInput(
            f"{url} holds a vault on several branches ({shown(vaults)}) and its HEAD names none of them; "
            f"clone one with `git clone -b {vaults[0]} {url} DIR` (memvault sets it up on first use), or make "
            "the remote's HEAD name it"
        )
    raise InvalidInput(
        f"{url} holds no memvault vault (no {CONFIG_FILE}); to publish one, run "
        "`memvault remote set URL` and `memvault sync` in an existing vault"
    )


def _vault_branch(store: GitStore, head: str | None) -> str | None:
    """The branch to check out when the remote's HEAD holds no vault: a bare remote made by
    `git init --bare` may name a HEAD branch that was never pushed (master, while vaults use
    main), so its main branch, or the only one holding a vault; None when HEAD holds one (or
    nothing does, or several branches do)."""
    if head is not None and _holds(store, "HEAD", CONFIG_FILE):
        return None
    vaults = vault_branches(store, fetched_branches(store))
    return "main" if "main" in vaults else (vaults[0] if len(vaults) == 1 else None)


def _holds(store: GitStore, rev: str, path: str) -> bool:
    return bool(store.run("ls-tree", "--name-only", rev, "--", path))


def _remove(root: Path, created: bool) -> None:
    if created:
        shutil.rmtree(root, ignore_errors=True)
    elif root.is_dir():
        for child in root.iterdir():
            shutil.rmtree(child, ignore_errors=True) if child.is_dir() else child.unlink(missing_ok=True)
