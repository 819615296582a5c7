"""Calendar arithmetic: months, ISO weeks, business days."""

from __future__ import annotations

import calendar
from collections.abc import Iterable
from datetime import date, timedelta

from .span import DateSpan


def days_in_month(year: int, month: int) -> int:
    if not 1 <= month <= 12:
        raise ValueError(f"month must be in 1..12, got {month}")
    return calendar.monthrange(year, month)[1]


def add_months(day: date, months: int) -> date:
    """Move by whole months, clamping to the last day of the target month.

    ``add_months(date(2024, 1, 31), 1) == date(2024, 2, 29)``.
    """
    index = day.year * 12 + (day.month - 1) + months
    year, month = divmod(index, 12)
    month += 1
    if not 1 <= year <= 9999:
        raise OverflowError("date out of range")
    return date(year, month, min(day.day, days_in_month(year, month)))


def month_span(year: int, month: int) -> DateSpan:
    return DateSpan(date(year, month, 1), date(year, month, days_in_month(year, month)))


def year_span(year: int) -> DateSpan:
    return DateSpan(date(year, 1, 1), date(year, 12, 31))


def iso_weeks_in_year(year: int) -> int:
    """52 or 53: December 28th always lies in the last ISO week."""
    return date(year, 12, 28).isocalendar()[1]


def week_span(year: int, week: int) -> DateSpan:
    """Monday to Sunday of ISO week ``week`` of ISO year ``year``."""
    if not 1 <= week <= iso_weeks_in_year(year):
        raise ValueError(f"ISO year {year} has no week {week}")
    # ISO week 1 is the week that contains January 4th
    anchor = date(year, 1, 4)
    monday = anchor - timedelta(days=anchor.weekday()) + timedelta(weeks=week - 1)
    return DateSpan(monday, monday + timedelta(days=6))


def business_days(span: DateSpan, holidays: Iterable[date] = ()) -> int:
    """Monday-to-Friday days in ``span`` that are not holidays."""
    off = set(holidays)
    return sum(1 for day in span if day.weekday() < 5 and day not in off)
