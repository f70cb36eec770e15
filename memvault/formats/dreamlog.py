"""log.md, dream's journal: the entries dream writes, and what they say about past runs.

One entry per batch attempt, one line each, plus indented lines under it:

  - 2026-11-22T03:00:05+01:00 dream ok 2026-11-01..2026-11-14 watermark=2026-11-14 · 17 facts: ...
    settled: <duplicates of facts a page cites: accounted for, and out of the default search>
    kept: <noops and other duplicates: accounted for, and still in the default search>
    note: <what the runner dropped from the answer, e.g. a MEMORY.md line over 300 characters>
  - 2026-11-23T03:00:02+01:00 dream failed 2026-11-15..2026-11-20 · attempt 1/3: <reason>
    problem: <every problem of the final answer, one per line>
  - 2026-11-25T03:00:02+01:00 dream skipped 2026-11-15..2026-11-20 watermark=2026-11-20 · ...
    unconsolidated: <ids left as raw facts>
  - 2026-11-26T03:00:02+01:00 dream error 2026-11-15..2026-11-20 · LLM unavailable: <reason>
  - 2026-11-27T03:00:02+01:00 dream error 2026-11-15..2026-11-20 · LLM not set up: <reason>

`watermark=YYYY-MM-DD` appears only on ok/skipped lines, and only once every fact of that day is
accounted for (a day too big for one batch is split); reasons are sanitised so the token cannot
appear anywhere else. `error` (provider trouble) does not count towards max_retries.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date

OUTCOMES = ("ok", "failed", "skipped", "error")
LATE_LABEL = "late"
SCRUB_LABEL = "scrub"    # rewrites pages that cite forgotten facts; never moves the watermark
_ENTRY = re.compile(
    r"^- (?P<at>\S+) dream (?P<outcome>ok|failed|skipped|error) (?P<label>\S+)"
    r"(?: watermark=(?P<watermark>\d{4}-\d{2}-\d{2}))?(?: · (?P<detail>.*))?$"
)
_IDS = re.compile(r"^  (?P<key>settled|unconsolidated|kept): (?P<ids>.*)$")
_PROBLEM = re.compile(r"^  problem: (?P<text>.*)$")
ID_KEYS = ("settled", "kept", "unconsolidated")
_WATERMARK = re.compile(r"\bwatermark=(\d{4}-\d{2}-\d{2})\b")


@dataclass
class Entry:
    at: str
    outcome: str
    label: str
    watermark: str | None = None
    detail: str = ""
    ids: list[str] = field(default_factory=list)       # settled and unconsolidated: out of default search
    kept: list[str] = field(default_factory=list)      # accounted for by dream, still in default search
    problems: list[str] = field(default_factory=list)  # of a failed attempt's final answer


def one_line(text: str, limit: int = 300) -> str:
    """Single line, no token that could be mistaken for a watermark."""
    text = " ".join(str(text).split())
    text = text.replace("watermark=", "watermark:")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def free_text_start(line: str) -> int:
    """Where the free text of a journal line starts (a reason, a problem, a note): what comes
    before it (time, outcome, batch, watermark, the record names and their ids) is structure a
    purge must not edit. len(line) for a line with no free text."""
    entry = _ENTRY.match(line.rstrip("\r\n"))
    if entry:
        return entry.start("detail") if entry.group("detail") is not None else len(line)
    if _IDS.match(line.rstrip("\r\n")):
        return len(line)
    record = re.match(r"^  \w+: ", line)
    return record.end() if record else 0


def format_entry(
    at: str,
    outcome: str,
    label: str,
    *,
    watermark: str | None = None,
    detail: str = "",
    ids: Mapping[str, Sequence[str]] | None = None,
    notes: Sequence[str] = (),
    problems: Sequence[str] = (),
) -> str:
    """One entry: its line, then its id lists (keys from ID_KEYS), notes and problems, indented."""
    line = f"- {at} dream {outcome} {label}"
    if watermark:
        line += f" watermark={watermark}"
    if detail:
        line += f" · {one_line(detail)}"
    for key, listed in (ids or {}).items():
        if listed:
            line += f"\n  {key}: {' '.join(listed)}"
    for note in notes:
        line += f"\n  note: {one_line(note, 500)}"
    for problem in problems:
        line += f"\n  problem: {one_line(problem, 500)}"
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
            (entries[-1].kept if m["key"] == "kept" else entries[-1].ids).extend(m["ids"].split())
            continue
        m = _PROBLEM.match(line)
        if m and entries:
            entries[-1].problems.append(m["text"])
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
    """Fact ids log.md accounts for that leave the default search (page-backed duplicates, and the
    facts of skipped batches, which search keeps by reading the skip itself)."""
    return {fid for e in entries if e.outcome in ("ok", "skipped") for fid in e.ids}


def kept_ids(entries: list[Entry]) -> set[str]:
    """Fact ids dream is done with that stay in the default search (noops, duplicates of raw facts)."""
    return {fid for e in entries if e.outcome == "ok" for fid in e.kept}


def failing(entries: list[Entry]) -> dict | None:
    """The job whose latest attempts failed: which batch, since when, how often, and why.

    None when the latest attempt of its kind (scrub or day batch) succeeded or was skipped.
    """
    streak: list[Entry] = []
    scrub = None
    for entry in reversed(entries):
        kind = entry.label == SCRUB_LABEL
        if scrub is None:
            if entry.outcome not in ("failed", "error"):
                return None
            scrub = kind
        if kind != scrub:
            continue  # a scrub between two failures of a day batch does not end the streak
        if entry.outcome not in ("failed", "error"):
            break
        streak.append(entry)
    if not streak:
        return None
    latest = streak[0]
    return {
        "batch": latest.label,
        "since": streak[-1].at,
        "failures": len(streak),
        "errors": sum(1 for e in streak if e.outcome == "error"),
        "outcome": latest.outcome,
        "reason": latest.detail,
        "problems": list(latest.problems),
    }


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
