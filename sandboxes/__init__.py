"""Where commands run: isolated, stateful sandboxes (Docker by default, bubblewrap without a daemon)."""

from __future__ import annotations

import logging

from .base import Backend, Sandbox, Snapshot, close_all, install_signal_handlers, live_count
from .errors import (
    DiskLimitExceeded,
    EngineUnavailable,
    FileNotFoundInSandbox,
    ImageNotFound,
    SandboxClosed,
    SandboxError,
    SandboxExpired,
)
from .pool import SandboxPool
from .spec import ExecResult, SandboxSpec

log = logging.getLogger(__name__)
BACKENDS = ("auto", "docker", "local", "overlay", "podman")

__all__ = [
    "Backend",
    "Sandbox",
    "Snapshot",
    "SandboxPool",
    "SandboxSpec",
    "ExecResult",
    "SandboxError",
    "DiskLimitExceeded",
    "EngineUnavailable",
    "FileNotFoundInSandbox",
    "ImageNotFound",
    "SandboxClosed",
    "SandboxExpired",
    "close_all",
    "get_backend",
    "install_signal_handlers",
    "live_count",
]


def get_backend(name: str = "auto", **options) -> Backend:
    """A backend by name; "auto" takes Docker where an engine answers, else bubblewrap over the base
    root filesystem ("local"); "overlay" runs any image under bubblewrap, without a daemon; "podman" runs
    the Docker backend's containers through Podman."""
    if name not in BACKENDS:
        raise SandboxError(f"unknown sandbox backend {name!r}; choose one of {', '.join(BACKENDS)}")
    if name in ("auto", "docker"):
        from .docker_backend import DockerBackend, engine_available

        if name == "docker" or engine_available():
            return DockerBackend(**options)
        log.warning("no Docker engine answers: falling back to the local bubblewrap backend")
    if name == "podman":
        from .podman_backend import PodmanBackend

        return PodmanBackend(**options)
    if name == "overlay":
        from .local.overlay import OverlayBackend

        return OverlayBackend(**options)
    from .local import LocalBackend

    return LocalBackend(**options)
