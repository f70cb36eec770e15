"""Which of the vault's own files a .gitignore makes git ignore, asked of git itself: a remote may
bring such rules (memvault.remote.sync_checks), and doctor looks at the working tree's."""

from __future__ import annotations

import os
import tempfile
from datetime import date

from memvault.base.config import DEFAULT_ZONES
from memvault.formats.layout import GITIGNORE, TOP_FILES, WIKI_DIR, is_vault_file, log_relpath
from memvault.remote.revisions import read_files
from memvault.storage.gitstore import GitStore, execute


def own_paths(store: GitStore, *revs: str) -> list[str]:
    """The vault's own files in the trees of `revs`, its top files, and a new day's log and a page
    in each zone: a .gitignore may name those before they exist."""
    listed = {path for rev in revs
              for path in store.run("ls-tree", "-r", "--name-only", "-z", "--full-tree", rev).split("\0") if path}
    zones = {path.split("/")[1] for path in listed if path.startswith(WIKI_DIR + "/") and path.count("/") == 2}
    new = {log_relpath(date.today()), *(f"{WIKI_DIR}/{zone}/page.md" for zone in zones | set(DEFAULT_ZONES))}
    return sorted(path for path in listed | TOP_FILES | new if is_vault_file(path))


def ignored(store: GitStore, paths: list[str], rev: str | None = None) -> list[str]:
    """Which of `paths` git ignores by the .gitignore files of `rev`'s tree (None: of the working
    tree), asked of git itself (`check-ignore --no-index`: tracked files too); this clone's own
    .git/info/exclude and core.excludesFile count alike for every `rev`."""
    if rev is None:
        return _check_ignore(store, store.root, paths)
    rules = [path for path in store.run("ls-tree", "-r", "--name-only", "-z", "--full-tree", rev).split("\0")
             if path.rsplit("/", 1)[-1] == GITIGNORE]
    files = read_files(store, [(rev, path) for path in rules])
    with tempfile.TemporaryDirectory(prefix="memvault-check-") as folder:
        for path in rules:  # tree_problem has refused `..`, symlinks and the like in these paths
            target = os.path.join(folder, *path.split("/"))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w", encoding="utf-8", errors="surrogateescape", newline="") as rule:
                rule.write(files[rev, path])
        return _check_ignore(store, folder, paths)


def _check_ignore(store: GitStore, tree: str | os.PathLike, paths: list[str]) -> list[str]:
    command = ["git", "-C", str(tree), "check-ignore", "--no-index", "--stdin", "-z"]
    # check-ignore takes file names, not pathspecs, and refuses to run with literal pathspecs set.
    environ = {key: value for key, value in store.env.items() if key != "GIT_LITERAL_PATHSPECS"}
    status, out, err = execute(command, {**environ, "GIT_WORK_TREE": str(tree)},
                               input="".join(f"{path}\0" for path in paths))
    if status not in (0, 1):  # 1: none of them ignored
        raise store.error(command, status, err)
    return sorted(path for path in out.split("\0") if path)
