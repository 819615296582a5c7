from datetime import date, datetime

import pytest

from spanlite import DateSpan, merge_spans


def span(a, b):
    return DateSpan(date.fromisoformat(a), date.fromisoformat(b))


def test_days_and_len():
    s = span("2024-02-27", "2024-03-01")
    assert s.days == 4  # leap year
    assert len(s) == 4
    assert DateSpan.single(date(2024, 1, 1)).days == 1


def test_start_after_end_is_rejected():
    with pytest.raises(ValueError):
        span("2024-01-02", "2024-01-01")


def test_datetimes_are_rejected():
    with pytest.raises(TypeError):
        DateSpan(datetime(2024, 1, 1), date(2024, 1, 2))


def test_contains():
    s = span("2024-01-10", "2024-01-20")
    assert date(2024, 1, 10) in s
    assert date(2024, 1, 20) in s
    assert date(2024, 1, 21) not in s
    assert "2024-01-15" not in s
    assert datetime(2024, 1, 15) not in s


def test_iteration():
    assert list(span("2023-12-30", "2024-01-02")) == [
        date(2023, 12, 30),
        date(2023, 12, 31),
        date(2024, 1, 1),
        date(2024, 1, 2),
    ]


def test_overlaps():
    a = span("2024-01-01", "2024-01-10")
    assert a.overlaps(span("2024-01-05", "2024-01-20"))
    assert span("2024-01-05", "2024-01-20").overlaps(a)
    assert a.overlaps(span("2024-01-03", "2024-01-04"))
    assert not a.overlaps(span("2024-01-12", "2024-01-20"))
    assert not span("2024-01-12", "2024-01-20").overlaps(a)


def test_intersection():
    a = span("2024-01-01", "2024-01-10")
    assert a.intersection(span("2024-01-05", "2024-01-20")) == span("2024-01-05", "2024-01-10")
    assert a.intersection(span("2024-01-10", "2024-01-20")) == span("2024-01-10", "2024-01-10")
    assert a.intersection(span("2024-02-01", "2024-02-02")) is None


def test_adjacent():
    assert span("2024-01-01", "2024-01-10").is_adjacent(span("2024-01-11", "2024-01-12"))
    assert span("2024-01-11", "2024-01-12").is_adjacent(span("2024-01-01", "2024-01-10"))
    assert not span("2024-01-01", "2024-01-10").is_adjacent(span("2024-01-12", "2024-01-12"))


def test_shift_and_str():
    s = span("2024-12-30", "2024-12-31").shift(2)
    assert str(s) == "2025-01-01..2025-01-02"


def test_split_by_month():
    parts = span("2024-01-30", "2024-03-02").split_by_month()
    assert [str(p) for p in parts] == [
        "2024-01-30..2024-01-31",
        "2024-02-01..2024-02-29",
        "2024-03-01..2024-03-02",
    ]


def test_split_across_year_end():
    parts = span("2024-12-31", "2025-01-01").split_by_month()
    assert len(parts) == 2


def test_merge_spans():
    merged = merge_spans(
        [
            span("2024-01-10", "2024-01-15"),
            span("2024-01-01", "2024-01-05"),
            span("2024-01-06", "2024-01-08"),  # adjacent to the first
            span("2024-01-12", "2024-01-20"),  # overlaps
            span("2024-02-01", "2024-02-01"),
        ]
    )
    assert [str(s) for s in merged] == [
        "2024-01-01..2024-01-08",
        "2024-01-10..2024-01-20",
        "2024-02-01..2024-02-01",
    ]


def test_merge_spans_empty():
    assert merge_spans([]) == []
