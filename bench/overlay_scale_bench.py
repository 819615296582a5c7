"""N sandboxes of one image started at once: start time (p50/p99) and disk, overlay against Docker.

    python -m bench.overlay_scale_bench [--image harness-base:latest] [--counts 16,100] [--workers 8] [--no-docker]

For each N: N sandboxes are created by `workers` threads at once (`Backend.create_many`), each start
timed from its call to a shell that answers; then each sandbox writes nothing more than its start did,
and the disk they take is measured before they close:
- overlay: the image's layers (once, shared; where the store links the engine's own layer folders, those)
  plus each sandbox's folder (`upper`, `work`, its /etc/hosts): what `harness sandbox ls --backend overlay`
  shows;
- docker: the image's size once, plus each container's writable layer and its init layer as overlay2
  holds them (`GraphDriver.Data`: UpperDir and WorkDir, and the `-init` layer's) and its folder of
  config, hosts and log files, as root on the host.
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table

from sandboxes import Backend, SandboxSpec, get_backend
from sandboxes.disk import tree_bytes
from sandboxes.images import BASE_IMAGE, build_base_image


def percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def start_all(backend: Backend, spec: SandboxSpec, count: int, workers: int) -> tuple[list, list[float]]:
    def one(_):
        began = time.perf_counter()
        sandbox = backend.create(spec)
        sandbox.exec("true")
        return sandbox, time.perf_counter() - began

    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(one, range(count)))
    return [sandbox for sandbox, _ in results], [seconds for _, seconds in results]


def overlay_disk(backend, sandboxes) -> tuple[int, int]:
    image = sandboxes[0].image
    return sum(tree_bytes(layer.resolve()) for layer in image.layers), sum(
        tree_bytes(sandbox.dir) for sandbox in sandboxes
    )


def docker_disk(backend, sandboxes) -> tuple[int, int]:
    image = backend.client.images.get(sandboxes[0].spec.image).attrs["Size"]
    written = 0
    for sandbox in sandboxes:
        details = backend.api.inspect_container(sandbox.container.id)
        data = details["GraphDriver"]["Data"]
        folders = [data["UpperDir"], data["WorkDir"], data["LowerDir"].split(":")[0]]  # the first lower: -init
        folders.append(str(Path(details["HostsPath"]).parent))  # its config, hosts and log files
        written += sum(tree_bytes(Path(folder)) for folder in folders)
    return image, written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=BASE_IMAGE)
    parser.add_argument("--counts", default="16,100")
    parser.add_argument("--workers", type=int, default=8, help="sandboxes started at once")
    parser.add_argument("--no-docker", action="store_true", help="overlay only (no engine needed)")
    args = parser.parse_args()
    if args.image == BASE_IMAGE and not args.no_docker:
        build_base_image()
    spec = SandboxSpec(image=args.image, memory="256m", pids=64, wall_time=600)
    backends = {"overlay": overlay_disk} | ({} if args.no_docker else {"docker": docker_disk})
    table = Table(
        "backend", "N", "start p50", "start p99", "all started", "image disk", "sandboxes' disk", "per sandbox"
    )
    for name, disk in backends.items():
        backend = get_backend(name)
        backend.create(spec).close()  # the first use (an unpack, an image check) is not what is measured
        for count in (int(n) for n in args.counts.split(",")):
            began = time.perf_counter()
            sandboxes, seconds = start_all(backend, spec, count, args.workers)
            wall = time.perf_counter() - began
            try:
                image, written = disk(backend, sandboxes)
            finally:
                with ThreadPoolExecutor(args.workers) as pool:
                    list(pool.map(lambda sandbox: sandbox.close(), sandboxes))
            table.add_row(
                name,
                str(count),
                f"{statistics.median(seconds) * 1000:.0f} ms",
                f"{percentile(seconds, 0.99) * 1000:.0f} ms",
                f"{wall:.1f} s",
                f"{image / 2**20:.0f} MiB",
                f"{written / 2**20:.1f} MiB",
                f"{written / count / 2**10:.0f} KiB",
            )
    Console().print(table)


if __name__ == "__main__":
    main()
