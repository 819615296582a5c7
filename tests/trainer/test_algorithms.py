"""The GRPO-family functions against small examples computed by hand."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from trainer.algorithms import (
    aggregate_loss,
    group_advantages,
    kl_penalty,
    overlong_mask,
    policy_loss,
    sequence_logprobs,
    token_entropy,
    zero_variance_groups,
)
from trainer.errors import ConfigError

# Two groups of four: [1, 0, 0, 1] (mean 0.5, unbiased std sqrt(1/3)) and [0, 0, 0, 4] (mean 1, unbiased std 2).
REWARDS = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 4.0])
HALF_OVER_STD = 0.5 / math.sqrt(1 / 3)


def tiny_qwen2(seed: int = 0) -> Qwen2ForCausalLM:
    """A randomly initialised two-layer Qwen2 with a vocabulary of 100."""
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=100,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return Qwen2ForCausalLM(config).eval()


def leaf(values: list) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32, requires_grad=True)


# --- advantages ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        ("grpo", [HALF_OVER_STD, -HALF_OVER_STD, -HALF_OVER_STD, HALF_OVER_STD, -0.5, -0.5, -0.5, 1.5]),
        ("dr_grpo", [0.5, -0.5, -0.5, 0.5, -1.0, -1.0, -1.0, 3.0]),
        ("rloo", [2 / 3, -2 / 3, -2 / 3, 2 / 3, -4 / 3, -4 / 3, -4 / 3, 4.0]),
    ],
)
def test_advantages_by_hand(method: str, expected: list[float]) -> None:
    advantages = group_advantages(REWARDS, 4, method=method, eps=0.0)
    torch.testing.assert_close(advantages, torch.tensor(expected))


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        # group 5 = [1, 3]: mean 2, unbiased std sqrt(2); group 9 = [2, 4, 6]: mean 4, unbiased std 2
        ("grpo", [-1 / math.sqrt(2), -1.0, 1 / math.sqrt(2), 0.0, 1.0]),
        ("dr_grpo", [-1.0, -2.0, 1.0, 0.0, 2.0]),
        ("rloo", [-2.0, -3.0, 2.0, 0.0, 3.0]),
    ],
)
def test_advantages_with_interleaved_group_ids_of_unequal_size(method: str, expected: list[float]) -> None:
    rewards = torch.tensor([1.0, 2.0, 3.0, 4.0, 6.0])
    advantages = group_advantages(rewards, torch.tensor([5, 9, 5, 9, 9]), method=method, eps=0.0)
    torch.testing.assert_close(advantages, torch.tensor(expected))


def test_group_ids_and_group_size_agree() -> None:
    ids = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    for method in ("grpo", "dr_grpo", "rloo"):
        torch.testing.assert_close(group_advantages(REWARDS, ids, method), group_advantages(REWARDS, 4, method))


def test_eps_keeps_zero_variance_groups_finite() -> None:
    rewards = torch.tensor([3.0, 3.0, 0.0, 1.0])
    advantages = group_advantages(rewards, 2, method="grpo")
    assert advantages[:2].tolist() == [0.0, 0.0]
    torch.testing.assert_close(advantages[2:], torch.tensor([-0.5, 0.5]) / (math.sqrt(0.5) + 1e-6))


def test_integer_rewards_give_float_advantages() -> None:
    assert group_advantages(torch.tensor([0, 1]), 2).dtype == torch.float32


def test_single_sample_groups() -> None:
    assert group_advantages(torch.tensor([2.0, 5.0]), 1, method="grpo").tolist() == [0.0, 0.0]
    with pytest.raises(ConfigError, match="at least 2 samples"):
        group_advantages(torch.tensor([2.0, 5.0]), 1, method="rloo")


def test_advantage_arguments_are_checked() -> None:
    with pytest.raises(ConfigError, match="unknown advantage method"):
        group_advantages(REWARDS, 4, method="ppo")
    with pytest.raises(ConfigError, match="does not divide"):
        group_advantages(REWARDS, 3)
    with pytest.raises(ConfigError, match="one id per sample"):
        group_advantages(REWARDS, torch.tensor([0, 1]))


# --- filters ------------------------------------------------------------------------------------------------------


def test_zero_variance_groups() -> None:
    rewards = torch.tensor([1.0, 1.0, 0.0, 1.0, 2.5, 2.5, 2.5, 2.5])
    assert zero_variance_groups(rewards, 2).tolist() == [True, True, False, False, True, True, True, True]
    assert zero_variance_groups(rewards, 4).tolist() == [False] * 4 + [True] * 4
    ids = torch.tensor([1, 0, 1, 0, 0, 0, 1, 1])  # group 1 = [1, 0, 2.5, 2.5], group 0 = [1, 1, 2.5, 2.5]
    assert not zero_variance_groups(rewards, ids).any()


def test_overlong_mask() -> None:
    assert overlong_mask(["stop", "length", "tool_calls", "error"]).tolist() == [False, True, False, False]
    assert overlong_mask([False, True]).tolist() == [False, True]
    assert overlong_mask(torch.tensor([1, 0])).tolist() == [True, False]


# --- aggregation --------------------------------------------------------------------------------------------------

# With logprobs == old_logprobs every ratio is 1, so the per-token loss is -A: -1 on three tokens of sequence 0 and
# -2 on the one token of sequence 1.
AGG_MASK = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]])
AGG_ADVANTAGES = torch.tensor([1.0, 2.0])


@pytest.mark.parametrize(
    ("aggregation", "expected"),
    [
        ("token_mean", (-3 - 2) / 4),  # all tokens of the batch together
        ("seq_mean_token_mean", (-1 + -2) / 2),  # each sequence's mean, then the mean of those
        ("seq_mean_token_sum_norm", (-3 / 6 + -2 / 6) / 2),  # each sequence's sum over max_len=6, then the mean
    ],
)
def test_aggregations_by_hand(aggregation: str, expected: float) -> None:
    logprobs = torch.full((2, 4), -1.0)
    loss, metrics = policy_loss(logprobs, logprobs, AGG_ADVANTAGES, AGG_MASK, aggregation=aggregation, max_len=6)
    assert loss.item() == pytest.approx(expected)
    assert metrics["pg_loss"] == pytest.approx(expected)
    assert metrics["ratio_mean"] == pytest.approx(1.0)
    assert metrics["clip_frac"] == 0.0


def test_aggregation_arguments_are_checked() -> None:
    per_token = torch.zeros(2, 4)
    with pytest.raises(ConfigError, match="needs max_len"):
        aggregate_loss(per_token, AGG_MASK, "seq_mean_token_sum_norm")
    with pytest.raises(ConfigError, match="unknown loss aggregation"):
        aggregate_loss(per_token, AGG_MASK, "sum")


def test_per_token_advantages() -> None:
    logprobs = torch.zeros(2, 4)
    per_token = AGG_ADVANTAGES[:, None].expand(2, 4)
    loss, _ = policy_loss(logprobs, logprobs, per_token, AGG_MASK)
    assert loss.item() == pytest.approx(-1.25)


# --- clipping -----------------------------------------------------------------------------------------------------

CLIP_LOW, CLIP_HIGH = 0.2, 0.28


@pytest.mark.parametrize(
    ("advantage", "ratio", "clipped_at", "side"),
    [
        (1.0, 1 + CLIP_HIGH - 1e-3, None, None),  # just inside the high bound
        (1.0, 1 + CLIP_HIGH + 1e-3, 1 + CLIP_HIGH, "high"),  # just beyond it
        (1.0, 1 + CLIP_LOW + 1e-3, None, None),  # beyond 1 + clip_low but that is the low side's epsilon
        (-1.0, 1 - CLIP_LOW + 1e-3, None, None),  # just inside the low bound
        (-1.0, 1 - CLIP_LOW - 1e-3, 1 - CLIP_LOW, "low"),  # just beyond it
        (1.0, 0.5, None, None),  # a positive advantage is never clipped below
        (-1.0, 1.5, None, None),  # a negative advantage is never clipped above
    ],
)
def test_clipping_starts_exactly_beyond_one_plus_or_minus_eps(
    advantage: float, ratio: float, clipped_at: float | None, side: str | None
) -> None:
    logprobs = leaf([[math.log(ratio)]])
    loss, metrics = policy_loss(
        logprobs, torch.zeros(1, 1), torch.tensor([advantage]), torch.ones(1, 1), CLIP_LOW, CLIP_HIGH
    )
    loss.backward()
    if clipped_at is None:
        assert loss.item() == pytest.approx(-advantage * ratio)
        assert logprobs.grad.item() == pytest.approx(-advantage * ratio)  # d(-A * exp(logp)) / dlogp
        assert metrics["clip_frac"] == 0.0
    else:
        assert loss.item() == pytest.approx(-advantage * clipped_at)
        assert logprobs.grad.item() == 0.0
        assert metrics["clip_frac"] == metrics[f"clip_frac_{side}"] == 1.0


def test_clip_fractions_count_unmasked_tokens() -> None:
    ratios = torch.tensor([[1.5, 1.0, 0.5, 1.0], [1.5, 9.0, 9.0, 9.0]])
    advantages = torch.tensor([[1.0, 1.0, -1.0, 1.0], [-1.0, 1.0, 1.0, 1.0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0]])  # the 9.0 ratios are masked out
    _, metrics = policy_loss(ratios.log(), torch.zeros(2, 4), advantages, mask)
    assert metrics["clip_frac_high"] == pytest.approx(1 / 5)
    assert metrics["clip_frac_low"] == pytest.approx(1 / 5)
    assert metrics["clip_frac"] == pytest.approx(2 / 5)
    assert metrics["ratio_mean"] == pytest.approx((1.5 + 1.0 + 0.5 + 1.0 + 1.5) / 5)


# --- KL -----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy_p", "ref_p", "k1", "k3"),
    [
        (0.5, 0.25, math.log(2), 0.5 + math.log(2) - 1),  # exp(log .5) - log .5 - 1
        (0.25, 0.5, -math.log(2), 2 - math.log(2) - 1),  # exp(log 2) - log 2 - 1
    ],
)
def test_kl_estimators(policy_p: float, ref_p: float, k1: float, k3: float) -> None:
    logprobs, ref = torch.tensor([[math.log(policy_p)]]), torch.tensor([[math.log(ref_p)]])
    assert kl_penalty(logprobs, ref, "k1").item() == pytest.approx(k1)
    assert kl_penalty(logprobs, ref, "k3").item() == pytest.approx(k3)
    for kl_type, expected in (("k1", k1), ("k3", k3)):
        loss, metrics = policy_loss(
            logprobs, logprobs, torch.zeros(1), torch.ones(1, 1), ref_logprobs=ref, kl_coef=0.1, kl_type=kl_type
        )
        assert loss.item() == pytest.approx(0.1 * expected)  # a zero advantage leaves only the KL term
        assert metrics["kl"] == pytest.approx(expected)


def test_kl_arguments_are_checked() -> None:
    logprobs = torch.zeros(1, 1)
    with pytest.raises(ConfigError, match="needs ref_logprobs"):
        policy_loss(logprobs, logprobs, torch.ones(1), torch.ones(1, 1), kl_coef=0.1)
    with pytest.raises(ConfigError, match="unknown KL estimator"):
        kl_penalty(logprobs, logprobs, "k2")


# --- gradients and masking ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"])
def test_gradients_flow_only_through_unmasked_tokens(aggregation: str) -> None:
    torch.manual_seed(0)
    mask = torch.tensor([[0, 1, 1, 1, 0], [0, 0, 1, 0, 0], [1, 1, 1, 1, 1]]).bool()
    logprobs = (-torch.rand(3, 5)).requires_grad_()
    old = logprobs.detach() + 0.05 * torch.randn(3, 5)
    ref = logprobs.detach() - 0.3
    # garbage where the mask is 0 must not reach the loss or the gradients
    old[~mask] = -math.inf
    ref[~mask] = math.nan
    loss, _ = policy_loss(
        logprobs,
        old,
        torch.tensor([1.0, -2.0, 0.5]),
        mask,
        ref_logprobs=ref,
        kl_coef=0.1,
        kl_type="k3",
        aggregation=aggregation,
        max_len=5,
    )
    loss.backward()
    assert torch.isfinite(loss)
    assert (logprobs.grad[~mask] == 0).all()
    assert (logprobs.grad[mask] != 0).all()


# --- entropy and log-probs ----------------------------------------------------------------------------------------


def test_token_entropy() -> None:
    logits = torch.zeros(1, 3, 8)  # uniform: entropy log(8)
    logits[0, 1, 0] = 1e4  # one certain position: entropy 0
    logits[0, 2] = torch.randn(8)  # masked out
    mask = torch.tensor([[1, 1, 0]])
    assert token_entropy(logits, mask).item() == pytest.approx(math.log(8) / 2)
    assert token_entropy(logits, torch.tensor([[1, 0, 0]])).item() == pytest.approx(math.log(8))


class _WithoutLogitsToKeep(torch.nn.Module):
    """A causal LM whose forward has no `logits_to_keep`: scored through the full-logits path."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask)


@pytest.mark.parametrize(
    "wrap, chunk",
    [(False, None), (True, None), (False, 2), (False, 64)],
    ids=["logits_to_keep", "full_logits", "chunks_of_2", "one_chunk"],
)
def test_sequence_logprobs_match_prefix_by_prefix_scoring(wrap: bool, chunk: int | None) -> None:
    model = _WithoutLogitsToKeep(tiny_qwen2()) if wrap else tiny_qwen2()
    torch.manual_seed(1)
    input_ids = torch.randint(3, 100, (2, 7))
    attention_mask = torch.tensor([[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0, 0]])
    response_mask = torch.tensor([[0, 0, 1, 1, 0, 1, 1], [0, 0, 0, 1, 1, 0, 0]])
    temperature = 0.7
    logprobs = sequence_logprobs(model, input_ids, attention_mask, response_mask, temperature, chunk=chunk)
    assert logprobs.shape == (2, 7)
    with torch.no_grad():
        for b, t in response_mask.nonzero().tolist():
            prefix_logits = model(input_ids=input_ids[b : b + 1, :t], attention_mask=attention_mask[b : b + 1, :t])
            expected = torch.log_softmax(prefix_logits.logits[0, -1] / temperature, -1)[input_ids[b, t]]
            assert logprobs[b, t].item() == pytest.approx(expected.item(), abs=1e-5)
    assert (logprobs[response_mask == 0] == 0).all()
    nothing_scored = sequence_logprobs(model, input_ids, attention_mask, torch.zeros_like(response_mask), chunk=chunk)
    assert nothing_scored.shape == (2, 7) and (nothing_scored == 0).all()
    logprobs.sum().backward()
    assert all(p.grad is not None for p in model.parameters())


def test_sequence_logprobs_refuse_to_score_the_first_token() -> None:
    with pytest.raises(ConfigError, match="position 0"):
        sequence_logprobs(tiny_qwen2(), torch.tensor([[5, 6]]), torch.ones(1, 2), torch.ones(1, 2))
