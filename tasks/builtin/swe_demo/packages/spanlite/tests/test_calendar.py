from datetime import date

import pytest

from spanlite import (
    DateSpan,
    add_months,
    business_days,
    days_in_month,
    iso_weeks_in_year,
    month_span,
    week_span,
    year_span,
)


@pytest.mark.parametrize(
    "year,month,expected",
    [(2024, 2, 29), (2023, 2, 28), (1900, 2, 28), (2000, 2, 29), (2024, 4, 30), (2024, 12, 31)],
)
def test_days_in_month(year, month, expected):
    assert days_in_month(year, month) == expected


def test_days_in_month_rejects_bad_month():
    with pytest.raises(ValueError):
        days_in_month(2024, 13)


@pytest.mark.parametrize(
    "start,months,expected",
    [
        (date(2024, 1, 31), 1, date(2024, 2, 29)),
        (date(2023, 1, 31), 1, date(2023, 2, 28)),
        (date(2024, 11, 15), 3, date(2025, 2, 15)),
        (date(2024, 3, 31), -1, date(2024, 2, 29)),
        (date(2024, 1, 15), -13, date(2022, 12, 15)),
        (date(2024, 5, 5), 0, date(2024, 5, 5)),
    ],
)
def test_add_months(start, months, expected):
    assert add_months(start, months) == expected


def test_add_months_overflow():
    with pytest.raises(OverflowError):
        add_months(date(9999, 12, 1), 1)


def test_month_and_year_spans():
    assert month_span(2024, 2) == DateSpan(date(2024, 2, 1), date(2024, 2, 29))
    assert year_span(2023).days == 365


def test_iso_weeks_in_year():
    assert iso_weeks_in_year(2020) == 53
    assert iso_weeks_in_year(2024) == 52


def test_week_span_2024():
    assert week_span(2024, 1) == DateSpan(date(2024, 1, 1), date(2024, 1, 7))
    assert week_span(2024, 10) == DateSpan(date(2024, 3, 4), date(2024, 3, 10))


def test_week_span_starting_in_previous_december():
    assert week_span(2020, 1).start == date(2019, 12, 30)
    assert week_span(2026, 1).start == date(2025, 12, 29)


def test_week_53():
    assert week_span(2020, 53) == DateSpan(date(2020, 12, 28), date(2021, 1, 3))
    with pytest.raises(ValueError):
        week_span(2024, 53)
    with pytest.raises(ValueError):
        week_span(2024, 0)


def test_week_span_is_monday_to_sunday():
    s = week_span(2024, 30)
    assert s.start.weekday() == 0 and s.end.weekday() == 6
    assert s.start.isocalendar()[1] == 30


def test_business_days():
    january = month_span(2024, 1)
    assert business_days(january) == 23
    assert business_days(january, holidays=[date(2024, 1, 1), date(2024, 1, 6)]) == 22
