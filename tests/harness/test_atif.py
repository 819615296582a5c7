"""Eval runs written as ATIF (`harness eval --trajectory-format atif`, or `harness trajectories export --format
atif` afterwards: the same files) are valid by Harbor's own models, carry tool calls with their observations,
and put each turn's exact tokens on its step."""

from __future__ import annotations

import json

from tests.cli_helpers import harness
from tests.tasks.harbor_init import assert_atif_valid


def exported(run_dir, tmp_path):
    done = harness("trajectories", "export", str(run_dir), "--output", str(tmp_path / "atif"))
    assert done.returncode == 0, done.stdout + done.stderr
    paths = sorted((tmp_path / "atif").glob("*.json"))
    assert_atif_valid(paths)
    return [json.loads(p.read_text()) for p in paths], [
        json.loads((run_dir / "trajectories" / p.name).read_text()) for p in paths
    ]


def test_gold_episode_as_atif(tmp_path, docker_backend):
    run = tmp_path / "gold"
    done = harness(
        "eval", "--checkpoint", "gold", "--tasks", "swe-demo", "--limit", "1", "--output", str(run),
        "--trajectory-format", "atif",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    assert "trajectories as atif:" in done.stdout
    (doc,), (ours,) = exported(run, tmp_path)
    (written,) = (run / "atif").glob("*.json")  # by the run itself: the export's file, byte for byte
    assert written.read_text() == (tmp_path / "atif" / written.name).read_text()
    calls = [c for m in ours["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    answers = {m["tool_call_id"]: m["content"] for m in ours["messages"] if m["role"] == "tool"}
    steps = [s for s in doc["steps"] if s["source"] == "agent"]
    assert [c["tool_call_id"] for s in steps for c in s["tool_calls"]] == [c["id"] for c in calls]
    for step in steps:
        for result in step["observation"]["results"]:
            assert result["content"] == answers[result["source_call_id"]]
    assert doc["extra"]["harness"]["reward"] == ours["reward"] == 1.0
    assert doc["extra"]["harness"]["model_patch"] == ours["model_patch"]


def test_model_turns_carry_their_exact_tokens(tmp_path, tiny_model, docker_backend):
    run = tmp_path / "tiny"
    args = ("--tasks", "swe-demo", "--limit", "1", "--max-turns", "2", "--max-tokens", "8", "--output", str(run))
    done = harness("eval", "--checkpoint", str(tiny_model), *args)
    assert done.returncode == 0, done.stdout[-3000:]
    (doc,), (ours,) = exported(run, tmp_path)
    ids, mask, logprobs = ours["token_ids"], ours["loss_mask"], ours["logprobs"]
    steps = [s for s in doc["steps"] if s["source"] == "agent"]
    assert len(steps) == ours["turns"] == 2
    generated = []
    for step in steps:
        metrics = step["metrics"]
        prompt, completion = metrics["prompt_token_ids"], metrics["completion_token_ids"]
        start = len(prompt)
        assert ids[: start + len(completion)] == prompt + completion  # what the turn saw, then what it generated
        assert mask[start : start + len(completion)] == [1] * len(completion)
        assert metrics["logprobs"] == logprobs[start : start + len(completion)]
        generated += completion
    assert generated == [t for t, m in zip(ids, mask) if m]  # every generated token, on its own turn's step
