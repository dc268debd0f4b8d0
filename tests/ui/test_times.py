"""Times in the reader's zone: Asia/Shanghai by default, configurable, never `None`."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from ui.times import local_time, reader_zone


def test_default_zone_is_shanghai_and_naive_values_are_utc(monkeypatch):
    monkeypatch.delenv("CLINCONSENSUS_TIMEZONE", raising=False)
    assert reader_zone() == ZoneInfo("Asia/Shanghai")
    utc = datetime(2026, 12, 2, 18, 30, 5)
    assert local_time(utc) == "2026-12-03 02:30"
    assert local_time(utc.replace(tzinfo=UTC), seconds=True) == "2026-12-03 02:30:05"


def test_configured_zone_and_missing_values(monkeypatch):
    monkeypatch.setenv("CLINCONSENSUS_TIMEZONE", "Europe/Berlin")
    assert local_time(datetime(2026, 7, 1, 12, 0, tzinfo=UTC)) == "2026-07-01 14:00"
    monkeypatch.setenv("CLINCONSENSUS_TIMEZONE", "Not/AZone")
    assert reader_zone() == ZoneInfo("Asia/Shanghai")
    assert local_time(None) == "—"
