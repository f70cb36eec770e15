"""The vault's remote as this clone knows it, without the network: its URL (set with `memvault
remote set`), the branch, and how far ahead or behind the last sync left it."""

from __future__ import annotations

from memvault.errors import InvalidInput
from memvault.formats.layout import CONFIG_FILE
from memvault.storage.gitstore import GitStore
from memvault.storage.store import Storage

REMOTE = "origin"
NETWORK_TIMEOUT_SECONDS = 300  # each git call that talks to the remote is killed after it


def config_get(storage: Storage, key: str) -> str | None:
    import git

    try:
        return storage.git.run("config", "--get", key) or None
    except git.GitCommandError:
        return None


def remote_url(storage: Storage) -> str | None:
    """The remote's URL, None when none is set."""
    return config_get(storage, f"remote.{REMOTE}.url")


def set_remote(storage: Storage, url: str) -> dict:
    """Point the vault at a remote (no network access); returns remote_info()."""
    url = (url or "").strip()
    if not url:
        raise InvalidInput("remote URL is empty")
    if "\n" in url or url.startswith("-"):
        raise InvalidInput("remote URL must be one line and must not start with '-'")
    previous = remote_url(storage)
    if previous is None:
        storage.git.run("remote", "add", REMOTE, url)
    elif previous != url:
        storage.git.run("remote", "set-url", REMOTE, url)
        # What we knew of the old remote says nothing of the new one (an empty remote must get
        # everything pushed, and ahead/behind must not be reported from the old one).
        for ref in storage.git.run("for-each-ref", "--format=%(refname)", f"refs/remotes/{REMOTE}/").splitlines():
            storage.git.run("update-ref", "--no-deref", "-d", ref)
    return remote_info(storage) or {}


def remote_info(storage: Storage) -> dict | None:
    """The remote and how far this vault is ahead/behind it, as of the last sync (no network)."""
    url = remote_url(storage)
    if url is None:
        return None
    branch = current_branch(storage)
    tracking = f"refs/remotes/{REMOTE}/{branch}"
    info = {"name": REMOTE, "url": url, "branch": branch, "synced": False, "ahead": None, "behind": None}
    if ref_exists(storage, tracking):
        counts = storage.git.run("rev-list", "--left-right", "--count", f"HEAD...{tracking}").split()
        info.update(synced=True, ahead=int(counts[0]), behind=int(counts[1]))
    return info


def current_branch(storage: Storage) -> str:
    return storage.git.run("symbolic-ref", "--short", "-q", "HEAD") or "main"


def ref_exists(storage: Storage, ref: str) -> bool:
    import git

    try:
        storage.git.run("rev-parse", "--verify", "-q", ref)
    except git.GitCommandError:
        return False
    return True


def fetched_branches(store: GitStore) -> list[str]:
    """The remote's branches, as this clone last fetched them."""
    names = store.run("for-each-ref", "--format=%(refname:strip=3)", f"refs/remotes/{REMOTE}").split()
    return [name for name in names if name != "HEAD"]


def vault_branches(store: GitStore, names: list[str]) -> list[str]:
    """Those of the fetched branches `names` whose tree holds a vault, asked of one git process: a
    remote may have many branches."""
    if not names:
        return []
    found = store.run("cat-file", "--batch-check",
                      input="".join(f"refs/remotes/{REMOTE}/{name}:{CONFIG_FILE}\n" for name in names)).split("\n")
    # each line "<sha> blob <size>", or "<name> missing"
    return [name for name, line in zip(names, found, strict=True) if line.split(" ")[1:2] == ["blob"]]
