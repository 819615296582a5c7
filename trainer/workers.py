"""The Ray layout: inference engines, environment workers that hold the sandboxes, a learner.

One driver (`trainer.recipe`) decides; these actors do. Rollouts run through the harness
episode runner (the code `harness eval` uses); a multi-turn group forks its n sandboxes from
one snapshot of the task's sandbox, so all samples start from the same state.
"""

from __future__ import annotations

import ctypes
import itertools
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import ray

from harness.episode import Limits, run_episode
from harness.scaffolds import OWN_LOOP, get_scaffold
from harness.policy import Completion, Policy, Sampling
from harness.trajectory import Trajectory
from infra.plugins import load_env_plugins
from tasks.task import Task

from harness.batching import shared_policy
from harness.policies.factory import checkpoint_policy

from .errors import TrainerError, ray_cause
from .learner import Learner, LearnerSettings, MiniShare, even_parts
from .sharding import concat_rows, real_rows, split_rows


def _use_cores(share: int = 1) -> None:
    """Ray starts actors with one CPU thread (OMP_NUM_THREADS=1). Generation and training take turns (a
    synchronous GRPO step), so on a CPU the busy actors may use every core the node has, split between the
    `share` actors that run at the same time (the engines, or the learner ranks)."""
    import torch

    torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // share))


def _return_freed_memory() -> None:
    """Give the allocator's free pages back to the system (glibc's malloc_trim). A threaded actor runs its calls on
    many threads, each allocating in a malloc arena of its own, so the weights one sync frees were not reused by the
    next sync's thread: a 135M model's engine grew by about a model's size per step (3 GB to 10.7 GB in 20 steps,
    until Ray's memory monitor killed the run)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to trim this way
        pass


@ray.remote
class EngineActor:
    """One inference engine: the actor that holds an in-process policy (`inference.engine`: transformers or
    vLLM) and serves the turns of every episode of the rollout workers, batched."""

    def __init__(self, backend: str, model_path: str, share: int = 1, **vllm_options: Any):
        _use_cores(share)
        self.policy = shared_policy(checkpoint_policy(model_path, backend, **vllm_options))

    def generate_ids(self, prompt_ids: list[int], sampling: Sampling) -> Completion:
        return self.policy.generate_ids(prompt_ids, sampling)

    def load_weights(self, state_dict: dict[str, Any]) -> bool:
        _return_freed_memory()  # the last sync's weights, freed once that call returned
        self.policy.load_weights(state_dict)
        return True

    def init_weight_group(self, host: str, port: int, rank_offset: int, world_size: int) -> bool:
        """`inference.weight_sync: nccl` (vLLM): join the learner's broadcast group."""
        self.policy.init_weight_group(host, port, rank_offset, world_size)
        return True

    def receive_weights(self, specs: list) -> bool:
        self.policy.receive_weights(specs)
        return True


class RemotePolicy(Policy):
    """The policy of a rollout worker's episodes: its turns come from an EngineActor, token ids in, exact token
    ids out (the conversation is rendered here, by the base class)."""

    def __init__(self, engine, tokenizer, name: str):
        self.engine, self.tokenizer, self.name = engine, tokenizer, name

    def generate_ids(self, prompt_ids: list[int], sampling: Sampling) -> Completion:
        return ray.get(self.engine.generate_ids.remote(prompt_ids, sampling))


@ray.remote
class RolloutWorker:
    """Runs episodes; owns the sandboxes they need (created, forked and closed here)."""

    def __init__(
        self, engine, tokenizer_path: str, sandbox_backend: str = "auto", threads: int = 16, scaffold: str = OWN_LOOP
    ):
        from transformers import AutoTokenizer

        load_env_plugins()  # the task kinds, tools and rewards the driver's plugins register
        self.scaffold = get_scaffold(scaffold)
        self.policy = RemotePolicy(engine, AutoTokenizer.from_pretrained(tokenizer_path), tokenizer_path)
        self.backend_name = sandbox_backend
        self.backend = None
        self.pool = ThreadPoolExecutor(max_workers=threads)

    def rollout_group(self, task: Task, n: int, sampling: Sampling, limits: Limits) -> list[Trajectory]:
        sandboxes = self._forked_sandboxes(task, n)
        seeds = [None if sampling.seed is None else sampling.seed + i for i in range(n)]
        futures = [
            self.pool.submit(
                run_episode,
                task,
                self.policy,
                Sampling(**{**sampling.__dict__, "seed": seeds[i]}),
                limits,
                self._backend(task),
                sandboxes[i] if sandboxes else None,
                i,
                scaffold=self.scaffold,
            )
            for i in range(n)
        ]
        return [f.result() for f in futures]

    def _backend(self, task: Task):
        if self.backend is None and task.sandbox is not None:
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
    """One learner rank: the whole learner with strategy `single`, one data-parallel FSDP2 rank with `fsdp2`."""

    def __init__(self, rank: int, world_size: int):
        self.rank, self.world_size = rank, world_size
        _use_cores(share=world_size)  # the ranks train at the same time

    def rendezvous(self) -> tuple[str, int]:
        from .sharding import free_address

        return free_address()

    def setup(
        self, address: tuple[str, int] | None, model_path: str, settings: LearnerSettings, ref_model_path: str | None
    ) -> bool:
        from transformers import AutoTokenizer

        from .learner import learner_device
        from .sharding import join_group

        if address is not None:
            join_group(address, self.rank, self.world_size, learner_device())
        self.learner = Learner(model_path, settings, ref_model_path)
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        return True

    def train_step(self, batch, minis: list[MiniShare]) -> dict[str, float]:
        return self.learner.train_step(batch, minis)

    def sft_step(self, batch, lr: float, total_tokens: float) -> dict[str, float]:
        return self.learner.sft_step(batch, lr, total_tokens)

    def reset_optimizer(self) -> bool:
        self.learner.reset_optimizer()
        return True

    def weights(self) -> dict[str, Any]:
        return self.learner.weights()

    def anchor_reference(self, folder) -> str | None:
        """The KL reference becomes the current policy; rank 0 saves it to `folder`, for a resumed run to load."""
        from .checkpoint import save_weights

        self.learner.anchor_reference()
        weights = self.learner.weights()  # every rank takes part in gathering
        return str(save_weights(Path(folder), self.learner.model, self.tokenizer, weights)) if self.rank == 0 else None

    def save_model(self, folder) -> str | None:
        """The current weights as a Hugging Face folder (no trainer state); rank 0 writes it."""
        from .checkpoint import save_weights

        weights = self.learner.weights()  # every rank takes part in gathering
        return str(save_weights(Path(folder), self.learner.model, self.tokenizer, weights)) if self.rank == 0 else None

    def init_weight_sender(self, host: str, port: int, world_size: int) -> bool:
        """`inference.weight_sync: nccl`: rank 0 joins the engines' group as its rank 0."""
        from .weight_sync import WeightSender

        self.sender = WeightSender(host, port, world_size)
        return True

    def weight_specs(self) -> list:
        from .weight_sync import weight_specs

        return weight_specs(self.learner.model.state_dict())

    def broadcast_weights(self) -> bool:
        weights = self.learner.weights()  # every rank takes part in gathering; rank 0 holds them whole
        if self.rank == 0:
            self.sender.send(weights)
        return True

    def save(self, run_dir, step: int, extra: dict[str, Any]) -> str | None:
        """Every rank gathers; rank 0 writes the checkpoint."""
        from .checkpoint import save_checkpoint

        weights, state = self.learner.weights(), self.learner.state()
        if self.rank != 0:
            return None
        return str(save_checkpoint(run_dir, step, self.learner.model, self.tokenizer, {**state, **extra}, weights))

    def load_state(self, state: dict[str, Any]) -> bool:
        self.learner.load_state(state)
        return True


class LearnerGroup:
    """The learner's ranks behind the calls the driver makes: one rank (`single`) or several FSDP2 ranks that
    each take an equal share of every batch. Failures come back as one clear TrainerError."""

    def __init__(
        self,
        model_path: str,
        settings: LearnerSettings,
        ref_model_path: str | None,
        ranks: int,
        gpus_per_rank: float,
        deadline_s: float | None = None,
    ):
        self.deadline_s = deadline_s  # a learner call that has not answered by then fails the run (trainer.deadlines)
        self.mini_batches = settings.mini_batches
        self.actors = [
            LearnerActor.options(num_cpus=0, num_gpus=gpus_per_rank).remote(rank, ranks) for rank in range(ranks)
        ]
        address = self._get(self.actors[0].rendezvous.remote()) if ranks > 1 else None
        self._get([actor.setup.remote(address, model_path, settings, ref_model_path) for actor in self.actors])

    def train_step(self, batch) -> dict[str, float]:
        if batch.loss_mask.sum() == 0:
            return {"skipped": 1.0}
        # Each mini-batch is split over the ranks on its own, so every rank holds the same part of each.
        sizes = even_parts(len(batch), self.mini_batches)
        bounds = list(itertools.accumulate(sizes, initial=0))
        minis = [split_rows(batch.rows(slice(a, b)), len(self.actors)) for a, b in zip(bounds, bounds[1:])]
        ranks = range(len(self.actors))
        shares = [concat_rows([parts[rank] for parts in minis]) for rank in ranks]
        layout = [
            [MiniShare(len(parts[0]), real_rows(size, len(ranks))[rank], size) for parts, size in zip(minis, sizes)]
            for rank in ranks
        ]
        results = self._get(
            [actor.train_step.remote(share, mine) for actor, share, mine in zip(self.actors, shares, layout)]
        )
        return _merge(results, summed=("trained_tokens", "micro_batches"))

    def sft_step(self, batch, lr: float) -> dict[str, float]:
        shares = split_rows(batch, len(self.actors))
        tokens = float(batch.loss_mask.sum())
        results = self._get([actor.sft_step.remote(share, lr, tokens) for actor, share in zip(self.actors, shares)])
        return _merge(results, summed=("sft/loss", "sft/tokens"))

    def reset_optimizer(self) -> None:
        self._get([actor.reset_optimizer.remote() for actor in self.actors])

    def anchor_reference(self, folder) -> None:
        self._get([actor.anchor_reference.remote(folder) for actor in self.actors])

    def weights(self):
        """A reference to the whole weights (rank 0's copy), for the engines to load."""
        refs = [actor.weights.remote() for actor in self.actors]
        self._get(refs[1:])  # the other ranks take part in the gathering and return nothing
        return refs[0]

    def save(self, run_dir, step: int, extra: dict[str, Any]) -> str:
        return self._get([actor.save.remote(run_dir, step, extra) for actor in self.actors])[0]

    def save_model(self, folder) -> str:
        return self._get([actor.save_model.remote(folder) for actor in self.actors])[0]

    def load_state(self, state: dict[str, Any]) -> None:
        self._get([actor.load_state.remote(state) for actor in self.actors])

    def _get(self, refs):
        try:
            return ray.get(refs, timeout=self.deadline_s)
        except ray.exceptions.GetTimeoutError:
            raise TrainerError(
                f"the learner did not answer within {self.deadline_s:g}s (trainer.deadlines.learner_step_s): "
                "training stopped; the last checkpoint is intact"
            ) from None
        except ray.exceptions.RayTaskError as err:
            cause = ray_cause(err)
            if isinstance(cause, TrainerError):
                raise TrainerError(str(cause)) from None
            raise TrainerError(
                f"the learner failed: {type(cause).__name__}: {cause}; the last checkpoint is intact"
            ) from None
        except ray.exceptions.RayActorError as err:
            raise TrainerError(f"a learner rank died ({err}); the last checkpoint is intact: rerun to resume") from None


def _merge(results: list[dict[str, float]], summed: tuple[str, ...]) -> dict[str, float]:
    """The ranks' metrics as one: counts and shares of a whole are added, the rest averaged."""
    return {key: sum(r.get(key, 0.0) for r in results) / (1 if key in summed else len(results)) for key in results[0]}
