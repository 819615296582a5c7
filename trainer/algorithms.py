"""The GRPO family as small pure functions on torch tensors.

Shapes: ``B`` samples (completions) in a batch, ``T`` token positions per sample, ``V`` vocabulary size.
Per-token tensors (log-probs, masks) are aligned with ``input_ids``: position ``t`` holds the log-probability of
token ``t`` given the tokens before it, and a mask is 1 on the policy's own tokens (the loss mask of a trajectory)
and 0 on prompt, tool-output and padding positions.

A learner step reads top to bottom with these pieces::

    advantages = group_advantages(rewards, group_size, method="grpo")
    logprobs = sequence_logprobs(model, input_ids, attention_mask, loss_mask, temperature)
    loss, metrics = policy_loss(logprobs, old_logprobs, advantages, loss_mask, aggregation="token_mean")
    loss.backward()

Correspondence with TRL's ``GRPOTrainer`` (checked by ``tests/trainer/test_trl_parity.py``):
``loss_type="grpo"`` is ``aggregation="seq_mean_token_mean"``, ``"dr_grpo"`` is ``"seq_mean_token_sum_norm"``
with ``max_len=max_completion_length``, ``"dapo"`` and ``"bnpo"`` are ``"token_mean"``; TRL's ``epsilon`` /
``epsilon_high`` are ``clip_low`` / ``clip_high`` and its ``beta`` is ``kl_coef`` with ``kl_type="k3"``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import get_args

import torch
from torch import Tensor, nn

from infra.plugins import Registry, RegistryError

from .choices import AdvantageMethod, Aggregation, KLType
from .errors import ConfigError

# The allowed values are spelled once, in trainer/choices.py (torch-free, shared with the config schema).
ADVANTAGE_METHODS = get_args(AdvantageMethod)  # the built-in estimators; plugins register more
AGGREGATIONS = get_args(Aggregation)
KL_TYPES = get_args(KLType)


def _group_index(groups: int | Tensor, batch_size: int, device: torch.device) -> Tensor:
    """Map every sample to a dense group number ``0..G-1``.

    ``groups`` is either a group size (the batch is made of consecutive groups of that size, the usual layout
    of ``n`` samples per prompt) or a ``[B]`` tensor of group ids (any values, any order, any group sizes).
    """
    if isinstance(groups, int):
        if groups < 1 or batch_size % groups:
            raise ConfigError(
                f"group size {groups} does not divide the batch of {batch_size} samples; "
                "pass a group size that divides the batch, or a tensor of group ids"
            )
        return torch.arange(batch_size, device=device) // groups
    if groups.shape != (batch_size,):
        raise ConfigError(f"group ids have shape {tuple(groups.shape)}, expected ({batch_size},): one id per sample")
    return torch.unique(groups, return_inverse=True)[1].to(device)


def _per_group_sum(values: Tensor, index: Tensor) -> Tensor:
    """Sum ``values`` within each group and hand every sample its group's sum."""
    num_groups = int(index.max()) + 1
    sums = torch.zeros(num_groups, dtype=values.dtype, device=values.device).index_add_(0, index, values)
    return sums[index]


AdvantageEstimator = Callable[[Tensor, Tensor, Tensor, float], Tensor]
ADVANTAGE_ESTIMATORS: Registry[AdvantageEstimator] = Registry("advantage estimator", "harness.advantage_estimators")


def register_advantage(name: str):
    """Decorate `fn(rewards, group_index, group_count, eps) -> advantages` (all ``[B]``; `group_index` maps a
    sample to its dense group number, `group_count` is the size of its group) to make it
    `trainer.algorithm.advantage: name`."""
    return ADVANTAGE_ESTIMATORS.register(name)


def group_advantages(
    rewards: Tensor,
    groups: int | Tensor,
    method: str = "grpo",
    eps: float = 1e-6,
) -> Tensor:
    """Advantages from rewards, normalised within each group of samples of the same prompt.

    Args:
        rewards: ``[B]`` scalar reward per sample.
        groups: group size (consecutive groups) or ``[B]`` group ids; see ``_group_index``.
        method: a registered estimator (or ``module:function``):
            ``"grpo"``: ``(r - mean) / (std + eps)`` with the *unbiased* (Bessel-corrected, ``n - 1``)
            group std, as TRL and the DeepSeekMath paper compute it; a single-sample group gets 0.
            ``"dr_grpo"``: ``r - mean``, no std scaling (Dr. GRPO).
            ``"rloo"``: ``r`` minus the mean reward of the *other* samples of its group (needs groups of >= 2).
        eps: added to the std in ``"grpo"`` so that a zero-variance group gives 0 instead of 0/0.
            TRL uses 1e-4.

    Returns:
        ``[B]`` float advantages.
    """
    try:
        estimator = ADVANTAGE_ESTIMATORS.get(method)
    except RegistryError as err:
        raise ConfigError(f"unknown advantage method {method!r}: {err}") from None
    rewards = rewards if rewards.is_floating_point() else rewards.float()
    index = _group_index(groups, rewards.numel(), rewards.device)
    count = _per_group_sum(torch.ones_like(rewards), index)
    return estimator(rewards, index, count, eps)


def _centered(rewards: Tensor, index: Tensor, count: Tensor) -> Tensor:
    return rewards - _per_group_sum(rewards, index) / count


@register_advantage("grpo")
def grpo_advantage(rewards: Tensor, index: Tensor, count: Tensor, eps: float) -> Tensor:
    centered = _centered(rewards, index, count)
    variance = _per_group_sum(centered**2, index) / (count - 1).clamp(min=1)
    return centered / (variance.sqrt() + eps)


@register_advantage("dr_grpo")
def dr_grpo_advantage(rewards: Tensor, index: Tensor, count: Tensor, eps: float) -> Tensor:
    return _centered(rewards, index, count)


@register_advantage("rloo")
def rloo_advantage(rewards: Tensor, index: Tensor, count: Tensor, eps: float) -> Tensor:
    if bool((count < 2).any()):
        raise ConfigError("RLOO needs at least 2 samples per group; sample more completions per prompt")
    # r - (sum - r) / (n - 1) == n / (n - 1) * (r - mean)
    return _centered(rewards, index, count) * count / (count - 1)


def zero_variance_groups(rewards: Tensor, groups: int | Tensor) -> Tensor:
    """``[B]`` bool, True for every sample whose whole group got the same reward (no learning signal).

    DAPO's dynamic sampling drops these groups; ``groups`` is a group size or group ids as in ``group_advantages``.
    """
    index = _group_index(groups, rewards.numel(), rewards.device)
    num_groups = int(index.max()) + 1
    empty = torch.zeros(num_groups, dtype=rewards.dtype, device=rewards.device)
    high = empty.scatter_reduce(0, index, rewards, reduce="amax", include_self=False)
    low = empty.scatter_reduce(0, index, rewards, reduce="amin", include_self=False)
    return (high == low)[index]


def overlong_mask(truncated: Sequence[str] | Sequence[bool] | Tensor) -> Tensor:
    """``[B]`` bool, True for every sample cut off by the length limit (DAPO's overlong filtering).

    ``truncated`` holds either finish reasons (``"length"`` means truncated, as in OpenAI's API and
    ``Completion.finish_reason``) or truncation flags. Drop those samples from the loss with
    ``loss_mask * ~overlong_mask(reasons)[:, None]``.
    """
    if isinstance(truncated, Tensor):
        return truncated.bool()
    return torch.tensor([r == "length" if isinstance(r, str) else bool(r) for r in truncated], dtype=torch.bool)


def token_entropy(logits: Tensor, mask: Tensor) -> Tensor:
    """Mean entropy (nats) of the next-token distributions over the unmasked positions; differentiable.

    Args:
        logits: ``[B, T, V]``, where ``logits[:, t]`` is the distribution token ``t`` was sampled from
            (model logits shifted right by one, the alignment of ``sequence_logprobs``), already divided by the
            sampling temperature if there was one.
        mask: ``[B, T]``, 1 where the position counts.
    """
    logp = torch.log_softmax(logits.float(), dim=-1)
    entropy = -(logp.exp() * logp).sum(-1)
    return _masked_mean(entropy, mask.bool())


def sequence_logprobs(
    model: nn.Module,
    input_ids: Tensor,
    attention_mask: Tensor,
    response_mask: Tensor,
    temperature: float = 1.0,
    chunk: int | None = None,
) -> Tensor:
    """Per-token log-probabilities of ``input_ids`` under ``model``, aligned with ``input_ids``.

    Position ``t`` of the result is ``log p(input_ids[:, t] | input_ids[:, :t])`` from the logits at position
    ``t - 1`` divided by ``temperature`` (the sampling temperature, so that the result matches the sampler's
    log-probs). Positions outside ``response_mask`` are 0. Gradients flow to the model unless the caller runs
    this under ``torch.no_grad()`` (as for old-policy and reference log-probs).

    Args:
        model: a causal LM returning ``.logits`` of shape ``[B, T, V]`` (any ``transformers`` causal LM).
        input_ids: ``[B, T]`` the tokens exactly as generated (prompt, turns, observations).
        attention_mask: ``[B, T]``, 0 on padding.
        response_mask: ``[B, T]``, 1 on the tokens to score; position 0 has no context and cannot be scored.
        temperature: the temperature the tokens were sampled with.

    Returns:
        ``[B, T]`` float32 log-probabilities.

    The ``[B, T, V]`` logits are the largest tensors of a step, so they are kept small: the LM head runs only
    from the first scored position of the batch on (``logits_to_keep``, where the model's forward takes it; the
    prompt's logits are never used), and one ``log_softmax`` + ``gather`` leaves autograd one ``[B, T, V]``
    tensor to keep, with no temperature-scaled copy at temperature 1.

    With ``chunk`` (positions), the LM head and log-softmax run over slices of that many positions, each recomputed
    in the backward pass: the logits held at once are ``[B, chunk, V]`` instead of ``[B, T, V]`` (at 32k tokens and a
    152k vocabulary, 50 GB against 3 GB for chunks of 2,048). The model must expose ``get_decoder()`` and
    ``get_output_embeddings()`` and compute its logits as that head over the decoder's last hidden state (true of
    Llama, Qwen, Mistral and most causal LMs; not of models that scale or soft-cap their logits).
    """
    scored = response_mask.bool()
    if bool(scored[:, 0].any()):
        raise ConfigError("response_mask marks position 0, which has no preceding token to predict it from")
    columns = scored.any(0).nonzero()
    first = int(columns[0]) if len(columns) else input_ids.shape[1]  # logits at first - 1 .. T - 1 are needed
    if chunk is not None:
        return _chunked_logprobs(model, input_ids, attention_mask, scored, first, temperature, chunk)
    if "logits_to_keep" in inspect.signature(model.forward).parameters:
        logits = model(
            input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=input_ids.shape[1] - first + 1
        ).logits
    else:
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, first - 1 :]
    logits = logits.float()
    if temperature != 1.0:
        logits = logits / temperature
    targets = nn.functional.pad(input_ids[:, first:], (0, 1))  # a dummy target past the end, dropped below
    logprobs = logits.log_softmax(-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)[:, :-1]
    return nn.functional.pad(logprobs, (first, 0)).masked_fill(~scored, 0.0)


def _chunked_logprobs(
    model: nn.Module,
    input_ids: Tensor,
    attention_mask: Tensor,
    scored: Tensor,
    first: int,
    temperature: float,
    chunk: int,
) -> Tensor:
    """`sequence_logprobs` with the LM head over `chunk` positions at a time, each slice recomputed in backward."""
    from torch.utils.checkpoint import checkpoint

    decoder, head = model.get_decoder(), model.get_output_embeddings()
    if decoder is None or head is None:
        raise ConfigError(f"{type(model).__name__} exposes no decoder and LM head: chunked log-probs need both")
    hidden = decoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state[
        :, first - 1 : input_ids.shape[1] - 1
    ]
    targets = input_ids[:, first:]

    def piece(states: Tensor, wanted: Tensor) -> Tensor:
        logits = head(states).float()
        if temperature != 1.0:
            logits = logits / temperature
        return logits.log_softmax(-1).gather(-1, wanted.unsqueeze(-1)).squeeze(-1)

    parts = [
        checkpoint(piece, hidden[:, start : start + chunk], targets[:, start : start + chunk], use_reentrant=False)
        for start in range(0, targets.shape[1], chunk)
    ]
    logprobs = torch.cat(parts, dim=1) if parts else hidden.new_zeros((input_ids.shape[0], 0))
    return nn.functional.pad(logprobs.float(), (first, 0)).masked_fill(~scored, 0.0)


def kl_penalty(logprobs: Tensor, ref_logprobs: Tensor, kl_type: KLType = "k1") -> Tensor:
    """Per-token estimate of KL(policy || reference) from the sampled tokens' log-probs (Schulman's estimators).

    ``"k1"``: ``logp - ref`` (unbiased, can be negative). ``"k3"``: ``exp(ref - logp) - (ref - logp) - 1``
    (unbiased, always >= 0; the GRPO paper's and TRL's choice).
    """
    if kl_type not in KL_TYPES:
        raise ConfigError(f"unknown KL estimator {kl_type!r}; choose one of {', '.join(KL_TYPES)}")
    log_ratio = ref_logprobs - logprobs
    if kl_type == "k1":
        return -log_ratio
    return torch.exp(log_ratio) - log_ratio - 1


def _masked_mean(values: Tensor, mask: Tensor) -> Tensor:
    """Mean of ``values`` over the True positions of ``mask`` (0 when there are none)."""
    return torch.where(mask, values, 0.0).sum() / mask.sum().clamp(min=1)


def aggregate_loss(
    per_token: Tensor,
    mask: Tensor,
    aggregation: Aggregation = "token_mean",
    max_len: int | None = None,
) -> Tensor:
    """Reduce a ``[B, T]`` per-token loss to a scalar over the unmasked tokens.

    ``"token_mean"``: mean over every unmasked token of the batch (DAPO; TRL's ``dapo`` and ``bnpo``).
    ``"seq_mean_token_mean"``: mean over sequences of each sequence's token mean (GRPO; TRL's ``grpo``).
    ``"seq_mean_token_sum_norm"``: each sequence's token sum divided by the constant ``max_len`` (the generation
    length limit), then mean over sequences (Dr. GRPO; TRL's ``dr_grpo``).
    """
    if aggregation not in AGGREGATIONS:
        raise ConfigError(f"unknown loss aggregation {aggregation!r}; choose one of {', '.join(AGGREGATIONS)}")
    mask = mask.bool()
    if aggregation == "token_mean":
        return _masked_mean(per_token, mask)
    token_sums = torch.where(mask, per_token, 0.0).sum(-1)
    if aggregation == "seq_mean_token_mean":
        return (token_sums / mask.sum(-1).clamp(min=1)).mean()
    if max_len is None:
        raise ConfigError("aggregation 'seq_mean_token_sum_norm' needs max_len, the maximum response length")
    return (token_sums / max_len).mean()


def importance_weights(proximal_logprobs: Tensor, behaviour_logprobs: Tensor, mask: Tensor, cap: float) -> Tensor:
    """Per-token ``min(pi_prox / pi_behaviour, cap)``, without gradient; 1 where ``mask`` is 0."""
    mask = mask.bool()
    log_w = torch.where(mask, proximal_logprobs.detach() - behaviour_logprobs.detach(), 0.0)
    return torch.clamp(torch.exp(log_w), max=cap)


def policy_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    ref_logprobs: Tensor | None = None,
    kl_coef: float = 0.0,
    kl_type: KLType = "k1",
    aggregation: Aggregation = "token_mean",
    max_len: int | None = None,
    behaviour_logprobs: Tensor | None = None,
    is_cap: float = 2.0,
) -> tuple[Tensor, dict[str, float]]:
    """PPO clipped surrogate loss per token, plus an optional KL penalty to a reference, aggregated.

    Per token, with ``ratio = exp(logprobs - old_logprobs)`` and advantage ``A``::

        loss_t = -min(ratio * A, clamp(ratio, 1 - clip_low, 1 + clip_high) * A) + kl_coef * KL_t

    ``clip_high > clip_low`` is DAPO's clip-higher. The gradient of a token vanishes exactly where the clamp is
    active on the chosen branch: ``ratio > 1 + clip_high`` with ``A > 0`` or ``ratio < 1 - clip_low`` with ``A < 0``.

    Args:
        logprobs: ``[B, T]`` current policy log-probs (with gradient), e.g. from ``sequence_logprobs``.
        old_logprobs: ``[B, T]`` log-probs of the policy that sampled the tokens (no gradient).
        advantages: ``[B]`` per sample, or ``[B, T]`` per token.
        mask: ``[B, T]``, 1 on the tokens that carry loss. Log-probs at masked positions are ignored and may hold
            anything (padding, -inf, NaN) without reaching the loss or the gradients.
        clip_low, clip_high: the PPO epsilons below and above a ratio of 1.
        ref_logprobs: ``[B, T]`` reference-policy log-probs; required when ``kl_coef > 0``, and when given the
            KL is reported in the metrics even if ``kl_coef`` is 0.
        kl_coef: weight of the per-token KL penalty (TRL's ``beta``).
        kl_type: estimator, see ``kl_penalty``.
        aggregation, max_len: how per-token losses become one number, see ``aggregate_loss``.
        behaviour_logprobs: ``[B, T]`` log-probs of the (older) engine weights that sampled the tokens, for
            stale samples of asynchronous training. Then ``old_logprobs`` are the proximal policy's (the learner's
            weights before this step), the clip is taken around them, and each token's surrogate is weighted by
            the truncated importance weight ``min(exp(old_logprobs - behaviour_logprobs), is_cap)`` (decoupled
            PPO, as AReaL): stale tokens count as much as the current policy would have sampled them.

    Returns:
        The scalar loss and float metrics: ``pg_loss`` (the surrogate alone, aggregated the same way),
        ``ratio_mean``, ``clip_frac_low`` / ``clip_frac_high`` / ``clip_frac`` (fraction of unmasked tokens whose
        gradient the clip removes, low side / high side / either, as TRL's ``clip_ratio/*`` metrics), and
        ``kl`` (token mean of the KL estimate) when ``ref_logprobs`` is given.
    """
    if kl_coef and ref_logprobs is None:
        raise ConfigError(f"kl_coef={kl_coef} needs ref_logprobs from a reference model; pass them or set kl_coef=0")
    mask = mask.bool()
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1)
    log_ratio = torch.where(mask, logprobs - old_logprobs, 0.0)
    ratio = torch.exp(log_ratio)
    clipped_ratio = torch.clamp(ratio, 1 - clip_low, 1 + clip_high)
    pg_per_token = -torch.min(ratio * advantages, clipped_ratio * advantages)
    metrics: dict[str, float] = {}
    if behaviour_logprobs is not None:
        weight = importance_weights(old_logprobs, behaviour_logprobs, mask, is_cap)
        pg_per_token = pg_per_token * weight
        metrics["is_weight_mean"] = _masked_mean(weight, mask).item()
    per_token = pg_per_token

    if ref_logprobs is not None:
        kl = kl_penalty(torch.where(mask, logprobs, 0.0), torch.where(mask, ref_logprobs, 0.0), kl_type)
        per_token = per_token + kl_coef * kl
        metrics["kl"] = _masked_mean(kl.detach(), mask).item()

    loss = aggregate_loss(per_token, mask, aggregation, max_len)
    with torch.no_grad():
        clipped_low = (ratio < 1 - clip_low) & (advantages < 0)
        clipped_high = (ratio > 1 + clip_high) & (advantages > 0)
        metrics |= {
            "pg_loss": aggregate_loss(pg_per_token, mask, aggregation, max_len).item(),
            "ratio_mean": _masked_mean(ratio, mask).item(),
            "clip_frac_low": _masked_mean(clipped_low.float(), mask).item(),
            "clip_frac_high": _masked_mean(clipped_high.float(), mask).item(),
            "clip_frac": _masked_mean((clipped_low | clipped_high).float(), mask).item(),
        }
    return loss, metrics
