"""Sandbox runtime benchmark: our persistent session against the ways peers run commands.

    python -m sandboxes.bench        (or: harness sandbox bench)

Everything is measured in one run on the same image, so the ratios hold on a noisy machine:
- per-command round trip: our pty session vs a fresh `docker exec` CLI call per command
  (what mini-swe-agent does) vs docker-py `exec_run` (a new exec over the API per command);
- sandbox ready time: from a warm pool vs a cold create + start;
- snapshot and fork of 4 sandboxes;
- 32 sandboxes running 20 commands each concurrently: our session vs `docker exec`.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from rich.console import Console
from rich.table import Table

from sandboxes import SandboxPool, SandboxSpec
from sandboxes.docker_backend import DockerBackend
from sandboxes.images import BASE_IMAGE, build_base_image

SPEC = SandboxSpec(image=BASE_IMAGE, memory="512m", pids=256, wall_time=900)


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return samples


def p50_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def round_trips(backend: DockerBackend, docker_cli: str) -> dict[str, float]:
    with backend.create(SPEC) as sb:
        sb.exec("true")
        ours = timed(lambda: sb.exec("true"), 300)
        cli = timed(lambda: subprocess.run([docker_cli, "exec", sb.container.id, "true"], check=True), 30)
        api = timed(lambda: sb.container.exec_run(["true"]), 60)
    return {"session": p50_ms(ours), "docker exec CLI": p50_ms(cli), "docker-py exec_run": p50_ms(api)}


def ready_times(backend: DockerBackend) -> dict[str, float]:
    cold = []
    for _ in range(8):
        started = time.perf_counter()
        sb = backend.create(SPEC)
        cold.append(time.perf_counter() - started)
        sb.close()
    warm = []
    with SandboxPool(backend, SPEC, size=4) as pool:
        for _ in range(8):
            pool.wait_ready(120)
            started = time.perf_counter()
            sb = pool.acquire()
            warm.append(time.perf_counter() - started)
            sb.close()
    return {"pool hand-out": p50_ms(warm), "cold create+start": p50_ms(cold)}


def fork_times(backend: DockerBackend) -> dict[str, float]:
    with backend.create(SPEC) as sb:
        sb.exec("mkdir -p /workspace/repo && cd /workspace/repo && seq 1 10000 > data.txt")
        started = time.perf_counter()
        snapshot = sb.snapshot()
        snap = time.perf_counter() - started
        started = time.perf_counter()
        forks = backend.fork(snapshot, 4)
        fork = time.perf_counter() - started
        for f in forks:
            f.close()
        backend.remove_snapshot(snapshot)
    return {"snapshot": snap * 1000, "fork x4": fork * 1000}


def concurrent_load(
    backend: DockerBackend, docker_cli: str, sandboxes: int = 32, commands: int = 20
) -> dict[str, float]:
    boxes = backend.create_many([SPEC] * sandboxes)
    try:

        def ours(sb):
            for i in range(commands):
                sb.exec(f"echo {i} > /tmp/f; cat /tmp/f")

        def cli(sb):
            for i in range(commands):
                subprocess.run(
                    [docker_cli, "exec", sb.container.id, "sh", "-c", f"echo {i} > /tmp/f; cat /tmp/f"],
                    check=True,
                    capture_output=True,
                )

        results = {}
        for name, worker in (("session", ours), ("docker exec CLI", cli)):
            started = time.perf_counter()
            with ThreadPoolExecutor(max_workers=sandboxes) as pool:
                list(pool.map(worker, boxes))
            results[name] = time.perf_counter() - started
        return results
    finally:
        for sb in boxes:
            sb.close()


def main() -> dict:
    console = Console()
    docker_cli = shutil.which("docker")
    if docker_cli is None:
        raise SystemExit("the docker CLI is needed as the peer in this benchmark (apt-get install docker.io)")
    build_base_image()
    backend = DockerBackend()
    console.print("[bold]measuring round trips...")
    rt = round_trips(backend, docker_cli)
    console.print("[bold]measuring ready times...")
    ready = ready_times(backend)
    console.print("[bold]measuring snapshot and fork...")
    forks = fork_times(backend)
    console.print("[bold]measuring 32 sandboxes x 20 commands...")
    load = concurrent_load(backend, docker_cli)

    table = Table(title="sandbox benchmark (medians; ratios are peer / ours)")
    table.add_column("measure")
    table.add_column("ours", justify="right")
    table.add_column("peer", justify="right")
    table.add_column("ratio", justify="right")
    table.add_row(
        "round trip p50 vs docker exec CLI",
        f"{rt['session']:.2f} ms",
        f"{rt['docker exec CLI']:.1f} ms",
        f"{rt['docker exec CLI'] / rt['session']:.0f}x",
    )
    table.add_row(
        "round trip p50 vs docker-py exec_run",
        f"{rt['session']:.2f} ms",
        f"{rt['docker-py exec_run']:.1f} ms",
        f"{rt['docker-py exec_run'] / rt['session']:.0f}x",
    )
    table.add_row(
        "ready: pool hand-out vs cold create+start",
        f"{ready['pool hand-out']:.2f} ms",
        f"{ready['cold create+start']:.0f} ms",
        f"{ready['cold create+start'] / ready['pool hand-out']:.0f}x",
    )
    table.add_row("snapshot / fork x4", f"{forks['snapshot']:.0f} ms", f"{forks['fork x4']:.0f} ms", "")
    table.add_row(
        "32 sandboxes x 20 commands (wall)",
        f"{load['session']:.2f} s",
        f"{load['docker exec CLI']:.2f} s",
        f"{load['docker exec CLI'] / load['session']:.1f}x",
    )
    console.print(table)
    return {"round_trip_ms": rt, "ready_ms": ready, "fork_ms": forks, "load_s": load}


if __name__ == "__main__":
    main()
