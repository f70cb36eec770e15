"""Remembering: drafts checked into facts and appended as one commit, a key stored once.

What `Vault.add`, `add_many` and `import_source` share: every draft is made a fact and checked
(category, time, credentials in the text and the labels, supersedes links) before anything is
written; a fact whose key is stored already (or given earlier in the batch) is not written again.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from memvault.errors import InvalidInput, InvalidItem
from memvault.formats.drafts import FactDraft, make_fact
from memvault.formats.facts import Fact
from memvault.storage.store import Storage

Draft = FactDraft | Mapping[str, Any] | str

# A key an import made (`memory-dir:3f47…`: a format and 16 hex digits) holds no credential: not scanned.
_MADE_KEY = re.compile(r"[a-z0-9-]+:[0-9a-f]{16}")


def add_facts(storage: Storage, drafts: Iterable[Draft], *, allow_secret: bool) -> list[Fact]:
    """The drafts checked and written as ONE commit (`Vault.add_many`). Everything is validated
    first; one bad item (InvalidItem, from 1) writes nothing.

    A text holding a credential (memvault.base.credentials) is refused, unless `allow_secret`: then
    it is stored marked secret, and no LLM is ever sent it. A `supersedes` naming no live fact,
    one already superseded, or a fact two items supersede, is refused (memvault.recall.succession).
    An item whose `key` is already stored (or given earlier in the batch) is not written: the
    stored fact takes its place in the list returned, and a notice says so.
    """
    facts = checked_facts(storage, drafts, allow_secret=allow_secret)
    if any(fact.supersedes for fact in facts):
        # Checked again under the write lock: writers superseding one fact at once all passed the
        # first check, and the chain forked (one successor shown, the others neither current nor marked).
        with storage.write_lock():
            written, stored = write_facts(storage, _succession_checked(storage, facts), locked=True)
    else:
        written, stored = write_facts(storage, facts)
    if len(written) == len(facts):
        return facts
    found = stored_facts(storage, stored)
    for fact in facts:  # a key given twice in the batch names its first fact
        if fact.id in written and fact.key is not None:
            found.setdefault(fact.key, fact)
    repeated = [fact for fact in facts if fact.id not in written]
    _tell_stored(storage, repeated, found, len(facts))
    return [fact if fact.id in written else found.get(fact.key, fact) for fact in facts]  # type: ignore[arg-type]


def fact_by_key(storage: Storage, key: str) -> Fact | None:
    """The fact stored under `key` (its first copy), forgotten or not; None when no fact has it."""
    return stored_facts(storage, storage.facts.stored_keys([key])).get(key)


def write_facts(storage: Storage, facts: list[Fact], origin: str | None = None, *,
                looked_up: bool = False, locked: bool = False) -> tuple[set[str], dict]:
    """Append checked facts as one commit, less those whose key is stored: (ids written, {key: where
    the stored fact is}). A retry of an add that was committed returns here without the lock
    (unless the caller `looked_up` the keys itself; they are looked up again under the lock)."""
    stored = {} if looked_up else storage.facts.stored_keys(fact.key for fact in facts if fact.key is not None)
    fresh: list[Fact] = []
    taken: set[str | None] = set(stored)
    for fact in facts:
        if fact.key is None or fact.key not in taken:
            fresh.append(fact)
            taken.add(fact.key)
    if fresh:
        stored.update(storage.facts.append_facts(fresh, origin, locked=locked))
    written = {fact.id for fact in fresh if fact.key is None or fact.key not in stored}
    return written, stored


def stored_facts(storage: Storage, stored: Mapping[str, Any]) -> dict[str, Fact]:
    """{key: its fact} for keys the storage found (storage.facts.keys.Keyed), each log read once."""
    by_path: dict[str, dict[str, str]] = {}
    for key, where in stored.items():
        by_path.setdefault(where.path, {})[where.id] = key
    found: dict[str, Fact] = {}
    for rel, ids in by_path.items():
        for fact in storage.facts.read_log(storage.path(rel))[0]:
            if fact.id in ids:
                found.setdefault(ids[fact.id], fact)
    return found


def _tell_stored(storage: Storage, repeated: list[Fact], found: Mapping[str, Fact], total: int) -> None:
    first = repeated[0]
    stored = found.get(first.key)  # type: ignore[arg-type]
    other = ", with another text" if stored is not None and stored.text != first.text else ""
    named = f"key {first.key!r} (fact {stored.id if stored else '?'}{other})"
    if total == 1:
        storage.notify(f"{named} is already stored; nothing was added")
    else:
        storage.notify(f"{len(repeated)} of {total} facts have a key already stored or given earlier in "
                       f"the batch (the first: {named}); nothing was added for them")


def checked_facts(storage: Storage, drafts: Iterable[Draft], *, allow_secret: bool) -> list[Fact]:
    """The drafts as facts ready to append, each checked; InvalidItem (from 1) for the first bad one."""
    from memvault.base.credentials import find_credentials

    now = datetime.now(storage.tz)
    new: list[Fact] = []
    for number, draft in enumerate(drafts, start=1):
        try:
            new.append(make_fact(draft, tz=storage.tz, categories=storage.config.categories, now=now))
        except InvalidInput as e:
            raise InvalidItem(number, str(e)) from None
    if not new:
        raise InvalidInput("nothing to add: no facts given")
    new = _succession_checked(storage, new)
    found = find_credentials([fact.text for fact in new])
    if found and not allow_secret:
        number, findings = next(iter(found.items()))
        raise InvalidItem(number + 1, f"the text holds a credential ({', '.join(map(str, findings))}); nothing "
                                      "was stored: remove it, or pass --allow-secret (allow_secret=True) to "
                                      "store it anyway, never to be sent to an LLM")
    _refuse_credentials_in_labels(new)
    return [replace(fact, secret=True) if i in found else fact for i, fact in enumerate(new)]


def _succession_checked(storage: Storage, facts: list[Fact]) -> list[Fact]:
    """`supersedes` checked (memvault.recall.succession), but for a fact that will not be written
    because its key is stored or given earlier in the batch: a retried add supersedes nothing anew."""
    from memvault.recall.succession import checked

    if not any(fact.supersedes for fact in facts):
        return facts
    taken = set(storage.facts.stored_keys(fact.key for fact in facts if fact.key is not None and fact.supersedes))
    repeats = set()
    for i, fact in enumerate(facts):
        if fact.key is not None:
            if fact.key in taken:
                repeats.add(i)
            taken.add(fact.key)
    return checked(storage, facts, skip=repeats)


def _refuse_credentials_in_labels(facts: list[Fact]) -> None:
    """A fact's source, session and tags are shown, committed and sent to dream's LLM even for a
    secret fact (only its text is withheld): a credential there is refused, --allow-secret or not."""
    from memvault.base.credentials import find_credentials

    first: dict[str, tuple[int, str]] = {}  # each label once (an import's 100k facts share a few sources)
    for number, fact in enumerate(facts, start=1):
        for name, value in (("source", fact.source), ("session", fact.session), ("key", fact.key),
                            *(("tag", tag) for tag in fact.tags)):
            if value and value not in first and not (name == "key" and _MADE_KEY.fullmatch(value)):
                first[value] = (number, name)
    labels = [(number, name, value) for value, (number, name) in first.items()]
    found = find_credentials([value for _n, _name, value in labels], labels=True)
    if found:
        at = min(found)
        number, name, _value = labels[at]
        kinds = ", ".join(f.kind for f in found[at])
        raise InvalidItem(number, f"the {name} holds a credential ({kinds}); nothing was stored: labels are "
                                  "committed and shown as they are, so leave it out")
