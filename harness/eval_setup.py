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


def prepare_eval(
    config: EvalConfig, *, resume: bool = False, force: bool = False, note: Callable[[str], None] = lambda message: None
) -> EvalRun:
    """Everything before the first episode; `note` hears what the user should know (e.g. a fallback backend)."""
    driver = get_scaffold(config.scaffold)  # an unknown name fails before anything starts
    if driver is not None:
        driver.argv()  # a scaffold from PyPI is installed into its venv now, not in the first episode
    if config.ray_address and config.scaffold != OWN_LOOP:
        raise HarnessError(
            f"--scaffold {config.scaffold} runs on this machine only, not on a Ray cluster (--ray-address)"
        )
    tasks = load_tasks(config.tasks, None if config.ray_address else config.backend)[: config.limit]
    task_list = with_grading_mode(with_reward_mode(tasks, config.reward_mode), config.grading_mode)
    if not task_list:
        raise TaskError(f"{config.tasks} holds no tasks")
    needs_sandbox = any(t.sandbox for t in task_list) and not config.ray_address
    sandbox_backend = get_backend(config.backend) if needs_sandbox else None
    if config.backend == "auto" and sandbox_backend is not None and sandbox_backend.name != "docker":
        note("no Docker engine answers: episodes run in the local bubblewrap backend")  # a fallback, not a choice
    check_run_dir(task_list, config, resume, force)
    if config.ray_address:
        return EvalRun(
            task_list,
            config,
            None,
            None,
            Cluster(config.ray_address, backend=config.backend),
            PolicySource(config.checkpoint, config.base_url),
            resume,
            force,
        )
    policy = make_policy(
        config.checkpoint, base_url=config.base_url, engine=config.engine, endpoint_limits=config.endpoint
    )
    if policy.tokenizer is not None and any(task.tools for task in task_list):
        config.notes += template_warnings(policy.tokenizer)
        for warning in config.notes:
            note(warning)
    return EvalRun(task_list, config, sandbox_backend, policy, resume=resume, force=force)
