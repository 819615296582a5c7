"""Probes under abuse: each replays one way a harness can be silently wrong.

Run directories that mix runs, bad records that crash a run, endpoints that never answer,
Ctrl-C, a run where everything failed, colliding trajectory files, unchecked numbers, torn
reports and `sandbox exec`. (The server probes are in tests/harness/test_server_probes.py,
the disk-limit probes in tests/sandboxes/test_disk_limit.py.)
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from harness.errors import PolicyError
from harness.trajectory import trajectory_file
from harness.policies.endpoint import EndpointLimits, EndpointPolicy
from harness.policy import Sampling
from infra.runlog import atomic_write
from tests.cli_helpers import ROOT, harness, rows_of


def _eval(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return harness("eval", "--tasks", "arith", "--limit", "3", *args, timeout=timeout)


# -- finding 2: `eval --resume` mixed runs -------------------------------------------------------


def test_resume_with_another_policy_or_task_set_is_refused_with_what_differs(tmp_path):
    out = tmp_path / "run"
    assert _eval("--checkpoint", "gold", "--output", str(out)).returncode == 0
    config = (out / "config.json").read_text()
    other_policy = _eval("--checkpoint", "empty", "--output", str(out), "--resume")
    assert other_policy.returncode == 1 and 'checkpoint: "gold" there, "empty" now' in " ".join(
        other_policy.stdout.split()
    )
    other_tasks = harness(
        "eval", "--checkpoint", "gold", "--tasks", "arith-tool", "--limit", "3", "--output", str(out), "--resume"
    )
    assert other_tasks.returncode == 1 and "tasks:" in other_tasks.stdout
    assert (out / "config.json").read_text() == config and len(rows_of(out / "results.jsonl")) == 3
    same = _eval("--checkpoint", "gold", "--output", str(out), "--resume")
    assert same.returncode == 0 and len(rows_of(out / "results.jsonl")) == 3


def test_force_sets_the_old_run_aside_and_starts_anew(tmp_path):
    out = tmp_path / "run"
    assert _eval("--checkpoint", "gold", "--output", str(out)).returncode == 0
    done = _eval("--checkpoint", "empty", "--output", str(out), "--force")
    assert done.returncode == 0, done.stdout
    report = json.loads((out / "report.json").read_text())
    assert report["checkpoint"] == "empty" and report["resolve_rate"] == 0.0 and report["episodes"] == 3
    (aside,) = tmp_path.glob("run.old-*")
    assert json.loads((aside / "report.json").read_text())["resolve_rate"] == 1.0


# -- finding 7: exit status, errors by kind, file names, numbers, torn files, sandbox exec ------


def test_numeric_options_are_range_checked():
    for option, value in (
        ("--limit", "-2"),
        ("--samples", "-1"),
        ("--workers", "-3"),
        ("--max-turns", "0"),
        ("--max-tokens", "0"),
    ):
        done = _eval(option, value, "--output", "/nonexistent/never-written")
        assert done.returncode == 2 and "Invalid value" in done.stdout + done.stderr, (option, done.stdout)


def test_ids_differing_only_in_unsafe_characters_get_their_own_trajectories(tmp_path):
    assert trajectory_file(Path("r"), "x-😀", 0) != trajectory_file(Path("r"), "x-🔥", 0)
    assert trajectory_file(Path("r"), "arith-1", 0).name == "arith-1__0.json"  # plain ids keep plain names
    rows = [
        {
            "data_source": "arith",
            "env_class": "gsm8k",
            "prompt": [{"role": "user", "content": "1+1?"}],
            "reward_spec": {"method": "rule", "ground_truth": "2"},
            "extra_info": {"id": task_id},
        }
        for task_id in ("x-😀", "x-🔥", "x/../y")
    ]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = harness("eval", "--checkpoint", "gold", "--tasks", str(tasks), "--output", str(tmp_path / "run"))
    assert done.returncode == 0, done.stdout
    saved = [json.loads(p.read_text())["task_id"] for p in (tmp_path / "run" / "trajectories").iterdir()]
    assert sorted(saved) == sorted(["x-😀", "x-🔥", "x/../y"])


def test_a_failed_write_leaves_the_previous_report_whole(tmp_path):
    report = tmp_path / "report.json"
    atomic_write(report, json.dumps({"resolve_rate": 0.5}))
    with pytest.raises(UnicodeEncodeError):
        atomic_write(report, json.dumps({"big": "x" * 100_000}) + "\ud800")  # fails part-way through
    assert json.loads(report.read_text()) == {"resolve_rate": 0.5}
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]  # no temporary left behind


def test_sandbox_exec_returns_the_commands_exit_status(docker_backend):
    done = harness("sandbox", "exec", "echo hi; exit 3", "--backend", "docker", timeout=120)
    assert done.returncode == 3 and done.stdout.startswith("hi") and "restart" not in done.stdout + done.stderr


# -- finding 3: bad records ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def bad_instances(tmp_path_factory) -> Path:
    """One good swe-demo instance and four that grading cannot use."""
    from tasks.swe_demo import load_swe_demo

    good, *others = load_swe_demo()[:5]
    broken = [
        {**others[0], "eval_script": 12345},
        {k: v for k, v in others[1].items() if k != "eval_script"},
        {**others[2], "log_parser": "parse_log_nonexistent"},
        {**others[3], "FAIL_TO_PASS": []},
    ]
    path = tmp_path_factory.mktemp("bad") / "instances.jsonl"
    path.write_text("".join(json.dumps(i) + "\n" for i in [good, *broken]))
    return path


def test_validate_flags_everything_grading_needs(bad_instances, tmp_path):
    done = harness("tasks", "validate", str(bad_instances))
    text = " ".join(done.stdout.split())
    assert done.returncode == 1 and "ok" not in text.split()
    for where in ("line 2: eval_script", "line 3: eval_script", "line 4: log_parser", "line 5: FAIL_TO_PASS"):
        assert where in text, where
    assert "line 1" not in text
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    done = harness("tasks", "validate", str(empty))
    assert done.returncode == 1 and "empty" in done.stdout


def test_bad_records_are_per_instance_errors_not_a_crashed_grading_run(bad_instances, tmp_path, docker_backend):
    done = harness("grade", "--predictions", "gold", "--tasks", str(bad_instances), "--output", str(tmp_path))
    assert done.returncode == 0 and "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    rows = {r["instance_id"]: r for r in rows_of(tmp_path / "results.jsonl")}
    assert len(rows) == 5 and sum(r["resolved"] for r in rows.values()) == 1
    assert sum("cannot grade" in r["error"] for r in rows.values()) == 4
    assert json.loads((tmp_path / "report.json").read_text())["summary"]["errors"] == 4


def test_bad_records_are_per_instance_errors_not_a_crashed_eval_run(bad_instances, tmp_path, docker_backend):
    broken = tmp_path / "broken.jsonl"
    broken.write_text("".join(bad_instances.read_text().splitlines(keepends=True)[1:]))
    done = harness("eval", "--checkpoint", "empty", "--tasks", str(broken), "--output", str(tmp_path / "run"))
    assert (
        done.returncode == 1 and "every episode failed" in done.stdout and "Traceback" not in done.stdout + done.stderr
    )
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["episodes"] == 4 and report["errors_by_kind"] == {"scoring_error": 4}
    assert "cannot be graded" in (tmp_path / "run" / "report.md").read_text()


# -- finding 1: `harness grade` reported another model's results ---------------------------------


def test_grading_other_predictions_into_a_used_folder_is_refused(bad_instances, tmp_path, docker_backend):
    one = tmp_path / "one.jsonl"
    one.write_text(bad_instances.read_text().splitlines()[0] + "\n")
    out = tmp_path / "grade"
    assert harness("grade", "--predictions", "gold", "--tasks", str(one), "--output", str(out)).returncode == 0
    again = harness("grade", "--predictions", "empty", "--tasks", str(one), "--output", str(out))
    assert again.returncode == 1 and "predictions_sha256" in again.stdout and "--force" in again.stdout
    forced = harness("grade", "--predictions", "empty", "--tasks", str(one), "--output", str(out), "--force")
    assert forced.returncode == 0 and "resolved 0/1" in forced.stdout, forced.stdout
    (row,) = rows_of(out / "results.jsonl")
    assert row["model_name_or_path"] == "empty" and not row["resolved"]


def test_a_different_predictions_file_is_a_different_grading_run(tmp_path):
    from tasks.grading.predictions import grade_identity, load_predictions
    from infra.rundir import RunMismatch, open_run

    instances = [{"instance_id": "a__b-1"}]
    paths = []
    for model, patch in (("model-a", "diff --git a/x b/x\n"), ("model-b", "")):
        path = tmp_path / f"{model}.jsonl"
        path.write_text(json.dumps({"instance_id": "a__b-1", "model_name_or_path": model, "model_patch": patch}) + "\n")
        paths.append(path)
    first, second = (grade_identity(load_predictions(p), instances, False, str(p), "t") for p in paths)
    out = tmp_path / "grade"
    assert open_run(out, "grade", first, resume=True) is False
    assert open_run(out, "grade", first, resume=True) is True  # the same run continues
    with pytest.raises(RunMismatch, match="predictions_sha256"):
        open_run(out, "grade", second, resume=True)


# -- finding 4: endpoints that never answer, 4xx, Ctrl-C, a run where everything failed ---------


@pytest.fixture
def dead_endpoint():
    """Accepts connections and reads requests, never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held, stop = [], threading.Event()

    def accept():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    listener.close()


@pytest.fixture
def counting_endpoint():
    """Answers every request with the status in `state["status"]`, counting requests."""
    state = {"status": 400, "requests": 0}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            state["requests"] += 1
            self.rfile.read(int(self.headers["Content-Length"]))
            body = json.dumps({"error": {"message": "nope", "type": "invalid_request_error"}}).encode()
            self.send_response(state["status"])
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    state["url"] = f"http://127.0.0.1:{server.server_address[1]}/v1"
    yield state
    server.shutdown()
    server.server_close()


HELLO = [{"role": "user", "content": "hi"}]


def test_default_limits_fail_a_dead_endpoint_within_a_minute():
    limits = EndpointLimits()
    assert (
        limits.turn_timeout < 60
        and limits.connect_timeout < limits.turn_timeout
        and limits.read_timeout < limits.turn_timeout
    )


def test_a_dead_endpoint_fails_the_turn_at_its_deadline(dead_endpoint):
    policy = EndpointPolicy(
        "m", base_url=dead_endpoint, limits=EndpointLimits(read_timeout=1, retries=5, turn_timeout=3, backoff=0.1)
    )
    started = time.monotonic()
    with pytest.raises(PolicyError, match="turn timeout|tries"):
        policy.generate(HELLO, [], Sampling(max_tokens=4))
    assert 2.5 < time.monotonic() - started < 5


def test_interrupt_ends_a_call_in_flight_at_once(dead_endpoint):
    policy = EndpointPolicy("m", base_url=dead_endpoint)  # default limits: this call would last 55 s
    threading.Timer(1.0, policy.interrupt).start()
    started = time.monotonic()
    with pytest.raises(PolicyError, match="interrupted"):
        policy.generate(HELLO, [], Sampling(max_tokens=4))
    assert time.monotonic() - started < 2.5


def test_4xx_is_not_retried_and_5xx_is(counting_endpoint):
    limits = EndpointLimits(retries=2, backoff=0.05)
    policy = EndpointPolicy("m", base_url=counting_endpoint["url"], limits=limits)
    with pytest.raises(PolicyError, match="answered 400"):
        policy.generate(HELLO, [], Sampling(max_tokens=4))
    assert counting_endpoint["requests"] == 1
    counting_endpoint.update(status=503, requests=0)
    with pytest.raises(PolicyError, match="503"):
        policy.generate(HELLO, [], Sampling(max_tokens=4))
    assert counting_endpoint["requests"] == 3


def test_a_run_where_every_episode_failed_exits_non_zero_with_errors_by_kind(dead_endpoint, tmp_path):
    settings = tmp_path / "eval.yaml"
    settings.write_text("endpoint:\n  read_timeout: 1\n  retries: 0\n  turn_timeout: 2\n")
    started = time.monotonic()
    done = _eval(
        "--checkpoint",
        "endpoint:m",
        "--base-url",
        dead_endpoint,
        "--config",
        str(settings),
        "--output",
        str(tmp_path / "run"),
    )
    assert done.returncode == 1 and "every episode failed" in done.stdout, done.stdout
    assert time.monotonic() - started < 60
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["errors_by_kind"] == {"policy_error": 3} and report["all_failed"]
    assert "## Errors: 3 of 3 episodes" in (tmp_path / "run" / "report.md").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text("endpoint:\n  read_timout: 1\n")
    done = _eval(
        "--checkpoint", "endpoint:m", "--base-url", dead_endpoint, "--config", str(bad), "--output", str(tmp_path / "x")
    )
    assert done.returncode == 1 and "read_timout" in done.stdout


def test_ctrl_c_stops_a_run_stuck_on_a_dead_endpoint_within_seconds(dead_endpoint, tmp_path):
    command = [
        sys.executable,
        "-m",
        "cli",
        "eval",
        "--checkpoint",
        "endpoint:m",
        "--base-url",
        dead_endpoint,
        "--tasks",
        "arith",
        "--limit",
        "4",
        "--workers",
        "4",
        "--output",
        str(tmp_path / "run"),
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    deadline = time.monotonic() + 60
    while not (tmp_path / "run" / "run.json").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(2)  # every worker is now waiting on the endpoint
    process.send_signal(signal.SIGINT)
    started = time.monotonic()
    process.wait(timeout=30)
    # A few seconds, most of it interpreter shutdown on a busy machine.
    assert time.monotonic() - started < 10 and process.returncode == 130, process.stdout.read()
