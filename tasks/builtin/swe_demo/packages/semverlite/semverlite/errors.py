"""Exceptions raised by semverlite. All are ``ValueError`` subclasses."""


class SemverError(ValueError):
    """Base class for semverlite errors."""


class InvalidVersion(SemverError):
    """A string is not a valid semantic version."""


class InvalidRange(SemverError):
    """A string is not a valid version range."""
