"""Credentials in fact text, found with detect-secrets before anything is written.

A fact holding a cloud key, a token, a private key or a password assignment would land in the
daily log, a commit, the index, the remote and (through dream) an LLM prompt and a wiki page, so
`add` refuses it unless the caller says to store it anyway. detect-secrets does the finding: its
plugins (AWS, GitHub, Slack, Stripe, private keys, JWTs, ...) and its keyword detector, which
reads the text as YAML so that an unquoted `api_key=...` or `password: ...` counts too.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

# detect-secrets is slow to import and to run: only texts that could hold a credential reach it.
# The gate decides what to scan, never what counts (docs/faults.md, "The credential pre-filter").
_WORTH_SCANNING_WORDS = re.compile(
    r"(?i)\b(?:api|key|token|auth|bearer|credential|private)"
    r"|(?:api|auth|service|account|db|database|priv|private|client)_?key|(?:db|database|key)_?pass"
    r"|passw|pwd|secret|contrase[ñn]a"
)
_WORTH_SCANNING_SHAPES = re.compile(r"(?i)-----BEGIN|[A-Za-z0-9+/_\-]{20,}|://[^\s/?#@]+:[^\s/?#@]+@")
# Every word the pattern above starts from, as plain lowercase pieces: looked for in a case-folded
# copy first, a third of the cost of the case-insensitive pattern tried at every position.
_WORD_PIECES = ("api", "key", "token", "auth", "bearer", "credential", "priv", "pass", "pwd", "secret", "contrase")
# A wiki page's path (`[title](wiki/people/alice-smith.md)`) looks like a provider key's run of
# 20 characters to the gate; it is no credential, so it is not looked at.
_PAGE_PATH = re.compile(r"wiki/[^\s()\[\]]*\.md")

# A label (source, session, tag) is a short name checked on every add: a keyword given a value, a
# run of 20 token characters without a dash (a UUID session is not one), a URL's password, a key.
_LABEL_WORTH_SCANNING = re.compile(
    r"(?i)(?:api|key|token|auth|bearer|credential|private|pass|pwd|secret|contrase[ñn]a)[^\s:=]*\s*[:=]"
    r"|[A-Za-z0-9+/_]{20,}|-----BEGIN|://[^\s/?#@]+:[^\s/?#@]+@"
)


@dataclass(frozen=True)
class Finding:
    kind: str   # detect-secrets' name for it, e.g. "AWS Access Key"
    line: int   # line of the fact text it is on, from 1

    def __str__(self) -> str:
        return f"{self.kind} (line {self.line})"


def find_credentials(texts: Sequence[str], *, labels: bool = False) -> dict[int, list[Finding]]:
    """{index in `texts`: what was found} for the texts that hold a credential (`labels`: the
    texts are sources, sessions and tags). A text given many times is scanned once."""
    gate = _LABEL_WORTH_SCANNING.search if labels else _worth_scanning
    first: dict[str, int] = {}
    for i, text in enumerate(texts):
        if text not in first and gate(text):
            first[text] = i
    found = _scan(texts, list(first.values()))
    return {i: found[first[text]] for i, text in enumerate(texts) if first.get(text) in found}


def _worth_scanning(text: str) -> bool:
    folded = text.casefold()  # as (?i) reads it: the long s of "paſsword" is an s
    if any(piece in folded for piece in _WORD_PIECES) and _WORTH_SCANNING_WORDS.search(text):
        return True
    return _WORTH_SCANNING_SHAPES.search(_PAGE_PATH.sub(" ", text) if "wiki/" in text else text) is not None


def kept_from_prompts(facts: Sequence) -> set[str]:
    """Ids of the facts no prompt may hold: those stored with a credential on purpose (`secret`),
    and those holding one unmarked (`unmarked_credentials`)."""
    return {fact.id for fact in facts if fact.secret} | set(unmarked_credentials(facts))


def unmarked_credentials(facts: Sequence) -> dict[str, list[str]]:
    """{id: what was found where} for the facts not marked `secret` that hold a credential, in
    their text or a label (a prompt shows the source and tags, a bundle the session too): what
    reached a log without `add` and its check — a hand edit, a plain git commit, another tool."""
    unmarked = [fact for fact in facts if not fact.secret]
    found: dict[str, list[str]] = {}
    for i, kinds in find_credentials([fact.text for fact in unmarked]).items():
        found.setdefault(unmarked[i].id, []).extend(map(str, kinds))
    labels = [(fact, name, value) for fact in unmarked
              for name, value in (("source", fact.source), ("session", fact.session),
                                  *(("tag", tag) for tag in fact.tags)) if value]
    for i, kinds in find_credentials([value for _f, _n, value in labels], labels=True).items():
        fact, name, _value = labels[i]
        found.setdefault(fact.id, []).extend(f"{name}: {kind.kind}" for kind in kinds)
    return found


def _scan(texts: Sequence[str], candidates: list[int]) -> dict[int, list[Finding]]:
    if not candidates:
        return {}
    from detect_secrets import SecretsCollection
    from detect_secrets.settings import default_settings

    starts: list[tuple[int, int]] = []  # (first line in the scanned file, text index)
    fd, name = tempfile.mkstemp(prefix="memvault-scan-", suffix=".yaml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            line = 1
            for i in candidates:
                starts.append((line, i))
                body = texts[i].replace("\r", "\n")
                handle.write(body + "\n")
                line += body.count("\n") + 1
        found = SecretsCollection()
        with default_settings():
            found.scan_file(name)
        results: dict[int, list[Finding]] = {}
        for _file, secret in found:
            first, index = max((s for s in starts if s[0] <= secret.line_number), key=lambda s: s[0])
            finding = Finding(secret.type, secret.line_number - first + 1)
            if finding not in results.setdefault(index, []):
                results[index].append(finding)
        return {i: sorted(f, key=lambda f: (f.line, f.kind)) for i, f in sorted(results.items())}
    finally:
        os.unlink(name)
