"""``${option}`` and ``${section:option}`` interpolation."""

from __future__ import annotations

import re
from collections.abc import Callable

from .errors import InterpolationDepthError, InterpolationMissingError
from .parser import optionxform

MAX_DEPTH = 10

_TOKEN = re.compile(r"\$\$|\$\{([^{}]*)\}")

Lookup = Callable[[str, str], str]


def interpolate(
    value: str, section: str, option: str, lookup: Lookup, *, max_depth: int = MAX_DEPTH
) -> str:
    """Expand references in ``value``.

    ``${name}`` refers to an option of the same section (or DEFAULT),
    ``${other:name}`` to an option of section ``other``; ``$$`` is a literal
    ``$``. ``lookup(section, option)`` returns the raw value or raises
    ``KeyError``. References may nest up to ``max_depth`` levels.
    """
    return _expand(value, section, option, lookup, 1, max_depth)


def _expand(
    value: str, section: str, option: str, lookup: Lookup, depth: int, max_depth: int
) -> str:
    if "$" not in value:
        return value
    if depth > max_depth:
        raise InterpolationDepthError(
            section, option, f"references nest deeper than {max_depth} levels"
        )

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        reference = match.group(1)
        if ":" in reference:
            ref_section, _, ref_option = reference.partition(":")
            ref_section = ref_section.strip()
        else:
            ref_section, ref_option = section, reference
        ref_option = optionxform(ref_option)
        try:
            raw = lookup(ref_section, ref_option)
        except KeyError:
            raise InterpolationMissingError(section, option, reference) from None
        return _expand(raw, ref_section, ref_option, lookup, depth + 1, max_depth)

    return _TOKEN.sub(replace, value)


def references(value: str) -> list[str]:
    """Return the references (``name`` or ``section:name``) used in ``value``."""
    return [m.group(1) for m in _TOKEN.finditer(value) if m.group(1) is not None]
