"""`dream --undo`: revert the last dream commit with git revert, if nothing later touched its files."""

from __future__ import annotations

import git

from memvault.dream.consolidate import dream_lock
from memvault.errors import MemvaultError, NotFound

UNDO_PREFIX = "dream: undo "
# Reverting a scrub would bring back what forgotten facts said: undo never picks one. A scrub
# writes log.md like every batch, so the batches before it can no longer be undone either.
SCRUB_PREFIX = "dream: scrub "


class UndoRefused(MemvaultError):
    """Later commits changed the files of the dream commit; reverting would clobber them."""


def _changed(vault, sha: str) -> set[str]:
    out = vault.git.run("diff-tree", "--no-commit-id", "--name-only", "-r", "--root", sha)
    return {line for line in out.splitlines() if line}


def undo_last_dream(vault) -> dict:
    """Revert the newest dream commit not undone yet; returns what was reverted."""
    vault.recover()
    with dream_lock(vault), vault.write_lock():
        commits = vault.git.log()
        undone = {c.message[len(UNDO_PREFIX):].split(" ", 1)[0] for c in commits
                  if c.message.startswith(UNDO_PREFIX)}

        def is_undone(sha: str) -> bool:
            return any(sha.startswith(short) for short in undone)

        later, target = [], None
        for commit in commits:
            if commit.message.startswith("dream: ") and not commit.message.startswith((UNDO_PREFIX, SCRUB_PREFIX)) \
                    and not is_undone(commit.sha):
                target = commit
                break
            later.append(commit)
        if target is None:
            raise NotFound("no dream commit to undo")
        paths = _changed(vault, target.sha)
        for commit in later:
            # an undone dream and its undo cancel out; anything else touching these files blocks
            if commit.message.startswith(UNDO_PREFIX) or is_undone(commit.sha):
                continue
            clash = paths & _changed(vault, commit.sha)
            if clash:
                raise UndoRefused(
                    f"cannot undo {target.sha[:12]} ({target.message}): later commit {commit.sha[:12]} "
                    f"({commit.message}) changed {', '.join(sorted(clash)[:3])}"
                )
        message = f"{UNDO_PREFIX}{target.sha[:12]} ({target.message})"
        with vault.transaction("replace", sorted(paths), message):
            try:
                vault.git.run("revert", "--no-commit", target.sha)
            except git.GitCommandError as e:
                vault.git.run("revert", "--abort")
                raise UndoRefused(f"git revert of {target.sha[:12]} failed: {str(e.stderr).strip()[:200]}") from None
            # the revert staged exactly the dream's files (deletions included); commit the index as is
            vault.git.identity()
            vault.git.run("commit", "-q", "--no-verify", "-m", message)
            commit = vault.git.head()
    return {
        "reverted": target.sha,
        "message": target.message,
        "commit": commit,
        "paths": sorted(paths),
        "watermark": vault.watermark.isoformat() if vault.watermark else None,
    }
