"""The one batch type: GRPO batches and SFT batches share its padding and its row slicing."""

from __future__ import annotations

import pytest
import torch

from harness.trajectory import Trajectory
from harness.tiny_model import init_tiny
from trainer.batch import build_batch, pad_values, right_pad
from trainer.errors import TrainerError
from trainer.learner import Learner, LearnerSettings
from trainer.sft import make_batches


def trajectory(ids, mask, reward):
    return Trajectory(task_id="t", token_ids=ids, loss_mask=mask, logprobs=[-0.5] * len(ids), reward=reward)


def test_right_pad_and_pad_values():
    ids, attention = right_pad([[5, 6, 7], [8]], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0]] and attention.tolist() == [[1, 1, 1], [1, 0, 0]]
    assert pad_values([[1.0], [0.5, 0.25]], 3).tolist() == [[1.0, 0.0, 0.0], [0.5, 0.25, 0.0]]


def test_grpo_batch_masks_padding_and_filtered_groups():
    groups = [
        [trajectory([1, 2, 3], [0, 1, 1], 1.0), trajectory([1, 2], [0, 1], 0.0)],
        [trajectory([4, 5, 6, 7], [0, 0, 1, 1], 1.0), trajectory([4, 5], [0, 1], 1.0)],
    ]  # no variance: dropped
    batch = build_batch(groups, pad_id=9, filter_zero_variance=True, filter_truncated=False)
    assert batch.input_ids.tolist() == [[1, 2, 3, 9], [1, 2, 9, 9], [4, 5, 6, 7], [4, 5, 9, 9]]
    assert batch.loss_mask.tolist() == [[0, 1, 1, 0], [0, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]
    assert batch.old_logprobs[1].tolist() == [-0.5, -0.5, 0.0, 0.0] and batch.stats["dropped_zero_variance"] == 2.0


def test_a_scaffold_episode_trains_on_every_token_segment_with_its_advantage():
    """A scaffold that rewrote its history (mini-swe-agent drops a reply without one action) left earlier segments:
    each is a row of the batch, with the episode's advantage, so every answer the policy sampled is trained on."""
    rewritten = trajectory([1, 2, 8], [0, 0, 1], 1.0)
    rewritten.metadata["scaffold"] = {
        "token_segments": [{"token_ids": [1, 2, 7, 7], "loss_mask": [0, 0, 1, 1], "logprobs": [0.0, 0.0, -0.25, -0.75]}]
    }
    batch = build_batch([[rewritten, trajectory([1, 2, 9], [0, 0, 1], 0.0)]], pad_id=0, filter_truncated=False)
    assert batch.input_ids.tolist() == [[1, 2, 7, 7], [1, 2, 8, 0], [1, 2, 9, 0]]
    assert batch.loss_mask.tolist() == [[0, 0, 1, 1], [0, 0, 1, 0], [0, 0, 1, 0]]
    assert batch.old_logprobs[0].tolist() == [0.0, 0.0, -0.25, -0.75]
    resolved, failed = batch.advantages[1].item(), batch.advantages[2].item()
    assert resolved > 0 > failed and batch.advantages.tolist() == [resolved, resolved, failed]
    assert batch.groups.tolist() == [0, 0, 0] and batch.rewards.tolist() == [1.0, 1.0, 0.0]
    assert batch.stats["response_length_mean"] == 2.0 and batch.stats["reward_mean"] == 0.5


def test_sft_batches_use_the_same_padding():
    (batch,) = make_batches([([1, 2, 3], [0, 1, 1]), ([4], [1])], batch_size=2, pad_id=0, seed=0)
    rows = sorted(zip(batch.input_ids.tolist(), batch.loss_mask.tolist()))
    assert rows == [([1, 2, 3], [0.0, 1.0, 1.0]), ([4, 0, 0], [0.0, 0.0, 0.0])]  # the first position never counts
    assert torch.equal(batch.attention_mask.sum(1).sort().values, torch.tensor([1, 3]))


def test_rows_slice_every_tensor_and_an_sft_batch_keeps_its_missing_fields():
    groups = [[trajectory([1, 2, 3], [0, 1, 1], 1.0), trajectory([1, 2], [0, 1], 0.0)]]
    rows = build_batch(groups, pad_id=9, filter_truncated=False).rows(slice(1, 2))
    assert rows.input_ids.tolist() == [[1, 2, 9]] and rows.old_logprobs.tolist() == [[-0.5, -0.5, 0.0]]
    assert rows.advantages.shape == (1,) and rows.groups.tolist() == [0] and rows.stats == {}
    (sft,) = make_batches([([1, 2, 3], [0, 1, 1])], batch_size=1, pad_id=0, seed=0)
    assert sft.rows(slice(0, 1)).old_logprobs is None and sft.advantages is None


def test_an_sft_batch_cannot_take_a_policy_gradient_step(tmp_path):
    learner = Learner(init_tiny(tmp_path / "tiny"), LearnerSettings(micro_batch_size=2))
    (sft,) = make_batches([([1, 2, 3], [0, 1, 1]), ([4, 5], [1, 1])], batch_size=2, pad_id=0, seed=0)
    with pytest.raises(TrainerError, match="sampled logprobs and advantages"):
        learner.train_step(sft)
    assert learner.sft_step(sft, lr=1e-3)["sft/tokens"] == 3.0
