"""Scaffolds from PyPI in venvs of their own under the harness cache (their dependencies stay out of
ours), made once on first use: `<cache>/scaffolds/<name>-<version>/`."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from pathlib import Path

from sandboxes.images import cache_dir

from ..errors import HarnessError

log = logging.getLogger(__name__)

MINI_SWE_AGENT = "mini-swe-agent==2.4.6"
_LOCK = threading.Lock()


class ScaffoldUnavailable(HarnessError):
    """A scaffold's package could not be installed into its venv."""


def venv_path(requirement: str) -> Path:
    return cache_dir() / "scaffolds" / requirement.replace("==", "-")


def venv_python(requirement: str) -> Path:
    """The python of the venv that has `requirement` (NAME==VERSION) installed; made now if missing."""
    venv = venv_path(requirement)
    python, marker = venv / "bin" / "python", venv / "installed.txt"
    with _LOCK:
        if python.exists() and marker.exists() and marker.read_text().strip() == requirement:
            return python
        log.warning("installing %s into %s (once; a few minutes)", requirement, venv)
        for command in ([sys.executable, "-m", "venv", "--clear", str(venv)], [str(python), "-m", "pip", "install", "-q", requirement]):
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise ScaffoldUnavailable(f"`{' '.join(command)}` failed: {(done.stderr or done.stdout)[-2000:]}")
        marker.write_text(requirement + "\n")
        return python
