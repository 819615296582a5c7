"""GRPO on a Harbor task through a scaffold: the batch is the tokens the intercepting endpoint recorded, the reward
is the task's own verifier (`tests/test.sh` writing `/logs/verifier/reward.json`), and the step changes the weights."""

from __future__ import annotations

import pytest
import torch

from tests.cli_helpers import harness, rows_of
from tests.tasks.test_harbor import write_task

# A tiny random model solves nothing, so a pass/fail verifier would pay both episodes of a group 0 and the update
# would be zero. This verifier pays a number it draws at random (two episodes that run side by side can agree on
# anything timed, such as the seconds their sandboxes lived).
RANDOM_REWARD = """\
python3 -c "import json, random; print(json.dumps({'reward': round(random.uniform(0.1, 10.0), 6), 'solved': 0}))" \
  > /logs/verifier/reward.json
"""


@pytest.mark.slow
def test_grpo_on_a_harbor_task_through_mini_swe_agent(tmp_path, docker_backend):
    from safetensors.torch import load_file

    from harness.tiny_model import init_tiny

    model = init_tiny(tmp_path / "tiny")
    write_task(tmp_path / "dataset", "elapsed", test=RANDOM_REWARD, solve="true\n")
    run_dir = tmp_path / "run"
    done = harness(
        "train",
        "--config",
        "examples/scaffolds/swe-tiny-grpo-mini-swe-agent-tiny-cpu.yaml",
        f"trainer.policy.model.path={model}",
        f"trainer.output_dir={run_dir}",
        f"data.train_data=['harbor:{tmp_path / 'dataset'}']",
        "trainer.train_batch_size=1",
        "trainer.micro_batch_size=1",
        "generator.n_samples_per_prompt=2",
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    [step] = rows_of(run_dir / "metrics.jsonl")
    trajectories = rows_of(run_dir / "rollouts" / "step_000001.jsonl")
    assert len(trajectories) == 2
    for t in trajectories:
        assert t["error"] == "", t["error"]
        assert t["reward_details"]["reward_file"] == "reward.json" and t["reward_details"]["rewards"]["solved"] == 0
        recorded = t["metadata"]["scaffold"]
        assert recorded["name"] == "mini-swe-agent" and t["turns"] == len(recorded["calls"]) >= 1
        segments = [*recorded["token_segments"], t]  # a history the scaffold rewrote starts a new segment
        for call in recorded["calls"]:  # each sampled answer sits where the engine continued its segment's prompt
            segment = segments[call["segment"]]
            where = slice(call["prompt_length"], call["prompt_length"] + len(call["token_ids"]))
            assert segment["token_ids"][where] == call["token_ids"] and segment["logprobs"][where] == call["logprobs"]
            assert set(segment["loss_mask"][where]) == {1}
        assert sum(sum(s["loss_mask"]) for s in segments) == sum(len(c["token_ids"]) for c in recorded["calls"])
    rewards = [t["reward"] for t in trajectories]
    assert all(r > 0 for r in rewards) and rewards[0] != rewards[1], rewards  # the verifier's, with variance
    sampled = sum(len(c["token_ids"]) for t in trajectories for c in t["metadata"]["scaffold"]["calls"])
    assert step["train/trained_tokens"] == sampled  # every sampled token, and nothing else
    assert step["train/ratio_mean"] == pytest.approx(1.0, abs=1e-5)  # the learner's logprobs are the engine's
    before = load_file(model / "model.safetensors")
    after = load_file(run_dir / "checkpoints" / "global_step_1" / "model.safetensors")
    assert any(not torch.equal(before[k], after[k]) for k in before), "the step changed nothing"
