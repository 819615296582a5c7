"""The one batch type passed from rollout to the learner (verl's single-controller style).

Built from trajectories' recorded token ids, loss masks and logprobs, never from text: the
learner trains on exactly what the engine generated.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from harness.trajectory import Trajectory

from .algorithms import group_advantages, zero_variance_groups
from .errors import TrainerError


@dataclass
class Batch:
    input_ids: Tensor  # [B, T] right-padded
    attention_mask: Tensor  # [B, T]
    loss_mask: Tensor  # [B, T] 1 on policy tokens
    old_logprobs: Tensor  # [B, T] as sampled by the engine
    advantages: Tensor  # [B]
    rewards: Tensor  # [B]
    groups: Tensor  # [B] group id (one per prompt)
    stats: dict[str, float] = field(default_factory=dict)

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def rows(self, index: Tensor | slice) -> "Batch":
        return Batch(self.input_ids[index], self.attention_mask[index], self.loss_mask[index], self.old_logprobs[index],
                     self.advantages[index], self.rewards[index], self.groups[index])


def build_batch(groups: list[list[Trajectory]], pad_id: int, advantage: str = "grpo",
                filter_zero_variance: bool = True, filter_truncated: bool = True) -> Batch:
    """Stack the groups' trajectories; compute group advantages; mask out filtered samples."""
    trajectories = [t for g in groups for t in g]
    missing = [t.task_id for t in trajectories if t.token_ids is None]
    if missing:
        raise TrainerError(f"trajectories without recorded tokens cannot be trained on (tasks {missing[:3]}); use a local engine")
    group_ids = torch.tensor([i for i, g in enumerate(groups) for _ in g])
    rewards = torch.tensor([t.reward for t in trajectories], dtype=torch.float32)
    advantages = group_advantages(rewards, group_ids, method=advantage)
    keep = torch.ones(len(trajectories), dtype=torch.bool)
    dropped_zero_var = dropped_truncated = 0
    if filter_zero_variance:
        flat = zero_variance_groups(rewards, group_ids)
        dropped_zero_var = int(flat.sum())
        keep &= ~flat
    if filter_truncated:
        truncated = torch.tensor([t.exit_status == "context_exceeded" for t in trajectories])
        dropped_truncated = int((truncated & keep).sum())
        keep &= ~truncated
    length = max(len(t.token_ids) for t in trajectories)
    input_ids = torch.full((len(trajectories), length), pad_id, dtype=torch.long)
    attention = torch.zeros((len(trajectories), length), dtype=torch.long)
    loss_mask = torch.zeros((len(trajectories), length), dtype=torch.float32)
    old = torch.zeros((len(trajectories), length), dtype=torch.float32)
    for row, t in enumerate(trajectories):
        n = len(t.token_ids)
        input_ids[row, :n] = torch.tensor(t.token_ids)
        attention[row, :n] = 1
        loss_mask[row, :n] = torch.tensor(t.loss_mask, dtype=torch.float32) * float(keep[row])
        old[row, :n] = torch.tensor(t.logprobs, dtype=torch.float32)
    stats = {
        "reward_mean": rewards.mean().item(),
        "pass_rate": (rewards >= 1.0).float().mean().item(),
        "advantage_mean": advantages.mean().item(),
        "advantage_std": advantages.std().item() if len(advantages) > 1 else 0.0,
        "dropped_zero_variance": float(dropped_zero_var),
        "dropped_truncated": float(dropped_truncated),
        "response_length_mean": float(sum(sum(t.loss_mask) for t in trajectories) / len(trajectories)),
        "sequence_length_max": float(length),
    }
    return Batch(input_ids, attention, loss_mask, old, advantages, rewards, group_ids, stats)
