"""What a purge removes from every blob and commit message of the history (memvault.purge).

The functions here are pure (bytes in, bytes out) and deterministic in the purged ids and texts
alone, so two clones that rewrite the same old commits get the same new commits: that is what
lets another clone adopt a purged history by rewriting its own copy and merging (memvault.sync).

`main` is the program memvault.purge runs as `python -m memvault.purge_filter` in the vault (a
child process: git-filter-repo works in its current directory and writes progress to stdout). It
reads {"ids": [...], "needles": [...]} as JSON on stdin, so the texts being purged are never on a
command line or in a file.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable

from memvault.citations import strip_forgotten_statements
from memvault.facts import META_OPEN, split_log

PURGED_MARK = "[purged]"
PURGE_SUBJECT = "purge: "       # the purge commit's own message is left as it is
MIN_NEEDLE_CHARS = 12           # shorter texts (or lines of a text) are removed by id only


def needles_of(texts: Iterable[str]) -> list[str]:
    """The verbatim strings whose lines are removed wherever they appear: each text whole, and
    each line of a multi-line text, when at least MIN_NEEDLE_CHARS long (shorter ones are too
    common to delete blindly: "yes", "ok")."""
    found: list[str] = []
    for text in texts:
        for candidate in [text.strip(), *(line.strip() for line in text.split("\n"))]:
            if len(candidate) >= MIN_NEEDLE_CHARS and candidate not in found:
                found.append(candidate)
    return found


def _id_token(fact_id: str) -> str:
    """How a daily log's metadata comment names a fact: '"id":"<id>"'."""
    return json.dumps({"id": fact_id}, separators=(",", ":"))[1:-1]


def scrub_text(text: str, ids: set[str], needles: list[str]) -> str:
    """The text without the purged facts' log items (the item and its indented lines), with
    their tombstone lines' hashes blanked, without page statements citing them, and without
    any line holding a needle. Text mentioning none of them comes back identical."""
    tokens = {fact_id: _id_token(fact_id) for fact_id in ids}
    if not any(fact_id in text for fact_id in ids) and not any(n in text for n in needles):
        return text
    out = []
    for chunk in split_log(text):
        first = chunk.text.split("\n", 1)[0]
        if chunk.is_item and META_OPEN in first and any(t in first for t in tokens.values()):
            continue  # the canonical copy: a daily-log item of a purged fact
        out.append(chunk.text)
    text = "".join(out)
    text = "".join(_blank_hash(line, ids) for line in text.splitlines(keepends=True))
    text = strip_forgotten_statements(text, ids)
    if needles:
        text = "".join(line for line in text.splitlines(keepends=True) if not any(n in line for n in needles))
    return text


def _blank_hash(line: str, ids: set[str]) -> str:
    """A tombstone line of a purged fact keeps its id (the fact stays dead) but not the text's hash."""
    if not line.startswith("{") or '"hash"' not in line:
        return line
    try:
        record = json.loads(line)
    except ValueError:
        return line
    if not isinstance(record, dict) or record.get("id") not in ids or not record.get("hash"):
        return line
    record["hash"] = ""
    end = line[len(line.rstrip("\r\n")):]
    return json.dumps(record, ensure_ascii=False, sort_keys=True) + end


def scrub_blob(data: bytes, ids: set[str], needles: list[str]) -> bytes:
    """scrub_text for a blob; a blob that is not UTF-8 text is left alone unless it holds a needle's
    bytes, whose lines are then dropped byte-wise."""
    raw_ids = [i.encode() for i in ids]
    raw_needles = [n.encode() for n in needles]
    if not any(i in data for i in raw_ids) and not any(n in data for n in raw_needles):
        return data
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return b"".join(line for line in data.splitlines(keepends=True) if not any(n in line for n in raw_needles))
    return scrub_text(text, ids, needles).encode("utf-8")


def scrub_message(message: bytes, ids: set[str], needles: list[str]) -> bytes:
    """A commit message naming a purged fact keeps the id but not its words: in every line that
    names one, what follows the id becomes "[purged]" ("add: <id> [purged]"); a needle anywhere
    else becomes "[purged]" too. Idempotent, and the purge commit's own message is left alone."""
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        return message
    if not any(i in text for i in ids) and not any(n in text for n in needles):
        return message
    lines = []
    for line in text.split("\n"):
        if not line.startswith(PURGE_SUBJECT):
            for needle in needles:
                line = line.replace(needle, PURGED_MARK)
            for fact_id in ids:
                at = line.find(fact_id)
                if at < 0:
                    continue
                end = at + len(fact_id)
                if line[end:].strip() not in ("", PURGED_MARK):
                    line = f"{line[:end]} {PURGED_MARK}"
                break
        lines.append(line)
    return "\n".join(lines).encode("utf-8")


_FILTER_ARGS = ["--force", "--partial", "--quiet"]


def main() -> None:
    """Rewrite every ref of the repository in the current directory (see the module docstring)."""
    import git_filter_repo as fr

    spec = json.loads(sys.stdin.read())
    ids = set(spec["ids"])
    needles = list(spec["needles"])

    def blob(blob, _metadata) -> None:
        blob.data = scrub_blob(blob.data, ids, needles)

    def message(text: bytes) -> bytes:
        return scrub_message(text, ids, needles)

    args = fr.FilteringOptions.parse_args(_FILTER_ARGS)
    fr.RepoFilter(args, blob_callback=blob, message_callback=message).run()


if __name__ == "__main__":
    main()
