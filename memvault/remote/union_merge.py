"""The git merge driver for the append-only files: daily logs and tombstones.jsonl.

.gitattributes names git's built-in `union` driver for them, so a plain `git pull` never writes
conflict markers there. Line-level union can split a multi-line fact, though: when both sides
append items whose last text lines are equal, git keeps one copy of the shared lines and the
first item loses its tail to the second. memvault therefore defines a driver *named* `union` in the
vault's git config (a configured driver takes precedence over git's built-in of the same name):
it merges whole items, keyed by fact id, and never drops one. Without that config entry (a plain
`git clone`), git's built-in union still applies.

git runs it as `python -m memvault.remote.union_merge %O %A %B %P`; the result replaces %A.
"""

from __future__ import annotations

import sys

from memvault.formats.facts import item_id, split_log
from memvault.formats.layout import LOGS_DIR, TOMBSTONES_FILE

# A driver configured under git's built-in name takes precedence over the built-in, so vaults
# without the config entry (a plain `git clone`) still get git's line union, never markers.
MERGE_DRIVER = "union"
UNION_PATTERNS = (f"{LOGS_DIR}/**", TOMBSTONES_FILE)  # what .gitattributes sends to it

Block = tuple[object, str]  # (key, text): a fact item keyed by its id, any other line by its text


def blocks(text: str, path: str, known: dict[str, Block] | None = None) -> list[Block]:
    """Split a file into blocks: one per fact item (with its continuation lines), one per other line.

    Lines end at "\n" only, as the log parser reads them (facts.split_log): a fact whose text
    holds "\r", U+2028 or another character str.splitlines() breaks at stays one block.
    `known` (item -> its block) lets the versions of one log share the items they have in common:
    each is keyed once, and held once.
    """
    if path.endswith(".jsonl"):
        lines = text.split("\n")
        ends = ["\n"] * (len(lines) - 1) + [""]
        return [(("line", line), line + end) for line, end in zip(lines, ends, strict=True) if line + end]
    found: list[Block] = []
    for chunk in split_log(text):
        if chunk.is_item:
            block = None if known is None else known.get(chunk.text)
            if block is None:
                block = (_item_key(chunk.text.split("\n", 1)[0], chunk.text), chunk.text)
                if known is not None:
                    known[chunk.text] = block
            found.append(block)
        else:
            found.append((("line", chunk.text.removesuffix("\n")), chunk.text))
    return found


def _item_key(first: str, item: str) -> object:
    fact_id = item_id(first)
    return ("fact", fact_id) if fact_id is not None else ("line", item)


def merge(base: str, ours: str, theirs: str, path: str) -> str:
    """Three-way merge at block level: edits on one side win, additions from both are kept."""
    known: dict[str, Block] = {}  # the three versions share nearly all their items
    base_text = {key: text for key, text in blocks(base, path, known)}
    their_blocks = blocks(theirs, path, known)
    their_text = {key: text for key, text in their_blocks}
    merged: list[str] = []
    our_keys = set()
    for key, text in blocks(ours, path, known):
        our_keys.add(key)
        if key in their_text and key in base_text and text == base_text[key] != their_text[key]:
            text = their_text[key]  # edited on their side only (a hand fix of a fact)
        merged.append(text)
    for key, text in their_blocks:
        if key in our_keys:
            continue
        if key in base_text and base_text[key] == text:
            continue  # we deleted it and they did not touch it: a deliberate removal
        our_keys.add(key)
        if merged and not merged[-1].endswith("\n"):
            merged[-1] += "\n"
        merged.append(text)
    return "".join(merged)


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        sys.stderr.write("usage: python -m memvault.remote.union_merge BASE OURS THEIRS PATH\n")
        return 2
    base_path, ours_path, theirs_path, path = argv

    def read(name: str) -> str:
        with open(name, encoding="utf-8", errors="surrogateescape", newline="") as f:
            return f.read()

    try:
        result = merge(read(base_path), read(ours_path), read(theirs_path), path)
        # Into git's temp file as it is, never a new one: when git was killed (a sync given up on),
        # this driver runs on alone, and a file it made would outlive the sync's clean-up.
        with open(ours_path, "r+", encoding="utf-8", errors="surrogateescape", newline="") as f:
            f.truncate()
            f.write(result)
    except FileNotFoundError:
        sys.stderr.write(f"memvault.remote.union_merge: {ours_path} is gone (the merge was given up); "
                         "nothing written\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
