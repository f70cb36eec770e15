"""The vault layout: every file and folder name memvault reads or writes, in one place.

A vault is a directory under git (see the README's "Vault layout"). Names here are vault-relative
and use "/", as git and the journal record them.
"""

from __future__ import annotations

import re
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
LOCKS_DIR = f"{STATE_DIR}/locks"
INDEX_DIR = f"{STATE_DIR}/index"
CACHE_DIR = f"{STATE_DIR}/cache"
EMBEDDING_CACHE = f"{CACHE_DIR}/embeddings.sqlite"   # vectors by (model, text hash); survives rebuilds
JOURNAL_FILE = f"{STATE_DIR}/journal.json"
QUEUE_DIR = f"{STATE_DIR}/queue"   # facts of writers waiting for the write lock (storage/queue.py)
WRITE_LOCK = "write.lock"          # in LOCKS_DIR: one writer of the vault at a time
DREAM_LOCK = "dream.lock"          # one dream at a time
INDEX_LOCK = "index.lock"          # one writer of the search index at a time
GIT_LOCKS_LOCK = "git-locks.lock"  # one process at a time clears stale git lock files

LOG_NAME = re.compile(r"^(\d{4})-(\d{2})-(\d{2})\.md$")


def log_relpath(day: date) -> str:
    """logs/YYYY/YYYY-MM-DD.md: where the facts of `day` live."""
    return f"{LOGS_DIR}/{day.year:04d}/{day.isoformat()}.md"


def is_log_name(name: str) -> bool:
    return LOG_NAME.match(name) is not None


def day_of_log(name: str) -> date:
    """The day a daily log file (by its name, with or without folders) holds."""
    return date.fromisoformat(name.rsplit("/", 1)[-1].removesuffix(".md"))
