"""The tiny checkpoint in real multi-turn episodes: in process (token-exact) and over HTTP."""

from __future__ import annotations

import json

import pytest

from harness.policies.hf import HFPolicy
from tests.cli_helpers import check_openai_endpoint, harness, serving
from tests.token_exactness import check_multi_turn_token_exactness


def test_multi_turn_tokens_are_exactly_what_the_engine_produced(tiny_model, docker_backend):
    policy = HFPolicy(tiny_model)
    check_multi_turn_token_exactness(policy, policy.model, docker_backend, atol=1e-4)


@pytest.fixture
def served(tiny_model):
    with serving(tiny_model) as url:
        yield url


def test_served_checkpoint_answers_the_real_openai_client(served):
    check_openai_endpoint(served)


def test_eval_through_the_served_endpoint(served, tmp_path, docker_backend):
    done = harness(
        "eval",
        "--checkpoint",
        "endpoint:tiny",
        "--base-url",
        served,
        "--tasks",
        "gsm8k-tool",
        "--limit",
        "2",
        "--max-turns",
        "3",
        "--max-tokens",
        "24",
        "--workers",
        "2",
        "--output",
        str(tmp_path),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["episodes"] == 2 and report["errors"] == 0
    assert set(report["exit_statuses"]) <= {"submitted", "max_turns", "format_errors"}
    trajectory = json.loads(next((tmp_path / "trajectories").glob("*.json")).read_text())
    assert trajectory["turns"] >= 1 and trajectory["messages"][1]["role"] == "assistant"


def test_eval_with_the_local_checkpoint(tiny_model, tmp_path, docker_backend):
    done = harness(
        "eval",
        "--checkpoint",
        str(tiny_model),
        "--tasks",
        "gsm8k",
        "--limit",
        "3",
        "--max-tokens",
        "16",
        "--output",
        str(tmp_path),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["episodes"] == 3 and report["total_completion_tokens"] > 0
    trajectory = json.loads(next((tmp_path / "trajectories").glob("*.json")).read_text())
    assert trajectory["token_ids"] and len(trajectory["token_ids"]) == len(trajectory["loss_mask"])
