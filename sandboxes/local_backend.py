"""The local backend's former module: it is the `sandboxes.local` package now."""

from .local import BWRAP_HINT, LocalBackend, LocalSandbox

__all__ = ["BWRAP_HINT", "LocalBackend", "LocalSandbox"]
