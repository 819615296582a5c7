"""The :class:`Version` value type (Semantic Versioning 2.0.0)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .errors import InvalidVersion

_NUM = r"0|[1-9]\d*"
_IDENT = r"[0-9A-Za-z-]+"
VERSION_RE = re.compile(
    rf"""
    v?
    (?P<major>{_NUM})\.(?P<minor>{_NUM})\.(?P<patch>{_NUM})
    (?:-(?P<pre>{_IDENT}(?:\.{_IDENT})*))?
    (?:\+(?P<build>{_IDENT}(?:\.{_IDENT})*))?
    """,
    re.VERBOSE,
)


def _identifier_key(ident: str) -> tuple[int, int | str]:
    # Numeric identifiers compare numerically and sort before alphanumeric ones.
    if ident.isdigit():
        return (0, int(ident))
    return (1, ident)


def _validate_prerelease(parts: tuple[str, ...], text: str) -> None:
    for part in parts:
        if part.isdigit() and len(part) > 1 and part.startswith("0"):
            raise InvalidVersion(f"numeric pre-release identifier has a leading zero: {text!r}")


@dataclass(frozen=True, eq=False)
class Version:
    major: int
    minor: int
    patch: int
    prerelease: tuple[str, ...] = ()
    build: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        for name in ("major", "minor", "patch"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InvalidVersion(f"{name} must be a non-negative int, got {value!r}")

    # -- parsing ------------------------------------------------------
    @classmethod
    def parse(cls, text: "str | Version") -> "Version":
        """Parse ``"1.2.3"``, ``"v1.2.3-rc.1+build.5"``... Raises :class:`InvalidVersion`."""
        if isinstance(text, Version):
            return text
        if not isinstance(text, str):
            raise InvalidVersion(f"expected a string, got {type(text).__name__}")
        candidate = text.strip().lstrip("=").strip()
        match = VERSION_RE.fullmatch(candidate)
        if match is None:
            raise InvalidVersion(f"not a semantic version: {text!r}")
        pre = tuple(match["pre"].split(".")) if match["pre"] else ()
        _validate_prerelease(pre, text)
        build = tuple(match["build"].split(".")) if match["build"] else ()
        return cls(int(match["major"]), int(match["minor"]), int(match["patch"]), pre, build)

    @classmethod
    def is_valid(cls, text: str) -> bool:
        try:
            cls.parse(text)
        except InvalidVersion:
            return False
        return True

    # -- comparison ---------------------------------------------------
    def sort_key(self) -> tuple:
        """Precedence key; build metadata does not take part."""
        if not self.prerelease:
            pre_key: tuple = (1,)
        else:
            pre_key = (0, tuple(_identifier_key(p) for p in self.prerelease))
        return (self.major, self.minor, self.patch, pre_key)

    def _coerce(self, other: object) -> "Version | None":
        if isinstance(other, Version):
            return other
        if isinstance(other, str):
            return Version.parse(other)
        return None

    def __eq__(self, other: object) -> bool:
        o = self._coerce(other)
        return NotImplemented if o is None else self.sort_key() == o.sort_key()

    def __hash__(self) -> int:
        return hash(self.sort_key())

    def __lt__(self, other: object) -> bool:
        o = self._coerce(other)
        return NotImplemented if o is None else self.sort_key() < o.sort_key()

    def __le__(self, other: object) -> bool:
        o = self._coerce(other)
        return NotImplemented if o is None else self.sort_key() <= o.sort_key()

    def __gt__(self, other: object) -> bool:
        o = self._coerce(other)
        return NotImplemented if o is None else self.sort_key() > o.sort_key()

    def __ge__(self, other: object) -> bool:
        o = self._coerce(other)
        return NotImplemented if o is None else self.sort_key() >= o.sort_key()

    # -- helpers ------------------------------------------------------
    @property
    def is_prerelease(self) -> bool:
        return bool(self.prerelease)

    @property
    def release(self) -> "Version":
        """The same version without pre-release and build parts."""
        return Version(self.major, self.minor, self.patch)

    def next_major(self) -> "Version":
        if self.prerelease and self.minor == 0 and self.patch == 0:
            return self.release
        return Version(self.major + 1, 0, 0)

    def next_minor(self) -> "Version":
        if self.prerelease and self.patch == 0:
            return self.release
        return Version(self.major, self.minor + 1, 0)

    def next_patch(self) -> "Version":
        if self.prerelease:
            return self.release
        return Version(self.major, self.minor, self.patch + 1)

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += "-" + ".".join(self.prerelease)
        if self.build:
            text += "+" + ".".join(self.build)
        return text

    def __repr__(self) -> str:
        return f"Version({str(self)!r})"
