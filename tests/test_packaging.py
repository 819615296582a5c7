"""An installed copy (a wheel, not the checkout) holds everything its commands import."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_an_installed_wheel_runs_the_sandbox_benchmark_without_the_bench_folder(tmp_path):
    source = tmp_path / "source"  # a clean copy: setuptools would reuse a stale build/ in the checkout
    shutil.copytree(
        ROOT, source, ignore=shutil.ignore_patterns(".git", "build", "*.egg-info", "__pycache__", "runs", ".venv*")
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(source),
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path / "wheel"),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    target = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target)  # what `pip install` puts in site-packages
    # Outside the checkout, with the wheel's files first on the path: `harness sandbox bench` runs the benchmark
    # the package holds; bench/ is a folder of benchmarks in the repository, not an installed package.
    probe = (
        "import cli, sandboxes.bench as b; from typer.main import get_command; "
        "assert callable(b.main); print(b.__file__); print(sorted(get_command(cli.app).commands['sandbox'].commands))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(target)},
    )
    assert done.returncode == 0, done.stderr
    where, commands = done.stdout.splitlines()
    assert Path(where).is_relative_to(target) and "bench" in commands
    assert not (target / "bench").exists()


PACKAGES = ("harness", "tasks", "sandboxes", "trainer", "infra", "bench")  # bench/: run from the checkout
# The benchmarks install these peers into virtual environments of their own (docs/benchmarks.md).
BENCH_PEERS = {"minisweagent", "swerex"}


def imported_top_level_names() -> set[str]:
    """Every module name the installed code imports (at any depth), but the standard library's and its own."""
    names: set[str] = set()
    files = [ROOT / "cli.py", *(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))]
    for path in files:
        if "swe_demo/packages" in path.as_posix():  # the demo repositories' own code, run inside sandboxes
            continue
        if "scaffolds/programs" in path.as_posix():  # scaffold programs, run in the scaffold's own venv
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names |= {alias.name.partition(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.partition(".")[0])
    folders = {p.name for p in ROOT.iterdir() if p.is_dir()}  # the checkout's own folders (a bench runs an example)
    return names - set(sys.stdlib_module_names) - set(PACKAGES) - folders - {"cli"}


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_imported_package_is_declared():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    declared = {normalized(re.match(r"[A-Za-z0-9_.\-]+", r).group()) for r in requirements}
    distributions = importlib.metadata.packages_distributions()
    undeclared = {}
    for module in imported_top_level_names() - BENCH_PEERS:
        owners = {normalized(d) for d in distributions.get(module, [module])}
        if not owners & declared:
            undeclared[module] = sorted(owners)
    assert undeclared == {}, f"imported but not declared in pyproject.toml: {undeclared}"


# What the `train`, `viewer` and `vllm` extras bring; the core install has none of them.
NOT_IN_CORE = (
    "torch",
    "transformers",
    "ray",
    "safetensors",
    "tokenizers",
    "tensorboard",
    "matplotlib",
    "pygments",
    "vllm",
)
# None in sys.modules is how Python spells "not installed": `import` raises ImportError, find_spec answers None.
CORE_ONLY = f"""
import sys
sys.modules.update(dict.fromkeys({NOT_IN_CORE!r}))
import cli
cli.app(sys.argv[1:], prog_name="harness")
"""


def test_the_core_install_runs_the_main_job(tmp_path, docker_backend):
    """`harness eval` (gold on swe-demo) runs without the training, viewer and vLLM extras."""
    run = tmp_path / "eval"
    done = subprocess.run(
        [sys.executable, "-c", CORE_ONLY, "eval", "--limit", "2", "--output", str(run)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads((run / "report.json").read_text())
    assert report["episodes"] == 2 and report["resolve_rate"] == 1.0, report


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["lint", "format"])
def test_ruff_finds_nothing(command):
    from tests.conftest import require

    require(importlib.util.find_spec("ruff") is not None, "ruff is not installed (pip install -e '.[dev]')")
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *command, "--no-cache", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-4000:]
