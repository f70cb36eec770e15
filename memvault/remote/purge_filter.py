"""What a purge removes from every blob and commit message of the history (memvault.remote.purge).

The functions here are pure (bytes in, bytes out) and deterministic in the purged ids and texts
alone, so two clones that rewrite the same old commits get the same new commits: that is what
lets another clone adopt a purged history by rewriting its own copy and merging (memvault.remote.sync).

`main` is the program memvault.remote.purge runs as `python -m memvault.remote.purge_filter` in the vault (a
child process: git-filter-repo works in its current directory and writes progress to stdout). It
reads {"ids": [...], "needles": [...]} as JSON on stdin, so the texts being purged are never on a
command line or in a file.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Sequence

from memvault.formats.citations import strip_forgotten_statements
from memvault.formats.dreamlog import free_text_start
from memvault.formats.facts import META_CLOSE, META_OPEN, comment_json, item_id, split_log
from memvault.formats.layout import CONFIG_FILE, DREAM_LOG, GITATTRIBUTES, GITIGNORE, LOGS_DIR, TOMBSTONES_FILE

PURGED_MARK = "[purged]"
_ID = r"[0-9a-hjkmnp-tv-z]{16}"
_CITED = re.compile(rf"\[\^({_ID})\]")
_DAY_HEADER = re.compile(r"# \d{4}-\d{2}-\d{2}\r?\n?")
_NAMED = re.compile(rf"^(?:[a-z]+: )?({_ID})\b|\(({_ID})\.\.({_ID})\)")
PURGE_SUBJECT = "purge: "       # the purge commit's own message is left as it is
MIN_NEEDLE_CHARS = 12           # shorter texts (or lines of a text) are removed by id only


def needles_of(texts: Iterable[str]) -> list[str]:
    """The verbatim strings that become PURGED_MARK wherever the vault's text holds them: each
    text whole, and each line of a multi-line text, when at least MIN_NEEDLE_CHARS long (shorter
    ones are too common to replace blindly: "yes", "ok")."""
    found: list[str] = []
    for text in texts:
        for candidate in [text.strip(), *(line.strip() for line in text.split("\n"))]:
            if len(candidate) >= MIN_NEEDLE_CHARS and candidate not in found:
                found.append(candidate)
    return sorted(found, key=len, reverse=True)  # a text goes before its own lines


def _forms(needles: list[str]) -> list[str]:
    """The needles as they may be stored: as they are, and escaped inside a JSON string (a quote
    or a backslash in a forget reason, non-ASCII text written with \\u escapes)."""
    forms = []
    for needle in needles:
        for form in (needle, json.dumps(needle)[1:-1], json.dumps(needle, ensure_ascii=False)[1:-1]):
            if form not in forms:
                forms.append(form)
    return forms


def scrub_text(text: str, ids: set[str], needles: list[str], path: str) -> str:
    """A file of the vault at `path` without the purged facts: in a daily log their items, in
    tombstones.jsonl their hashes, in a page the statements citing them; and the purged texts
    (`needles`) wherever else the vault's markdown or tombstones hold them, as PURGED_MARK.

    Only words change: a log item's metadata comment, a tombstone's JSON, log.md's records and
    configuration files are never edited, so a purged text shaped like a piece of the vault's
    structure (one a hostile clone chose) cannot take anything else with it. Text mentioning
    none of the ids or needles comes back identical."""
    if not any(fact_id in text for fact_id in ids) and not any(form in text for form in _forms(needles)):
        return text
    if path == TOMBSTONES_FILE:
        return "".join(_scrub_tombstone(line, ids, needles) for line in text.splitlines(keepends=True))
    if path.rsplit("/", 1)[-1] in (CONFIG_FILE, GITATTRIBUTES, GITIGNORE):
        return text  # configuration, never edited
    if not path.endswith(".md"):
        return _replace(text, needles)  # a text file of the user's
    if path.startswith(LOGS_DIR + "/"):
        return _scrub_log(text, ids, needles)
    if path == DREAM_LOG:
        return "".join(line[:free_text_start(line)] + _replace(line[free_text_start(line):], needles)
                       for line in text.splitlines(keepends=True))
    lines = strip_forgotten_statements(text, ids).splitlines(keepends=True)
    front = _frontmatter_lines(lines)
    return "".join(_scrub_title(line, needles) if n < front else _scrub_line(line, needles)
                   for n, line in enumerate(lines))


def _frontmatter_lines(lines: list[str]) -> int:
    """How many lines a page's YAML front matter takes (0 without one)."""
    if not lines or lines[0].rstrip("\r\n") != "---":
        return 0
    for n, line in enumerate(lines[1:], start=2):
        if line.rstrip("\r\n") == "---":
            return n
    return 0


def _scrub_title(line: str, needles: list[str]) -> str:
    """In front matter only a page's title is words (its sources, dates and zone are structure);
    a title that becomes "[purged]" is quoted, or YAML would read a list."""
    if not line.startswith("title:"):
        return line
    value = line[len("title:"):].strip()
    new = _replace(value, needles)
    if new == value:
        return line
    return f"title: {json.dumps(new, ensure_ascii=False)}{line[len(line.rstrip(chr(13) + chr(10))):]}"


def _scrub_log(text: str, ids: set[str], needles: list[str]) -> str:
    """A daily log without the purged facts' items (the item line and its indented lines); in the
    other items only the words of the text change, never their metadata comment, and the day's
    header is kept, so no other fact is lost, whatever the purged text was."""
    out = []
    for chunk in split_log(text):
        first, _newline, rest = chunk.text.partition("\n")
        meta = first.rfind(META_OPEN) if chunk.is_item else -1
        if meta >= 0 and item_id(first) in ids:
            continue  # the canonical copy: a daily-log item of a purged fact
        if meta < 0:
            # the log's "# YYYY-MM-DD" header is structure: a reader that lost it takes no line for a fact
            out.append(chunk.text if _DAY_HEADER.fullmatch(chunk.text) else _replace(chunk.text, needles))
            continue
        out.append(_replace(first[:meta], needles) + _scrub_labels(first[meta:], needles) + _newline
                   + _replace(rest, needles))
    return "".join(out)


def _scrub_labels(comment: str, needles: list[str]) -> str:
    """An item's metadata comment: the purged text in its source, session or tags becomes
    PURGED_MARK; its id, time and category are never edited, and a comment holding no needle
    comes back byte for byte."""
    if not any(form in comment for form in _forms(needles)):
        return comment
    body = comment.rstrip("\r")
    if not (body.startswith(META_OPEN) and body.endswith(META_CLOSE)):
        return comment
    try:
        meta = json.loads(body[len(META_OPEN):-len(META_CLOSE)])
    except ValueError:
        return comment
    if not isinstance(meta, dict):
        return comment
    changed = dict(meta)
    for key in ("source", "session"):
        if isinstance(changed.get(key), str):
            changed[key] = _replace(changed[key], needles)
    if isinstance(changed.get("tags"), list):
        changed["tags"] = [_replace(t, needles) if isinstance(t, str) else t for t in changed["tags"]]
    if changed == meta:
        return comment
    encoded = comment_json(json.dumps(changed, ensure_ascii=False, separators=(",", ":")))
    return f"{META_OPEN}{encoded}{META_CLOSE}{comment[len(body):]}"


def _scrub_line(line: str, needles: list[str]) -> str:
    """A line of a page, MEMORY.md or another markdown file: gone when it is a copy of a purged
    text (a list item or a line holding just it), else the text becomes PURGED_MARK within it."""
    if not any(n in line for n in needles):
        return line
    bare = line.strip().removeprefix("- ").removeprefix("* ").strip()
    if bare in needles:
        return ""
    return _replace(line, needles, _citations(line))


def _replace(text: str, needles: list[str], kept: Sequence[tuple[int, int]] = ()) -> str:
    """Every occurrence of any needle becomes PURGED_MARK, all in one pass (overlapping ones merge
    into one mark, so the result does not depend on the needles' order), but for one inside a
    `kept` span: where the vault's structure names a fact by its id (a citation, a commit
    subject), so a purged text equal to (a piece of) an id cannot unhook what names it."""
    spans = sorted((at, at + len(needle)) for needle in needles if needle
                   for at in _occurrences(text, needle)
                   if not any(start <= at and at + len(needle) <= end for start, end in kept))
    if not spans:
        return text
    merged = [list(spans[0])]
    for start, end in spans[1:]:
        if start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out, at = [], 0
    for start, end in merged:
        out += [text[at:start], PURGED_MARK]
        at = end
    out.append(text[at:])
    return "".join(out)


def _citations(text: str) -> list[tuple[int, int]]:
    """The ids a page cites (`[^id]`): kept."""
    return [m.span(1) for m in _CITED.finditer(text)]


def _named(line: str) -> list[tuple[int, int]]:
    """The ids a commit message names where memvault writes them: after the subject's verb
    (`add: <id>`), at the start of a group commit's line, in an id range (`(<id>..<id>)`)."""
    return [span for m in _NAMED.finditer(line) for span in (m.span(1), m.span(2), m.span(3)) if span != (-1, -1)]


def _occurrences(text: str, needle: str):
    at = text.find(needle)
    while at >= 0:
        yield at
        at = text.find(needle, at + 1)


def _scrub_tombstone(line: str, ids: set[str], needles: list[str]) -> str:
    """A tombstone line: a purged fact's keeps its id (the fact stays dead) but not the text's
    hash, and a purged text in a reason becomes PURGED_MARK; the JSON stays valid."""
    if not line.startswith("{"):
        return line
    try:
        record = json.loads(line)
    except ValueError:
        return line
    if not isinstance(record, dict):
        return line
    changed = dict(record)
    if changed.get("id") in ids and changed.get("hash"):
        changed["hash"] = ""
    if isinstance(changed.get("reason"), str):  # the one free text; id, at, hash are structure
        changed["reason"] = _replace(changed["reason"], needles)
    if changed == record:
        return line
    end = line[len(line.rstrip("\r\n")):]
    return json.dumps(changed, ensure_ascii=False, sort_keys=True) + end


def scrub_blob(data: bytes, ids: set[str], needles: list[str], path: str) -> bytes:
    """scrub_text for the blob of a file at `path`; in a file that is not UTF-8 text (and not
    configuration), the needles' bytes become PURGED_MARK."""
    raw_ids = [i.encode() for i in ids]
    raw_needles = [n.encode() for n in needles]
    if not any(i in data for i in raw_ids) and not any(form.encode() in data for form in _forms(needles)):
        return data
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        if path.rsplit("/", 1)[-1] in (CONFIG_FILE, GITATTRIBUTES, GITIGNORE):
            return data
        for needle in raw_needles:
            data = data.replace(needle, PURGED_MARK.encode())
        return data
    return scrub_text(text, ids, needles, path).encode("utf-8")


def scrub_message(message: bytes, ids: set[str], needles: list[str]) -> bytes:
    """A commit message naming a purged fact keeps the id but not its words: in every line that
    names one, what follows the id becomes "[purged]" ("add: <id> [purged]"); a needle anywhere
    else becomes "[purged]" too, also as a message writes another fact's first words (spaces run
    together, cut at 60 characters with "…": the end of such a line that begins a needle goes).
    Idempotent, and the purge commit's own message is left alone."""
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        return message
    words = sorted({*needles, *(" ".join(n.split()) for n in needles)} - {""}, key=len, reverse=True)
    if not any(i in text for i in ids) and not any(w in text for w in words) and "…" not in text:
        return message
    lines = []
    for line in text.split("\n"):
        if not line.startswith(PURGE_SUBJECT):
            line = _cut_short_copy(line, words)
            line = _replace(line, words, _named(line))
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


def _cut_short_copy(line: str, words: list[str]) -> str:
    """A line ending in "…" (a fact's first words, cut) whose end is the start of a needle, at
    least MIN_NEEDLE_CHARS of it: that end becomes PURGED_MARK."""
    if not line.endswith("…"):
        return line
    body = line[:-1]
    cut = len(body)
    for word in words:
        at = body.find(word[:MIN_NEEDLE_CHARS])
        while 0 <= at < cut:
            if word.startswith(body[at:]):
                cut = at
                break
            at = body.find(word[:MIN_NEEDLE_CHARS], at + 1)
    if cut == len(body):
        return line
    return body[:cut] + _replace(body[cut:], [body[cut:]]) + "…"


_FILTER_ARGS = ["--force", "--partial", "--quiet"]


def main() -> None:
    """Rewrite every ref of the repository in the current directory (see the module docstring)."""
    import git_filter_repo as fr

    spec = json.loads(sys.stdin.read())
    ids = set(spec["ids"])
    needles = list(spec["needles"])

    scrubbed: dict[tuple[bytes, bytes], bytes] = {}  # (path, blob) -> new blob: a blob recurs

    def file_info(filename: bytes, mode: bytes, blob_id: bytes, value):
        if mode not in (b"100644", b"100755"):
            return filename, mode, blob_id  # a symlink or submodule holds no text of a fact
        key = (filename, blob_id)
        if key not in scrubbed:
            data = value.get_contents_by_identifier(blob_id)
            new = scrub_blob(data, ids, needles, filename.decode("utf-8", "replace"))
            scrubbed[key] = blob_id if new == data else value.insert_file_with_contents(new)
        return filename, mode, scrubbed[key]

    def message(text: bytes) -> bytes:
        return scrub_message(text, ids, needles)

    args = fr.FilteringOptions.parse_args(_FILTER_ARGS)
    fr.RepoFilter(args, file_info_callback=file_info, message_callback=message).run()


if __name__ == "__main__":
    main()
