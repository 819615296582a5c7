"""Exceptions raised by spanlite."""


class SpanParseError(ValueError):
    """Text could not be read as a date, a span or a timestamp."""
