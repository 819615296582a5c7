"""spanlite: inclusive date spans and the calendar arithmetic around them.

>>> from spanlite import parse_span
>>> span = parse_span("2024-02")
>>> span.start, span.end, span.days
(datetime.date(2024, 2, 1), datetime.date(2024, 2, 29), 29)
"""

from .calendar_util import (
    add_months,
    business_days,
    days_in_month,
    iso_weeks_in_year,
    month_span,
    week_span,
    year_span,
)
from .errors import SpanParseError
from .parse import parse_date, parse_span
from .span import DateSpan, merge_spans
from .timestamps import day_bounds, parse_timestamp, to_utc

__all__ = [
    "DateSpan",
    "SpanParseError",
    "add_months",
    "business_days",
    "day_bounds",
    "days_in_month",
    "iso_weeks_in_year",
    "merge_spans",
    "month_span",
    "parse_date",
    "parse_span",
    "parse_timestamp",
    "to_utc",
    "week_span",
    "year_span",
]

__version__ = "0.1.0"
