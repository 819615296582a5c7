"""npm-style version ranges: ``^1.2``, ``~1.2.3``, ``>=1.0 <2``, ``1.x || 2.x``, ``1 - 2``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import InvalidRange, InvalidVersion
from .version import Version

OPERATORS = ("<=", ">=", "<", ">", "=")

_WILDCARDS = {"x", "X", "*"}
_PART = r"(?:0|[1-9]\d*|[xX*])"
_IDENT = r"[0-9A-Za-z-]+"
_PARTIAL_RE = re.compile(
    rf"v?(?P<major>{_PART})(?:\.(?P<minor>{_PART})(?:\.(?P<patch>{_PART})"
    rf"(?:-(?P<pre>{_IDENT}(?:\.{_IDENT})*))?(?:\+{_IDENT}(?:\.{_IDENT})*)?)?)?"
)
_TOKEN_RE = re.compile(r"(<=|>=|<|>|=|\^|~>?)?(.*)")
_HYPHEN_RE = re.compile(r"\s*(\S+)\s+-\s+(\S+)\s*")

Partial = tuple["int | None", "int | None", "int | None", tuple[str, ...]]


@dataclass(frozen=True)
class Comparator:
    op: str
    version: Version

    def matches(self, version: Version) -> bool:
        key, own = version.sort_key(), self.version.sort_key()
        if self.op == "=":
            return key == own
        if self.op == "<":
            return key < own
        if self.op == "<=":
            return key <= own
        if self.op == ">":
            return key > own
        if self.op == ">=":
            return key >= own
        raise AssertionError(self.op)

    def __str__(self) -> str:
        return f"{self.op}{self.version}"


_ANY = Comparator(">=", Version(0, 0, 0))
_NONE = Comparator("<", Version(0, 0, 0))


def _parse_partial(text: str, source: str) -> Partial:
    match = _PARTIAL_RE.fullmatch(text)
    if match is None:
        raise InvalidRange(f"bad version {text!r} in range {source!r}")
    parts: list[int | None] = []
    wildcard_seen = False
    for name in ("major", "minor", "patch"):
        raw = match[name]
        if raw is None or raw in _WILDCARDS or wildcard_seen:
            wildcard_seen = True
            parts.append(None)
        else:
            parts.append(int(raw))
    pre = tuple(match["pre"].split(".")) if match["pre"] and parts[2] is not None else ()
    return parts[0], parts[1], parts[2], pre


def _floor(major: int, minor: int | None, patch: int | None, pre: tuple[str, ...]) -> Version:
    return Version(major, minor or 0, patch or 0, pre)


def _caret(major: int | None, minor: int | None, patch: int | None, pre) -> list[Comparator]:
    if major is None:
        return [_ANY]
    lower = _floor(major, minor, patch, pre)
    if major != 0 or minor is None:
        upper = Version(major + 1, 0, 0)
    elif minor != 0 or patch is None:
        upper = Version(0, minor + 1, 0)
    else:
        upper = Version(0, 0, patch + 1)
    return [Comparator(">=", lower), Comparator("<", upper)]


def _tilde(major: int | None, minor: int | None, patch: int | None, pre) -> list[Comparator]:
    if major is None:
        return [_ANY]
    lower = _floor(major, minor, patch, pre)
    upper = Version(major + 1, 0, 0) if minor is None else Version(major, minor + 1, 0)
    return [Comparator(">=", lower), Comparator("<", upper)]


def _next_after_partial(major: int, minor: int | None) -> Version:
    return Version(major + 1, 0, 0) if minor is None else Version(major, minor + 1, 0)


def _primitive(op: str, major, minor, patch, pre) -> list[Comparator]:
    if major is None:
        return [_NONE] if op in ("<", ">") else [_ANY]
    if patch is not None:
        return [Comparator(op or "=", Version(major, minor, patch, pre))]
    lower = _floor(major, minor, patch, pre)
    upper = _next_after_partial(major, minor)
    if op in ("", "="):
        return [Comparator(">=", lower), Comparator("<", upper)]
    if op == ">":
        return [Comparator(">=", upper)]
    if op == ">=":
        return [Comparator(">=", lower)]
    if op == "<":
        return [Comparator("<", lower)]
    return [Comparator("<", upper)]  # "<="


def _hyphen(low: str, high: str, source: str) -> list[Comparator]:
    lo = _parse_partial(low, source)
    hi = _parse_partial(high, source)
    comparators = [_ANY] if lo[0] is None else [Comparator(">=", _floor(*lo))]
    if hi[0] is None:
        return comparators
    if hi[2] is not None:
        comparators.append(Comparator("<=", Version(hi[0], hi[1], hi[2], hi[3])))
    else:
        comparators.append(Comparator("<", _next_after_partial(hi[0], hi[1])))
    return comparators


def _parse_set(text: str, source: str) -> list[Comparator]:
    hyphen = _HYPHEN_RE.fullmatch(text)
    if hyphen:
        return _hyphen(hyphen[1], hyphen[2], source)
    # allow whitespace between an operator and its version: ">= 1.2"
    text = re.sub(r"(<=|>=|<|>|=|\^|~>?)\s+", r"\1", text.strip())
    if not text:
        return [_ANY]
    comparators: list[Comparator] = []
    for token in text.split():
        match = _TOKEN_RE.fullmatch(token)
        assert match is not None
        op, rest = match[1] or "", match[2]
        if not rest:
            raise InvalidRange(f"operator without a version in {source!r}")
        parts = _parse_partial(rest, source)
        if op == "^":
            comparators += _caret(*parts)
        elif op in ("~", "~>"):
            comparators += _tilde(*parts)
        else:
            comparators += _primitive(op, *parts)
    return comparators


class Range:
    """A union (``||``) of comparator sets (space separated, all must match)."""

    def __init__(self, sets: list[list[Comparator]], source: str = "") -> None:
        self.sets = sets
        self.source = source

    @classmethod
    def parse(cls, text: "str | Range") -> "Range":
        if isinstance(text, Range):
            return text
        if not isinstance(text, str):
            raise InvalidRange(f"expected a string, got {type(text).__name__}")
        return cls([_parse_set(part, text) for part in text.split("||")], text)

    def contains(self, version: "Version | str", *, include_prerelease: bool = False) -> bool:
        """Whether ``version`` satisfies the range.

        A pre-release version only matches a comparator set in which some
        comparator is itself a pre-release of the same major.minor.patch
        (so ``>=1.2.3-rc.1`` admits ``1.2.3-rc.2`` but not ``1.3.0-rc.1``),
        unless ``include_prerelease`` is true.
        """
        try:
            v = Version.parse(version)
        except InvalidVersion:
            return False
        return any(self._set_matches(s, v, include_prerelease) for s in self.sets)

    @staticmethod
    def _set_matches(comparators: list[Comparator], v: Version, include_prerelease: bool) -> bool:
        if not all(c.matches(v) for c in comparators):
            return False
        if v.prerelease and not include_prerelease:
            return any(
                c.version.prerelease and c.version.release == v.release for c in comparators
            )
        return True

    def __contains__(self, version: object) -> bool:
        if not isinstance(version, (str, Version)):
            return False
        return self.contains(version)

    def __str__(self) -> str:
        return " || ".join(" ".join(str(c) for c in s) for s in self.sets)

    def __repr__(self) -> str:
        return f"Range({self.source!r})"


def satisfies(version: "Version | str", range_: "Range | str", *, include_prerelease: bool = False) -> bool:
    """Shortcut for ``Range.parse(range_).contains(version)``."""
    return Range.parse(range_).contains(version, include_prerelease=include_prerelease)
