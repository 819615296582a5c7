"""The :class:`Config` object: typed, interpolated access to parsed INI data."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from .errors import NoOptionError, NoSectionError
from .interpolate import interpolate
from .parser import DEFAULT_SECTION, optionxform, parse

T = TypeVar("T")

_UNSET: Any = object()

BOOLEAN_STATES = {
    "1": True,
    "yes": True,
    "true": True,
    "on": True,
    "0": False,
    "no": False,
    "false": False,
    "off": False,
}


def _to_bool(value: str) -> bool:
    key = value.lower()
    if key not in BOOLEAN_STATES:
        raise ValueError(f"not a boolean: {value!r}")
    return BOOLEAN_STATES[key]


class Config:
    """Parsed configuration.

    Values from the ``[DEFAULT]`` section are visible in every section.
    """

    def __init__(self, *, interpolation: bool = True) -> None:
        self._defaults: dict[str, str] = {}
        self._sections: dict[str, dict[str, str]] = {}
        self.interpolation = interpolation

    # -- construction -------------------------------------------------
    @classmethod
    def from_string(cls, text: str, *, strict: bool = True, interpolation: bool = True) -> "Config":
        cfg = cls(interpolation=interpolation)
        data = parse(text, strict=strict)
        cfg._defaults = data.pop(DEFAULT_SECTION, {})
        cfg._sections = data
        return cfg

    @classmethod
    def from_file(cls, path: str | Path, *, encoding: str = "utf-8", **kwargs: Any) -> "Config":
        return cls.from_string(Path(path).read_text(encoding=encoding), **kwargs)

    # -- structure ----------------------------------------------------
    def sections(self) -> list[str]:
        """Section names in file order, without DEFAULT."""
        return list(self._sections)

    def has_section(self, section: str) -> bool:
        return section in self._sections

    def add_section(self, section: str) -> None:
        if section == DEFAULT_SECTION:
            raise ValueError("DEFAULT cannot be added")
        self._sections.setdefault(section, {})

    def options(self, section: str) -> list[str]:
        own = self._section(section)
        return list(own) + [k for k in self._defaults if k not in own]

    def has_option(self, section: str, option: str) -> bool:
        try:
            self._raw(section, option)
        except KeyError:
            return False
        return True

    def set(self, section: str, option: str, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError(f"option values must be str, not {type(value).__name__}")
        target = self._defaults if section == DEFAULT_SECTION else self._section(section)
        target[optionxform(option)] = value

    def remove_option(self, section: str, option: str) -> bool:
        target = self._defaults if section == DEFAULT_SECTION else self._section(section)
        return target.pop(optionxform(option), None) is not None

    # -- access -------------------------------------------------------
    def _section(self, section: str) -> dict[str, str]:
        try:
            return self._sections[section]
        except KeyError:
            raise NoSectionError(section) from None

    def _raw(self, section: str, option: str) -> str:
        key = optionxform(option)
        own = self._defaults if section == DEFAULT_SECTION else self._section(section)
        if key in own:
            return own[key]
        if key in self._defaults:
            return self._defaults[key]
        raise NoOptionError(section, option)

    def get(self, section: str, option: str, *, raw: bool = False, fallback: Any = _UNSET) -> Any:
        """Return the value as a string, interpolated unless ``raw``.

        With ``fallback`` a missing section or option returns ``fallback``
        instead of raising :class:`NoSectionError` / :class:`NoOptionError`.
        """
        try:
            value = self._raw(section, option)
        except (NoSectionError, NoOptionError):
            if fallback is _UNSET:
                raise
            return fallback
        if raw or not self.interpolation:
            return value
        return interpolate(value, section, optionxform(option), self._raw)

    def _convert(
        self, conv: Callable[[str], T], type_name: str, section: str, option: str, fallback: Any
    ) -> T | Any:
        try:
            value = self.get(section, option)
        except (NoSectionError, NoOptionError):
            if fallback is _UNSET:
                raise
            return fallback
        try:
            return conv(value.strip())
        except ValueError:
            raise ValueError(
                f"[{section}] {option}: cannot convert {value!r} to {type_name}"
            ) from None

    def getint(self, section: str, option: str, *, fallback: Any = _UNSET) -> int:
        return self._convert(int, "int", section, option, fallback)

    def getfloat(self, section: str, option: str, *, fallback: Any = _UNSET) -> float:
        return self._convert(float, "float", section, option, fallback)

    def getboolean(self, section: str, option: str, *, fallback: Any = _UNSET) -> bool:
        """Accepts 1/yes/true/on and 0/no/false/off (any case)."""
        return self._convert(_to_bool, "bool", section, option, fallback)

    def getlist(
        self, section: str, option: str, *, sep: str = ",", fallback: Any = _UNSET
    ) -> list[str]:
        """Split on ``sep`` and on newlines; empty items are dropped."""
        try:
            value = self.get(section, option)
        except (NoSectionError, NoOptionError):
            if fallback is _UNSET:
                raise
            return fallback
        items = value.replace("\n", sep).split(sep)
        return [item.strip() for item in items if item.strip()]

    def items(self, section: str, *, raw: bool = False) -> dict[str, str]:
        """All options visible in ``section`` (DEFAULT included)."""
        return {key: self.get(section, key, raw=raw) for key in self.options(section)}

    # -- output -------------------------------------------------------
    def to_string(self) -> str:
        out: list[str] = []
        blocks = ([(DEFAULT_SECTION, self._defaults)] if self._defaults else []) + list(
            self._sections.items()
        )
        for name, values in blocks:
            out.append(f"[{name}]")
            for key, value in values.items():
                lines = value.split("\n")
                out.append(f"{key} = {lines[0]}")
                out.extend(f"    {line}" for line in lines[1:])
            out.append("")
        return "\n".join(out)
