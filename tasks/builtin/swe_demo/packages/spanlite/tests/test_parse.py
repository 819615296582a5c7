from datetime import date, datetime, timezone

import pytest

from spanlite import DateSpan, SpanParseError, day_bounds, parse_date, parse_span, parse_timestamp, to_utc


def test_parse_date():
    assert parse_date("2024-03-05") == date(2024, 3, 5)
    assert parse_date("  2024-03-05\n") == date(2024, 3, 5)


@pytest.mark.parametrize("bad", ["2024-3-5", "20240305", "2024-03-05T00:00", "", "yesterday"])
def test_parse_date_rejects_malformed(bad):
    with pytest.raises(SpanParseError):
        parse_date(bad)


def test_span_error_is_a_value_error():
    assert issubclass(SpanParseError, ValueError)


def test_parse_span_forms():
    assert parse_span("2024-01-05") == DateSpan(date(2024, 1, 5), date(2024, 1, 5))
    assert parse_span("2024-02") == DateSpan(date(2024, 2, 1), date(2024, 2, 29))
    assert parse_span("2024") == DateSpan(date(2024, 1, 1), date(2024, 12, 31))
    assert parse_span("2024-W02") == DateSpan(date(2024, 1, 8), date(2024, 1, 14))
    assert parse_span("2024w02") == parse_span("2024-W02")


def test_parse_span_ranges():
    assert parse_span("2024-01-05..2024-02-10") == DateSpan(date(2024, 1, 5), date(2024, 2, 10))
    assert parse_span("2024-01..2024-03") == DateSpan(date(2024, 1, 1), date(2024, 3, 31))
    assert parse_span(" 2024-12-30 .. 2025 ") == DateSpan(date(2024, 12, 30), date(2025, 12, 31))


@pytest.mark.parametrize("bad", ["2024-13", "2024-W54", "2024-02-10..2024-01-01", "soon", "2024-01-01..", "..2024"])
def test_parse_span_errors(bad):
    with pytest.raises(SpanParseError):
        parse_span(bad)


def test_parse_timestamp_z_and_naive():
    expected = datetime(2024, 3, 10, 12, 0, tzinfo=timezone.utc)
    assert parse_timestamp("2024-03-10T12:00:00Z") == expected
    assert parse_timestamp("2024-03-10T12:00:00") == expected
    assert parse_timestamp("2024-03-10T12:00:00+00:00") == expected
    assert parse_timestamp("2024-03-10T12:00:00Z").tzinfo is timezone.utc


def test_parse_timestamp_rejects_garbage():
    with pytest.raises(SpanParseError):
        parse_timestamp("tomorrow at noon")
    with pytest.raises(SpanParseError):
        parse_timestamp("")


def test_to_utc_naive_is_assumed_utc():
    assert to_utc(datetime(2024, 1, 1, 8)) == datetime(2024, 1, 1, 8, tzinfo=timezone.utc)


def test_day_bounds_utc():
    start, end = day_bounds(date(2024, 1, 1))
    assert start == datetime(2024, 1, 1, tzinfo=timezone.utc)
    assert end == datetime(2024, 1, 2, tzinfo=timezone.utc)
