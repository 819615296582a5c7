"""The :class:`DateSpan` value type: a closed range of calendar days."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date, timedelta

ONE_DAY = timedelta(days=1)


@dataclass(frozen=True, order=True)
class DateSpan:
    """All days from ``start`` to ``end``, both included."""

    start: date
    end: date

    def __post_init__(self) -> None:
        for name in ("start", "end"):
            value = getattr(self, name)
            # datetime is a subclass of date; a span is made of whole days
            if not isinstance(value, date) or hasattr(value, "hour"):
                raise TypeError(f"{name} must be a datetime.date, got {type(value).__name__}")
        if self.start > self.end:
            raise ValueError(f"span starts after it ends: {self.start} > {self.end}")

    @classmethod
    def single(cls, day: date) -> "DateSpan":
        return cls(day, day)

    @property
    def days(self) -> int:
        """Number of days in the span (a one-day span has 1)."""
        return (self.end - self.start).days + 1

    def __len__(self) -> int:
        return self.days

    def __contains__(self, day: object) -> bool:
        if not isinstance(day, date) or hasattr(day, "hour"):
            return False
        return self.start <= day <= self.end

    def __iter__(self) -> Iterator[date]:
        day = self.start
        while day <= self.end:
            yield day
            day += ONE_DAY

    def overlaps(self, other: "DateSpan") -> bool:
        """Whether the two spans share at least one day."""
        return self.start <= other.end and other.start <= self.end

    def intersection(self, other: "DateSpan") -> "DateSpan | None":
        start, end = max(self.start, other.start), min(self.end, other.end)
        return DateSpan(start, end) if start <= end else None

    def is_adjacent(self, other: "DateSpan") -> bool:
        """True when one span ends the day before the other starts."""
        return self.end + ONE_DAY == other.start or other.end + ONE_DAY == self.start

    def shift(self, days: int) -> "DateSpan":
        delta = timedelta(days=days)
        return DateSpan(self.start + delta, self.end + delta)

    def split_by_month(self) -> list["DateSpan"]:
        """Cut the span at month boundaries."""
        pieces = []
        start = self.start
        while start <= self.end:
            if start.month == 12:
                next_month = date(start.year + 1, 1, 1)
            else:
                next_month = date(start.year, start.month + 1, 1)
            end = min(self.end, next_month - ONE_DAY)
            pieces.append(DateSpan(start, end))
            start = end + ONE_DAY
        return pieces

    def __str__(self) -> str:
        return f"{self.start.isoformat()}..{self.end.isoformat()}"


def merge_spans(spans: Iterable[DateSpan]) -> list[DateSpan]:
    """Merge overlapping and adjacent spans; the result is sorted."""
    merged: list[DateSpan] = []
    for span in sorted(spans):
        if merged and span.start <= merged[-1].end + ONE_DAY:
            last = merged[-1]
            merged[-1] = DateSpan(last.start, max(last.end, span.end))
        else:
            merged.append(span)
    return merged
