"""Parsing the dates people and agents type: ISO 8601, `today`, `yesterday`, `7d`, `12h`, `2w`.

The one place dates are read, for `add --at` and for the since/until of search, recent and
sessions. Errors name the field ("since", "at"), not a command-line flag.

Dates before 1900-01-01 are refused: a daily log of a day that far back is far more likely a typo
(`0226-11-01`, `1026-11-01`, `99999d`) than a memory, while a life's history (birthdays, a move in
the 1970s) still fits.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta, tzinfo

from memvault.errors import InvalidInput

EARLIEST = date(1900, 1, 1)
_RELATIVE = re.compile(r"^(\d+)\s*(m|min|h|d|w)$")
_UNITS = {"m": "minutes", "min": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_at(value: str | date, tz: tzinfo, now: datetime | None = None) -> datetime:
    """When a fact happened: an ISO date (midnight) or datetime, naive in the vault's zone; or
    `now`, `today` (now), `yesterday` (this time yesterday), `3d`, `12h`, `2w` (that long ago).
    A datetime or date object is taken as its text would be."""
    now = now or datetime.now(tz)
    if isinstance(value, date):
        check_plausible(value, "at")
        if not isinstance(value, datetime):
            moment = datetime.combine(value, time.min, tz)
        else:
            moment = value.replace(tzinfo=tz) if value.tzinfo is None else _in_zone(value, tz)
        return _not_future(moment, now, value.isoformat())
    if not isinstance(value, str):
        raise InvalidInput(f"at must be an ISO 8601 date or datetime, got {value!r}")
    text = value.strip().lower()
    match = _RELATIVE.match(text)
    if text in ("now", "today"):
        return now
    if text == "yesterday":
        return now - timedelta(days=1)
    if match:
        return _ago(now, match, value, "at")
    return _not_future(_parse_iso(value, tz, option="at"), now, value)


def _not_future(moment: datetime, now: datetime, typed: str) -> datetime:
    # A small allowance for clock skew between machines; beyond it, a future date is a typo.
    if moment > now + timedelta(days=1):
        raise InvalidInput(f"at {typed!r} is in the future; facts record what already happened")
    return moment


Bound = str | date | datetime | None


def parse_range(since: Bound, until: Bound, tz: tzinfo, *,
                now: datetime | None = None) -> tuple[datetime | None, datetime | None]:
    """A since/until pair as aware datetimes (a date covers its whole day); checked in order."""
    lower = _as_bound(since, tz, end=False, now=now, option="since")
    upper = _as_bound(until, tz, end=True, now=now, option="until")
    check_range(lower, upper)
    return lower, upper


def check_range(since: datetime | None, until: datetime | None) -> None:
    if since is not None and until is not None and since > until:
        raise InvalidInput(f"since ({since.isoformat()}) is after until ({until.isoformat()})")


def log_days(since: datetime | None, until: datetime | None) -> tuple[date | None, date | None]:
    """The days whose logs (and index days) may hold a fact timed within since..until.

    A fact's day is the date of its time in the zone it was written in, which need not be this
    vault's zone now: a clone elsewhere with `timezone = "local"`, a laptop that travelled, a zone
    changed in memvault.toml. Offsets are under a day, so a day of slack either side of the bounds'
    instants holds them all; the exact bounds are then checked on the facts' times.
    """
    def shifted(moment: datetime | None, hours: int) -> date | None:
        if moment is None:
            return None
        try:
            return (moment.astimezone(UTC) + timedelta(hours=hours)).date()
        except OverflowError:  # at the ends of the calendar: no day is left out
            return None
    return shifted(since, -24), shifted(until, 24)


def _as_bound(value: Bound, tz: tzinfo, *, end: bool, now: datetime | None, option: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        check_plausible(value, option)
        # In the vault's zone, as every bound is: a page dated by day only is compared by date.
        return _in_zone(value, tz) if value.tzinfo else value.replace(tzinfo=tz)
    if isinstance(value, date):
        check_plausible(value, option)
        return _day_bound(value, tz, end)
    if not isinstance(value, str):
        raise InvalidInput(f"{option} must be a date, got {value!r}")
    return parse_bound(value, tz, end=end, now=now, option=option)


def parse_bound(value: str, tz: tzinfo, *, end: bool = False, now: datetime | None = None,
                option: str = "since") -> datetime:
    """A filter bound. Dates cover whole days: until 2026-11-01 includes that day."""
    text = value.strip().lower()
    now = now or datetime.now(tz)
    if text in ("now",):
        return now
    if text in ("today", "yesterday"):
        day = now.date() - timedelta(days=1 if text == "yesterday" else 0)
        return _day_bound(day, tz, end)
    match = _RELATIVE.match(text)
    if match:
        return _ago(now, match, value, option)
    moment = _parse_iso(value, tz, option=option)
    if _is_date_only(value):
        return _day_bound(moment.date(), tz, end)
    return moment


def check_plausible(moment: date, option: str, typed: str | None = None) -> None:
    """Refuse a date before EARLIEST (see the module docstring), naming the field and the value."""
    day = moment.date() if isinstance(moment, datetime) else moment
    if day < EARLIEST:
        shown = typed if typed is not None else moment.isoformat()
        raise InvalidInput(f"{option} {shown!r} is too far back: dates before {EARLIEST} are refused as typos")


def _ago(now: datetime, match: re.Match, value: str, option: str) -> datetime:
    try:
        # That long ago by the clock on the wall of no zone: arithmetic on an aware datetime keeps
        # its wall time, so across a DST change `12h` was 11 or 13 hours.
        span = timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
        moment = (now.astimezone(UTC) - span).astimezone(now.tzinfo)
    except OverflowError:
        moment = datetime.min
    check_plausible(moment, option, value)
    return moment


def _day_bound(day: date, tz: tzinfo, end: bool) -> datetime:
    if end:
        return datetime.combine(day, time.max, tz)
    return datetime.combine(day, time.min, tz)


def _is_date_only(value: str) -> bool:
    """A day without a time, in any ISO 8601 form Python reads (2026-11-24, 20261124, 2026-W48-2):
    each is a whole day as a bound, not its midnight."""
    value = value.strip()
    if len(value) > 10:  # (no date form is longer: a datetime is spared a raised ValueError)
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


def _parse_iso(value: str, tz: tzinfo, *, option: str) -> datetime:
    text = value.strip()
    try:
        if _is_date_only(text):
            day = date.fromisoformat(text)
            check_plausible(day, option, value)
            return datetime.combine(day, time.min, tz)
        moment = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        raise InvalidInput(
            f"{option} {value!r} is not a date: use ISO 8601 (2026-11-01, 2026-11-01T09:30, "
            "2026-11-01T09:30+01:00), or today, yesterday, 7d, 12h, 2w"
        ) from None
    # Before any time zone arithmetic, which overflows near year 1.
    check_plausible(moment, option, value)
    if moment.tzinfo is None:
        return moment.replace(tzinfo=tz)
    moment = _in_zone(moment, tz)
    check_plausible(moment, option, value)  # 1900-01-01T00:30+01:00 is still 1899 in UTC
    return moment


def _in_zone(moment: datetime, tz: tzinfo) -> datetime:
    """An aware time in the vault's zone. Past the calendar's end there (9999-12-31T20:00+00:00 is
    in year 10000 in Tokyo; a script's `datetime.max` as "no upper bound") it is that end itself,
    where the conversion would overflow."""
    try:
        return moment.astimezone(tz)
    except OverflowError:
        return (datetime.max if moment.year > 1 else datetime.min).replace(tzinfo=tz)
