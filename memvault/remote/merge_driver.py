"""The item-aware union merge driver (memvault.remote.union_merge) in the vault's git config and
.gitattributes: installed on every open, checked and repaired by doctor."""

from __future__ import annotations

import shlex
import shutil
import sys

from memvault.formats.layout import GITATTRIBUTES
from memvault.remote.origin import config_get
from memvault.remote.union_merge import MERGE_DRIVER, UNION_PATTERNS
from memvault.storage.gitstore import GitStore
from memvault.storage.store import Storage

MERGE_DRIVER_NAME = "memvault: union of daily-log items and tombstone lines"


def driver_command() -> str:
    return f"{shlex.quote(sys.executable)} -m memvault.remote.union_merge %O %A %B %P"


# The driver's module before it moved into memvault/remote/: a vault set up then still names it.
_FORMER_DRIVER = " -m memvault.union_merge "


def ensure_merge_driver(storage: Storage) -> bool:
    """Install the union driver in the vault's git config if missing or naming its former module;
    True if it was installed.

    Runs on every open (a fresh clone has no such entry), so the usual path is one small read.
    """
    try:
        config = (storage.git.git_dir / "config").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    if f'[merge "{MERGE_DRIVER}"]' in config and _FORMER_DRIVER not in config:
        return False
    try:
        install_merge_driver(storage.git)
    except Exception:  # noqa: BLE001 - a read-only vault or a concurrent writer; doctor reports it
        return False
    return True


def install_merge_driver(store: GitStore) -> None:
    store.run("config", f"merge.{MERGE_DRIVER}.name", MERGE_DRIVER_NAME)
    store.run("config", f"merge.{MERGE_DRIVER}.driver", driver_command())


def merge_driver_problems(storage: Storage) -> list[str]:
    """What keeps the append-only files from merging item by item (empty when all is well)."""
    problems = []
    attributes = storage.path(GITATTRIBUTES)
    lines = attributes.read_text(encoding="utf-8").splitlines() if attributes.exists() else []
    for pattern in UNION_PATTERNS:
        if f"{pattern} merge={MERGE_DRIVER}" not in [" ".join(line.split()) for line in lines]:
            problems.append(f".gitattributes lacks `{pattern} merge={MERGE_DRIVER}`")
    driver = config_get(storage, f"merge.{MERGE_DRIVER}.driver")
    if not driver:
        problems.append(f"git config has no merge.{MERGE_DRIVER}.driver (item-aware union for daily logs)")
    else:
        try:
            interpreter = shlex.split(driver)[0]
        except (ValueError, IndexError):
            interpreter = ""
        if "memvault.remote.union_merge" not in driver or not shutil.which(interpreter):
            problems.append(f"merge.{MERGE_DRIVER}.driver points to a missing program: {driver}")
    return problems


def repair_merge_driver(storage: Storage) -> list[str]:
    """Restore the driver config and, if needed, the .gitattributes lines (one commit)."""
    done = []
    problems = merge_driver_problems(storage)
    if any("git config" in p or "missing program" in p for p in problems):
        install_merge_driver(storage.git)
        done.append(f"installed the union merge driver in the vault's git config ({driver_command()})")
    missing = [p for p in UNION_PATTERNS if any(f"`{p} merge=" in q for q in problems)]
    if missing:
        path = storage.path(GITATTRIBUTES)
        with storage.write_lock():
            text = path.read_text(encoding="utf-8") if path.exists() else ""
            if text and not text.endswith("\n"):
                text += "\n"
            text += "".join(f"{p} merge={MERGE_DRIVER}\n" for p in missing)
            path.write_text(text, encoding="utf-8")
            storage.git.commit([GITATTRIBUTES], "doctor: union merge for daily logs and tombstones")
        done.append(f"added {', '.join(missing)} to .gitattributes (committed)")
    return done
