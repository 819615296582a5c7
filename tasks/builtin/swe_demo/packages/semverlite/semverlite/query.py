"""Pick and order versions from a list of strings."""

from __future__ import annotations

from collections.abc import Iterable

from .errors import InvalidVersion
from .ranges import Range
from .version import Version


def sort_versions(versions: Iterable[str], *, reverse: bool = False) -> list[str]:
    """Sort version strings by precedence; raises :class:`InvalidVersion` on junk."""
    return sorted(versions, key=lambda v: Version.parse(v).sort_key(), reverse=reverse)


def _matching(
    versions: Iterable[str], range_: "Range | str", include_prerelease: bool
) -> list[tuple[Version, str]]:
    rng = Range.parse(range_)
    found = []
    for text in versions:
        try:
            parsed = Version.parse(text)
        except InvalidVersion:
            continue  # registries list junk; skip it like npm does
        if rng.contains(parsed, include_prerelease=include_prerelease):
            found.append((parsed, text))
    return found


def max_satisfying(
    versions: Iterable[str], range_: "Range | str", *, include_prerelease: bool = False
) -> str | None:
    """The highest version in ``versions`` that satisfies ``range_``, or None."""
    found = _matching(versions, range_, include_prerelease)
    if not found:
        return None
    return max(found, key=lambda pair: pair[0])[1]


def min_satisfying(
    versions: Iterable[str], range_: "Range | str", *, include_prerelease: bool = False
) -> str | None:
    """The lowest version in ``versions`` that satisfies ``range_``, or None."""
    found = _matching(versions, range_, include_prerelease)
    if not found:
        return None
    return min(found, key=lambda pair: pair[0])[1]


def latest(versions: Iterable[str], *, include_prerelease: bool = False) -> str | None:
    """The highest valid version; pre-releases only if ``include_prerelease``."""
    return max_satisfying(versions, "*", include_prerelease=include_prerelease)
