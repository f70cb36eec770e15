"""Counting prompt tokens: tiktoken's cl100k_base when it can load offline, else a safe estimate.

tiktoken downloads its encodings on first use. memvault never reaches for the network to count
tokens: it uses an encoding file already on disk (tiktoken's cache, or the copy litellm ships),
and otherwise falls back to an estimate that over-counts, so a budget is still never exceeded.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import tempfile
from functools import lru_cache
from pathlib import Path

ENCODING = "cl100k_base"
ESTIMATE = "estimate"
_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
# Every cl100k_base token is at least one UTF-8 byte, so a byte count never under-counts (base64
# and URLs go down to 1.4 bytes a token); used only when no encoding file is on disk.
_ESTIMATE_BYTES_PER_TOKEN = 1


def encoding_file() -> Path | None:
    """The encoding file counting would load (None: it estimates), found without loading it."""
    if os.environ.get("MEMVAULT_TOKENIZER", "").strip().lower() == ESTIMATE:
        return None
    if importlib.util.find_spec("tiktoken") is None:
        return None
    key = hashlib.sha1(_URL.encode()).hexdigest()
    configured = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    cache = Path(configured or Path(tempfile.gettempdir()) / "data-gym-cache")
    if (cache / key).is_file():
        return cache / key
    bundled = _litellm_tokenizers()
    if configured or bundled is None or not (bundled / key).is_file():
        return None  # loading would mean a download
    return bundled / key


@lru_cache(maxsize=1)
def _encoding():
    found = encoding_file()
    if found is None:
        return None
    # The same setting litellm makes for itself when it is imported.
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(found.parent))
    import tiktoken

    try:
        return tiktoken.get_encoding(ENCODING)
    except Exception:  # noqa: BLE001 - a corrupt cache file: counting must still work
        return None


def _litellm_tokenizers() -> Path | None:
    # find_spec does not import litellm (slow); it only locates the package directory.
    spec = importlib.util.find_spec("litellm")
    for base in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(base) / "litellm_core_utils" / "tokenizers"
        if candidate.is_dir():
            return candidate
    return None


def tokenizer_name() -> str:
    """`cl100k_base` when counting exactly, `estimate` otherwise."""
    return ENCODING if _encoding() is not None else ESTIMATE


def count(text: str) -> int:
    if not text:
        return 0
    encoding = _encoding()
    if encoding is None:
        return math.ceil(len(text.encode("utf-8")) / _ESTIMATE_BYTES_PER_TOKEN)
    return len(encoding.encode(text, disallowed_special=()))


def truncate(text: str, max_tokens: int) -> str:
    """The longest prefix of `text`, cut at a line end when possible, that fits `max_tokens`."""
    if max_tokens <= 0:
        return ""
    if count(text) <= max_tokens:
        return text
    lines = text.split("\n")
    kept: list[str] = []
    for line in lines:
        if count("\n".join([*kept, line])) > max_tokens:
            break
        kept.append(line)
    if kept:
        return "\n".join(kept)
    # Not even the first line fits: cut inside it, by characters (binary search on the count).
    first = lines[0]
    low, high = 0, len(first)
    while low < high:
        middle = (low + high + 1) // 2
        if count(first[:middle]) <= max_tokens:
            low = middle
        else:
            high = middle - 1
    return first[:low]
