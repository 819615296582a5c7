"""The one batch type passed from rollout to the learner (verl's single-controller style).

Built from trajectories' recorded token ids, loss masks and logprobs, never from text: the
learner trains on exactly what the engine generated. A GRPO batch fills every field; an SFT batch
(`trainer.sft.make_batches`) only the tokens and the loss mask.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

import torch
from torch import Tensor

from harness.trajectory import Trajectory, infrastructure_failure

from .algorithms import group_advantages, zero_variance_groups
from .errors import TrainerError


@dataclass
class Batch:
    input_ids: Tensor  # [B, T] right-padded
    attention_mask: Tensor  # [B, T]
    loss_mask: Tensor  # [B, T] 1 on the tokens trained on (the policy's own)
    old_logprobs: Tensor | None = None  # [B, T] as sampled by the engine (RL only)
    advantages: Tensor | None = None  # [B] (RL only)
    rewards: Tensor | None = None  # [B] (RL only)
    groups: Tensor | None = None  # [B] group id, one per prompt (RL only)
    stats: dict[str, float] = field(default_factory=dict)

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def rows(self, index: Tensor | slice) -> "Batch":
        """The batch of these rows (its stats, about the whole batch, are not carried)."""
        sliced = {
            f.name: getattr(self, f.name)[index] for f in fields(self) if isinstance(getattr(self, f.name), Tensor)
        }
        return replace(self, **sliced, stats={})


def token_batch(rows: list[tuple[list[int], list[float]]], pad_id: int) -> Batch:
    """(token ids, loss mask) rows as a right-padded Batch: padding has attention 0 and loss mask 0."""
    input_ids, attention = right_pad([ids for ids, _ in rows], pad_id)
    return Batch(input_ids, attention, pad_values([mask for _, mask in rows], input_ids.shape[1]))


def right_pad(rows: list[list[int]], pad_id: int) -> tuple[Tensor, Tensor]:
    """Token id rows as one ``[B, T]`` tensor padded on the right with `pad_id`, and its attention mask."""
    length = max(len(row) for row in rows)
    input_ids = torch.full((len(rows), length), pad_id, dtype=torch.long)
    attention = torch.zeros((len(rows), length), dtype=torch.long)
    for index, row in enumerate(rows):
        input_ids[index, : len(row)] = torch.tensor(row, dtype=torch.long)
        attention[index, : len(row)] = 1
    return input_ids, attention


def pad_values(rows: list[list[float]], length: int) -> Tensor:
    """Per-token float rows (loss masks, log-probs) as one ``[B, length]`` tensor, zero on the padding."""
    values = torch.zeros((len(rows), length), dtype=torch.float32)
    for index, row in enumerate(rows):
        values[index, : len(row)] = torch.tensor(row, dtype=torch.float32)
    return values


def was_truncated(trajectory: Trajectory) -> bool:
    """Cut off by a length limit before it finished (DAPO's overlong samples): its last turn stopped at
    `generator.max_tokens` (finish_reason `length`, recorded per turn), or it ran out of `generator.max_context`."""
    turns = trajectory.metadata.get("turn_stats") or [{}]
    return turns[-1].get("finish_reason") == "length" or trajectory.exit_status == "context_exceeded"


def without_infrastructure_failures(
    groups: list[list[Trajectory]], min_valid: int = 2, max_fraction: float = 1.0
) -> tuple[list[list[Trajectory]], dict[str, float]]:
    """The groups without the episodes that ended through no action of the policy
    (`harness.trajectory.infrastructure_failure`): their reward of 0 enters neither the group's advantages nor the
    loss. A group that lost episodes so and is left with fewer than `min_valid` is dropped whole. Raises TrainerError
    when more than `max_fraction` of the episodes failed so (the environment is broken: an update on the rest would
    be skewed)."""
    episodes = sum(len(group) for group in groups)
    failures = [t for group in groups for t in group if infrastructure_failure(t)]
    if episodes and len(failures) > max_fraction * episodes:
        raise TrainerError(
            f"{len(failures)} of {episodes} episodes ended through no fault of the policy "
            f"(first: {infrastructure_failure(failures[0])}: {failures[0].error[:300]}), more than "
            f"trainer.algorithm.max_infra_failures={max_fraction:g} of them; no update was made: "
            "fix the sandboxes or grader, then rerun to resume"
        )
    valid = [[t for t in group if not infrastructure_failure(t)] for group in groups]
    kept = [left for left, group in zip(valid, groups) if len(left) == len(group) or len(left) >= min_valid]
    if groups and not kept:
        raise TrainerError(
            f"no group kept {min_valid} valid episodes (trainer.algorithm.min_valid_samples) after "
            f"{len(failures)} infrastructure failures; no update was made"
        )
    return kept, {
        "infra_failures": float(len(failures)),
        "infra_failure_fraction": len(failures) / max(episodes, 1),
        "dropped_groups": float(len(groups) - len(kept)),
    }


def token_rows(trajectory: Trajectory) -> list[tuple[list[int], list[int], list[float]]]:
    """The token ids, loss masks and logprobs a trajectory is trained on: its token fields, after the earlier token
    segments of an episode whose scaffold or context strategy rewrote its history (`metadata.scaffold.token_segments`,
    harness.scaffolds.intercept; `metadata.context.token_segments`, harness.context) or that had several agent
    sessions (`metadata.sessions.token_segments`, harness.episode). Every answer the policy sampled is in one of
    them, with the prompt it was sampled from."""
    earlier = [
        segment
        for owner in ("sessions", "scaffold", "context")
        for segment in (trajectory.metadata.get(owner) or {}).get("token_segments") or []
    ]
    rows = [(s["token_ids"], s["loss_mask"], s["logprobs"]) for s in earlier]
    return [*rows, (trajectory.token_ids, trajectory.loss_mask, trajectory.logprobs)]


def build_batch(
    groups: list[list[Trajectory]],
    pad_id: int,
    advantage: str = "grpo",
    filter_zero_variance: bool = True,
    filter_truncated: bool = True,
) -> Batch:
    """Stack the groups' trajectories, one row per token segment (`token_rows`); compute group advantages (a
    trajectory's rows share its advantage); mask out filtered samples."""
    trajectories = [t for g in groups for t in g]
    missing = [t.task_id for t in trajectories if t.token_ids is None]
    if missing:
        raise TrainerError(
            f"trajectories without recorded tokens cannot be trained on (tasks {missing[:3]}); use a local engine"
        )
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
        truncated = torch.tensor([was_truncated(t) for t in trajectories], dtype=torch.bool)
        dropped_truncated = int((truncated & keep).sum())
        keep &= ~truncated
    rows = [token_rows(t) for t in trajectories]
    owner = torch.tensor([i for i, own in enumerate(rows) for _ in own])  # the trajectory of each row
    rows = [row for own in rows for row in own]
    batch = token_batch([(ids, mask) for ids, mask, _ in rows], pad_id)
    length = batch.input_ids.shape[1]
    batch.loss_mask *= keep[owner].unsqueeze(1).float()
    stats = {
        "reward_mean": rewards.mean().item(),
        "pass_rate": (rewards >= 1.0).float().mean().item(),
        "advantage_mean": advantages.mean().item(),
        "advantage_std": advantages.std().item() if len(advantages) > 1 else 0.0,
        "dropped_zero_variance": float(dropped_zero_var),
        "dropped_truncated": float(dropped_truncated),
        "response_length_mean": float(sum(sum(mask) for _, mask, _ in rows) / len(trajectories)),
        "sequence_length_max": float(length),
    }
    return replace(
        batch,
        old_logprobs=pad_values([logprobs for _, _, logprobs in rows], length),
        advantages=advantages[owner],
        rewards=rewards[owner],
        groups=group_ids[owner],
        stats=stats,
    )
