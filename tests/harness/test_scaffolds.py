"""Episodes driven by scaffold programs: mini-swe-agent, a user's own, and ones that misbehave."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

from harness.policies.hf import HFPolicy
from harness.viewer.audit import audit
from tests.cli_helpers import ROOT, harness, rows_of
from tests.token_exactness import check_multi_turn_token_exactness


def run_eval(out, *args: str, plugin: tuple[str, ...] = (), tasks: str = "swe-demo") -> dict:
    done = harness(*plugin, "eval", "--tasks", tasks, "--output", str(out), *args, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads((out / "report.json").read_text())


def test_mini_swe_agent_resolves_with_gold_and_not_with_empty(tmp_path, docker_backend):
    report = run_eval(tmp_path / "gold", "--scaffold", "mini-swe-agent", "--checkpoint", "gold", "--limit", "1")
    assert report["resolve_rate"] == 1.0 and report["exit_statuses"] == {"submitted": 1}, report
    predictions = rows_of(tmp_path / "gold" / "predictions.jsonl")
    assert len(predictions) == 1 and predictions[0]["model_patch"].startswith("diff --git")
    for path in (tmp_path / "gold" / "trajectories").glob("*.json"):
        trajectory = json.loads(path.read_text())
        assert trajectory["metadata"]["scaffold"]["name"] == "mini-swe-agent" and trajectory["turns"] >= 2
        assert "```mswea_bash_command" in trajectory["messages"][2]["content"]  # gold in the scaffold's own format
        assert len(trajectory["metadata"]["turn_stats"]) == trajectory["turns"]
        own = json.loads((tmp_path / "gold" / "scaffolds" / path.stem / "mini-swe-agent.traj.json").read_text())
        assert own["info"]["exit_status"] == "Submitted"  # the scaffold's own record, beside ours
    report = run_eval(tmp_path / "empty", "--scaffold", "mini-swe-agent", "--checkpoint", "empty", "--limit", "1")
    assert report["resolve_rate"] == 0.0 and report["exit_statuses"] == {"submitted": 1} and report["errors"] == 0, (
        report
    )


def test_openhands_resolves_with_gold_and_not_with_empty(tmp_path, docker_backend):
    empty = run_eval(tmp_path / "empty", "--scaffold", "openhands", "--checkpoint", "empty", "--limit", "1")
    assert empty["resolve_rate"] == 0.0 and empty["exit_statuses"] == {"submitted": 1} and empty["errors"] == 0, empty
    report = run_eval(tmp_path, "--scaffold", "openhands", "--checkpoint", "gold", "--limit", "1")
    assert report["resolve_rate"] == 1.0 and report["exit_statuses"] == {"submitted": 1}, report
    path = next((tmp_path / "trajectories").glob("*.json"))
    trajectory = json.loads(path.read_text())
    assert trajectory["metadata"]["scaffold"]["name"] == "openhands" and trajectory["messages"][0]["role"] == "system"
    called = [c["function"]["name"] for m in trajectory["messages"] for c in m.get("tool_calls") or []]
    assert called == ["file_editor", "terminal", "finish"]  # gold as OpenHands' own tool calls
    assert "File created successfully at: /tmp/gold.patch" in trajectory["messages"][3]["content"]
    assert [f.kind for f in audit(trajectory)] == []  # the audit reads OpenHands' tools as ours
    events = list((tmp_path / "scaffolds" / path.stem / "openhands").glob("*/events/*.json"))
    assert any(
        json.loads(e.read_text()).get("tool_name") == "finish" for e in events
    )  # OpenHands' own record, beside ours


def test_a_scaffold_of_your_own_resolves_with_gold(tmp_path, docker_backend):
    # swe-tiny's gold is an exact-string edit: written as a shell command in the scaffold's format
    report = run_eval(
        tmp_path,
        "--scaffold",
        "bash-agent",
        "--checkpoint",
        "gold",
        "--limit",
        "1",
        plugin=("--plugin", "examples.scaffolds.scaffold"),
        tasks="swe-tiny",
    )
    assert report["resolve_rate"] == 1.0 and report["exit_statuses"] == {"submitted": 1}, report
    trajectory = json.loads(next((tmp_path / "trajectories").glob("*.json")).read_text())
    assert (
        trajectory["messages"][2]["content"].count("```bash") == 1
        and "python3 -c" in trajectory["messages"][2]["content"]
    )


def test_misbehaving_scaffolds_end_with_their_own_status_and_leave_nothing(tmp_path, docker_backend, monkeypatch):
    run_id = f"scaffold-test-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("HARNESS_RUN_ID", run_id)
    done = harness(
        "eval",
        "--tasks",
        "swe-demo",
        "--limit",
        "1",
        "--samples",
        "4",
        "--workers",
        "4",
        "--checkpoint",
        "empty",
        "--scaffold",
        "tests.harness.scaffold_programs:misbehaving",
        "--episode-timeout",
        "20",
        "--output",
        str(tmp_path),
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr  # the run went on and finished
    rows = {row["sample"]: row for row in rows_of(tmp_path / "results.jsonl")}
    assert {k: rows[k]["exit_status"] for k in rows} == {
        0: "scaffold_error",
        1: "wall_time",
        2: "output_limit",
        3: "no_submit",
    }
    assert "status 3" in rows[0]["error"] and "about to fail" in rows[0]["error"]
    trajectory = json.loads(next((tmp_path / "trajectories").glob("*__3.json")).read_text())
    assert len(trajectory["metadata"]["scaffold"]["rejected_requests"]) == 2 and [
        c["command"] for c in trajectory["metadata"]["scaffold"]["commands"]
    ] == ["echo still here"]
    child = int(next((tmp_path / "scaffolds").glob("*__1/child.pid")).read_text())
    assert not os.path.exists(f"/proc/{child}") or "zombie" in open(f"/proc/{child}/status").read().lower()
    assert (tmp_path / "scaffolds").glob("*__2/scaffold.log").__next__().stat().st_size <= 1 << 20
    left = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=harness.run_id={run_id}"], capture_output=True, text=True
    )
    assert left.stdout.strip() == ""


def test_a_scaffold_dies_with_a_killed_harness(tmp_path, docker_backend):
    # sample 1 of the misbehaving scaffold hangs with a child of its own; the harness is then killed with SIGKILL
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cli",
            "eval",
            "--tasks",
            "swe-demo",
            "--limit",
            "1",
            "--samples",
            "2",
            "--workers",
            "2",
            "--checkpoint",
            "empty",
            "--scaffold",
            "tests.harness.scaffold_programs:misbehaving",
            "--output",
            str(tmp_path),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 300
        while (
            not list((tmp_path / "scaffolds").glob("*__1/child.pid"))
            and time.monotonic() < deadline
            and run.poll() is None
        ):
            time.sleep(0.5)
        child = int(next((tmp_path / "scaffolds").glob("*__1/child.pid")).read_text())
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
    for _ in range(100):
        if not os.path.exists(f"/proc/{child}") or "zombie" in open(f"/proc/{child}/status").read().lower():
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"the scaffold's process {child} outlived the killed harness")


def test_a_tiny_model_through_a_scaffold_is_token_exact(tiny_model, docker_backend, one_torch_thread):
    from examples.scaffolds.scaffold import bash_agent

    policy = HFPolicy(tiny_model)
    check_multi_turn_token_exactness(policy, policy.model, docker_backend, atol=1e-4, scaffold=bash_agent)
