"""Grading overhead per instance: our grader against the steps SWE-bench's own harness takes.

    python -m bench.grading_bench [--instances 8] [--rounds 2]

Both sides grade the same swe-demo instances, in the same image, with the gold patch, one
after the other per instance (the order flips every round), so the ratios hold on a noisy
machine. Overhead is everything except running the tests: the wall time of one grading minus
the test command's own duration, which `date` markers around it (the same eval script on both
sides) print into the test log.

- ours: `tasks.grading.grade.grade` (a fresh sandbox, the patch through a tar archive, applied with
  fallbacks, the eval script run in our persistent shell, the log read back and parsed).
- peer: the sequence of `swebench.harness.run_evaluation.run_instance`, with docker-py:
  `containers.create` + `start`, the patch copied in as a tar archive, `git apply` with its
  fallback loop, `git diff`, eval.sh copied in, `/bin/bash /eval.sh` streamed from a thread
  that is joined with a timeout, the log written to a file, `git diff` again,
  `get_eval_report` (`get_logs_eval` and the resolution rules), report.json, then
  `stop(timeout=15)` + `remove(force=True)`.

- ours, pre-started: the same grading in a sandbox started beforehand, as `harness eval
  --prestart` starts it while the episode before it runs (its start is off the critical path,
  so not counted; that is the point of it).

SWE-bench's containers run `tail -f /dev/null` as PID 1, which ignores SIGTERM, so its stop
always waits out the 15 s grace period. The target ratio (ours / peer <= 0.5) is taken
against the peer without that stop: its forced remove still kills the container, as ours does.
The ratio against the full sequence is shown too.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import statistics
import tarfile
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import docker.errors
from rich.console import Console
from rich.table import Table
from swebench.harness.constants import END_TEST_OUTPUT, START_TEST_OUTPUT
from swebench.harness.grading import get_eval_report
from swebench.harness.utils import make_test_spec

from sandboxes import Backend, get_backend
from sandboxes.base import labels
from sandboxes.docker_backend import docker_client
from sandboxes.prestart import PrestartBackend
from tasks.grading.grade import grade, grading_spec
from tasks.swe_demo import build_instance, task_dirs

TARGET = 0.5  # ours / peer overhead
TEST_TIMEOUT = 1800  # SWE-bench's default per instance
CLOCK = 'echo "HARNESS_BENCH_CLOCK $(date +%s.%N)"'
_CLOCK_LINE = re.compile(r"^HARNESS_BENCH_CLOCK (\d+\.\d+)$", re.MULTILINE)
# What run_instance runs, in its order (swebench.harness.run_evaluation.GIT_APPLY_CMDS).
GIT_APPLY_CMDS = [
    "git apply --verbose",
    "git apply --verbose --3way",
    "git apply --verbose --reject",
    "patch --batch --forward --fuzz=5 -p1 -i",
]
CONTAINER_PATCH_FILE = "/tmp/patch.diff"
CONTAINER_WORKDIR = "/testbed"


class BenchError(RuntimeError):
    pass


@dataclass
class Sample:
    total: float  # seconds, the whole grading
    tests: float  # seconds the test command itself ran
    stop: float = 0.0  # seconds in the peer's `stop` (waiting out its grace period)

    @property
    def overhead(self) -> float:
        return self.total - self.tests

    @property
    def overhead_without_stop(self) -> float:
        return self.overhead - self.stop


def with_test_clock(instance: dict) -> dict:
    """The instance with its eval script printing a timestamp just before and after the tests."""
    lines = instance["eval_script"].split("\n")
    start = next(i for i, line in enumerate(lines) if START_TEST_OUTPUT in line)
    end = next(i for i, line in enumerate(lines) if END_TEST_OUTPUT in line)
    lines = lines[: start + 1] + [CLOCK] + lines[start + 1 : end + 1] + [CLOCK] + lines[end + 1 :]
    return {**instance, "eval_script": "\n".join(lines)}


def seconds_of_tests(log: str) -> float:
    stamps = [float(s) for s in _CLOCK_LINE.findall(log)]
    if len(stamps) != 2:
        raise BenchError(f"expected 2 clock lines in the test log, found {len(stamps)}:\n{log[-2000:]}")
    return stamps[1] - stamps[0]


class LogKeepingBackend:
    """Our backend, keeping the last file the grader reads back from a sandbox: the test log."""

    def __init__(self, backend: Backend):
        self.backend = backend
        self.last_read = b""

    def create(self, spec):
        return self._keep(self.backend.create(spec))

    def create_within(self, spec, seconds):
        return self._keep(self.backend.create_within(spec, seconds))

    def _keep(self, sandbox):
        read_file = sandbox.read_file

        def read_and_keep(path: str) -> bytes:
            self.last_read = read_file(path)
            return self.last_read

        sandbox.read_file = read_and_keep
        return sandbox


def grade_ours(instance: dict, backend: LogKeepingBackend) -> Sample:
    started = time.perf_counter()
    report = grade(instance, instance["patch"], backend, timeout=TEST_TIMEOUT)
    total = time.perf_counter() - started
    if not report.resolved:
        raise BenchError(
            f"our grader did not resolve {instance['instance_id']} with its gold patch: {report.to_dict()}"
        )
    return Sample(total, seconds_of_tests(backend.last_read.decode("utf-8", errors="replace")))


def grade_prestarted(instance: dict, backend: Backend) -> Sample:
    """Our grading with its sandbox started ahead (timed from the hand-out on)."""
    with PrestartBackend(backend, [grading_spec(instance, TEST_TIMEOUT)], per_image=1) as ahead:
        if not ahead.wait_idle(120) or ahead.ready_count() != 1:
            raise BenchError(f"the grading sandbox of {instance['instance_id']} could not be pre-started")
        keeping = LogKeepingBackend(ahead)
        sample = grade_ours(instance, keeping)
        if ahead.stats["handed_out"] != 1:
            raise BenchError("the grader did not take the pre-started sandbox")
    return sample


def copy_to_container(container, src: Path, dst: PurePosixPath) -> None:
    """As SWE-bench does it: a tar file on disk, read back, `mkdir -p`, `put_archive`."""
    tar_path = src.with_suffix(".tar")
    with tarfile.open(tar_path, "w") as tar:
        tar.add(src, arcname=dst.name)
    data = tar_path.read_bytes()
    container.exec_run(f"mkdir -p {dst.parent}")
    container.put_archive(str(dst.parent), data)
    tar_path.unlink()


def exec_with_timeout(container, command: str, timeout: float) -> str:
    """As SWE-bench does it: the exec's output streamed in a thread that is joined with a timeout."""
    output = io.BytesIO()

    def stream() -> None:
        exec_id = container.client.api.exec_create(container.id, command)["Id"]
        for chunk in container.client.api.exec_start(exec_id, stream=True):
            output.write(chunk)

    thread = threading.Thread(target=stream, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise BenchError(f"{command} ran past {timeout}s")
    return output.getvalue().decode(errors="replace")


def grade_peer(instance: dict, client, log_root: Path, run_id: str) -> Sample:
    """The steps of swebench's `run_instance`, timed from its first to its last."""
    spec = make_test_spec(instance)  # run_instance is handed a ready TestSpec
    log_dir = log_root / spec.instance_id
    started = time.perf_counter()
    log_dir.mkdir(parents=True, exist_ok=True)
    client.images.get(spec.image)  # SWE-bench would pull a missing image here; never done in this benchmark
    name = f"sweb.eval.{spec.instance_id.lower()}.{run_id}"
    try:
        client.containers.get(name).remove(force=True)
    except docker.errors.NotFound:
        pass
    container = client.containers.create(
        image=spec.image,
        name=name,
        user="root",
        detach=True,
        command="tail -f /dev/null",
        network_mode="none",
        labels=labels(),
    )
    try:
        container.start()
        patch_file = log_dir / "patch.diff"
        patch_file.write_text(instance["patch"])
        copy_to_container(container, patch_file, PurePosixPath(CONTAINER_PATCH_FILE))
        for attempt, command in enumerate(GIT_APPLY_CMDS):
            if attempt:
                container.exec_run(
                    ["/bin/bash", "-c", "git checkout -- . ; git clean -fd"], workdir=CONTAINER_WORKDIR, user="root"
                )
            if (
                container.exec_run(
                    f"{command} {CONTAINER_PATCH_FILE}", workdir=CONTAINER_WORKDIR, user="root"
                ).exit_code
                == 0
            ):
                break
        else:
            raise BenchError(f"the peer could not apply the gold patch of {spec.instance_id}")
        container.exec_run("git -c core.fileMode=false diff", workdir=CONTAINER_WORKDIR)
        eval_file = log_dir / "eval.sh"
        eval_file.write_text(spec.eval_script)
        copy_to_container(container, eval_file, PurePosixPath("/eval.sh"))
        test_output = exec_with_timeout(container, "/bin/bash /eval.sh", TEST_TIMEOUT)
        test_output_path = log_dir / "test_output.txt"
        test_output_path.write_text(test_output)
        container.exec_run("git -c core.fileMode=false diff", workdir=CONTAINER_WORKDIR)
        prediction = {"instance_id": spec.instance_id, "model_name_or_path": "gold", "model_patch": instance["patch"]}
        report = get_eval_report(spec, prediction, str(test_output_path), include_tests_status=True)
        (log_dir / "report.json").write_text(json.dumps(report, indent=4))
    finally:
        stop_started = time.perf_counter()
        container.stop(timeout=15)
        stop = time.perf_counter() - stop_started
        container.remove(force=True)
    total = time.perf_counter() - started
    if not report[spec.instance_id]["resolved"]:
        raise BenchError(f"the peer did not resolve {spec.instance_id} with its gold patch: {report}")
    return Sample(total, seconds_of_tests(test_output), stop)


def median(samples: list[Sample], measure: str) -> float:
    return statistics.median(getattr(s, measure) for s in samples)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=8, help="swe-demo instances to grade (default 8)")
    parser.add_argument("--rounds", type=int, default=2, help="gradings of each instance per side (default 2)")
    args = parser.parse_args(argv)
    console = Console()
    backend = get_backend("docker")
    console.print(f"[bold]preparing {args.instances} swe-demo instances...")
    instances = [with_test_clock(build_instance(path, backend)) for path in task_dirs()[: args.instances]]
    ours_backend, client, run_id = LogKeepingBackend(backend), docker_client(), uuid.uuid4().hex[:8]
    ours: list[Sample] = []
    ahead: list[Sample] = []
    peer: list[Sample] = []
    with tempfile.TemporaryDirectory(prefix="grading-bench-") as log_root:
        for round_number in range(args.rounds):
            for instance in instances:
                console.print(f"round {round_number + 1}/{args.rounds}: {instance['instance_id']}")
                for side in ("ours", "ahead", "peer") if round_number % 2 == 0 else ("peer", "ahead", "ours"):
                    if side == "ours":
                        ours.append(grade_ours(instance, ours_backend))
                    elif side == "ahead":
                        ahead.append(grade_prestarted(instance, backend))
                    else:
                        peer.append(grade_peer(instance, client, Path(log_root), run_id))

    result = {
        "instances": len(instances),
        "rounds": args.rounds,
        "ours": {
            "total_s": median(ours, "total"),
            "tests_s": median(ours, "tests"),
            "overhead_s": median(ours, "overhead"),
        },
        "ahead": {
            "total_s": median(ahead, "total"),
            "tests_s": median(ahead, "tests"),
            "overhead_s": median(ahead, "overhead"),
        },
        "peer": {
            "total_s": median(peer, "total"),
            "tests_s": median(peer, "tests"),
            "overhead_s": median(peer, "overhead"),
            "stop_s": median(peer, "stop"),
            "overhead_without_stop_s": median(peer, "overhead_without_stop"),
        },
    }
    result["ratio"] = result["ours"]["overhead_s"] / result["peer"]["overhead_without_stop_s"]
    result["ratio_with_stop"] = result["ours"]["overhead_s"] / result["peer"]["overhead_s"]
    result["ratio_prestarted"] = result["ahead"]["overhead_s"] / result["peer"]["overhead_without_stop_s"]
    result["target"] = TARGET

    o, p = result["ours"], result["peer"]
    table = Table(
        title=f"grading per instance ({len(instances)} instances x {args.rounds} rounds, medians; ratios are ours / peer)"
    )
    table.add_column("measure")
    table.add_column("ours", justify="right")
    table.add_column("SWE-bench steps", justify="right")
    table.add_column("ratio", justify="right")
    table.add_row("total", f"{o['total_s']:.2f} s", f"{p['total_s']:.2f} s", f"{o['total_s'] / p['total_s']:.2f}")
    table.add_row("  of which the tests", f"{o['tests_s']:.2f} s", f"{p['tests_s']:.2f} s", "")
    table.add_row(
        "overhead (peer without its 15 s stop)",
        f"{o['overhead_s']:.2f} s",
        f"{p['overhead_without_stop_s']:.2f} s",
        f"{result['ratio']:.2f} (target <= {TARGET})",
    )
    a = result["ahead"]
    table.add_row(
        "overhead, ours pre-started (as in eval --prestart)",
        f"{a['overhead_s']:.2f} s",
        f"{p['overhead_without_stop_s']:.2f} s",
        f"{result['ratio_prestarted']:.2f} (target <= {TARGET})",
    )
    table.add_row(
        "overhead (peer with its stop)",
        f"{o['overhead_s']:.2f} s",
        f"{p['overhead_s']:.2f} s",
        f"{result['ratio_with_stop']:.2f}",
    )
    console.print(table)
    return result


if __name__ == "__main__":
    main()
