"""Work that needs a sandbox, spread over the nodes of a Ray cluster.

Each node advertises how many sandboxes it runs at once as a custom Ray resource named
`sandbox` (`ray start --resources '{"sandbox": 8}'`, sized by its cores); a job takes one unit,
so Ray places it on a node with a free slot. On the node the job gets that node's own backend
(its Docker engine, or bubblewrap where none answers), resolved once per worker process.

Jobs are retried here, in the driver, not by Ray: a job whose node is lost (raylet killed,
machine gone) is submitted again and runs elsewhere; a job that ran to its end is yielded
exactly once, so the caller records each result once. A job that raises fails the run with its
own error. Ray is imported only when a cluster is used.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from .errors import SandboxError

log = logging.getLogger(__name__)
RESOURCE = "sandbox"
_backends: dict[str, Any] = {}  # per worker process: backend name -> Backend


class ClusterError(SandboxError):
    """The Ray cluster could not be reached, has no sandbox slots, or kept losing a job's node."""


@dataclass
class Cluster:
    address: str  # what `ray.init(address=...)` takes: "auto", "HOST:PORT", "ray://HOST:10001"
    backend: str = "auto"  # resolved on each node against that node's own engine
    attempts: int = 3  # runs of one job when its node is lost; errors of the job itself are not retried
    poll_s: float = 2.0  # how often the driver checks that some node still offers sandboxes

    def connect(self) -> None:
        import ray

        if not ray.is_initialized():
            root = str(Path(__file__).resolve().parents[1])
            # Workers import this checkout's packages, as the driver does.
            env = {"PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}
            try:
                ray.init(address=self.address, log_to_driver=False, runtime_env={"env_vars": env})
            except (ConnectionError, RuntimeError, ValueError) as err:
                raise ClusterError(f"cannot join the Ray cluster at {self.address!r}: {err}") from err
        if slots() == 0:
            raise ClusterError(
                f"no node of the Ray cluster at {self.address!r} advertises a {RESOURCE!r} resource: "
                f"start nodes with `ray start ... --resources '{{\"{RESOURCE}\": N}}'` (N sandboxes at once)"
            )

    def map_unordered(self, fn: Callable[..., Any], jobs: list[tuple]) -> Iterator[tuple[tuple, Any, str]]:
        """Run `fn(backend, *job)` for every job on some node; yield (job, result, node id) as each ends."""
        import ray

        self.connect()
        remote = ray.remote(_on_node).options(resources={RESOURCE: 1}, num_cpus=0, max_retries=0)
        submit = lambda job: remote.remote(fn, self.backend, job)  # noqa: E731
        pending = {submit(job): (job, 1) for job in jobs}
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=self.poll_s)
                if not ready:
                    if slots() == 0:
                        raise ClusterError(
                            f"no live node of the Ray cluster offers a {RESOURCE!r} slot; "
                            f"{len(pending)} jobs were left unrun"
                        )
                    continue
                job, attempt = pending.pop(ready[0])
                try:
                    result, node = ray.get(ready[0])
                except _node_lost() as err:
                    if attempt >= self.attempts:
                        raise ClusterError(
                            f"job {_name(job)} lost its node {attempt} times; last: {type(err).__name__}"
                        ) from err
                    log.warning("job %s lost its node (%s); running it again elsewhere", _name(job), type(err).__name__)
                    pending[submit(job)] = (job, attempt + 1)
                    continue
                except ray.exceptions.RayTaskError as err:
                    raise err.as_instanceof_cause() from None
                yield job, result, node
        finally:
            for ref in pending:  # Ctrl-C or an error: jobs still queued or running stop (their sandboxes close)
                ray.cancel(ref)


def slots() -> float:
    """Sandbox slots the live nodes of the connected cluster offer in all."""
    import ray

    return ray.cluster_resources().get(RESOURCE, 0)


def node_backend(name: str):
    """This node's backend by name, created once per process."""
    if name not in _backends:
        from . import get_backend

        _backends[name] = get_backend(name)
    return _backends[name]


def _on_node(fn: Callable[..., Any], backend: str, job: tuple) -> tuple[Any, str]:
    import ray

    return fn(node_backend(backend), *job), ray.get_runtime_context().get_node_id()


def _node_lost() -> tuple[type[BaseException], ...]:
    import ray.exceptions as rex

    return (rex.NodeDiedError, rex.WorkerCrashedError, rex.ObjectLostError, rex.LocalRayletDiedError)


def _name(job: tuple) -> str:
    first = job[0] if job else "?"
    return str(getattr(first, "id", None) or (first.get("instance_id") if isinstance(first, dict) else first))[:80]
