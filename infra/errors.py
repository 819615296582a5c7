"""The errors of run directories and registries; the message says what was wrong and what to do."""

from __future__ import annotations


class InfraError(Exception):
    """Base of the infra package."""
