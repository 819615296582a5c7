"""`harness eval --ray-address`: episodes on the nodes of a Ray cluster, results in the driver's run directory.

Each episode is one job of `sandboxes.cluster.Cluster`: it runs on a node with a free `sandbox`
slot, in that node's own sandbox backend, with a policy built on that node from the run's
`--checkpoint` (once per worker process). The trajectory comes back to the driver, which saves
it and appends its result row (with the node that ran it) to `results.jsonl` as it arrives, so
`--resume` and the report work as for a local run. A node lost mid-run costs only the episodes
it held: they run again on another node, and each episode is recorded once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from sandboxes import Backend
from sandboxes.cluster import Cluster
from infra.rundir import RESULTS
from infra.runlog import append_row
from tasks.task import Task

from .episode import Limits, run_episode
from .policy import Policy, Sampling
from .trajectory import Trajectory, result_row, trajectory_file

_policies: dict[tuple[str, str | None], Policy] = {}  # per worker process


@dataclass(frozen=True)
class PolicySource:
    """What a node needs to build the run's policy itself."""

    checkpoint: str
    base_url: str | None = None


def run_episodes(
    jobs: list[tuple[Task, int]],
    source: PolicySource,
    sampling: Callable[[int], Sampling],
    limits: Limits,
    cluster: Cluster,
    out: Path,
    on_result: Callable[[dict[str, Any]], None],
) -> None:
    """Run (task, sample) jobs on the cluster; save each trajectory and append its row as it ends."""
    work = [(task, sample, source, sampling(sample), limits) for task, sample in jobs]
    for _, trajectory_dict, node in cluster.map_unordered(_episode, work):
        trajectory = Trajectory.from_dict(trajectory_dict)
        trajectory.save(trajectory_file(out, trajectory.task_id, trajectory.sample))
        row = {**result_row(trajectory), "node": node}
        append_row(out / RESULTS, row)
        on_result(row)


def _episode(
    backend: Backend, task: Task, sample: int, source: PolicySource, sampling: Sampling, limits: Limits
) -> dict:
    """One episode on the node this runs on (called by `Cluster.map_unordered`)."""
    return run_episode(
        task, _policy(source), sampling, limits, backend=backend if task.sandbox else None, sample=sample
    ).to_dict()


def _policy(source: PolicySource) -> Policy:
    key = (source.checkpoint, source.base_url)
    if key not in _policies:
        from .policies.factory import make_policy

        _policies[key] = make_policy(source.checkpoint, base_url=source.base_url)
    return _policies[key]
