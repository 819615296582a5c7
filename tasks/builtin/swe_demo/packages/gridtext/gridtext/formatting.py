"""Turning cell values into text."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any


def is_number(value: Any) -> bool:
    """Numbers, and strings that spell a number. Booleans are not numbers."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float, Decimal)):
        return True
    if isinstance(value, str):
        text = value.strip().replace(",", "").replace("_", "")
        if not text:
            return False
        try:
            float(text)
        except ValueError:
            return False
        return True
    return False


def format_value(value: Any, *, precision: int = 2, thousands: bool = False) -> str:
    """Format one cell value.

    ``None`` is blank, booleans are ``yes``/``no``, floats and Decimals get
    ``precision`` decimals, ints and floats can get thousands separators.
    Everything else goes through ``str``.
    """
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}" if thousands else str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (float, Decimal)):
        spec = f",.{precision}f" if thousands else f".{precision}f"
        return format(value, spec)
    return str(value)
