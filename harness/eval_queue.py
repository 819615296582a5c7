"""No idle sandbox time in an eval run: the driver knows its whole queue of (task, sample) jobs.

- `job_specs(task)`: the sandboxes one episode of `task` creates, in order: its own, then the
  fresh one its grader runs in (SWE-bench grading, a repository's test command).
- `start_ahead(jobs, backend, per_image)`: a `PrestartBackend` fed with those specs, job after
  job, so the next episodes' (and gradings') containers start while the current ones run.
- `AgentSlots`: at most `workers` episodes are in their agent turns at once; an episode gives
  its slot up when its turns are over (`run_episode(on_agent_done=...)`), so the next episode
  starts while this one is graded.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

from sandboxes import Backend, SandboxSpec
from sandboxes.prestart import PrestartBackend
from tasks.task import Task

from .kinds import kind_of


def job_specs(task: Task) -> list[SandboxSpec]:
    if task.sandbox is None:
        return []
    kind = kind_of(task)
    if (task.reward_spec.get("method") or kind.reward) == "swebench":
        from tasks.grading.grade import grading_spec

        return [task.sandbox, grading_spec(task.metadata["instance"])]
    return [task.sandbox, *(kind.verifier_sandboxes(task) if kind.verifier_sandboxes else [])]


def start_ahead(jobs: list[tuple[Task, int]], backend: Backend, per_image: int, workers: int) -> PrestartBackend:
    """At most `per_image` ready or starting per image, and 2 x `workers` (the next round of episodes and gradings) in all."""
    return PrestartBackend(
        backend,
        [spec for task, _ in jobs for spec in job_specs(task)],
        per_image=per_image,
        total=max(2 * workers, per_image),
    )


class AgentSlots:
    """A bound on episodes in their agent turns; `slot()` yields the release to call when the turns end."""

    def __init__(self, workers: int):
        self._free = threading.Semaphore(max(workers, 1))

    @contextmanager
    def slot(self) -> Iterator:
        self._free.acquire()
        released = threading.Event()

        def release() -> None:
            if not released.is_set():
                released.set()
                self._free.release()

        try:
            yield release
        finally:
            release()
