"""One exception hierarchy for everything that goes wrong where commands run."""


class SandboxError(Exception):
    """A sandbox could not do what was asked; the message says what and how to fix it."""


class EngineUnavailable(SandboxError):
    """No container engine answers (Docker not installed or not running)."""


class ImageNotFound(SandboxError):
    """The image a spec names does not exist locally."""


class SandboxClosed(SandboxError):
    """The sandbox was closed, or its container died, before or during the call."""


class SandboxExpired(SandboxError):
    """The sandbox ran past its wall-clock limit."""


class FileNotFoundInSandbox(SandboxError, FileNotFoundError):
    """A path asked for does not exist inside the sandbox."""


class DiskLimitExceeded(SandboxClosed):
    """The sandbox wrote more than its disk limit (`spec.disk`) and was stopped."""
