"""The one batch layout: right padding shared by the GRPO batch and the SFT batches."""

from __future__ import annotations

import torch

from harness.trajectory import Trajectory
from trainer.batch import build_batch, pad_values, right_pad
from trainer.sft import make_batches


def trajectory(ids, mask, reward):
    return Trajectory(task_id="t", token_ids=ids, loss_mask=mask, logprobs=[-0.5] * len(ids), reward=reward)


def test_right_pad_and_pad_values():
    ids, attention = right_pad([[5, 6, 7], [8]], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0]] and attention.tolist() == [[1, 1, 1], [1, 0, 0]]
    assert pad_values([[1.0], [0.5, 0.25]], 3).tolist() == [[1.0, 0.0, 0.0], [0.5, 0.25, 0.0]]


def test_grpo_batch_masks_padding_and_filtered_groups():
    groups = [[trajectory([1, 2, 3], [0, 1, 1], 1.0), trajectory([1, 2], [0, 1], 0.0)],
              [trajectory([4, 5, 6, 7], [0, 0, 1, 1], 1.0), trajectory([4, 5], [0, 1], 1.0)]]  # no variance: dropped
    batch = build_batch(groups, pad_id=9, filter_zero_variance=True, filter_truncated=False)
    assert batch.input_ids.tolist() == [[1, 2, 3, 9], [1, 2, 9, 9], [4, 5, 6, 7], [4, 5, 9, 9]]
    assert batch.loss_mask.tolist() == [[0, 1, 1, 0], [0, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]
    assert batch.old_logprobs[1].tolist() == [-0.5, -0.5, 0.0, 0.0] and batch.stats["dropped_zero_variance"] == 2.0


def test_sft_batches_use_the_same_padding():
    (batch,) = make_batches([([1, 2, 3], [0, 1, 1]), ([4], [1])], batch_size=2, pad_id=0, seed=0)
    rows = sorted(zip(batch.input_ids.tolist(), batch.loss_mask.tolist()))
    assert rows == [([1, 2, 3], [0.0, 1.0, 1.0]), ([4, 0, 0], [0.0, 0.0, 0.0])]  # the first position never counts
    assert torch.equal(batch.attention_mask.sum(1).sort().values, torch.tensor([1, 3]))
