"""An installed copy (a wheel, not the checkout) holds everything its commands import."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_an_installed_wheel_runs_the_commands_that_import_bench(tmp_path):
    source = tmp_path / "source"  # a clean copy: setuptools would reuse a stale build/ in the checkout
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", "build", "*.egg-info", "__pycache__", "runs", ".venv*"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path / "wheel")], check=True, capture_output=True)
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    target = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target)  # what `pip install` puts in site-packages
    # Outside the checkout, with the wheel's files first on the path: `harness sandbox bench` resolves its
    # benchmark module from the installed copy (it crashed with "No module named 'bench'" when bench/ was left out).
    probe = ("import cli, bench.sandbox_bench as b; from typer.main import get_command; "
             "assert callable(b.main); print(b.__file__); print(sorted(get_command(cli.app).commands['sandbox'].commands))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(target)})
    assert done.returncode == 0, done.stderr
    where, commands = done.stdout.splitlines()
    assert Path(where).is_relative_to(target) and "bench" in commands
