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
    r"|passw|pass(?:code|phrase)|pwd|secret|contrase[ñn]a"
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


# A password stated in words, which detect-secrets' keyword plugin (assignments: `password: x`,
# `password = "x"`) passes over: "db password is Xk9#mQ2vLp7!", "the wifi passcode was 'hunter2'".
# The keyword, at most a few words naming what it opens, a verb, then the value.
_STATED = re.compile(
    r"(?i)\b(?:pass(?:word|code|phrase)|passwd|pwd)s?"
    r"(?:\s+(?:for|of|to|on)\s+[^\s.,;:!?]+(?:\s+[^\s.,;:!?]+){0,3}?)?"
    r"\s+(?:is\s+now|is\s+still|is\s+set\s+to|changed\s+to|became|is|was|=)\s*:?\s+"
)
_QUOTED = re.compile(r"[\"'`“‘]([^\"'`”’\n]{4,64})[\"'`”’]")
_BARE = re.compile(r"(\S+?)([.,;:!?)\]}]*)(?=\s|$)")
# What may follow a value that ends its clause without punctuation ("... is hunter2 and the pin
# is ..."); any other word makes it a description ("is 12 characters long", "is 8 digits").
_AFTER_VALUE = frozenset({"and", "but", "or", "so", "for", "if", "because", "now", "btw", "until", "since", "from",
                          "on", "at", "in", "-", "–", "—"})
STATED_PASSWORD = "Stated Password"


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
    for text, i in first.items() if not labels else ():
        stated = [Finding(STATED_PASSWORD, line) for line in stated_passwords(text)]
        if stated:
            found[i] = sorted(set(found.get(i, [])) | set(stated), key=lambda f: (f.line, f.kind))
    return {i: found[first[text]] for i, text in enumerate(texts) if first.get(text) in found}


def stated_passwords(text: str) -> list[int]:
    """The lines (from 1) where a password is stated in words with a value that looks like one:
    quoted, or holding a digit, a symbol or a capital inside a word ("hunter2", "Xk9#mQ2vLp7!",
    "CorrectHorse"). A plain word ("is long", "is the same as before") is a description."""
    lines = []
    for stated in _STATED.finditer(text):
        rest = text[stated.end():]
        if _QUOTED.match(rest) or _bare_value(rest):
            lines.append(text.count("\n", 0, stated.start()) + 1)
    return sorted(set(lines))


def _bare_value(rest: str) -> bool:
    found = _BARE.match(rest)
    if found is None:
        return False
    value, punctuation = found.groups()
    if not 4 <= len(value) <= 64:
        return False
    following = rest[found.end():].split(maxsplit=1)
    if following and not punctuation and following[0].casefold() not in _AFTER_VALUE:
        return False
    return (any(c.isdigit() for c in value) or any(not c.isalnum() and c not in "-'’" for c in value)
            or re.search(r"[a-z][A-Z]", value) is not None)


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
