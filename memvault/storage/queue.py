"""The add queue: facts of writers waiting for the write lock, committed together by its holder.

A writer that finds the write lock taken puts its facts in one request file
(`.memvault/queue/<time>-<pid>-<random>.req`, written aside and renamed into place) and waits.
Whoever holds the lock next claims the requests of live owners, oldest first (renaming each to
`.claimed`), appends them all and makes ONE commit, then deletes the claimed files: a request
that is gone was committed. A request whose owner died (SIGKILL) is discarded, never committed,
and a waiter that gives up withdraws its own request while it is still pending.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from memvault.formats.facts import Fact, format_item
from memvault.storage.owner import Owner

PENDING = ".req"
CLAIMED = ".claimed"
REJECTED = ".rejected"    # a request its committer could not read back; its owner reports failure
DONE = "done"
# A request with more facts than this is named by its id range in a group commit's message.
LISTED_PER_REQUEST = 20


@dataclass(frozen=True)
class QueuedFact:
    path: str     # the daily log it goes to
    id: str
    words: str    # its first words, for the commit message
    item: str     # the log item, exactly as memvault.formats.facts formats it
    key: str | None = None  # its key: the committer adds nothing for a key already stored


@dataclass(frozen=True)
class Request:
    """One writer's facts: committed together, all or none."""

    owner: Owner
    facts: tuple[QueuedFact, ...]
    origin: str | None = None  # what an import read ("chatgpt conversations.json"), for its commit message

    @classmethod
    def of(cls, facts: list[Fact], origin: str | None = None) -> Request:
        # Only a request of a few facts names them in a commit message: a big one says its id range.
        named = len(facts) <= LISTED_PER_REQUEST
        return cls(Owner.me(), tuple(QueuedFact(f.path, f.id, first_words(f) if named else "", format_item(f), f.key)
                                     for f in facts), origin)

    def to_json(self) -> str:
        data: dict[str, object] = {"owner": self.owner.to_json(),
                "facts": [[f.path, f.id, f.words, f.item, *([f.key] if f.key is not None else [])]
                          for f in self.facts]}
        if self.origin is not None:
            data["origin"] = self.origin
        return json.dumps(data, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Request:
        data = json.loads(text)
        owner = Owner.from_json(data["owner"])
        if owner is None:
            raise ValueError("request without an owner")
        facts = tuple(_queued(fact) for fact in data["facts"])
        origin = data.get("origin")
        return cls(owner, facts, str(origin) if origin is not None else None)

    @property
    def message(self) -> str:
        """The commit message of this request alone."""
        if self.origin is not None:
            span = f"{self.facts[0].id}..{self.facts[-1].id}" if len(self.facts) > 1 else self.facts[0].id
            return f"import: {len(self.facts)} fact{'s' if len(self.facts) != 1 else ''} from {self.origin} ({span})"
        if len(self.facts) == 1:
            fact = self.facts[0]
            return f"add: {fact.id} {fact.words}".rstrip()
        return f"add: {len(self.facts)} facts ({self.facts[0].id}..{self.facts[-1].id})"


def _queued(fields: list) -> QueuedFact:
    """A fact of a request file: [path, id, words, item] and its key, if it has one."""
    path, fact_id, words, item = (str(value) for value in fields[:4])
    return QueuedFact(path, fact_id, words, item, key=str(fields[4]) if len(fields) > 4 else None)


def first_words(fact: Fact) -> str:
    """How a commit message names a fact; never the text of one holding a credential."""
    if fact.secret:
        return "(text withheld: it holds a credential)"
    words = " ".join(fact.text.split())
    return words[:60] + ("…" if len(words) > 60 else "")


def commit_message(requests: list[Request]) -> str:
    """One request keeps its own message; a group names each fact (or each big batch's id range)."""
    if len(requests) == 1:
        return requests[0].message
    facts = [f for r in requests for f in r.facts]
    lines: list[str] = []
    for request in requests:
        if len(request.facts) <= LISTED_PER_REQUEST and request.origin is None:
            lines.extend(f"{f.id} {f.words}".rstrip() for f in request.facts)
        else:
            lines.append(request.message.removeprefix("add: "))
    subject = f"add: {len(facts)} facts from {len(requests)} writers ({facts[0].id}..{facts[-1].id})"
    return subject + "\n\n" + "\n".join(lines)


class Queue:
    """The request files under `folder`. Claiming, finishing and giving back need the write lock."""

    def __init__(self, folder: Path):
        self.folder = folder

    def submit(self, request: Request) -> str:
        """Queue a request; returns its name (the file name without suffix)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        name = f"{time.time_ns():020d}-{os.getpid()}-{secrets.token_hex(4)}"
        tmp = self.folder / f".{name}.tmp"
        try:
            tmp.write_text(request.to_json(), encoding="utf-8")
            # No fsync: after a crash the owner is gone, and a dead owner's request is discarded anyway.
            os.replace(tmp, self.folder / (name + PENDING))
        except BaseException:
            with suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise
        return name

    def state(self, name: str) -> str:
        """PENDING, CLAIMED, REJECTED, or DONE (committed; or withdrawn, which only its owner does)."""
        for suffix in (PENDING, CLAIMED, REJECTED):
            if (self.folder / (name + suffix)).exists():
                return suffix
        return DONE

    def withdraw(self, name: str) -> bool:
        """Take back a request nobody has claimed; False when it is already claimed or gone."""
        with suppress(FileNotFoundError):
            (self.folder / (name + REJECTED)).unlink()
        try:
            (self.folder / (name + PENDING)).unlink()
        except FileNotFoundError:
            return False
        return True

    def claim(self) -> list[tuple[str, Request]]:
        """Claim every pending request of a live owner, oldest first; dead owners' are discarded."""
        self._remove_dead_temp_files()
        claimed = []
        for name in self._names(PENDING):
            target = self.folder / (name + CLAIMED)
            try:
                os.rename(self.folder / (name + PENDING), target)
            except FileNotFoundError:
                continue  # withdrawn meanwhile
            try:
                request = Request.from_json(target.read_text(encoding="utf-8"))
            except (OSError, ValueError, KeyError, TypeError):
                with suppress(OSError):
                    os.rename(target, self.folder / (name + REJECTED))
                continue
            if not request.owner.alive():
                self.discard(name)  # its writer was killed before hearing back: never commit it
                continue
            claimed.append((name, request))
        return claimed

    def claimed(self) -> list[str]:
        """Requests claimed by a committer; with the write lock held these are leftovers of a killed one."""
        return self._names(CLAIMED)

    def finish(self, name: str) -> None:
        """A claimed request is committed: gone tells its owner so."""
        with suppress(FileNotFoundError):
            (self.folder / (name + CLAIMED)).unlink()

    def discard(self, name: str) -> None:
        with suppress(FileNotFoundError):
            (self.folder / (name + CLAIMED)).unlink()

    def give_back(self, name: str) -> None:
        """Return a claimed request to the queue (its commit did not land), or drop it if its owner died."""
        path = self.folder / (name + CLAIMED)
        try:
            owner = Request.from_json(path.read_text(encoding="utf-8")).owner
        except FileNotFoundError:
            return
        except (OSError, ValueError, KeyError, TypeError):
            owner = None
        if owner is not None and owner.alive():
            os.rename(path, self.folder / (name + PENDING))
        else:
            self.discard(name)

    def _remove_dead_temp_files(self) -> None:
        """Requests whose writer was killed while writing them (`.<time>-<pid>-<random>.tmp`)."""
        try:
            with os.scandir(self.folder) as entries:
                temps = [e.name for e in entries if e.name.startswith(".") and e.name.endswith(".tmp")]
        except FileNotFoundError:
            return
        for name in temps:
            pid = name.split("-")[1] if name.count("-") >= 2 else ""
            if pid.isdigit() and not Owner(int(pid)).alive():
                with suppress(FileNotFoundError):
                    (self.folder / name).unlink()

    def has_claims(self) -> bool:
        return bool(self.claimed())

    def _names(self, suffix: str) -> list[str]:
        try:
            with os.scandir(self.folder) as entries:
                return sorted(e.name[: -len(suffix)] for e in entries if e.name.endswith(suffix))
        except FileNotFoundError:
            return []
