"""Timestamps: everything is normalised to timezone-aware UTC."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta, timezone, tzinfo

from .errors import SpanParseError


def to_utc(moment: datetime) -> datetime:
    """Return ``moment`` as an aware datetime in UTC.

    Naive datetimes are taken to be in UTC already; aware ones are
    converted, so the instant they denote does not change.
    """
    if moment.tzinfo is None or moment.utcoffset() is None:
        return moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


def parse_timestamp(text: str) -> datetime:
    """Parse an ISO 8601 timestamp (``Z`` or ``+HH:MM`` suffix, or naive
    meaning UTC) and return it in UTC. Raises :class:`SpanParseError`."""
    cleaned = text.strip()
    if cleaned[-1:] in ("Z", "z"):
        cleaned = cleaned[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(cleaned)
    except ValueError:
        raise SpanParseError(f"not an ISO 8601 timestamp: {text!r}") from None
    return to_utc(moment)


def day_bounds(day: date, tz: tzinfo = timezone.utc) -> tuple[datetime, datetime]:
    """First instant of ``day`` and of the next day in ``tz``, both in UTC."""
    start = datetime.combine(day, time.min, tzinfo=tz)
    end = datetime.combine(day + timedelta(days=1), time.min, tzinfo=tz)
    return to_utc(start), to_utc(end)
