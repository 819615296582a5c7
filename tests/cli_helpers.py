"""Running the real `harness` command in a subprocess, and reading its append-only results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def harness(*args: str, timeout: float = 1800, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    """`harness ARGS` from the repository root; `pythonpath` also makes a user's own modules importable."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(pythonpath or ""), os.environ.get("PYTHONPATH", "")]))}
    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]
