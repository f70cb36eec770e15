"""The environment memvault's git commands run in: the vault's repository pinned, a parent
repository's variables dropped, the user's hooks and signing switched off for each call.

memvault never touches an enclosing repository (GIT_DIR and GIT_WORK_TREE are the vault's).
"""

from __future__ import annotations

import os
from pathlib import Path

_LEAKY_VARS = (
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_COMMON_DIR",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
)
# The user's git settings memvault's own git calls must not follow (hooks, signing, encodings),
# overridden for each call, never written: docs/sync.md, "Your git config", says why each.
OWN_SETTINGS = (
    ("core.hooksPath", os.devnull),
    ("commit.gpgSign", "false"),
    ("push.gpgSign", "false"),
    ("i18n.commitEncoding", "UTF-8"),
    ("i18n.logOutputEncoding", "UTF-8"),
)


def vault_env(root: Path) -> dict[str, str]:
    """The environment for a git command in the vault at `root`."""
    # Variables a parent repository's hook may have exported must not reach the vault's git.
    env = with_own_settings({k: v for k, v in os.environ.items() if k not in _LEAKY_VARS})
    env.update(
        GIT_DIR=str(root / ".git"),
        GIT_WORK_TREE=str(root),
        GIT_CEILING_DIRECTORIES=str(root.parent),
        GIT_TERMINAL_PROMPT="0",
        # A read never writes: without this `git status` refreshes .git/index as a side effect,
        # and on a full disk fails writing .git/index.lock although it only reads.
        GIT_OPTIONAL_LOCKS="0",
        # Every path memvault names is a file's name, never a pattern: a remote's file named `*`
        # must not make `git clean -- *` delete every untracked file.
        GIT_LITERAL_PATHSPECS="1",
    )
    if not (os.environ.get("GIT_SSH_COMMAND") or os.environ.get("GIT_SSH")):
        # memvault runs unattended (cron, agents): an ssh passphrase prompt would hang it.
        env["GIT_SSH_COMMAND"] = "ssh -o BatchMode=yes"
    return env


def outside_env() -> dict[str, str]:
    """The environment for a git command that has no vault yet (init, clone): nothing inherited
    from a parent repository's hook environment."""
    return with_own_settings({k: v for k, v in os.environ.items()
                              if k not in _LEAKY_VARS and k not in ("GIT_DIR", "GIT_WORK_TREE")})


def with_own_settings(env: dict[str, str]) -> dict[str, str]:
    """`env` with OWN_SETTINGS added as git's command-line settings (GIT_CONFIG_COUNT, git 2.31;
    inherited by every git a call starts, purge's filter-repo included), after any the user set."""
    try:
        first = max(int(env.get("GIT_CONFIG_COUNT") or 0), 0)
    except ValueError:
        first = 0  # git itself refuses a malformed count: the user's entries cannot be read
    for i, (key, value) in enumerate(OWN_SETTINGS, start=first):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    env["GIT_CONFIG_COUNT"] = str(first + len(OWN_SETTINGS))
    return env
