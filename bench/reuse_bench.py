"""One environment image per repository against an image per instance, for N tasks of one repository.

    python -m bench.reuse_bench [--package spanlite] [--instances FILE --repo OWNER/NAME] [--rounds 4]

The tasks: the swe-demo tasks of one package (default), or the shared instances of one
repository in a JSONL that `harness tasks mine --share-env` wrote. For each task, both forms
are made in the same run from the same content:

- per instance: an image built FROM the environment image with the repository at the base
  commit (the same archive) unpacked into /testbed, what `tasks.mining.mine` / `tasks.swe_demo`
  build per instance; its build time and the disk it adds over the environment image;
- shared: the repository archive alone (`tasks.shared_env.repo_archive`, made again into a
  scratch cache from a repository holding the commit): its time and size; no image.

Then the per-start cost, alternating the two forms per task and round: ready means the sandbox
is started and its /testbed holds the repository at the base commit (prebuilt: `create` plus a
`git rev-parse HEAD`; shared: `create` plus `run_setup`, which empties /testbed, puts the archive
in with one put-archive call and checks HEAD). The bench's images are removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tarfile
import tempfile
import time
import uuid
from pathlib import Path

from rich.console import Console
from rich.table import Table

from sandboxes import SandboxSpec, get_backend
from sandboxes.docker_backend import docker_client
from sandboxes.images import build_image
from tasks.grading.grade import run_setup
from tasks.shared_env import REPO_ARCHIVE, repo_archive
from tasks.swe_demo import build_instance, task_dirs

BENCH_REPOSITORY = "harness-bench/reuse"


def load_instances(args, console: Console) -> list[dict]:
    if args.instances:
        rows = [json.loads(line) for line in Path(args.instances).read_text().splitlines() if line.strip()]
        chosen = [r for r in rows if r.get(REPO_ARCHIVE) and (not args.repo or r["repo"] == args.repo)]
        if not chosen:
            raise SystemExit(f"{args.instances} holds no shared instances{' of ' + args.repo if args.repo else ''}")
        return chosen
    dirs = [d for d in task_dirs() if d.name.split("__")[0] == args.package]
    if not dirs:
        raise SystemExit(f"no swe-demo package {args.package!r}")
    console.print(f"[bold]loading the {len(dirs)} swe-demo tasks of {args.package} (shared form)...")
    return [build_instance(d, get_backend("docker"), shared=True) for d in dirs]


def per_instance_image(instance: dict, tag: str) -> float:
    """Build the instance's own image (environment + its repository); seconds."""
    workdir = instance.get("workdir", "/testbed")
    dockerfile = (
        f"FROM {instance['image']}\nRUN mkdir -p {workdir} && find {workdir} -mindepth 1 -maxdepth 1 -exec rm -rf {{}} +\n"
        f"ADD repo.tar {workdir}/\nWORKDIR {workdir}\nRUN git update-index -q --refresh >/dev/null; true\n"
    )
    started = time.perf_counter()
    build_image(tag, dockerfile, {"repo.tar": Path(instance[REPO_ARCHIVE])}, labels={"harness.bench": "reuse"})
    return time.perf_counter() - started


def remake_archive(instance: dict) -> float:
    """Make the repository archive again into a scratch cache; seconds (the repository to take it from is not timed)."""
    with tempfile.TemporaryDirectory(prefix="harness-reuse-") as scratch:
        source = Path(scratch) / "source"
        source.mkdir()
        with tarfile.open(instance[REPO_ARCHIVE]) as tar:
            tar.extractall(source, filter="data")
        previous = os.environ.get("HARNESS_CACHE")
        os.environ["HARNESS_CACHE"] = str(Path(scratch) / "cache")
        try:
            started = time.perf_counter()
            repo_archive(source, instance["base_commit"], instance["instance_id"])
            return time.perf_counter() - started
        finally:
            if previous is None:
                os.environ.pop("HARNESS_CACHE")
            else:
                os.environ["HARNESS_CACHE"] = previous


def image_size(api, image: str) -> int:
    return api.inspect_image(image)["Size"]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--package", default="spanlite", help="swe-demo package whose tasks to use (default spanlite)")
    parser.add_argument("--instances", help="a JSONL of shared instances (harness tasks mine --share-env) instead")
    parser.add_argument("--repo", help="with --instances: the repository (owner/name) to take")
    parser.add_argument("--rounds", type=int, default=4, help="starts per task and form (default 4)")
    args = parser.parse_args(argv)
    console = Console()
    instances = load_instances(args, console)
    backend = get_backend("docker")
    api = docker_client().api
    environments = sorted({i["image"] for i in instances})
    run = uuid.uuid4().hex[:8]
    tags = {i["instance_id"]: f"{BENCH_REPOSITORY}-{i['instance_id'].lower()}:{run}" for i in instances}
    build_s, added, archive_s, archive_bytes = [], [], [], []
    starts: dict[str, list[float]] = {"prebuilt": [], "shared": []}
    inject_s: list[float] = []
    try:
        for instance in instances:
            console.print(f"{instance['instance_id']}: building its own image, remaking its archive")
            build_s.append(per_instance_image(instance, tags[instance["instance_id"]]))
            added.append(image_size(api, tags[instance["instance_id"]]) - image_size(api, instance["image"]))
            archive_s.append(remake_archive(instance))
            archive_bytes.append(Path(instance[REPO_ARCHIVE]).stat().st_size)
        for round_number in range(args.rounds):
            for index, instance in enumerate(instances):
                forms = ("prebuilt", "shared") if (round_number + index) % 2 == 0 else ("shared", "prebuilt")
                for form in forms:
                    spec = SandboxSpec(
                        image=tags[instance["instance_id"]] if form == "prebuilt" else instance["image"],
                        workdir=instance.get("workdir", "/testbed"),
                        memory="2g",
                        pids=512,
                        wall_time=600,
                    )
                    started = time.perf_counter()
                    sandbox = backend.create(spec)
                    try:
                        if form == "shared":
                            injected = time.perf_counter()
                            run_setup(sandbox, instance)
                            inject_s.append(time.perf_counter() - injected)
                        head = sandbox.exec(f"cd {spec.workdir} && git rev-parse HEAD").output.strip()
                        starts[form].append(time.perf_counter() - started)
                    finally:
                        sandbox.close()
                    if head != instance["base_commit"]:
                        raise SystemExit(f"{instance['instance_id']} ({form}): HEAD is {head!r}, not the base commit")
    finally:
        for tag in tags.values():
            try:
                api.remove_image(tag, force=True)
            except Exception:  # noqa: BLE001 - not built
                pass

    n = len(instances)
    result = {
        "tasks": n,
        "repository": instances[0]["repo"],
        "environment_images": environments,
        "rounds": args.rounds,
        "per_instance": {
            "images_built": n,
            "build_s_total": sum(build_s),
            "build_s_median": statistics.median(build_s),
            "disk_added_bytes": sum(added),
        },
        "shared": {"images_built": 0, "archive_s_total": sum(archive_s), "archive_bytes": sum(archive_bytes)},
        "start_s": {form: statistics.median(times) for form, times in starts.items()},
        "inject_s": statistics.median(inject_s),
    }
    result["start_ratio"] = result["start_s"]["shared"] / result["start_s"]["prebuilt"]
    mib = 2**20
    table = Table(
        title=f"{n} tasks of {result['repository']}: one environment image ({', '.join(environments)}) "
        f"vs an image per task; {args.rounds} starts per task and form, alternating"
    )
    for column in ("measure", "image per task", "shared image + repository put in", "saved / ratio"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    table.add_row("images built", str(n), "0", str(n))
    table.add_row(
        "time to make them (archives for shared)",
        f"{sum(build_s):.1f} s",
        f"{sum(archive_s):.2f} s",
        f"{sum(build_s) - sum(archive_s):.1f} s",
    )
    table.add_row(
        "disk over the environment image",
        f"{sum(added) / mib:.1f} MiB",
        f"{sum(archive_bytes) / mib:.1f} MiB (host archives)",
        f"{(sum(added) - sum(archive_bytes)) / mib:.1f} MiB",
    )
    table.add_row(
        "start to ready (p50)",
        f"{result['start_s']['prebuilt'] * 1000:.0f} ms",
        f"{result['start_s']['shared'] * 1000:.0f} ms (put in: {result['inject_s'] * 1000:.0f} ms)",
        f"{result['start_ratio']:.2f}x",
    )
    console.print(table)
    console.print_json(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
