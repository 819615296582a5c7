"""Our trajectories as ATIF (Agent Trajectory Interchange Format, Harbor's trajectory format).

Each message becomes a step: system and user messages steps of their own, an assistant turn an
`agent` step with its tool calls, and the tool messages that answer them that step's
observation. For in-process models the exact token record goes where ATIF has room: each agent
step's `metrics` carry the ids the engine generated for that turn (`completion_token_ids`), their
`logprobs`, and the ids the turn was conditioned on (`prompt_token_ids`: every token before
it). The whole record (ids, loss mask, logprobs) stays in `extra.harness` too, with the reward, its
details (a Harbor task's: every key of its reward file), exit status and patch, so nothing of ours
is lost in the round trip.
"""

from __future__ import annotations

import json
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from .trajectory import Trajectory

SCHEMA_VERSION = "ATIF-v1.6"
AGENT_NAME = "harness"


def to_atif(trajectory: Trajectory) -> dict[str, Any]:
    """The ATIF document of one trajectory (a JSON-ready dict)."""
    steps: list[dict[str, Any]] = []
    turns = _turn_tokens(trajectory)
    turn = 0
    for message in trajectory.messages:
        role = message.get("role")
        if role == "tool" and steps and steps[-1]["source"] == "agent":
            result = {"content": _text(message.get("content"))}
            calls = {c["tool_call_id"] for c in steps[-1].get("tool_calls", [])}
            if message.get("tool_call_id") in calls:
                result["source_call_id"] = message["tool_call_id"]
            steps[-1].setdefault("observation", {"results": []})["results"].append(result)
            continue
        step: dict[str, Any] = {"step_id": len(steps) + 1}
        if role == "assistant":
            turn += 1
            step.update(source="agent", message=_text(message.get("content")))
            if trajectory.policy:
                step["model_name"] = trajectory.policy
            if message.get("reasoning_content"):
                step["reasoning_content"] = message["reasoning_content"]
            calls = [_tool_call(call, n) for n, call in enumerate(message.get("tool_calls") or [])]
            if calls:
                step["tool_calls"] = calls
            if turn in turns:
                step["metrics"] = turns[turn]
        else:  # system, user, and a tool message no agent step precedes: the environment speaking
            step.update(source="system" if role == "system" else "user", message=_text(message.get("content")))
        steps.append(step)
    if not steps:  # the episode ended before its first message (a sandbox that never started): ATIF needs a step
        steps.append({"step_id": 1, "source": "system", "message": trajectory.error or "the episode had no messages"})
    return {
        "schema_version": SCHEMA_VERSION,
        "session_id": f"{trajectory.task_id}__{trajectory.sample}",
        "agent": {
            "name": AGENT_NAME,
            "version": _version(),
            **({"model_name": trajectory.policy} if trajectory.policy else {}),
            **({"tool_definitions": trajectory.tools} if trajectory.tools else {}),
        },
        "steps": steps,
        "final_metrics": {
            "total_prompt_tokens": trajectory.prompt_tokens,
            "total_completion_tokens": trajectory.completion_tokens,
            "total_steps": len(steps),
        },
        "extra": {
            "harness": {
                "task_id": trajectory.task_id,
                "sample": trajectory.sample,
                "reward": trajectory.reward,
                "reward_details": trajectory.reward_details,  # a Harbor task's: every key of its reward file
                "exit_status": trajectory.exit_status,
                "error": trajectory.error,
                "turns": trajectory.turns,
                "model_patch": trajectory.model_patch,
                "token_ids": trajectory.token_ids,
                "loss_mask": trajectory.loss_mask,
                "logprobs": trajectory.logprobs,
                "untrained_turns": trajectory.untrained_turns,
                "timings": trajectory.timings,
            }
        },
    }


def _turn_tokens(trajectory: Trajectory) -> dict[int, dict[str, Any]]:
    """{assistant turn (1 = first): ATIF metrics with its exact tokens}, from the token record.

    The tokens a turn generated are a run of loss-mask 1 (`harness.tokens.TokenLedger`), so the k-th
    run is the k-th trained turn. Where the runs and the trained turns do not pair up one to one (a turn
    that generated no token), no step gets tokens: a guess would put ids on the wrong turn."""
    ids, mask, logprobs = trajectory.token_ids, trajectory.loss_mask, trajectory.logprobs
    if not ids or not mask or not logprobs or not (len(ids) == len(mask) == len(logprobs)):
        return {}
    runs, start = [], None
    for i, bit in enumerate([*mask, 0]):
        if bit and start is None:
            start = i
        elif not bit and start is not None:
            runs.append((start, i))
            start = None
    assistant_turns = sum(m.get("role") == "assistant" for m in trajectory.messages)
    trained = [t for t in range(1, assistant_turns + 1) if t not in set(trajectory.untrained_turns)]
    if len(runs) != len(trained):
        return {}
    return {
        turn: {
            "prompt_tokens": begin,
            "completion_tokens": end - begin,
            "prompt_token_ids": ids[:begin],
            "completion_token_ids": ids[begin:end],
            "logprobs": logprobs[begin:end],
        }
        for turn, (begin, end) in zip(trained, runs)
    }


def _tool_call(call: dict[str, Any], index: int) -> dict[str, Any]:
    function = call.get("function") or {}
    raw = function.get("arguments")
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        arguments = None
    if not isinstance(arguments, dict):  # ATIF's arguments are an object: keep what the model wrote as it was
        arguments = {"raw": raw}
    return {
        "tool_call_id": str(call.get("id") or f"call_{index}"),
        "function_name": str(function.get("name", "")),
        "arguments": arguments,
    }


def _text(content: Any) -> str:
    if content is None:
        return ""
    return content if isinstance(content, str) else json.dumps(content)


def _version() -> str:
    try:
        return version("harness")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0"
