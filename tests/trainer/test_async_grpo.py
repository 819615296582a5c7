"""Asynchronous GRPO: the importance correction of stale samples (the short real run is in test_train_run.py)."""

from __future__ import annotations

import torch

from trainer.algorithms import importance_weights, policy_loss


def test_importance_weights_are_truncated_ratios_and_one_off_the_mask():
    proximal = torch.log(torch.tensor([[0.5, 0.5, 0.9, 0.2]]))
    behaviour = torch.log(torch.tensor([[0.5, 0.25, 0.1, 0.9]]))
    mask = torch.tensor([[1, 1, 1, 0]])
    w = importance_weights(proximal, behaviour, mask, cap=2.0)
    assert torch.allclose(w, torch.tensor([[1.0, 2.0, 2.0, 1.0]]))  # 1, 0.5/0.25, 9 capped at 2, masked


def _gradient(
    logits: torch.Tensor, actions: torch.Tensor, advantages: torch.Tensor, behaviour: torch.Tensor, corrected: bool
) -> torch.Tensor:
    theta = logits.clone().requires_grad_(True)
    logprobs = torch.log_softmax(theta, -1)[actions].unsqueeze(0)
    mask = torch.ones_like(logprobs)
    if corrected:  # proximal = the current weights, behaviour = the stale engine's
        loss, _ = policy_loss(
            logprobs,
            logprobs.detach(),
            advantages.unsqueeze(0),
            mask,
            clip_low=0.2,
            clip_high=0.2,
            behaviour_logprobs=behaviour[actions].unsqueeze(0),
            is_cap=1e9,
        )
    else:  # the engine's log-probs taken as the old policy, as a synchronous step does: the clip around them
        loss, _ = policy_loss(
            logprobs, behaviour[actions].unsqueeze(0), advantages.unsqueeze(0), mask, clip_low=0.2, clip_high=0.2
        )
    loss.backward()
    return theta.grad


def test_corrected_gradient_of_stale_samples_matches_the_on_policy_gradient():
    """Tokens sampled by old weights (mu), trained at new weights (pi): with the correction the expected gradient
    is the on-policy policy gradient sum_a pi(a) A(a) grad log pi(a). Without it, PPO's clip around mu cuts the
    gradient of every token whose ratio pi/mu left [0.8, 1.2]: biased."""
    torch.manual_seed(0)
    logits = torch.tensor([1.0, 0.0, -1.0, 0.5])
    pi = torch.softmax(logits, -1)
    mu = torch.tensor([0.1, 0.5, 0.3, 0.1])  # the stale policy that sampled
    reward = torch.tensor([1.0, 0.0, 0.0, 0.5])
    theta = logits.clone().requires_grad_(True)
    exact_loss = -(pi.detach() * (reward - 0.3) * torch.log_softmax(theta, -1)).sum()
    exact = torch.autograd.grad(exact_loss, theta)[0]
    actions = torch.multinomial(mu, 200_000, replacement=True)
    advantages = reward[actions] - 0.3
    corrected = _gradient(logits, actions, advantages, torch.log(mu), corrected=True)
    naive = _gradient(logits, actions, advantages, torch.log(mu), corrected=False)
    assert torch.allclose(corrected, exact, atol=0.01), (corrected, exact)
    assert (naive - exact).abs().max() > 0.05, (naive, exact)
