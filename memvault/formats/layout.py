"""The vault layout: every file and folder name memvault reads or writes, in one place.

A vault is a directory under git (see the README's "Vault layout"). Names here are vault-relative
and use "/", as git and the journal record them. Also here: which paths are the vault's own files
(what memvault commits). Names only: storage/paths.py is where a name meets the disk.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import date

CONFIG_FILE = "memvault.toml"
MEMORY_FILE = "MEMORY.md"          # bounded summary for prompts, written by dream
INDEX_FILE = "index.md"            # table of contents of the wiki, written by dream
DREAM_LOG = "log.md"               # dream's journal: runs, failures, skips, watermark=
SCHEMA_FILE = "schema.md"
TOMBSTONES_FILE = "tombstones.jsonl"
GITATTRIBUTES = ".gitattributes"
GITIGNORE = ".gitignore"
LOGS_DIR = "logs"                  # logs/YYYY/YYYY-MM-DD.md: the daily fact logs
WIKI_DIR = "wiki"                  # wiki/<zone>/<slug>.md: consolidated pages

# Local only (ignored by git): derived data and coordination between processes.
STATE_DIR = ".memvault"
# The search index's part of it, by names relative to STATE_DIR (or to the copy in the user's
# cache that stands for it when the vault cannot be written: memvault/index/location.py).
STATE_LOCKS = "locks"
STATE_INDEX = "index"
STATE_CACHE = "cache"
STATE_EMBEDDING_CACHE = f"{STATE_CACHE}/embeddings.sqlite"   # vectors by (model, text hash); survives rebuilds
STATE_ASOF = "asof"                # the vault as of past commits: their files and search index (recall/asof.py)
LOCKS_DIR = f"{STATE_DIR}/{STATE_LOCKS}"
INDEX_DIR = f"{STATE_DIR}/{STATE_INDEX}"
CACHE_DIR = f"{STATE_DIR}/{STATE_CACHE}"
EMBEDDING_CACHE = f"{STATE_DIR}/{STATE_EMBEDDING_CACHE}"
JOURNAL_FILE = f"{STATE_DIR}/journal.json"
DREAM_RUN = f"{STATE_DIR}/dream-run.json"  # a running dream's progress (read only while it holds its lock)
DREAM_LLM = f"{STATE_DIR}/dream-llm.json"  # what each model's server took as response_format
RESERVE_FILE = f"{STATE_DIR}/reserve"   # spare bytes an undo on a full disk uses (storage/reserve.py)
PURGE_STATE = f"{STATE_DIR}/purge.json"   # purged ids this clone is clean of; a purge under way; a push owed
KEYS_DB = f"{STATE_DIR}/keys.sqlite"   # fact keys -> ids, derived from the logs (storage/keys.py)
QUEUE_DIR = f"{STATE_DIR}/queue"   # facts of writers waiting for the write lock (storage/queue.py)
WRITE_LOCK = "write.lock"          # in LOCKS_DIR: one writer of the vault at a time
DREAM_LOCK = "dream.lock"          # one dream at a time
SYNC_LOCK = "sync.lock"            # one sync of a clone at a time (they would race on its refs)
INDEX_LOCK = "index.lock"          # one writer of the search index at a time
GIT_LOCKS_LOCK = "git-locks.lock"  # one process at a time clears stale git lock files

LOG_NAME = re.compile(r"^(\d{4})-(\d{2})-(\d{2})\.md$")


def log_relpath(day: date) -> str:
    """logs/YYYY/YYYY-MM-DD.md: where the facts of `day` live."""
    return f"{LOGS_DIR}/{day.year:04d}/{day.isoformat()}.md"


def is_log_name(name: str) -> bool:
    """Is `name` a daily log's file name: YYYY-MM-DD.md of a day that exists (never 2026-02-30.md)?"""
    return LOG_NAME.match(name) is not None and _real_day(name)


def is_misdated_log(rel: str) -> bool:
    """Is `rel` (vault-relative) named like a daily log of logs/ for a day that does not exist
    (logs/2026/2026-02-30.md, 2026-13-45.md)? No reader takes it for a log; doctor and sync name it."""
    parts = rel.split("/")
    return (len(parts) == 3 and parts[0] == LOGS_DIR and LOG_NAME.match(parts[2]) is not None
            and not _real_day(parts[2]))


def _real_day(name: str) -> bool:
    try:
        date.fromisoformat(name.removesuffix(".md"))
    except ValueError:
        return False
    return True


def day_of_log(name: str) -> date:
    """The day a daily log file (by its name, with or without folders) holds."""
    return date.fromisoformat(name.rsplit("/", 1)[-1].removesuffix(".md"))


# The vault's own files, which memvault commits (doctor --fix included); anything else in the
# folder (a note, an editor's backup, a git temp file) is not memvault's to commit.
TOP_FILES = frozenset({CONFIG_FILE, MEMORY_FILE, INDEX_FILE, DREAM_LOG, SCHEMA_FILE, TOMBSTONES_FILE,
                       GITATTRIBUTES, GITIGNORE})
_VAULT_FILE = re.compile(r"^(?:logs/\d{4}/\d{4}-\d{2}-\d{2}\.md|wiki/[^/.][^/]*/[^/.][^/]*\.md"
                         r"|(?:logs|wiki)(?:/[^/.][^/]*)?/\.gitkeep)$")
# Left behind by a killed git (the merge driver's temp copies) or a killed atomic write.
_TEMP_FILE = re.compile(r"(?:^|/)(?:\.merge_file_[^/]*|[^/]+\.\d+\.tmp)$")


def is_vault_file(rel: str) -> bool:
    """Is `rel` (vault-relative, "/") one of the files a vault is made of?"""
    return rel in TOP_FILES or (_VAULT_FILE.match(rel) is not None and not is_misdated_log(rel))


def is_temp_file(rel: str) -> bool:
    """Is `rel` a temp file a killed git or memvault process left behind (safe to delete)?"""
    return _TEMP_FILE.search(rel) is not None


def in_work_tree(paths: Iterable[str]) -> list[str]:
    """Those of `paths` git can name in a work tree. A tree pushed from a remote may hold an entry
    named `..`, `.` or `.git` that git refuses to check out; naming one fails every git command."""
    def named(rel: str) -> bool:
        parts = rel.split("/")
        return not rel.startswith("/") and all(part not in ("", ".", "..") and part.lower() != ".git"
                                              for part in parts)
    return [rel for rel in paths if named(rel)]


