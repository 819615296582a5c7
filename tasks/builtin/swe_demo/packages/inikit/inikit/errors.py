"""Exception hierarchy for inikit."""

from __future__ import annotations


class InikitError(Exception):
    """Base class for every error raised by inikit."""


class ParseError(InikitError):
    """The text is not valid INI. ``lineno`` is 1-based."""

    def __init__(self, message: str, lineno: int, line: str) -> None:
        self.message = message
        self.lineno = lineno
        self.line = line
        super().__init__(f"line {lineno}: {message}: {line!r}")


class DuplicateSectionError(ParseError):
    """A section header appears twice (strict mode only)."""


class DuplicateOptionError(ParseError):
    """An option appears twice in one section (strict mode only)."""


class NoSectionError(InikitError, KeyError):
    """The requested section does not exist."""

    def __init__(self, section: str) -> None:
        self.section = section
        super().__init__(f"no section {section!r}")

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class NoOptionError(InikitError, KeyError):
    """The requested option does not exist in the section (nor in DEFAULT)."""

    def __init__(self, section: str, option: str) -> None:
        self.section = section
        self.option = option
        super().__init__(f"no option {option!r} in section {section!r}")

    def __str__(self) -> str:
        return str(self.args[0])


class InterpolationError(InikitError):
    """A ``${...}`` reference could not be expanded."""

    def __init__(self, section: str, option: str, message: str) -> None:
        self.section = section
        self.option = option
        super().__init__(f"[{section}] {option}: {message}")


class InterpolationMissingError(InterpolationError):
    """A ``${...}`` reference names an option that does not exist."""

    def __init__(self, section: str, option: str, reference: str) -> None:
        self.reference = reference
        super().__init__(section, option, f"bad reference ${{{reference}}}")


class InterpolationDepthError(InterpolationError):
    """References nest too deeply (usually a reference cycle)."""
