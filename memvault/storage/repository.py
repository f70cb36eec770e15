"""The vault's git repository: whether it can be used, and the way back when .git is missing or
broken (a new repository from the vault's files, in one commit).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from memvault.errors import VaultUnwritable
from memvault.formats.layout import STATE_DIR
from memvault.storage.gitstore import GitStore, execute
from memvault.storage.store import Storage


def repository_problem(root: Path) -> str | None:
    """Why the vault's git repository cannot be used (missing; HEAD or the index unreadable), or None.

    A repository git cannot write or read for want of space or permission (a full disk, a
    read-only vault) is not broken: that raises VaultUnwritable, so that nothing is set aside.
    """
    if not (root / ".git").exists():
        return "its git repository (.git) is missing"
    # The store's environment runs git with GIT_OPTIONAL_LOCKS=0: `status` would otherwise write
    # the refreshed index, and a full disk would look like a broken repository.
    store = GitStore(root)
    for args in (("rev-parse", "--verify", "--quiet", "HEAD^{commit}"), ("status", "--porcelain")):
        status, _out, err = execute(["git", *args], store.env)
        if status != 0:
            error = store.error(["git", *args], status, err)
            if isinstance(error, VaultUnwritable):
                raise error
            said = [line for line in err.splitlines() if line.strip()] or ["HEAD names no readable commit"]
            return f"its git repository (.git) is broken ({said[-1]})"
    return None


def recreate_repository(root: Path, template: Path) -> list[str]:
    """A new repository holding the vault's files as they are, in one commit. A broken .git is moved
    into .memvault/ (never deleted); template files the vault lost (.gitignore, ...) are put back."""
    storage = Storage(root)
    done: list[str] = []
    with storage.write_lock():
        if repository_problem(root) is None:
            return done  # repaired meanwhile by another process
        git_dir = root / ".git"
        had_git = git_dir.exists() or git_dir.is_symlink()
        kept: Path | None = None
        restored: list[Path] = []
        try:
            if had_git:
                aside = root / STATE_DIR / f"broken-git-{time.strftime('%Y%m%dT%H%M%S')}"
                aside.parent.mkdir(parents=True, exist_ok=True)
                git_dir.rename(aside)
                kept = aside  # only once moved: until then the .git in place is the vault's own
                done.append(f"moved the broken .git to {storage.relpath(kept)}")
            for source in sorted(template.rglob("*")):
                target = root / source.relative_to(template)
                if source.is_file() and "__pycache__" not in source.parts and not target.exists():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    restored.append(target)
                    shutil.copy2(source, target)
                    done.append(f"restored {storage.relpath(target)} from the template")
            store = GitStore.init(root)
            sha = store.commit(["."], "adopt: re-create the repository from the vault's files")
        except BaseException:
            # A repair that cannot finish (a full disk, Ctrl-C) leaves the vault as it found it:
            # never without the .git it had, however broken.
            if kept is not None or not had_git:
                _undo_recreate(root, kept, restored)
            raise
    done.append(f"re-created the git repository from the vault's files as {(sha or '')[:10]} "
                "(earlier history is not in it)")
    return done


def _undo_recreate(root: Path, kept: Path | None, restored: list[Path]) -> None:
    """Remove the half-made repository and template files, and put the moved .git back."""
    git_dir = root / ".git"
    if git_dir.is_symlink() or git_dir.is_file():
        git_dir.unlink()
    else:
        shutil.rmtree(git_dir, ignore_errors=True)
    if kept is not None:
        kept.rename(git_dir)
    for path in restored:
        path.unlink(missing_ok=True)
