"""Reading dates and spans from text."""

from __future__ import annotations

import re
from datetime import date

from .calendar_util import month_span, week_span, year_span
from .errors import SpanParseError
from .span import DateSpan

_DATE_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_MONTH_RE = re.compile(r"(\d{4})-(\d{2})")
_WEEK_RE = re.compile(r"(\d{4})-?W(\d{2})", re.IGNORECASE)
_YEAR_RE = re.compile(r"\d{4}")


def parse_date(text: str) -> date:
    """Parse ``YYYY-MM-DD``. Raises :class:`SpanParseError`."""
    match = _DATE_RE.fullmatch(text.strip())
    if match is None:
        raise SpanParseError(f"expected YYYY-MM-DD, got {text!r}")
    year, month, day = (int(g) for g in match.groups())
    try:
        return date(year, month, day)
    except ValueError as exc:
        raise SpanParseError(f"invalid date {text!r}: {exc}") from None


def parse_span(text: str) -> DateSpan:
    """Parse a span.

    Accepted forms: ``2024-01-05..2024-02-10`` (both ends included; either
    end may also be a month, week or year, whose first/last day is used),
    ``2024-01-05`` (one day), ``2024-01`` (a month), ``2024-W05`` (an ISO
    week) and ``2024`` (a year). Raises :class:`SpanParseError`.
    """
    text = text.strip()
    if ".." in text:
        left, _, right = text.partition("..")
        start, end = _parse_unit(left).start, _parse_unit(right).end
        if start > end:
            raise SpanParseError(f"span starts after it ends: {text!r}")
        return DateSpan(start, end)
    return _parse_unit(text)


def _parse_unit(text: str) -> DateSpan:
    text = text.strip()
    if _DATE_RE.fullmatch(text):
        return DateSpan.single(parse_date(text))
    match = _MONTH_RE.fullmatch(text)
    if match:
        year, month = int(match[1]), int(match[2])
        if not 1 <= month <= 12:
            raise SpanParseError(f"invalid month in {text!r}")
        return month_span(year, month)
    match = _WEEK_RE.fullmatch(text)
    if match:
        try:
            return week_span(int(match[1]), int(match[2]))
        except ValueError as exc:
            raise SpanParseError(str(exc)) from None
    if _YEAR_RE.fullmatch(text):
        return year_span(int(text))
    raise SpanParseError(f"not a date, month, week or year: {text!r}")
