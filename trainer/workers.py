"""The Ray layout: inference engines, environment workers that hold the sandboxes, a learner.

One driver (`trainer.recipe`) decides; these actors do. Rollouts run through the harness
episode runner (the code `harness eval` uses); a multi-turn group forks its n sandboxes from
one snapshot of the task's sandbox, so all samples start from the same state.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import ray

from harness.episode import EpisodeLimits, run_episode
from harness.policy import Completion, Policy, Sampling
from harness.trajectory import Trajectory
from tasks.task import Task

from harness.batching import BatchingEngine

from .engine import load_engine
from .learner import Learner, LearnerSettings


def _use_all_cores() -> None:
    """Ray starts actors with one CPU thread (OMP_NUM_THREADS=1). Generation and training take turns (a
    synchronous GRPO step), so on a CPU the busy actor may use every core the node has."""
    import torch

    torch.set_num_threads(len(os.sched_getaffinity(0)))


@ray.remote
class EngineActor:
    """One inference engine (transformers or vLLM), batching the requests of all episodes."""

    def __init__(self, backend: str, model_path: str):
        _use_all_cores()
        self.engine = BatchingEngine(load_engine(backend, model_path))

    def generate_ids(self, prompt_ids: list[int], sampling: Sampling) -> Completion:
        return self.engine.generate_ids(prompt_ids, sampling)

    def load_weights(self, state_dict: dict[str, Any]) -> bool:
        self.engine.load_weights(state_dict)
        return True


class RemoteEngine(Policy):
    """A policy whose turns come from an EngineActor: token ids in, exact token ids out."""

    def __init__(self, engine, tokenizer, name: str):
        self.engine, self.tokenizer, self.name = engine, tokenizer, name

    def generate(self, messages, tools, sampling):
        from harness.tokens import render

        return self.generate_ids(list(render(self.tokenizer, messages, tools, True, True)), sampling)

    def generate_ids(self, prompt_ids: list[int], sampling: Sampling) -> Completion:
        return ray.get(self.engine.generate_ids.remote(prompt_ids, sampling))


@ray.remote
class RolloutWorker:
    """Runs episodes; owns the sandboxes they need (created, forked and closed here)."""

    def __init__(self, engine, tokenizer_path: str, sandbox_backend: str = "auto", threads: int = 16):
        from transformers import AutoTokenizer

        self.policy = RemoteEngine(engine, AutoTokenizer.from_pretrained(tokenizer_path), tokenizer_path)
        self.backend_name = sandbox_backend
        self.backend = None
        self.pool = ThreadPoolExecutor(max_workers=threads)

    def rollout_group(self, task: Task, n: int, sampling: Sampling, limits: EpisodeLimits) -> list[Trajectory]:
        sandboxes = self._forked_sandboxes(task, n)
        seeds = [None if sampling.seed is None else sampling.seed + i for i in range(n)]
        futures = [
            self.pool.submit(run_episode, task, self.policy, Sampling(**{**sampling.__dict__, "seed": seeds[i]}), limits,
                             self._backend(task), sandboxes[i] if sandboxes else None, i)
            for i in range(n)
        ]
        return [f.result() for f in futures]

    def _backend(self, task: Task):
        if self.backend is None and (task.sandbox is not None or task.env_class == "swe"):
            from sandboxes import get_backend

            self.backend = get_backend(self.backend_name)
        return self.backend

    def _forked_sandboxes(self, task: Task, n: int) -> list | None:
        if task.sandbox is None or n < 2:
            return None
        backend = self._backend(task)
        with backend.create(task.sandbox) as origin:
            snapshot = origin.snapshot()
        try:
            return backend.fork(snapshot, n)
        finally:
            backend.remove_snapshot(snapshot)


@ray.remote
class LearnerActor:
    def __init__(self, model_path: str, settings: LearnerSettings, ref_model_path: str | None = None):
        from transformers import AutoTokenizer

        _use_all_cores()
        self.learner = Learner(model_path, settings, ref_model_path)
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)

    def train_step(self, batch) -> dict[str, float]:
        return self.learner.train_step(batch)

    def sft_step(self, batch, lr: float) -> dict[str, float]:
        from .sft import sft_step

        return sft_step(self.learner, batch, lr)

    def reset_optimizer(self) -> bool:
        """Start RL with fresh optimizer moments after the SFT warm start, at the RL schedule's learning rate
        (SFT steps set their own; the scheduler only sets it again after the first RL step)."""
        self.learner.optimizer.state.clear()
        for group, lr in zip(self.learner.optimizer.param_groups, self.learner.scheduler.get_last_lr()):
            group["lr"] = lr
        return True

    def weights(self) -> dict[str, Any]:
        return self.learner.weights()

    def save(self, run_dir, step: int, extra: dict[str, Any]) -> str:
        from .checkpoint import save_checkpoint

        return str(save_checkpoint(run_dir, step, self.learner.model, self.tokenizer, {**self.learner.state(), **extra}))

    def load_state(self, state: dict[str, Any]) -> bool:
        self.learner.load_state(state)
        return True
