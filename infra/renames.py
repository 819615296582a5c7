"""Former spellings of what users type (CLI flags, YAML keys, reward_spec keys and values): still read,
with a warning that names the current spelling. docs/concepts.md lists them all."""

from __future__ import annotations

import warnings
from typing import Any


def warn_renamed(old: str, new: str) -> None:
    """Say once per spelling that `old` was read as `new` (a FutureWarning: shown to users by default)."""
    warnings.warn(f"{old} is deprecated: use {new}", FutureWarning, stacklevel=3)


def take_renamed(mapping: dict[str, Any], old: str, new: str, where: str = "") -> dict[str, Any]:
    """`mapping` with its key `old` moved to `new` (a copy, with a warning); both present is an error."""
    if old not in mapping:
        return mapping
    if new in mapping:
        raise ValueError(f"{where}{old} and {new} are the same setting: keep {new}")
    warn_renamed(f"{where}{old}", f"{where}{new}")
    out = {k: v for k, v in mapping.items() if k != old}
    out[new] = mapping[old]
    return out
