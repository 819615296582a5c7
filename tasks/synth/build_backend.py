"""What a project's PEP 517 build backend needs, asked on the host before the offline image build.

`build-system.requires` is only part of it: a backend names more requirements at build time
(`get_requires_for_build_wheel` / `get_requires_for_build_editable`: hatchling asks for
`editables` for an editable install, setuptools for `wheel` on old releases). The backend is
installed from the wheelhouse into a scratch folder and asked, as `pip` and `python -m build` ask
it, through `pyproject_hooks`. Whether it can make an editable install at all (PEP 660
`build_editable`; old flit-core and poetry-core releases cannot) decides how the image installs the
project. setuptools projects without a `pyproject.toml` build-system table use the legacy backend,
for which pip can always make an editable install.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from pyproject_hooks import BuildBackendHookCaller, BuildBackendWarning

LEGACY_BACKEND = "setuptools.build_meta:__legacy__"
DEFAULT_BUILD_REQUIRES = ["setuptools>=40.8.0", "wheel"]


@dataclass(frozen=True)
class BackendNeeds:
    """The backend, the requirements it was installed with, those it asked for, and whether it edits in place."""

    backend: str
    requires: list[str]
    asked: list[str] = field(default_factory=list)
    editable: bool = True
    problem: str = ""  # why the backend could not be asked ("" when it answered)


def declared_backend(system: dict) -> tuple[str, list[str], list[str]]:
    """(backend, build requirements, backend-path) of a `[build-system]` table (PEP 517/518 defaults)."""
    return (
        system.get("build-backend", LEGACY_BACKEND),
        list(system.get("requires", DEFAULT_BUILD_REQUIRES)),
        list(system.get("backend-path", [])),
    )


def ask_backend(project: Path, system: dict, wheelhouse: Path, env: dict[str, str]) -> BackendNeeds:
    """Install the backend from `wheelhouse` (offline) and ask what else it needs to build a wheel and an
    editable wheel of `project`. A backend that cannot be installed or asked is reported in `problem`
    (the image build then shows what was missing)."""
    backend, requires, backend_path = declared_backend(system)
    with tempfile.TemporaryDirectory(prefix="harness-backend-") as scratch:
        target = Path(scratch) / "site"
        installed = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-index",
                "--find-links",
                str(wheelhouse),
                "--target",
                str(target),
                *requires,
            ],
            capture_output=True,
            text=True,
            check=False,
            env=env,
        )
        if installed.returncode != 0:
            return BackendNeeds(backend, requires, problem=f"installing {requires}: {installed.stderr.strip()[-600:]}")
        hook_env = {**env, "PYTHONPATH": str(target)}

        def runner(cmd, cwd=None, extra_environ=None):
            done = subprocess.run(
                cmd, cwd=cwd, env={**hook_env, **(extra_environ or {})}, capture_output=True, text=True, check=False
            )
            if done.returncode != 0:
                raise RuntimeError((done.stderr or done.stdout).strip()[-600:])

        caller = BuildBackendHookCaller(str(project), backend, backend_path or None, runner=runner)
        try:
            with warnings.catch_warnings():  # the backend's own warnings (deprecated options, ...)
                warnings.simplefilter("ignore", BuildBackendWarning)
                asked = caller.get_requires_for_build_wheel({}) + caller.get_requires_for_build_editable({})
        except Exception as err:  # the backend's own failure, whatever it raises
            return BackendNeeds(backend, requires, problem=f"{backend}: {err}")
        editable = backend == LEGACY_BACKEND or _has_build_editable(project, backend, backend_path, hook_env)
        return BackendNeeds(backend, requires, sorted(set(asked) - set(requires)), editable)


def _has_build_editable(project: Path, backend: str, backend_path: list[str], env: dict[str, str]) -> bool:
    module, _, attribute = backend.partition(":")
    probe = (
        "import importlib, json, sys\n"
        f"sys.path[:0] = {json.dumps([str(project / p) for p in backend_path])}\n"
        f"obj = importlib.import_module({module!r})\n"
        f"for part in {attribute!r}.split('.') if {attribute!r} else []:\n"
        "    obj = getattr(obj, part)\n"
        "print(json.dumps(hasattr(obj, 'build_editable')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=project, env=env, capture_output=True, text=True, check=False
    )
    return done.returncode == 0 and json.loads(done.stdout.strip().splitlines()[-1]) is True


def scm_env(version: str) -> dict[str, str]:
    """The environment for builds of a checkout without `.git`: setuptools-scm told its version."""
    return {**os.environ, "SETUPTOOLS_SCM_PRETEND_VERSION": version} if version else dict(os.environ)
