"""Harbor's own tools, in their venv: tasks made by `harbor tasks init` (the real CLI), one per template it offers,
then filled in as a task's author would (the instruction, the solution, the check; each asks for /app/hello.txt),
and ATIF files checked by Harbor's own trajectory validator."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from harness.scaffolds.venvs import HARBOR, venv_python

# name: the options of `harbor tasks init`
TEMPLATES = {
    "pytest-separate": [],  # the default: pytest in the verifier's own image (tests/Dockerfile)
    "pytest-shared": ["--verifier-mode", "shared"],  # uv and pytest installed by test.sh in the agent's sandbox
    "plain-separate": ["--no-pytest"],  # a test.sh of the author's own, in the verifier's image
    "plain-shared": ["--no-pytest", "--verifier-mode", "shared"],
}
TEST = 'from pathlib import Path\n\n\ndef test_hello():\n    assert Path("/app/hello.txt").read_text() == "hello\\n"\n'
CHECK = (
    '[ "$(cat /app/hello.txt)" = hello ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n'
)


VALIDATE = """
import sys
from harbor.utils.trajectory_validator import TrajectoryValidator
for path in sys.argv[1:]:
    validator = TrajectoryValidator()
    if not validator.validate(path):
        sys.exit(f"{path}: {validator.get_errors()}")
print("valid", len(sys.argv) - 1)
"""


def assert_atif_valid(paths: list[Path]) -> None:
    """Every file is an ATIF trajectory by Harbor's own validator (its pydantic models)."""
    assert paths, "no ATIF files"
    checked = subprocess.run(
        [str(venv_python(HARBOR)), "-c", VALIDATE, *map(str, paths)], capture_output=True, text=True, timeout=120
    )
    assert checked.returncode == 0 and f"valid {len(paths)}" in checked.stdout, checked.stderr[-3000:]


def init_task(root: Path, name: str, *options: str) -> Path:
    """`harbor tasks init demo/NAME -p ROOT OPTIONS...`, as its user runs it: the task directory made."""
    harbor = Path(venv_python(HARBOR)).with_name("harbor")
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    command = [str(harbor), "tasks", "init", f"demo/{name}", "-p", str(root), *options]
    subprocess.run(command, check=True, capture_output=True, text=True, timeout=120, env=env)
    return root / name


def harbor_init(root: Path) -> list[Path]:
    """One filled-in task per template under `root`."""
    made = []
    for name, options in TEMPLATES.items():
        task = init_task(root, name, *options)
        (task / "instruction.md").write_text("Write the line `hello` to /app/hello.txt.\n")
        (task / "solution" / "solve.sh").write_text("#!/bin/bash\necho hello > /app/hello.txt\n")
        if (task / "tests" / "test_outputs.py").is_file():
            (task / "tests" / "test_outputs.py").write_text(TEST)
        else:
            with (task / "tests" / "test.sh").open("a") as script:
                script.write(CHECK)
        # the separate verifier sees what the agent left only where the task names it as an artifact
        toml = (task / "task.toml").read_text()
        (task / "task.toml").write_text(re.sub(r"(?m)^artifacts = \[\]", 'artifacts = ["/app/hello.txt"]', toml))
        made.append(task)
    return made
