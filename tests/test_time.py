"""Time: the zone that cuts days, facts written in other zones, and the since/until bounds."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from support.git import snapshot

from memvault import InvalidInput, RecentQuery, Vault


def _ids(result) -> list[str]:
    assert result.exit_code == 0, result.stderr
    return [item["id"] for item in json.loads(result.stdout or "[]")]


def test_a_fact_written_in_another_zone_is_found_by_since_and_until(cli, monkeypatch):
    # timezone = "local" (the default) on a laptop that flew from Honolulu to Kiritimati: the fact
    # at 20:00 on the 23rd in Honolulu is 20:00 on the 24th in Kiritimati, yet it sits in the
    # 23rd's log. It was missing from `--since 2026-11-24` (and shown by `--until 2026-11-23`'s
    # day filter only by luck): the log's day was compared with the bound's day.
    monkeypatch.setenv("TZ", "Pacific/Honolulu")
    added = cli("add", "The ferry to Tarawa leaves at dawn", "--at", "2026-11-23T20:00")
    assert added.exit_code == 0, added.stderr
    fact_id = added.stdout.strip()

    monkeypatch.setenv("TZ", "Pacific/Kiritimati")
    assert _ids(cli("recent", "--since", "2026-11-24", "--json")) == [fact_id]
    assert _ids(cli("recent", "--since", "2026-11-24T19:00", "--until", "2026-11-24T21:00", "--json")) == [fact_id]
    assert _ids(cli("sessions", "--since", "2026-11-24", "--json")) == []  # no source: not listed, no error
    assert fact_id in _ids(cli("search", "ferry to Tarawa", "--since", "2026-11-24", "--all", "--json"))
    # ... and the bounds still hold: in Kiritimati it happened on the 24th, not the 23rd nor the 25th.
    assert _ids(cli("recent", "--until", "2026-11-23", "--json")) == []
    assert _ids(cli("recent", "--since", "2026-11-25", "--json")) == []
    assert _ids(cli("search", "ferry to Tarawa", "--until", "2026-11-23", "--all", "--json")) == []


def test_api_bounds_in_another_zone_than_the_vault_s(vault_dir):
    vault = Vault.open(vault_dir)  # the tests' TZ is UTC
    fact = vault.add("The penguins were fed late", at="2026-11-20T20:00")
    kiritimati = ZoneInfo("Pacific/Kiritimati")
    since = datetime(2026, 11, 21, 0, 0, tzinfo=kiritimati)  # 2026-11-20T10:00 UTC: before the fact
    assert [f.id for f in vault.recent(since=since)] == [fact.id]
    assert [h.id for h in vault.search("penguins fed", since=since, include_all=True)] == [fact.id]
    until = datetime(2026, 11, 21, 5, 0, tzinfo=kiritimati)  # 2026-11-20T15:00 UTC: before it too
    assert vault.recent(until=until) == []


def test_recent_and_sessions_take_dates_as_people_type_them(vault_dir):
    """The Python API reads `since`/`until` as the CLI and MCP do ("2026-11-10", "7d"): parsed
    once, by RecentQuery.parse in the vault's zone. Bad inputs tried: a date that is no date, and
    a ready RecentQuery with keywords beside it: one clear InvalidInput each."""
    vault = Vault.open(vault_dir)
    old = vault.add("The boiler was serviced", at="2026-11-01T09:00", source="mail")
    new = vault.add("The boiler was serviced again", at="2026-11-20T09:00", source="mail")
    assert [f.id for f in vault.recent(since="2026-11-10")] == [new.id]
    assert [f.id for f in vault.recent(until="2026-11-01")] == [old.id]
    assert [s.facts for s in vault.sessions(since="2026-11-01", until="2026-11-30")] == [2]
    query = RecentQuery.parse(1, tz=vault.tz, until="2026-11-30", source="mail", oldest_first=False)
    assert [f.id for f in vault.recent(query)] == [new.id]
    with pytest.raises(InvalidInput, match="since 'last week' is not a date"):
        vault.recent(since="last week")
    with pytest.raises(InvalidInput, match="either in the RecentQuery or as keywords"):
        vault.recent(query, tag="boiler")


def test_a_bound_at_the_calendar_s_end_in_another_zone_is_no_error(cli, monkeypatch):
    """Bad inputs tried: `datetime.max` in UTC as a script's "no upper bound", and
    9999-12-31T20:00+00:00 typed on the CLI, in a vault east of UTC, where both are in year 10000:
    an unexpected OverflowError (exit 1). They bound nothing now."""
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    fact_id = cli("add", "The lantern festival is in August").stdout.strip()
    for command in (["recent"], ["search", "lantern festival"]):
        result = cli(*command, "--until", "9999-12-31T20:00+00:00", "--json")
        assert _ids(result) == [fact_id], result.stderr
    vault = Vault.open(cli.vault_dir)
    assert [h.id for h in vault.search("lantern festival", until=datetime.max.replace(tzinfo=UTC))] == [fact_id]
    assert [f.id for f in vault.recent(until=datetime.max.replace(tzinfo=UTC))] == [fact_id]
    assert vault.recent(since=datetime.max.replace(tzinfo=UTC)) == []


def test_hours_ago_are_elapsed_hours_across_a_dst_change():
    from memvault.base.dates import parse_at, parse_bound

    paris = ZoneInfo("Europe/Paris")
    noon = datetime(2026, 3, 29, 12, 0, tzinfo=paris)  # the clocks went 02:00 -> 03:00 this night
    for moment in (parse_bound("12h", paris, now=noon), parse_at("720min", paris, now=noon)):
        # was 00:00+01:00 the same day: 11 hours ago, so `--since 12h` left an hour of facts out
        assert noon.timestamp() - moment.timestamp() == 12 * 3600
        assert moment.isoformat() == "2026-03-28T23:00:00+01:00"
    autumn = datetime(2026, 10, 25, 12, 0, tzinfo=paris)  # 03:00 -> 02:00: the night had 25 hours
    assert autumn.timestamp() - parse_bound("12h", paris, now=autumn).timestamp() == 12 * 3600


def test_a_day_written_without_dashes_is_a_whole_day_as_a_bound(cli):
    fact_id = cli("add", "The quarterly report went out", "--at", "2026-11-24T10:00").stdout.strip()
    for day in ("20261124", "2026-W48-2"):  # ISO 8601 too, and accepted: was the day's midnight
        assert _ids(cli("recent", "--until", day, "--json")) == [fact_id], day
        assert _ids(cli("recent", "--since", day, "--until", day, "--json")) == [fact_id], day


def test_an_offset_that_puts_a_time_before_1900_in_the_vault_s_zone_is_refused(cli, vault_dir):
    before = snapshot(vault_dir)
    result = cli("add", "Grandfather was born", "--at", "1900-01-01T00:30+01:00")
    # was stored as 1899-12-31T23:30+00:00 in logs/1899/, past the documented limit
    assert result.exit_code == 2 and "too far back" in result.stderr
    assert snapshot(vault_dir) == before
    assert cli("add", "Grandmother was born", "--at", "1900-01-01T00:30-01:00").exit_code == 0


def _at(cli, *args: str) -> str:
    result = cli("add", "The tide tables were printed", "--json", *args)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["at"]


@pytest.mark.parametrize("tz, summer, winter", [
    ("JST-9", "+09:00", "+09:00"),                                  # a POSIX rule, no DST
    ("CET-1CEST,M3.5.0,M10.5.0/3", "+02:00", "+01:00"),             # a POSIX rule with DST
    ("/usr/share/zoneinfo/Asia/Tokyo", "+09:00", "+09:00"),         # a zone file's path
    (":/usr/share/zoneinfo/Europe/Paris", "+02:00", "+01:00"),
])
def test_timezone_local_follows_tz_in_every_form_the_c_library_reads(cli, monkeypatch, tz, summer, winter):
    # With timezone = "local", TZ set to anything but an IANA name was passed over for
    # /etc/localtime's zone (UTC here): facts were filed under another day than `date` shows.
    if tz.lstrip(":").startswith("/") and not os.path.exists(tz.lstrip(":")):
        pytest.skip(f"no {tz} on this machine")
    monkeypatch.setenv("TZ", tz)
    assert _at(cli, "--at", "2026-07-01T12:00").endswith(summer)
    assert _at(cli, "--at", "2026-01-15T12:00").endswith(winter)
    assert _at(cli, "--at", "2026-01-15T23:30+00:00").startswith("2026-01-16T")  # east of UTC: the next day
