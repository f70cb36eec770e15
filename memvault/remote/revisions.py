"""What sync reads of a remote's commits, before it merges them: files at a revision (many of them
by one git process: a sync after months away may bring hundreds of daily logs), and the common
base of two sides."""

from __future__ import annotations

from memvault.storage.gitstore import GitStore


def _read(store: GitStore, rev: str, path: str) -> str:
    """The file at `rev`, "" where it does not exist."""
    import git

    try:
        return store.run("show", f"{rev}:{path}")
    except git.GitCommandError:  # not in that commit (a new day's log, a log the remote deleted)
        return ""


def read_files(store: GitStore, wanted: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """Each (commit, path)'s file, "" where it does not exist, read by one `git cat-file --batch`."""
    found: dict[tuple[str, str], str] = {}
    asked = []
    for commit, path in dict.fromkeys(wanted):
        if not path.isprintable():  # a newline, or bytes that are no UTF-8: the batch's lines cannot carry it
            found[commit, path] = _read(store, commit, path)
        else:
            asked.append((commit, path))
    if not asked:
        return found
    answer = store.run("cat-file", "--batch", input="".join(f"{commit}:{path}\n" for commit, path in asked))
    data = (answer + "\n").encode("utf-8", "surrogateescape")  # run() dropped the final newline
    at = 0
    for key in asked:
        end = data.index(b"\n", at)
        header = data[at:end]
        at = end + 1
        if header.endswith((b" missing", b" ambiguous")):
            found[key] = ""
            continue
        _sha, kind, size = header.split(b" ")  # then `size` bytes and a newline
        found[key] = data[at : at + int(size)].decode("utf-8", "surrogateescape") if kind == b"blob" else ""
        at += int(size) + 1
    return found


def common_base(store: GitStore, head: str, rev: str) -> str:
    """The commit `head` and `rev` have in common, or the empty tree when they have none (two
    vaults started apart): then all of `rev` is new here, and all of it is checked."""
    return merge_base(store, head, rev) or store.run("hash-object", "-t", "tree", "/dev/null")


def merge_base(store: GitStore, head: str, rev: str) -> str | None:
    """The commit `head` and `rev` have in common; None for unrelated histories."""
    import git

    try:
        return store.run("merge-base", head, rev)
    except git.GitCommandError:  # exit 1: no common commit
        return None
