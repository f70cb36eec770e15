"""log.md, dream's journal: the entries dream writes, and what they say about past runs.

One entry per batch attempt, one line each, plus an optional indented id list:

  - 2026-11-22T03:00:05+01:00 dream ok 2026-11-01..2026-11-14 watermark=2026-11-14 · 17 facts: ...
    settled: <ids marked duplicate/noop, so they are accounted for without a page citation>
  - 2026-11-23T03:00:02+01:00 dream failed 2026-11-15..2026-11-20 · attempt 1/3: <reason>
  - 2026-11-25T03:00:02+01:00 dream skipped 2026-11-15..2026-11-20 watermark=2026-11-20 · ...
    unconsolidated: <ids left as raw facts>
  - 2026-11-26T03:00:02+01:00 dream error 2026-11-15..2026-11-20 · LLM unavailable: <reason>

`watermark=YYYY-MM-DD` appears only on ok/skipped lines; reasons are sanitised so it cannot
appear anywhere else. `error` (provider trouble) does not count towards max_retries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date

OUTCOMES = ("ok", "failed", "skipped", "error")
LATE_LABEL = "late"
SCRUB_LABEL = "scrub"    # rewrites pages that cite forgotten facts; never moves the watermark
_ENTRY = re.compile(
    r"^- (?P<at>\S+) dream (?P<outcome>ok|failed|skipped|error) (?P<label>\S+)"
    r"(?: watermark=(?P<watermark>\d{4}-\d{2}-\d{2}))?(?: · (?P<detail>.*))?$"
)
_IDS = re.compile(r"^  (?P<key>settled|unconsolidated): (?P<ids>.*)$")
_WATERMARK = re.compile(r"\bwatermark=(\d{4}-\d{2}-\d{2})\b")


@dataclass
class Entry:
    at: str
    outcome: str
    label: str
    watermark: str | None = None
    detail: str = ""
    ids: list[str] = field(default_factory=list)


def one_line(text: str, limit: int = 300) -> str:
    """Single line, no token that could be mistaken for a watermark."""
    text = " ".join(str(text).split())
    text = text.replace("watermark=", "watermark:")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def format_entry(
    at: str,
    outcome: str,
    label: str,
    *,
    watermark: str | None = None,
    detail: str = "",
    ids_key: str | None = None,
    ids: list[str] | tuple[str, ...] = (),
) -> str:
    line = f"- {at} dream {outcome} {label}"
    if watermark:
        line += f" watermark={watermark}"
    if detail:
        line += f" · {one_line(detail)}"
    if ids_key and ids:
        line += f"\n  {ids_key}: {' '.join(ids)}"
    return line + "\n"


def parse_journal(text: str) -> list[Entry]:
    entries: list[Entry] = []
    for line in text.splitlines():
        m = _ENTRY.match(line)
        if m:
            entries.append(Entry(
                at=m["at"], outcome=m["outcome"], label=m["label"],
                watermark=m["watermark"], detail=m["detail"] or "",
            ))
            continue
        m = _IDS.match(line)
        if m and entries:
            entries[-1].ids.extend(m["ids"].split())
    return entries


def failed_attempts(entries: list[Entry], label: str) -> int:
    """Failed attempts on this batch since the last batch of its kind that was applied or skipped.

    Scrubs and day batches count apart: a scrub that succeeds between two failed attempts of a
    day batch must not reset that batch's count, nor a day batch the scrub's.
    """
    count = 0
    scrub = label == SCRUB_LABEL
    for entry in entries:
        if (entry.label == SCRUB_LABEL) != scrub:
            continue
        if entry.outcome in ("ok", "skipped"):
            count = 0
        elif entry.outcome == "failed" and entry.label == label:
            count += 1
    return count


def settled_ids(entries: list[Entry]) -> set[str]:
    """Fact ids accounted for by log.md itself (duplicates, noops, skipped batches)."""
    return {fid for e in entries if e.outcome in ("ok", "skipped") for fid in e.ids}


def latest_watermark(text: str) -> date | None:
    """The last day consolidated: the latest `watermark=YYYY-MM-DD` token of log.md."""
    tokens = _WATERMARK.findall(text)
    return date.fromisoformat(tokens[-1]) if tokens else None


def append_entry(log_text: str, entry: str) -> str:
    if log_text and not log_text.endswith("\n"):
        log_text += "\n"
    last = log_text.rstrip("\n").rsplit("\n", 1)[-1]
    if last and not last.startswith(("- ", "  ")):
        log_text += "\n"  # a blank line after the prose header keeps the list a list
    return log_text + entry
