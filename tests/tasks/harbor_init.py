"""Tasks made by Harbor's own `harbor tasks init` (the real CLI, in its venv), one per template it offers, then
filled in as a task's author would: the instruction, the solution, the check. Each asks for /app/hello.txt."""

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


def harbor_init(root: Path) -> list[Path]:
    """One filled-in task per template under `root`."""
    harbor = Path(venv_python(HARBOR)).with_name("harbor")
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    made = []
    for name, options in TEMPLATES.items():
        command = [str(harbor), "tasks", "init", f"demo/{name}", "-p", str(root), *options]
        subprocess.run(command, check=True, capture_output=True, text=True, timeout=120, env=env)
        task = root / name
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
