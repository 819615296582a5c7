"""pip and uv run on the host: downloads for a base's Python, pins as of a date.

Also the two small helpers the project image and the wheel builds share: `timed` (how long a step
took) and `quote` (one word of a shell command run in a container).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .build_backend import scm_env
from .errors import SynthError


def host_python() -> str:
    return f"{sys.version_info[0]}.{sys.version_info[1]}"


def for_python(python: str) -> list[str]:
    """pip's options to download for the base's Python rather than the host's (nothing when they are the same)."""
    return [] if python == host_python() else ["--python-version", python]


def pinned(project: Path, targets: list[str], before: str | None, python: str, version: str = "") -> list[str]:
    """`targets` (requirements, `.` for the project) resolved to exact pins for `python` (as of `before`, where
    given), the project itself left out."""
    wanted = project / ".harness-requirements.in"
    wanted.write_text("\n".join(targets) + "\n")
    done = uv_compile(project, wanted.name, before, python, version=version)
    wanted.unlink()
    if done.returncode != 0:
        when = f" as of {before}" if before else ""
        raise SynthError(
            f"resolving the dependencies for Python {python}{when} failed (uv pip compile): {problems(done)}"
        )
    pins = [line.split(";")[0].strip() for line in done.stdout.splitlines()]
    return [pin for pin in pins if "==" in pin]


def uv_compile(
    cwd: Path, wanted: str, before: str | None, python: str, *options: str, version: str = ""
) -> subprocess.CompletedProcess:
    newer = ["--exclude-newer", before] if before else []
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "uv",
            "pip",
            "compile",
            "--quiet",
            "--no-header",
            "--no-annotate",
            *newer,
            "--python-version",
            python,
            *options,
            wanted,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env=scm_env(version),
    )


def pip(cwd: Path, *args, version: str = "") -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env=scm_env(version),
    )
    if done.returncode != 0:
        raise SynthError(f"pip {args[0]} of the project's dependencies failed: {problems(done)}")


def problems(done: subprocess.CompletedProcess) -> str:
    """The end of a failed pip or uv run's stderr, without pip's warnings (a machine's pip configuration
    can print one per package before the error that matters)."""
    lines = [line for line in done.stderr.splitlines() if not line.startswith("WARNING:")]
    return "\n".join(lines).strip()[-1500:]


def tail(err: Exception, size: int = 400) -> str:
    """The end of an error's message, where pip and uv put the reason."""
    text = str(err)
    return text if len(text) <= size else "..." + text[-size:]


@contextmanager
def timed(on_step: Callable[[str], None], what: str) -> Iterator[None]:
    """Report how long `what` took (where mining and synthesis spend their time)."""
    started = time.monotonic()
    try:
        yield
    finally:
        on_step(f"{what}: {time.monotonic() - started:.0f}s")


def quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"
