"""Asynchronous GRPO (`trainer.async`): rollouts for the next steps run while the learner trains.

With staleness bound k, the driver keeps the rollouts of steps s .. s+k in flight while the
learner trains step s: the rollouts of step t are started with the weights of version v (the
number of updates the engines had loaded then), and the driver never starts them earlier than
v = t - k. So a step's samples are at most k updates old, by construction; none is dropped.
Their staleness is corrected, not ignored: the learner takes the clip around its own weights
before the step (the proximal policy) and weights each token by the truncated importance ratio
pi_proximal / pi_behaviour, where pi_behaviour is what the engine recorded when it sampled the
token (decoupled PPO, `trainer.algorithms.policy_loss`). Weight updates reach the engines while
later rollouts are still generating: those rollouts continue with the new weights, and each
token keeps the log-prob of the weights that sampled it.

Every wait has a deadline (`trainer.deadlines`): a stuck rollout fails the step with a clear
error before any update, so the last checkpoint stays intact.
"""

from __future__ import annotations

import time
from typing import Callable

import ray

from harness.episode import Limits
from harness.policy import Sampling
from tasks.task import Task

from .errors import TrainerError, ray_cause

NextBatch = Callable[[dict], tuple[list[Task], dict, dict]]  # position -> (prompts, start, position after)


class RolloutsAhead:
    """The rollout groups of the coming steps, each started at most `staleness` updates ahead of the learner."""

    def __init__(
        self, submit: Callable[[list[Task], int], list], staleness: int, total_steps: int, next_batch: NextBatch
    ):
        self.submit, self.staleness, self.total_steps, self.next_batch = submit, staleness, total_steps, next_batch
        self.inflight: dict[int, tuple[int, list, float]] = {}  # step -> (weights version at start, refs, start time)
        self.frontier: tuple[int, dict] | None = (
            None  # the next step not yet started, and the data position of its batch
        )

    def collect(self, step: int, prompts: list[Task], after: dict, deadline_s: float) -> tuple[list, dict[str, float]]:
        """The groups of `step` (whose batch is `prompts`, the data position after it `after`), with the weights of
        version `step` in the engines now; start the rollouts of the following steps up to `step + staleness`."""
        if step not in self.inflight:
            self.inflight[step] = (step, self.submit(prompts, step), time.monotonic())
            self.frontier = (step + 1, after)
        while self.frontier is not None and self.frontier[0] <= min(step + self.staleness, self.total_steps - 1):
            ahead, position = self.frontier
            batch, _, position_after = self.next_batch(position)
            self.inflight[ahead] = (step, self.submit(batch, ahead), time.monotonic())
            self.frontier = (ahead + 1, position_after)
        version, refs, started = self.inflight.pop(step)
        waited = time.monotonic()
        groups = get_within(refs, deadline_s, f"the rollouts of step {step + 1}", "trainer.deadlines.rollout_s")
        return groups, {
            "async/staleness": float(step - version),
            "async/rollout_wait_s": time.monotonic() - waited,
            "async/rollout_age_s": time.monotonic() - started,
            "async/steps_in_flight": float(len(self.inflight)),
        }

    def cancel(self) -> None:
        for _, refs, _ in self.inflight.values():
            for ref in refs:
                ray.cancel(ref)
        self.inflight.clear()


def get_within(refs: list, deadline_s: float, what: str, key: str) -> list:
    """`ray.get(refs)`, but a part that has not answered after `deadline_s` fails the run with a clear error."""
    ready, late = ray.wait(list(refs), num_returns=len(refs), timeout=deadline_s)
    if late:
        for ref in late:
            ray.cancel(ref)
        raise TrainerError(
            f"{what} did not finish within {deadline_s:g}s ({key}); {len(late)} of {len(refs)} still running. "
            "No update was made and the last checkpoint is intact: find what is stuck, or raise the deadline, and rerun to resume"
        )
    try:
        return ray.get(refs)
    except ray.exceptions.RayActorError as err:
        raise TrainerError(
            f"{what}: an actor died ({err}); no update was made, the last checkpoint is intact: rerun to resume"
        ) from None
    except ray.exceptions.RayTaskError as err:
        cause = ray_cause(err)
        if isinstance(cause, TrainerError):
            raise TrainerError(str(cause)) from None
        raise TrainerError(
            f"{what} failed ({type(cause).__name__}: {cause}); no update was made, "
            "the last checkpoint is intact: rerun to resume"
        ) from None


def rollout_submitter(
    workers, n: int, sampling_of: Callable[[int], Sampling], limits: Limits
) -> Callable[[list[Task], int], list]:
    """Start one rollout group per prompt, spread over the rollout workers."""

    def submit(prompts: list[Task], step: int) -> list:
        sampling = sampling_of(step)
        return [
            workers[i % len(workers)].rollout_group.remote(task, n, sampling, limits) for i, task in enumerate(prompts)
        ]

    return submit
