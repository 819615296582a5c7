"""One evaluation run from its settings, the start of both `harness eval` and `harness generate`.

`prepare_eval` loads the task set, checks the run directory (a `--resume` of another run is refused
before a model loads), picks the sandbox backend and makes the policy (here, or on each node of a Ray
cluster); `EvalRun.run` runs the episodes and returns the report. The caller shows the progress.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from sandboxes import Backend, get_backend
from sandboxes.cluster import Cluster
from tasks.errors import TaskError
from tasks.grading.grade import with_grading_mode
from tasks.gsm8k import with_reward_mode
from tasks.task import Task
from tasks.taskset import load_tasks

from .checkpoints import template_warnings
from .distributed import PolicySource
from .errors import HarnessError
from .evaluate import EvalConfig, check_run_dir, evaluate
from .policies.endpoint import EndpointLimits
from .policies.factory import make_policy
from .policy import Policy
from .scaffolds import OWN_LOOP, get_scaffold


@dataclass
class EvalRun:
    tasks: list[Task]
    config: EvalConfig
    backend: Backend | None  # None: no task needs a sandbox, or the cluster's nodes hold them
    policy: Policy | None  # None on a cluster: each node makes its own from `source`
    cluster: Cluster | None = None
    source: PolicySource | None = None
    resume: bool = False
    force: bool = False

    @property
    def episodes(self) -> int:
        return len(self.tasks) * self.config.samples

    @property
    def output(self) -> Path:
        return Path(self.config.output)

    def run(self, on_result: Callable[[dict[str, Any]], None] = lambda row: None) -> dict[str, Any]:
        """Run (or finish) every episode; the report (also written to the run directory). Closes the policy."""
        try:
            return evaluate(
                self.tasks,
                self.policy,
                self.config,
                self.backend,
                resume=self.resume,
                on_result=on_result,
                force=self.force,
                cluster=self.cluster,
                source=self.source,
            )
        finally:
            if self.policy is not None:
                self.policy.close()


def default_output(checkpoint: str, tasks: str) -> Path:
    name = Path(checkpoint).name or checkpoint
    return Path("runs") / f"eval-{name.replace(':', '_')}-{Path(tasks).stem}"


def prepare_eval(
    checkpoint: str,
    tasks: str,
    output: Path | None = None,
    *,
    samples: int = 1,
    workers: int = 4,
    max_turns: int | None = None,
    temperature: float = 0.0,
    max_tokens: int = 1024,
    limit: int | None = None,
    resume: bool = False,
    force: bool = False,
    base_url: str | None = None,
    backend: str = "auto",
    ray_address: str | None = None,
    engine: str = "auto",
    endpoint_limits: EndpointLimits | None = None,
    episode_timeout: float | None = None,
    reward_mode: str | None = None,
    grading_mode: str | None = None,
    prestart: int = 0,
    scaffold: str = OWN_LOOP,
    note: Callable[[str], None] = lambda message: None,
) -> EvalRun:
    """Everything before the first episode; `note` hears what the user should know (e.g. a fallback backend)."""
    driver = get_scaffold(scaffold)  # an unknown name fails before anything starts
    if driver is not None:
        driver.argv()  # a scaffold from PyPI is installed into its venv now, not in the first episode
    if ray_address and scaffold != OWN_LOOP:
        raise HarnessError(f"--scaffold {scaffold} runs on this machine only, not on a Ray cluster (--ray-address)")
    task_list = with_grading_mode(with_reward_mode(load_tasks(tasks)[:limit], reward_mode), grading_mode)
    if not task_list:
        raise TaskError(f"{tasks} holds no tasks")
    sandbox_backend = get_backend(backend) if any(t.sandbox for t in task_list) and not ray_address else None
    if (
        backend == "auto" and sandbox_backend is not None and sandbox_backend.name != "docker"
    ):  # a fallback, not a choice
        note("no Docker engine answers: episodes run in the local bubblewrap backend")
    output = output or default_output(checkpoint, tasks)
    config = EvalConfig(
        tasks=tasks,
        checkpoint=checkpoint,
        output=str(output),
        samples=samples,
        workers=workers,
        max_turns=max_turns,
        temperature=temperature,
        max_tokens=max_tokens,
        backend=backend,
        limit=limit,
        base_url=base_url if checkpoint.startswith("endpoint:") else None,
        episode_timeout=float(episode_timeout or EvalConfig.episode_timeout),
        prestart=prestart,
        grading_mode=grading_mode or "default",
        scaffold=scaffold,
    )
    check_run_dir(task_list, config, resume, force)
    if ray_address:
        return EvalRun(
            task_list,
            config,
            None,
            None,
            Cluster(ray_address, backend=backend),
            PolicySource(checkpoint, base_url),
            resume,
            force,
        )
    policy = make_policy(checkpoint, base_url=base_url, engine=engine, endpoint_limits=endpoint_limits)
    if policy.tokenizer is not None and any(task.tools for task in task_list):
        config.notes += template_warnings(policy.tokenizer)
        for warning in config.notes:
            note(warning)
    return EvalRun(task_list, config, sandbox_backend, policy, resume=resume, force=force)
