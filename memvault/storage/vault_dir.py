"""The vault's directory: where a vault is, whether a directory holds one, and making a new one.

What `Vault.open`, `Vault.init` and `Vault(root)` decide before any storage is opened: the
path to use (explicit > MEMVAULT_VAULT > enclosing vault > default), why a directory is not a
vault (in words that say what to do), and a new vault made whole or not at all.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memvault.errors import BrokenRepository, InvalidInput, MemvaultError, NotAVault, unwritable
from memvault.formats.layout import CONFIG_FILE
from memvault.storage.paths import template_root


def default_vault_path() -> Path:
    from platformdirs import user_data_path

    return user_data_path("memvault", appauthor=False) / "vault"


def is_vault(path: Path) -> bool:
    return (path / CONFIG_FILE).is_file() and (path / ".git").exists()


def find_enclosing_vault(start: Path) -> Path | None:
    # memvault.toml alone is enough: a vault that lost its .git is reported, not passed over.
    for candidate in (start, *start.parents):
        if (candidate / CONFIG_FILE).is_file():
            return candidate
    return None


def refuse_inside_a_vault(root: Path) -> None:
    """A new vault may not lie inside another: that one's files would hold it (under wiki/ its logs
    and facts read as pages of the outer vault, handed to its agents), and its git sees a folder."""
    outer = find_enclosing_vault(root.parent)
    if outer is not None:
        raise InvalidInput(f"{root} is inside the vault {outer}, whose search and git would take its files "
                           "for their own; choose a folder outside it")


def locate(path: os.PathLike[str] | str | None = None) -> Path:
    """Where the vault is: explicit path > MEMVAULT_VAULT > enclosing vault of cwd > default vault."""
    explicit = path or os.environ.get("MEMVAULT_VAULT")
    if explicit:
        return Path(explicit).expanduser().resolve()
    return find_enclosing_vault(Path.cwd()) or default_vault_path()


@contextmanager
def explained_if_broken(root: Path) -> Iterator[None]:
    """A git failure that comes from a broken repository is told as such (BrokenRepository)."""
    try:
        yield
    except MemvaultError:
        raise
    except Exception as e:
        from memvault.storage.repository import repository_problem

        problem = repository_problem(root)
        if problem is None:
            raise
        raise BrokenRepository(root, problem) from e


def check_vault_dir(root: Path) -> None:
    """NotAVault (saying what to do instead) or BrokenRepository, unless `root` is a vault to open."""
    if not is_vault(root):
        if root.is_file():
            raise NotAVault(f"{root} is a file, not a vault directory")
        if (root / CONFIG_FILE).is_file():
            raise BrokenRepository(root, "its git repository (.git) is missing")
        if not root.exists():
            raise NotAVault(f"{root} does not exist; create a vault there with `memvault init {root}`")
        try:
            empty = not any(root.iterdir())
        except OSError:  # not readable: no advice to init there either
            empty = False
        # init makes a vault in a new or empty directory only: name it where it would work
        advice = (f"create one with `memvault init {root}`" if empty else
                  "point --vault (or MEMVAULT_VAULT) at your vault, or make a new one with "
                  "`memvault init PATH` in a new or empty directory")
        raise NotAVault(f"{root} is not a memvault vault (it has no {CONFIG_FILE}); {advice}")
    problem = _git_dir_problem(root)
    if problem:
        raise BrokenRepository(root, problem)


def _git_dir_problem(root: Path) -> str | None:
    """A cheap look at .git on every open (commands that read only never run git to notice): why
    it cannot be a repository, or None. A damaged inside is left to git and `doctor`."""
    git_dir = root / ".git"
    if git_dir.is_file():
        # A linked worktree's .git is a file naming the real git directory: `gitdir: PATH`.
        found = re.fullmatch(r"gitdir: (.+?)\s*", git_dir.read_text(encoding="utf-8", errors="replace"))
        if found is None or not (root / found.group(1)).is_dir():
            return "its git repository (.git) is broken (.git is a file that names no git directory)"
        return None
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8", errors="replace").strip()
    except FileNotFoundError:
        return None if not git_dir.exists() else "its git repository (.git) is broken (.git/HEAD is missing)"
    except (IsADirectoryError, NotADirectoryError):
        head = ""
    if head.startswith("ref: refs/") or re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", head):
        return None
    return "its git repository (.git) is broken (.git/HEAD names no branch or commit)"


def recreate_if_broken(root: Path) -> list[str] | None:
    """`adopt`: the git repository of the vault at `root` re-created from its files in one commit,
    and what was done; None when its repository is healthy (left as it is)."""
    from memvault.storage.repository import recreate_repository, repository_problem

    if not (root / CONFIG_FILE).is_file():
        raise NotAVault(f"{root} has no {CONFIG_FILE}, so there is no vault to adopt; "
                        "`memvault init` creates a new one in an empty directory")
    if repository_problem(root) is None:
        return None
    return recreate_repository(root, template_root())


def holds_vault(root: Path) -> bool:
    """Whether `init` finds a vault at `root` already (True) or may make one there (False: the
    directory is new or empty); InvalidInput for any other directory, or a path none can be made at."""
    from memvault.storage.gitstore import require_git

    require_git()  # before the template is copied: a vault without its repository is half made
    with _creating(root):
        existing = (root / CONFIG_FILE).is_file()
        if not existing and root.exists() and not root.is_dir():
            raise InvalidInput(f"{root} is not a directory; choose an empty or new directory")
        if not existing and root.exists() and any(root.iterdir()):
            raise InvalidInput(f"{root} is not empty and is not a vault; choose an empty or new directory")
    return existing


def make_vault(root: Path) -> None:
    """The template copied into `root` (new or empty) and committed as the repository's first
    commit; on any failure `root` is left as it was found."""
    from memvault.storage.gitstore import GitStore

    made = not root.exists()
    with _creating(root):
        root.mkdir(parents=True, exist_ok=True)
    try:
        shutil.copytree(template_root(), root, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
        store = GitStore.init(root)
        store.commit(["."], "init: new memvault vault")
    except BaseException:
        # A vault without its first commit (a git config that fails every commit, a full disk,
        # Ctrl-C) would pass for a vault: `init` again said "already a vault" and its template
        # files stayed staged beside every later commit. The directory is left as it was found,
        # unless a first commit is there after all (an init of the same folder at the same time).
        if GitStore(root).head() is None:
            _unmake(root, made)
        raise


def _unmake(root: Path, made: bool) -> None:
    """Remove what a failed `init` put in `root` (it was empty, or did not exist when `made`)."""
    if made:
        shutil.rmtree(root, ignore_errors=True)
        return
    for child in root.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


@contextmanager
def _creating(root: Path) -> Iterator[None]:
    """The vault's directory is looked at and made here: an OSError is one line naming the path.

    Cannot write (read-only, permission, disk full) is VaultUnwritable, as for any write; any
    other failure is a path no vault can be made at (a file where a directory should be, a
    name too long, /proc), which is bad input.
    """
    try:
        yield
    except OSError as e:
        # (a file in the path is named below: it is the path given, not a place that refused a write)
        clear = None if e.errno == errno.ENOTDIR else unwritable(e, e.filename or root, "no vault was created")
        if clear is not None:
            raise clear from None
        blocker = next((p for p in root.parents if p.exists() and not p.is_dir()), None)
        if blocker is not None:
            raise InvalidInput(f"cannot create a vault at {root}: {blocker} is not a directory") from None
        raise InvalidInput(f"cannot create a vault at {root}: {e.strerror or e}") from None
