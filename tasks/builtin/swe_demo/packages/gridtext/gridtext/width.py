"""How many terminal columns a string occupies."""

from __future__ import annotations

import unicodedata

ELLIPSIS = "\u2026"


def char_width(ch: str) -> int:
    """Columns taken by one code point: 0, 1 or 2.

    East Asian wide and fullwidth characters take two columns; combining
    marks, format characters (zero-width joiner, ...) and control
    characters take none.
    """
    if len(ch) != 1:
        raise ValueError(f"expected a single character, got {ch!r}")
    if unicodedata.combining(ch):
        return 0
    category = unicodedata.category(ch)
    if category in ("Mn", "Me", "Cf", "Cc"):
        return 0
    if unicodedata.east_asian_width(ch) in ("W", "F"):
        return 2
    return 1


def display_width(text: str) -> int:
    """Columns taken by ``text`` when printed on one line."""
    return sum(char_width(ch) for ch in text)


def truncate(text: str, width: int, ellipsis: str = ELLIPSIS) -> str:
    """Shorten ``text`` to at most ``width`` columns, ending with ``ellipsis``.

    Text that already fits is returned unchanged. A wide character that
    would straddle the limit is dropped entirely.
    """
    if width < 0:
        raise ValueError("width must be >= 0")
    if display_width(text) <= width:
        return text
    marker_width = display_width(ellipsis)
    if marker_width > width:
        return ""
    budget = width - marker_width
    kept: list[str] = []
    used = 0
    for ch in text:
        w = char_width(ch)
        if used + w > budget:
            break
        kept.append(ch)
        used += w
    return "".join(kept) + ellipsis
