"""`harness eval`, `grade` and `generate --ray-address` on a real 3-node Ray cluster started on this machine, one
node killed mid-run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.cli_helpers import free_port, harness, rows_of

pytestmark = pytest.mark.slow  # a 3-node cluster, episodes in Docker: 2.5 to 4 minutes

RAY = str(Path(sys.executable).with_name("ray"))
ENV = {
    **os.environ,
    "RAY_AUTH_MODE": "disabled",
    "RAY_USAGE_STATS_ENABLED": "0",
    # A lost node is declared dead after ~3 s instead of ~30 s.
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_failure_threshold": "4",
    "RAY_health_check_timeout_ms": "500",
}


def _ours(marker: str) -> list[int]:
    """Processes whose command line names `marker` (the cluster's temp dir or GCS port)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


@pytest.fixture(scope="module")
def ray_cluster():
    """A head that runs no sandboxes (the driver's node) and two nodes with 2 sandbox slots each."""
    if not Path(RAY).exists():
        pytest.fail(f"the ray command is missing beside {sys.executable}")
    temp = tempfile.mkdtemp(prefix="hray")  # short: Ray's socket paths must stay under 107 characters
    port = free_port()
    common = ["--num-cpus=1", "--disable-usage-stats"]
    try:
        subprocess.run(
            [
                RAY,
                "start",
                "--head",
                f"--port={port}",
                f"--temp-dir={temp}",
                "--include-dashboard=false",
                f"--ray-client-server-port={free_port()}",
                '--resources={"sandbox": 0}',
                *common,
            ],
            env=ENV,
            check=True,
            capture_output=True,
            timeout=180,
        )
        for name in ("w1", "w2"):
            subprocess.run(
                [
                    RAY,
                    "start",
                    f"--address=127.0.0.1:{port}",
                    f'--resources={{"sandbox": 2, "test_{name}": 1}}',
                    *common,
                ],
                env=ENV,
                check=True,
                capture_output=True,
                timeout=180,
            )
        yield {"address": f"127.0.0.1:{port}", "temp": temp}
    finally:
        for marker in (temp, f":{port}"):
            for pid in _ours(marker):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def _raylet_of(node: str) -> int:
    [pid] = [
        p
        for p in _ours(f"test_{node},")
        if "raylet" in Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace").split("\0")[0]
    ]
    return pid


def test_grade_and_generate_on_the_cluster_and_a_failing_job_fails_the_run_with_its_own_error(
    ray_cluster, docker_backend, gsm8k_copy, tmp_path, monkeypatch
):
    import pandas
    import ray

    from sandboxes.cluster import Cluster
    from tasks.grading.predictions import scripted_predictions
    from tasks.taskset import load_tasks

    address = ray_cluster["address"]
    instances = [t.metadata["instance"] for t in load_tasks("swe-demo") if t.env_class == "swe"][:2]
    predictions = tmp_path / "preds.jsonl"
    predictions.write_text("".join(json.dumps(p) + "\n" for p in scripted_predictions(instances, "gold").values()))
    for key, value in ENV.items():  # the cluster's Ray settings, for the harness commands below
        monkeypatch.setenv(key, value)
    graded = harness(
        "grade",
        "--predictions",
        str(predictions),
        "--tasks",
        "swe-demo",
        "--ray-address",
        address,
        "--output",
        str(tmp_path / "grade"),
        timeout=300,
    )
    assert graded.returncode == 0, graded.stdout + graded.stderr
    rows = rows_of(tmp_path / "grade" / "results.jsonl")
    assert sorted(r["instance_id"] for r in rows) == sorted(i["instance_id"] for i in instances) and all(
        r["resolved"] for r in rows
    )

    made = harness(
        "generate",
        "--checkpoint",
        "gold",
        "--tasks",
        "gsm8k-tool",
        "--limit",
        "4",
        "--ray-address",
        address,
        "--output",
        str(tmp_path / "data"),
        timeout=300,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    frame = pandas.read_parquet(tmp_path / "data" / "trajectories.parquet")
    assert sorted(frame["task_id"]) == sorted(f"gsm8k-test-{i}" for i in range(4)) and (frame["reward"] == 1).all()
    assert all(r["node"] for r in rows_of(tmp_path / "data" / "run" / "results.jsonl"))  # each episode ran on a node

    cluster = Cluster(address)
    try:
        with pytest.raises(
            TypeError, match="JSON object must be str"
        ):  # json.loads(the node's backend): the job's own error
            list(cluster.map_unordered(json.loads, [()]))
    finally:
        ray.shutdown()


def _runs_a_sandbox(raylet) -> bool:
    """Whether a running container was made by one of this raylet's workers (so it runs an episode now)."""
    from sandboxes.base import LABEL_MANAGED, LABEL_OWNER
    from sandboxes.docker_backend import docker_client

    workers = {str(p.pid) for p in raylet.children(recursive=True)}
    running = docker_client().containers.list(
        filters={"label": f"{LABEL_MANAGED}=1", "status": "running"}, ignore_removed=True
    )
    return any(c.labels.get(LABEL_OWNER, "").rpartition(":")[2] in workers for c in running)


def _eval(address: str, out: Path, limit: int, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "cli",
        "--verbose",
        "eval",
        "--checkpoint",
        "gold",
        "--tasks",
        "gsm8k-tool",
        "--limit",
        str(limit),
        "--ray-address",
        address,
        "--output",
        str(out),
        *extra,
    ]


def test_eval_survives_a_node_killed_mid_run_and_resumes(ray_cluster, docker_backend, gsm8k_copy, tmp_path):
    out = tmp_path / "run"
    driver = subprocess.Popen(
        _eval(ray_cluster["address"], out, 14), env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    results = out / "results.jsonl"
    # The node dies whole, while it runs an episode (a sandbox of one of its workers is up): its raylet
    # and the workers it started (a worker outliving its raylet could still hand its small result
    # straight to the driver, and the node's loss would go unseen).
    import psutil

    raylet = psutil.Process(_raylet_of("w1"))
    deadline = time.monotonic() + 240
    while not (len(rows_of(results) if results.exists() else []) >= 2 and _runs_a_sandbox(raylet)):
        assert driver.poll() is None and time.monotonic() < deadline, (
            driver.stdout.read() if driver.poll() is not None else "w1 ran nothing"
        )
        time.sleep(0.05)
    assert len(rows_of(results)) < 10  # the rest runs after the kill
    for process in [*raylet.children(recursive=True), raylet]:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    output, _ = driver.communicate(timeout=300)
    assert driver.returncode == 0, output
    assert "lost its node" in output  # the episodes it held ran again elsewhere
    rows = rows_of(results)
    assert sorted(r["task_id"] for r in rows) == sorted(f"gsm8k-test-{i}" for i in range(14))  # each exactly once
    assert all(r["resolved"] for r in rows) and len({r["node"] for r in rows[-4:]}) == 1  # the last ones: the node left
    assert len(list((out / "trajectories").glob("*.json"))) == 14
    assert json.loads((out / "report.json").read_text())["episodes"] == 14

    # --resume on the one node left, after the last two rows are lost (as a kill while writing would):
    # only those two run again, nothing else is redone. (A larger --limit is another run: refused.)
    results.write_text("".join(json.dumps(r) + "\n" for r in rows[:12]))
    more = subprocess.run(
        _eval(ray_cluster["address"], out, 14, "--resume"), env=ENV, capture_output=True, text=True, timeout=300
    )
    assert more.returncode == 0, more.stdout + more.stderr
    assert rows_of(results)[:12] == rows[:12]
    assert sorted(r["task_id"] for r in rows_of(results)) == sorted(f"gsm8k-test-{i}" for i in range(14))
    docker_backend.prune()  # the killed node's sandboxes: their owners (that node's workers) are gone
