"""Vault settings: memvault.toml, overridden by MEMVAULT_* environment variables."""

from __future__ import annotations

import io
import math
import os
import re
import struct
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from memvault.errors import InvalidInput

DEFAULT_EMBED_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_RERANK_MODEL = "Xenova/ms-marco-MiniLM-L-12-v2"
# How many of the best fused candidates the reranker reads (docs/search.md#the-rerank-stage).
DEFAULT_RERANK_CANDIDATES = 15
CATEGORIES = (
    "fact",
    "preference",
    "correction",
    "entity",
    "decision",
    "relationship",
    "principle",
    "commitment",
    "moment",
    "skill",
    "event",
)
DREAM_MODES = ("notes", "prose")
DEFAULT_ZONES = ("0_Inbox", "people", "projects", "preferences", "topics", "events")


@dataclass(frozen=True)
class DreamConfig:
    max_days: int = 14
    max_retries: int = 3
    memory_max_lines: int = 200
    memory_max_bytes: int = 16_000
    zones: tuple[str, ...] = DEFAULT_ZONES
    mode: str = "notes"          # notes: the model decides per fact, the runner writes; prose: the model writes
    time_budget: float = 14_400  # seconds a run may spend asking; what is left waits for the next run


@dataclass(frozen=True)
class LLMConfig:
    """[llm]: which model dream calls, and how patiently."""

    model: str | None = None
    api_base: str | None = None
    timeout: float = 120.0     # seconds per call
    attempts: int = 3          # calls per request, retries included
    backoff: float = 2.0       # seconds before the first retry; doubles each time
    context_window: int | None = None     # tokens the model takes (prompt + answer); None: ask litellm
    max_output_tokens: int | None = None  # longest answer asked for (sent as max_tokens)


@dataclass(frozen=True)
class RerankConfig:
    """[rerank]: the cross-encoder that re-orders search's best candidates."""

    enabled: bool = True
    model: str = DEFAULT_RERANK_MODEL
    path: str | None = None    # local ONNX model directory (offline use)
    candidates: int = DEFAULT_RERANK_CANDIDATES


@dataclass(frozen=True)
class Config:
    timezone: str = "local"
    categories: tuple[str, ...] = CATEGORIES
    lock_timeout: float = 10.0
    embed_model: str = DEFAULT_EMBED_MODEL
    embed_model_path: str | None = None
    llm: LLMConfig = field(default_factory=LLMConfig)
    dream: DreamConfig = field(default_factory=DreamConfig)
    rerank: RerankConfig = field(default_factory=RerankConfig)

    @property
    def llm_model(self) -> str | None:
        return self.llm.model

    @property
    def api_base(self) -> str | None:
        return self.llm.api_base

    @property
    def tz(self) -> tzinfo:
        return resolve_timezone(self.timezone)

    @property
    def zones(self) -> tuple[str, ...]:
        return self.dream.zones


def resolve_timezone(name: str) -> tzinfo:
    """An IANA zone by name; "local" means the host's zone (TZ, then /etc/localtime)."""
    if name and name != "local":
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, OSError) as e:
            raise InvalidInput(
                f"unknown timezone {name!r} (vault.timezone: an IANA name such as Europe/Paris, or local)"
            ) from e
    zone = _tz_variable(os.environ.get("TZ", "")) or _etc_localtime()
    # Last resort: a fixed offset is right today, if not across a DST change.
    return zone or datetime.now().astimezone().tzinfo  # type: ignore[return-value]


def _tz_variable(value: str) -> tzinfo | None:
    """The zone TZ names, read as the C library reads it (so days are cut where `date` cuts them):
    an IANA name, a zone file's path, or a POSIX rule such as JST-9 or CET-1CEST,M3.5.0,M10.5.0/3.
    These last two were passed over for /etc/localtime's zone."""
    name = value.removeprefix(":")
    if not name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        pass
    if name.startswith("/"):
        return _zone_file(name)
    try:
        return _posix_rule(name)
    except ValueError:
        return None


def _posix_rule(rule: str) -> tzinfo:
    """A POSIX TZ rule as a zone: a TZif file (RFC 8536) with no transitions, only one UTC type and
    the rule as its footer, which zoneinfo applies to every time. ValueError if it does not parse."""
    counts = struct.pack(">6l", 0, 0, 0, 0, 1, 4)  # isut, isstd, leap, transition, type, char counts
    block = b"TZif2" + bytes(15) + counts + struct.pack(">lBB", 0, 0, 0) + b"UTC\0"
    try:
        footer = b"\n" + rule.encode("ascii") + b"\n"
    except UnicodeEncodeError:
        raise ValueError(f"not a POSIX TZ rule: {rule!r}") from None
    return ZoneInfo.from_file(io.BytesIO(block + block + footer), key=rule)


def _zone_file(path: str) -> tzinfo | None:
    try:
        with open(path, "rb") as f:
            return ZoneInfo.from_file(f, key=path)
    except (OSError, ValueError):
        return None


def _etc_localtime() -> tzinfo | None:
    """The host's zone: by its IANA name when /etc/localtime links into a zoneinfo folder, else
    the file itself (a copy, as many container images have)."""
    name = _etc_localtime_name()
    if name:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            pass
    return _zone_file("/etc/localtime")


def _etc_localtime_name() -> str | None:
    try:
        target = os.path.realpath("/etc/localtime")
    except OSError:
        return None
    marker = "/zoneinfo/"
    return target.split(marker, 1)[1] if marker in target else None


def load_config(path: Path) -> Config:
    """Read the vault's settings file (memvault.toml), then apply environment overrides."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    except UnicodeDecodeError as e:
        raise InvalidInput(f"{path} is not UTF-8 text (byte {e.start}); save it as UTF-8") from None
    return parse_config(text, str(path))


def parse_config(text: str, where: str, environ: Mapping[str, str] = os.environ) -> Config:
    """Settings from memvault.toml's text, overridden by the MEMVAULT_* variables of `environ`.

    InvalidInput, naming `where`, for a file that does not parse (with tomllib's line and column)
    or a value out of range (with the key and the value). Sync checks a remote's file with this
    and no environment, so that what it refuses is what every clone would fail to load.
    """
    return _parse(_loads(text, where), where, environ, {})


def unknown_settings(text: str, where: str = "memvault.toml") -> list[str]:
    """The keys of a valid memvault.toml that no setting reads, each with the nearest setting's name
    where one is close ("vault.lock_timout (did you mean vault.lock_timeout?)"). Such a key changes
    nothing: a typo leaves its setting at the default. They are not refused, since a vault synced
    from a newer memvault may hold settings this one does not know; doctor names them."""
    data = _loads(text, where)
    tables: dict[str, _Asked] = {}
    _parse(data, where, {}, tables)  # no environment: every setting is then read from the file
    found = [(name, None, value) for name, value in data.items() if name not in tables]
    found += [(name, key, None) for name, table in tables.items() for key in table if key not in table.asked]
    return [_with_nearest(name, key, value, tables) for name, key, value in found]


def _with_nearest(name: str, key: str | None, value: object, tables: dict[str, _Asked]) -> str:
    """`name.key` (or a top-level `name`) and the closest setting: within its own table, a table for
    a table, any setting for a top-level value (`timezone = ...` written outside [vault])."""
    import difflib

    if key is not None:
        options = {known: f"{name}.{known}" for known in tables[name].asked}
    elif isinstance(value, dict):
        options = {table: f"[{table}]" for table in tables}
    else:
        options = {known: f"{table}.{known}" for table, read in tables.items() for known in read.asked}
    near = difflib.get_close_matches(key or name, list(options), n=1)
    shown = f"{name}.{key}" if key is not None else name
    return f"{shown} (did you mean {options[near[0]]}?)" if near else shown


def _loads(text: str, where: str) -> dict:
    try:
        return tomllib.loads(text.removeprefix("\ufeff"))  # (a byte-order mark, as some editors save UTF-8)
    except tomllib.TOMLDecodeError as e:
        raise InvalidInput(f"{where} does not parse as TOML: {e}") from e


class _Asked(dict):
    """A [table] of the file that remembers which keys the settings read (unknown_settings)."""

    def __init__(self, data: dict):
        super().__init__(data)
        self.asked: set[str] = set()

    def get(self, key, default=None):
        self.asked.add(key)
        return super().get(key, default)


def _parse(data: dict, where: str, environ: Mapping[str, str], tables: dict) -> Config:
    try:
        vault, embedding, llm, dream, rerank = (_table(data, name, tables)
                                                for name in ("vault", "embedding", "llm", "dream", "rerank"))
        dream_config = DreamConfig(
            max_days=_positive_int(dream.get("max_days", 14), "dream.max_days"),
            max_retries=_positive_int(dream.get("max_retries", 3), "dream.max_retries"),
            memory_max_lines=_positive_int(dream.get("memory_max_lines", 200), "dream.memory_max_lines"),
            memory_max_bytes=_positive_int(dream.get("memory_max_bytes", 16_000), "dream.memory_max_bytes"),
            zones=_names(dream.get("zones", DEFAULT_ZONES), "dream.zones", _ZONE),
            mode=_choice(dream.get("mode", "notes"), "dream.mode", DREAM_MODES),
            time_budget=_positive_number(dream.get("time_budget", 14_400), "dream.time_budget"),
        )
        config = Config(
            timezone=_timezone(vault.get("timezone", "local")),
            categories=_names(vault.get("categories", CATEGORIES), "vault.categories", _CATEGORY),
            lock_timeout=_lock_timeout(vault, environ),
            embed_model=environ.get("MEMVAULT_EMBED_MODEL") or embedding.get("model") or DEFAULT_EMBED_MODEL,
            embed_model_path=environ.get("MEMVAULT_EMBED_MODEL_PATH") or embedding.get("path") or None,
            llm=LLMConfig(
                model=environ.get("MEMVAULT_MODEL") or llm.get("model") or None,
                api_base=environ.get("MEMVAULT_API_BASE") or llm.get("api_base") or None,
                timeout=_positive_number(llm.get("timeout", 120.0), "llm.timeout"),
                attempts=_positive_int(llm.get("attempts", 3), "llm.attempts"),
                backoff=_non_negative_number(llm.get("backoff", 2.0), "llm.backoff"),
                context_window=_optional_positive_int(llm.get("context_window"), "llm.context_window"),
                max_output_tokens=_optional_positive_int(llm.get("max_output_tokens"), "llm.max_output_tokens"),
            ),
            dream=dream_config,
            rerank=_rerank(rerank, environ),
        )
    except (TypeError, ValueError) as e:
        raise InvalidInput(f"{where}: {e}") from e
    return config


def _timezone(value: object) -> str:
    """vault.timezone, checked as it is read: a zone no command can use would otherwise pass
    `doctor --fix`, `sync` and `clone` and stop only the commands that need the day (or a purge
    that had already rewritten history)."""
    if not isinstance(value, str):
        raise ValueError(f"vault.timezone must be a string, got {value!r}")
    if value and value != "local":
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a region's folder ("Europe"), a long name
            raise ValueError(f"unknown timezone {value!r} (vault.timezone: an IANA name such as Europe/Paris, "
                             "or local)") from None
    return value


def _rerank(table: dict, environ: Mapping[str, str]) -> RerankConfig:
    """[rerank], with MEMVAULT_RERANK (on/off), MEMVAULT_RERANK_MODEL and MEMVAULT_RERANK_MODEL_PATH over it."""
    enabled = table.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ValueError(f"rerank.enabled must be true or false, got {enabled!r}")
    raw = environ.get("MEMVAULT_RERANK")
    if raw:
        word = raw.strip().lower()
        if word not in _SWITCH:
            # Raised outside parse_config's handler, which would blame memvault.toml.
            raise InvalidInput(f"MEMVAULT_RERANK must be on or off (1 or 0), got {raw!r}")
        enabled = _SWITCH[word]
    model = environ.get("MEMVAULT_RERANK_MODEL") or table.get("model") or DEFAULT_RERANK_MODEL
    path = environ.get("MEMVAULT_RERANK_MODEL_PATH") or table.get("path") or None
    for name, value in (("rerank.model", model), ("rerank.path", path)):
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{name} must be a string, got {value!r}")
    candidates = _positive_int(table.get("candidates", DEFAULT_RERANK_CANDIDATES), "rerank.candidates")
    if candidates > MAX_RERANK_CANDIDATES:
        raise ValueError(f"rerank.candidates must be at most {MAX_RERANK_CANDIDATES}, got {candidates!r}")
    return RerankConfig(enabled=enabled, model=model, path=path, candidates=candidates)


_SWITCH = {"1": True, "on": True, "true": True, "yes": True, "0": False, "off": False, "false": False, "no": False}
# Each candidate costs the reranker a model run (milliseconds); past this a search takes seconds.
MAX_RERANK_CANDIDATES = 200


def _table(data: dict, name: str, tables: dict) -> _Asked:
    """A [section] of the file; `vault = 5` is no table to read settings from."""
    section = data.get(name, {})
    if not isinstance(section, dict):
        raise ValueError(f"{name} must be a table ([{name}]), got {section!r}")
    tables[name] = _Asked(section)
    return tables[name]


def _lock_timeout(vault: dict, environ: Mapping[str, str]) -> float:
    """MEMVAULT_LOCK_TIMEOUT, else vault.lock_timeout: a bad value is blamed on where it came from."""
    raw = environ.get("MEMVAULT_LOCK_TIMEOUT")
    if raw:
        try:
            return _positive_number(float(raw), "MEMVAULT_LOCK_TIMEOUT")
        except ValueError:
            # Raised outside parse_config's handler, which would blame memvault.toml.
            raise InvalidInput(f"MEMVAULT_LOCK_TIMEOUT must be a positive number of seconds, got {raw!r}") from None
    return _positive_number(vault.get("lock_timeout", 10.0), "vault.lock_timeout")


# A category is a short name (typed after --category, shown in columns; inner spaces were always
# accepted); a zone is a folder of wiki/, so never a path of its own.
_CATEGORY = re.compile(r"^[^\s,#\x00-\x1f\x7f](?:[^,#\x00-\x1f\x7f]{0,38}[^\s,#\x00-\x1f\x7f])?$")
_ZONE = re.compile(r"^[^./\\\s\x00-\x1f\x7f][^/\\\x00-\x1f\x7f]{0,63}$")


def _names(value: object, name: str, shape: re.Pattern) -> tuple[str, ...]:
    """A non-empty list of distinct names of the given shape ("fact" alone is not a list of letters)."""
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(f"{name} must be a non-empty list of names, got {value!r}")
    bad = [item for item in value if not isinstance(item, str) or not shape.match(item)]
    if bad:
        raise ValueError(f"{name} holds {bad[0]!r}, which is not a valid name")
    folded = [item.casefold() for item in value]
    if len(set(folded)) < len(folded):
        raise ValueError(f"{name} names one of them twice: {value!r}")
    return tuple(value)


def _choice(value: object, name: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return str(value)


def _positive_number(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return float(value)


def _non_negative_number(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"{name} must be zero or a positive number, got {value!r}")
    return float(value)


def _positive_int(value: object, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def _optional_positive_int(value: object, name: str) -> int | None:
    return None if value is None else _positive_int(value, name)
