"""What can stop a synthesis run as a whole (bad candidates are only counted, never raised)."""

from __future__ import annotations

from ..errors import TaskError


class SynthError(TaskError):
    """The project cannot be turned into tasks; the message says why and what to try."""
