"""Whole episodes through the real loop, real sandboxes and the real verifier."""

from __future__ import annotations

import dataclasses

import pytest

from harness.episode import Limits, run_episode
from harness.errors import PolicyError
from harness.policies.factory import make_policy
from harness.policies.endpoint import EndpointPolicy
from harness.policies.scripted import EmptyPolicy, GoldPolicy, ReplayPolicy, ScriptedPolicy
from harness.policy import tool_turn as call
from harness.policy import Completion, Sampling
from sandboxes import live_count
from tasks.taskset import load_tasks

SAMPLING = Sampling(temperature=0.0)


@pytest.fixture(scope="module")
def swe_task(docker_backend):
    return load_tasks("swe-demo")[0]


def test_gold_resolves_and_empty_does_not(swe_task, docker_backend):
    gold = run_episode(swe_task, GoldPolicy(), SAMPLING, backend=docker_backend)
    assert (gold.exit_status, gold.reward, gold.turns) == ("submitted", 1.0, 3)
    assert gold.model_patch == swe_task.metadata["instance"]["patch"] and gold.reward_details["resolved"]
    empty = run_episode(swe_task, EmptyPolicy(), SAMPLING, backend=docker_backend)
    assert (empty.exit_status, empty.reward, empty.model_patch) == ("submitted", 0.0, "")
    assert live_count() == 0


def test_replay_reruns_a_saved_trajectory(swe_task, docker_backend, tmp_path):
    gold = run_episode(swe_task, GoldPolicy(), SAMPLING, backend=docker_backend)
    gold.save(tmp_path / "gold.json")
    replayed = run_episode(swe_task, ReplayPolicy(tmp_path / "gold.json"), SAMPLING, backend=docker_backend)
    assert replayed.reward == 1.0 and [m["role"] for m in replayed.messages] == [m["role"] for m in gold.messages]


class Scripted:
    """A one-task policy from a list of turns."""

    def __init__(self, *turns: Completion):
        self.turns = turns

    def for_task(self, task):
        return ScriptedPolicy("scripted", list(self.turns))


def test_a_model_that_never_calls_a_tool_stops_with_format_errors(swe_task, docker_backend):
    talk = Completion(text="I would fix it by editing the file.")
    trajectory = run_episode(swe_task, Scripted(talk, talk, talk, talk), SAMPLING, backend=docker_backend)
    assert trajectory.exit_status == "format_errors" and trajectory.turns == 3
    assert "No tool call" in trajectory.messages[-1]["content"]


def test_invalid_json_becomes_an_observation_the_model_recovers_from(swe_task, docker_backend):
    bad = Completion(text='<tool_call>{"name": "bash", "arguments": {"command": </tool_call>')
    trajectory = run_episode(
        swe_task,
        Scripted(bad, call("bash", command="echo recovered"), call("submit")),
        SAMPLING,
        backend=docker_backend,
    )
    assert trajectory.exit_status == "submitted"
    contents = [m.get("content") or "" for m in trajectory.messages]
    assert any("not valid JSON" in c for c in contents) and "recovered\n" in contents


def test_unknown_tools_and_bad_arguments_are_reported(swe_task, docker_backend):
    trajectory = run_episode(
        swe_task, Scripted(call("rm_rf"), call("bash", cmd="ls"), call("submit")), SAMPLING, backend=docker_backend
    )
    contents = [m.get("content") or "" for m in trajectory.messages if m["role"] == "tool"]
    assert "unknown tool `rm_rf`" in contents[0] and "missing required argument `command`" in contents[1]
    assert trajectory.exit_status == "submitted"


def test_turn_limit_and_hanging_tool_call(swe_task, docker_backend):
    limits = Limits(max_turns=2, command_timeout=2)
    trajectory = run_episode(
        swe_task,
        Scripted(call("bash", command="sleep 600"), call("bash", command="echo ok"), call("submit")),
        SAMPLING,
        limits,
        backend=docker_backend,
    )
    assert trajectory.exit_status == "max_turns" and trajectory.turns == 2
    assert "timed out" in trajectory.messages[2]["content"] and trajectory.messages[4]["content"] == "ok\n"
    assert trajectory.timings["total_s"] < 60


def test_missing_image_is_a_clear_sandbox_error(swe_task, docker_backend):
    broken = dataclasses.replace(
        swe_task, sandbox=dataclasses.replace(swe_task.sandbox, image="harness-swe-demo/missing:0")
    )
    trajectory = run_episode(broken, GoldPolicy(), SAMPLING, backend=docker_backend)
    assert trajectory.exit_status == "sandbox_error" and "harness tasks ls swe-demo" in trajectory.error


def test_gold_without_tools_answers_at_once(swe_task, docker_backend):
    task = load_tasks("arith-tool")[0]
    trajectory = run_episode(task, make_policy("gold-no-tools"), SAMPLING, backend=docker_backend)
    assert trajectory.reward == 1.0 and trajectory.turns == 1
    assert [c["function"]["name"] for c in trajectory.messages[1]["tool_calls"]] == ["submit"]
    with pytest.raises(PolicyError, match="without tools"):
        GoldPolicy(use_tools=False).for_task(swe_task)


def test_endpoint_down_is_a_policy_error(swe_task, docker_backend):
    policy = EndpointPolicy("m", base_url="http://127.0.0.1:9/v1", retries=1, backoff=0.01, timeout=2)
    trajectory = run_episode(swe_task, policy, SAMPLING, backend=docker_backend)
    assert trajectory.exit_status == "policy_error" and "unreachable" in trajectory.error


def test_gsm8k_single_turn_and_tool_variant(docker_backend, gsm8k_copy):
    single = load_tasks("gsm8k")[0]
    right = run_episode(single, GoldPolicy(), SAMPLING)
    wrong = run_episode(single, Scripted(Completion(text="#### -1")), SAMPLING)
    assert (right.reward, wrong.reward) == (1.0, 0.0)
    tool_task = load_tasks("gsm8k-tool")[0]
    answer = tool_task.reward_spec["ground_truth"]
    trajectory = run_episode(
        tool_task,
        Scripted(call("python", code="print(6 * 7)"), call("submit", answer=answer)),
        SAMPLING,
        backend=docker_backend,
    )
    assert trajectory.reward == 1.0 and "42" in trajectory.messages[2]["content"] and trajectory.turns == 2
