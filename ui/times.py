"""Times as the reader expects them: in their time zone (Asia/Shanghai unless configured), minutes shown.

The database stores UTC. `CLINCONSENSUS_TIMEZONE` (an IANA name such as "Europe/Berlin") sets the
zone for everyone; a person's browser zone, when Streamlit knows it, wins for that person.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from db.rules.config import get_settings
from ui.text import Translator

DEFAULT_TIMEZONE = "Asia/Shanghai"


def _zone(name: str | None) -> ZoneInfo | None:
    try:
        return ZoneInfo(name) if name else None
    except (ZoneInfoNotFoundError, ValueError):
        return None


def reader_zone() -> ZoneInfo:
    """The browser's zone when known, else the configured one, else Asia/Shanghai."""
    import streamlit as st

    try:
        browser = getattr(st.context, "timezone", None)
    except (AttributeError, RuntimeError):  # outside a script run
        browser = None
    return _zone(browser) or _zone(get_settings().timezone or None) or ZoneInfo(DEFAULT_TIMEZONE)


def local_time(value: datetime | None, *, zone: ZoneInfo | None = None, seconds: bool = False) -> str:
    """`value` (UTC when naive) in the reader's zone as "2026-12-02 20:15"; "—" for none."""
    if value is None:
        return "—"
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    shown = value.astimezone(zone or reader_zone())
    return shown.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")


def clock_time(value: datetime | None, *, zone: ZoneInfo | None = None) -> str:
    """`value` (UTC when naive) as "12:03" when it is today in the reader's zone, else as `local_time` does."""
    if value is None:
        return "—"
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    zone = zone or reader_zone()
    shown = value.astimezone(zone)
    if shown.date() != datetime.now(zone).date():
        return local_time(value, zone=zone)
    return shown.strftime("%H:%M")


#: Zones readers know by a name of their own; any other is named by its offset from UTC.
_NAMED_ZONES = {"Asia/Shanghai": "times.zone.beijing", "Asia/Chongqing": "times.zone.beijing"}


def utc_offset(zone: ZoneInfo, at: datetime | None = None) -> str:
    """The zone's offset now (or at `at`) as "UTC+8", "UTC+5:30", "UTC−3", "UTC"."""
    offset = (at or datetime.now(UTC)).astimezone(zone).utcoffset()
    minutes = int(offset.total_seconds() // 60) if offset else 0
    if not minutes:
        return "UTC"
    hours, rest = divmod(abs(minutes), 60)
    return f"UTC{'+' if minutes > 0 else '−'}{hours}" + (f":{rest:02d}" if rest else "")


def zone_label(zone: ZoneInfo, t: Translator) -> str:
    """The zone as a reader names it, with its offset ("北京时间，UTC+8"), never the IANA id."""
    key = _NAMED_ZONES.get(zone.key)
    return t(key, offset=utc_offset(zone)) if key else utc_offset(zone)
