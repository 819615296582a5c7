"""N sandboxes of one image started at once: start time (p50/p99) and disk, overlay against Docker.

    python -m bench.overlay_scale_bench [--image harness-base:latest] [--counts 16,100] [--workers 8]
        [--backends overlay,overlay-tmpfs,docker]

For each N: N sandboxes are created by `workers` threads at once (`Backend.create_many`), each start
timed from its call to a shell that answers; then each sandbox writes nothing more than its start did,
and the disk they take is measured before they close:
- overlay: the image's layers (once, shared; where the store links the engine's own layer folders, those)
  plus each sandbox's folder (`upper`, `work`, its /etc/hosts): what `harness sandbox ls --backend overlay`
  shows;
- overlay-tmpfs (the overlay backend with `writable="tmpfs"`): the image's layers, plus the link each sandbox
  has in the cache; what it wrote and its small files are on tmpfs, in memory, and counted there ("in tmpfs");
- docker: the image's size once, plus each container's writable layer and its init layer as overlay2
  holds them (`GraphDriver.Data`: UpperDir and WorkDir, and the `-init` layer's) and its folder of
  config, hosts and log files, as root on the host.

Memory per idle sandbox: the proportional set size (PSS, /proc/PID/smaps_rollup) of each sandbox's process tree on
the host while it idles, the mean over the N: overlay from its bwrap process down (overlay-tmpfs: and its holder
process); docker from the container's containerd shim down (the shim is one per container, a cost of the
container). "In tmpfs", overlay-tmpfs only: the mean bytes each sandbox holds on tmpfs (its tmpfs's used blocks and
its folder on /dev/shm), memory on top of the PSS. Fork: one sandbox writes a file,
is snapshot, and is forked `--fork` times (`Backend.fork`); the time to all forks answering, each checked to hold
the file.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table

from sandboxes import Backend, SandboxSpec, get_backend
from sandboxes.disk import tree_bytes
from sandboxes.images import BASE_IMAGE, build_base_image


def process_children() -> dict[int, list[int]]:
    """Each process id with the ids of its children, from /proc."""
    tree: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        tree.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    return tree


def tree_pss(root: int, children: dict[int, list[int]]) -> int:
    """Bytes of proportional set size of `root` and every process below it."""
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        total += next(int(line.split()[1]) * 1024 for line in rollup.splitlines() if line.startswith("Pss:"))
    return total


def idle_memory(backend: Backend, sandboxes) -> float:
    """Mean PSS of an idle sandbox's process tree (see the module's doc)."""
    children = process_children()
    roots = []
    for sandbox in sandboxes:
        if backend.name == "docker":
            pid = backend.api.inspect_container(sandbox.container.id)["State"]["Pid"]
            roots.append(int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]))  # its shim
        else:
            roots.append(sandbox.process.pid)
            if sandbox.holder is not None:
                roots.append(sandbox.holder.pid)
    return sum(tree_pss(root, children) for root in roots) / len(sandboxes)


def in_tmpfs(sandboxes) -> float:
    """Mean bytes an overlay-tmpfs sandbox holds on tmpfs: its own tmpfs's used blocks and its folder on /dev/shm."""
    held = 0
    for sandbox in sandboxes:
        tmpfs = os.statvfs(sandbox._upper().parent)
        held += (tmpfs.f_blocks - tmpfs.f_bfree) * tmpfs.f_frsize + tree_bytes(sandbox.dir)
    return held / len(sandboxes)


def floor(backend: Backend, spec: SandboxSpec, samples: int = 20) -> dict[str, float]:
    """The physical floor of an overlay start, p50 seconds: an overlay mount of the image's layers alone (in a mount
    namespace of its own, as a sandbox mounts it), and a bare bwrap start on the image's root (`true`, no shell)."""
    import subprocess
    import tempfile

    layers = ":".join(str(layer.resolve()) for layer in backend.store.get(spec.image).layers[::-1])
    mount, bwrap = [], []
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "root"
        for n in range(samples):
            folder = Path(scratch) / str(n)
            for part in ("upper", "work", "merged"):
                (folder / part).mkdir(parents=True)
            options = f"lowerdir={layers},upperdir={folder / 'upper'},workdir={folder / 'work'}"
            began = time.perf_counter()
            subprocess.run(
                ["unshare", "-m", "sh", "-c", f'mount -t overlay overlay -o "{options}" {folder / "merged"}'],
                check=True,
            )
            mount.append(time.perf_counter() - began)
            if n == 0:  # the bwrap starts share one mount, made outside the timing
                root.mkdir()
                subprocess.run(["mount", "-t", "overlay", "overlay", "-o", options, str(root)], check=True)
        try:
            for _ in range(samples):
                began = time.perf_counter()
                subprocess.run(["bwrap", "--ro-bind", str(root), "/", "--unshare-all", "/bin/true"], check=True)
                bwrap.append(time.perf_counter() - began)
        finally:
            subprocess.run(["umount", str(root)], check=True)
    return {"overlay mount alone": statistics.median(mount), "bare bwrap start": statistics.median(bwrap)}


def fork_time(backend: Backend, spec: SandboxSpec, count: int) -> float:
    """Seconds from a snapshot's fork into `count` sandboxes to all of them answering with the parent's file."""
    with backend.create(spec) as parent:
        parent.exec("head -c 1048576 /dev/urandom > /tmp/state && sha256sum /tmp/state > /tmp/state.sum")
        snapshot = parent.snapshot()
        began = time.perf_counter()
        forks = backend.fork(snapshot, count)
        try:
            answers = [child.exec("sha256sum -c /tmp/state.sum").exit_code for child in forks]
            took = time.perf_counter() - began
        finally:
            for child in forks:
                child.close()
    if any(answers):
        raise RuntimeError(f"{answers.count(1)} of {count} forks lack the parent's file")
    return took


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
    """(the image's blocks, the sandboxes' blocks on disk: their folders, or the links to them on tmpfs)."""
    image = sandboxes[0].image
    return sum(tree_bytes(layer.resolve()) for layer in image.layers), sum(
        os.lstat(sandbox.dir).st_blocks * 512 if sandbox.dir.is_symlink() else tree_bytes(sandbox.dir)
        for sandbox in sandboxes
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


BACKENDS = {
    "overlay": lambda: get_backend("overlay", writable="disk"),
    "overlay-tmpfs": lambda: get_backend("overlay", writable="tmpfs"),
    "docker": lambda: get_backend("docker"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=BASE_IMAGE)
    parser.add_argument("--counts", default="16,100")
    parser.add_argument("--workers", type=int, default=8, help="sandboxes started at once")
    parser.add_argument("--backends", default=",".join(BACKENDS), help="of " + ", ".join(BACKENDS))
    parser.add_argument("--no-docker", action="store_true", help="leave docker out (no engine needed)")
    parser.add_argument("--fork", type=int, default=16, help="forks of one snapshot")
    args = parser.parse_args()
    names = [name for name in args.backends.split(",") if not (args.no_docker and name == "docker")]
    unknown = set(names) - set(BACKENDS)
    if unknown:
        parser.error(f"unknown backends {', '.join(sorted(unknown))}: choose from {', '.join(BACKENDS)}")
    if args.image == BASE_IMAGE and "docker" in names:
        build_base_image()
    spec = SandboxSpec(image=args.image, memory="256m", pids=64, wall_time=600)
    table = Table(
        "backend",
        "N",
        "start p50",
        "start p99",
        "all started",
        "image disk",
        "sandboxes' disk",
        "per sandbox",
        "idle memory (PSS)",
        "in tmpfs",
    )
    forks = Table("backend", "forks", "all answering")
    floors = Table("the floor of an overlay start", "p50")
    for name in names:
        backend = BACKENDS[name]()
        disk = docker_disk if name == "docker" else overlay_disk
        backend.create(spec).close()  # the first use (an unpack, an image check) is not what is measured
        for count in (int(n) for n in args.counts.split(",")):
            began = time.perf_counter()
            sandboxes, seconds = start_all(backend, spec, count, args.workers)
            wall = time.perf_counter() - began
            try:
                image, written = disk(backend, sandboxes)
                memory = idle_memory(backend, sandboxes)
                held = f"{in_tmpfs(sandboxes) / 2**10:.0f} KiB" if name == "overlay-tmpfs" else "-"
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
                f"{memory / 2**20:.1f} MiB",
                held,
            )
        if args.fork:
            forks.add_row(name, str(args.fork), f"{fork_time(backend, spec, args.fork):.2f} s")
        if name == "overlay":
            for what, seconds in floor(backend, spec).items():
                floors.add_row(what, f"{seconds * 1000:.0f} ms")
    console = Console(width=160)
    console.print(table)
    if args.fork:
        console.print(forks)
    console.print(floors)


if __name__ == "__main__":
    main()
