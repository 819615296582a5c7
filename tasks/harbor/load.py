"""Harbor task directories as Tasks: `--tasks harbor:PATH` (one task, a folder of them, a checked-out dataset).

Each task's image is built (once: `tasks.harbor.image`) when it is loaded. A task that cannot be read or
built is still returned, without a sandbox and with the reason in `metadata["harbor_problem"]`: its
episode ends at once as a `sandbox_error` with that reason, so one bad task never stops a run.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path

from sandboxes import SandboxError
from sandboxes.spec import SandboxSpec

from ..errors import TaskError, TaskSourceError
from ..swe import SWE_TOOLS
from ..task import Task
from .config import HarborStep, HarborTaskDir, is_task_dir, read_task_dir
from .image import TaskImage, build_task_image, build_verifier_image

log = logging.getLogger(__name__)
ENV_CLASS = "harbor"
MAX_TURNS = 50
DEFAULT_WALL_TIME = 3600.0  # the agent's share of a sandbox's life where the task sets no [agent].timeout_sec
SEARCH_DEPTH = 3  # how deep below PATH task directories are looked for


def load_harbor(source: str, on_step: Callable[[str], None] = log.info) -> list[Task]:
    """Every task under `source` (the part after `harbor:`), images built."""
    root = Path(source).expanduser()
    if not root.is_dir():
        raise TaskSourceError(f"harbor:{source}: no such directory")
    directories = task_dirs(root)
    if not directories:
        raise TaskSourceError(f"harbor:{source}: no Harbor task here (a folder with task.toml and instruction.md)")
    ids = _ids(root, directories)
    return [harbor_task(path, ids[path], f"harbor/{root.resolve().name}", on_step) for path in directories]


def task_dirs(root: Path) -> list[Path]:
    """`root` itself where it is a task directory, else the task directories below it (not inside one another)."""
    if is_task_dir(root):
        return [root]
    found: list[Path] = []
    level = [root]
    for _ in range(SEARCH_DEPTH):
        below = [p for folder in level for p in sorted(folder.iterdir()) if p.is_dir() and not p.name.startswith(".")]
        found += [p for p in below if is_task_dir(p)]
        level = [p for p in below if not is_task_dir(p)]
    return sorted(found)


def _ids(root: Path, directories: list[Path]) -> dict[Path, str]:
    """A task's id is its directory's name, or its path below `root` where two names are the same."""
    names = [p.name for p in directories]
    return {p: p.name if names.count(p.name) == 1 else str(p.relative_to(root)) for p in directories}


def harbor_task(
    path: Path, task_id: str | None = None, data_source: str = "harbor", on_step: Callable[[str], None] = log.info
) -> Task:
    """The Task of one Harbor task directory (its image built); a broken one carries its problem instead."""
    task_id = task_id or path.name
    try:
        task = read_task_dir(path)
        image = build_task_image(task, on_step)
        verifier_image = (
            build_verifier_image(
                task,
                task.tests_dir if (task.tests_dir / "Dockerfile").is_file() else None,
                task.verifier_image,
                f"{task.path.name}-verifier",
                on_step,
            )
            if task.verifier_separate and not task.steps
            else None
        )
        step_images = {
            step.name: build_verifier_image(
                task, step.verifier_context, step.verifier_image, f"{task.path.name}-{step.name}-verifier", on_step
            )
            for step in task.steps
            if step.verifier_separate
        }
    except (TaskError, SandboxError) as err:
        log.warning("Harbor task %s cannot run: %s", task_id, err)
        instruction = path / "instruction.md"
        prompt = instruction.read_text(errors="replace") if instruction.is_file() else ""
        return _task(task_id, data_source, prompt, None, {"harbor_problem": str(err), "harbor_dir": str(path)})
    # the sandbox lives through every step's agent and verifier
    phases = [(s.agent_timeout, s.verifier_timeout) for s in task.steps] or [
        (task.agent_timeout, task.verifier_timeout)
    ]
    life = sum((agent or DEFAULT_WALL_TIME) + verifier for agent, verifier in phases)
    spec = SandboxSpec(
        image=image.image,
        workdir=task.workdir or image.workdir,
        env=dict(task.env),
        cpus=task.cpus,
        memory=f"{task.memory_mb}m" if task.memory_mb else "2g",
        disk=f"{task.storage_mb}m" if task.storage_mb else None,
        wall_time=life + 300,
        network=False,
        user=task.agent_user,
    )
    metadata = _metadata(task, image.notes)
    if task.verifier_separate and not task.steps:
        metadata["verifier_sandbox"] = _verifier_sandbox(spec, verifier_image, task.verifier_timeout)
    for step in metadata.get("steps", []):
        if step["name"] in step_images:
            step["verifier_sandbox"] = _verifier_sandbox(spec, step_images[step["name"]], step["verifier_timeout"])
    return _task(task_id, data_source, task.instruction, spec, metadata)


def _verifier_sandbox(spec: SandboxSpec, own: TaskImage | None, timeout: float) -> dict:
    """A separate verifier's fresh sandbox: its own image where it has one, else a copy of the agent's."""
    if own is None:
        return dataclasses.replace(spec, wall_time=timeout + 300).to_dict()
    return dataclasses.replace(
        spec, image=own.image, workdir=own.workdir, user=own.user, wall_time=timeout + 300
    ).to_dict()


def _task(task_id: str, data_source: str, prompt: str, spec: SandboxSpec | None, metadata: dict) -> Task:
    return Task(
        id=task_id,
        data_source=data_source,
        prompt=[{"role": "user", "content": prompt}],
        env_class=ENV_CLASS,
        reward_spec={"method": ENV_CLASS},
        sandbox=spec,
        tools=list(SWE_TOOLS),
        max_turns=MAX_TURNS,
        metadata=metadata,
    )


def _metadata(task: HarborTaskDir, notes: dict) -> dict:
    """What the episode needs of the task directory, and how its image was made."""
    return {
        "harbor_dir": str(task.path),
        "harbor_name": task.name,
        "agent_timeout": task.agent_timeout,
        "verifier_timeout": task.verifier_timeout,
        "verifier_user": task.verifier_user,
        "verifier_env": task.verifier_env,
        "solution_env": task.solution_env,
        "has_solution": all((step.solution_dir / "solve.sh").is_file() for step in task.steps)
        if task.steps
        else task.solve_script.is_file(),
        "artifacts": list(task.artifacts),
        "network": "none" + (" (the task asked for one)" if task.network_asked else ""),
        "harbor_metadata": task.config.get("metadata", {}),
        **(
            {"steps": [_step(step) for step in task.steps], "reward_strategy": task.reward_strategy}
            if task.steps
            else {}
        ),
        # Harbor seeds its agents (not the oracle or nop) with a task's trajectory.json; the agents here start
        # from the instruction alone
        **({"prior_context_ignored": "trajectory.json"} if (task.path / "trajectory.json").is_file() else {}),
        **notes,
    }


def _step(step: HarborStep) -> dict:
    """What an episode needs of one step of a multi-step task (harness.kinds.harbor)."""
    return {
        "name": step.name,
        "instruction": step.instruction,
        "tests": [str(folder) for folder in step.tests],
        "solution_dir": str(step.solution_dir),
        "workdir_dir": str(step.workdir_dir),
        "agent_timeout": step.agent_timeout,
        "verifier_timeout": step.verifier_timeout,
        "verifier_user": step.verifier_user,
        "verifier_env": step.verifier_env,
        "min_reward": step.min_reward,
        "artifacts": list(step.artifacts),
    }
