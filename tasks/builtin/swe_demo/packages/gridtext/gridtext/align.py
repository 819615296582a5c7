"""Padding cells to a column width."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .formatting import is_number
from .width import display_width

ALIGNMENTS = ("left", "right", "center")


def align_cell(text: str, width: int, align: str = "left", fill: str = " ") -> str:
    """Pad ``text`` with ``fill`` to ``width`` display columns.

    Text wider than ``width`` is returned unchanged. For ``center`` an odd
    amount of padding puts the extra column on the right.
    """
    if align not in ALIGNMENTS:
        raise ValueError(f"align must be one of {ALIGNMENTS}, got {align!r}")
    if len(fill) != 1 or display_width(fill) != 1:
        raise ValueError("fill must be a single one-column character")
    missing = width - display_width(text)
    if missing <= 0:
        return text
    if align == "left":
        return text + fill * missing
    if align == "right":
        return fill * missing + text
    left = missing // 2
    return fill * left + text + fill * (missing - left)


def infer_alignment(values: Iterable[Any]) -> str:
    """``right`` for a column of numbers (blanks ignored), else ``left``."""
    seen_number = False
    for value in values:
        if value is None or value == "":
            continue
        if not is_number(value):
            return "left"
        seen_number = True
    return "right" if seen_number else "left"
