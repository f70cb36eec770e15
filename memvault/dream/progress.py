"""A running dream's progress, for `memvault status` and `dream --status` while it runs.

The runner writes a small JSON file under .memvault/ at each step (a batch begins, the model is
asked, an answer is checked, a batch is applied). It is read only while the dream lock is held: a
run that was killed left its file behind, and its lock died with it, so it never shows as running.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from typing import Any

from memvault.formats.layout import DREAM_LOCK, DREAM_RUN
from memvault.storage import lock
from memvault.storage.files import atomic_write
from memvault.storage.store import Storage


class RunState:
    """What this run has done so far, written through on every change."""

    def __init__(self, storage: Storage, *, pending_facts: int, batches: int):
        self.storage = storage
        self.state: dict[str, Any] = {
            "pid": os.getpid(), "started": _now(), "pending_facts": pending_facts, "planned_batches": batches,
            "batches_done": 0, "facts_done": 0, "facts_left": 0, "batch": None, "step": "planning",
            "since": _now(),
        }
        self._write()

    def step(self, step: str, **fields: Any) -> None:
        self.state.update(fields, step=step, since=_now())
        self._write()

    def batch_done(self, *, facts_done: int = 0, facts_left: int = 0) -> None:
        self.state["batches_done"] += 1
        self.state["facts_done"] += facts_done
        self.state["facts_left"] += facts_left
        self.step("between batches", batch=None)

    def close(self) -> None:
        """The run is over: its progress goes (a file left by a killed run is never read)."""
        try:
            (self.storage.root / DREAM_RUN).unlink(missing_ok=True)
        except OSError:
            pass

    def _write(self) -> None:
        try:
            atomic_write(self.storage.root / DREAM_RUN, json.dumps(self.state, ensure_ascii=False) + "\n")
        except OSError:
            pass  # progress is informative only: a full disk must not stop the dream it describes


def running(storage: Storage) -> dict | None:
    """The progress of the dream running now, None when none runs (whatever file a killed run left)."""
    if lock.holder(storage.lock_path(DREAM_LOCK)) is None:
        return None
    try:
        data = json.loads((storage.root / DREAM_RUN).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = None
    if not isinstance(data, dict) or not _alive(data.get("pid")):
        # the lock is held but the first step is not written yet, or this file is a killed run's
        # and the lock is an undo's
        return {"step": "starting"}
    return data


def _alive(pid) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: it exists
    return True


def _now() -> str:
    return datetime.now().astimezone().isoformat(timespec="seconds")
