"""Our GRPO pieces give the same numbers as TRL's trainers, run as TRL runs them.

A real ``GRPOTrainer`` (and ``RLOOTrainer``) is built offline on the project's tiny random Qwen2 checkpoint
(``harness.tiny_model``). For losses, the same batch (prompt and completion ids and masks, advantages, old and reference
log-probs) goes to TRL's ``GRPOTrainer._compute_loss`` and to our ``sequence_logprobs`` + ``policy_loss``; the
losses, the gradients of every parameter and the clip/KL metrics must agree. For advantages, TRL generates and
scores a batch itself and we recompute its advantages from the same rewards.

Settings that TRL has and we do not are pinned off: ``use_bias_correction_kl=False`` (TRL's default multiplies the
KL term by the importance ratio; ours is the plain per-token k3 of the GRPO paper).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

try:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer, RLOOConfig, RLOOTrainer
except ImportError as missing:
    if os.environ.get("CI"):
        raise
    pytest.skip(f"TRL parity needs trl ({missing}); pip install trl", allow_module_level=True)

from transformers import AutoModelForCausalLM, AutoTokenizer

from harness.tiny_model import init_tiny
from trainer.algorithms import (
    group_advantages,
    policy_loss,
    sequence_logprobs,
    token_entropy,
)

MAX_COMPLETION_LENGTH = 8  # longer than the completions below, so Dr. GRPO's constant differs from their length
TEMPERATURE = 0.7
CLIP_LOW, CLIP_HIGH = 0.2, 0.28
# TRL loss type -> our aggregation; bnpo and dapo agree on one batch and differ only across accumulated batches
AGGREGATION = {
    "grpo": "seq_mean_token_mean",
    "dr_grpo": "seq_mean_token_sum_norm",
    "dapo": "token_mean",
    "bnpo": "token_mean",
}
LOSS_ATOL, GRAD_ATOL, RTOL = 1e-6, 1e-6, 1e-5


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's tiny Qwen2 checkpoint (tied embeddings, byte-level BPE); TRL loads its reference model from it."""
    return init_tiny(tmp_path_factory.mktemp("tiny-qwen2"))


def common_settings(checkpoint: Path) -> dict:
    """Trainer arguments for one process on the CPU in float32 (TRL defaults to bf16 autocast), nothing saved."""
    return {
        "output_dir": str(checkpoint / "out"),
        "use_cpu": True,
        "bf16": False,
        "report_to": "none",
        "save_strategy": "no",
        "activation_checkpointing": False,
        "max_completion_length": MAX_COMPLETION_LENGTH,
        "temperature": TEMPERATURE,
    }


def trainer_kwargs(checkpoint: Path, rewards: list[float]) -> dict:
    """Model, tokenizer, data set and a reward function that hands out ``rewards`` in order."""
    return {
        "model": AutoModelForCausalLM.from_pretrained(checkpoint),
        "processing_class": AutoTokenizer.from_pretrained(checkpoint),
        "train_dataset": Dataset.from_dict({"prompt": ["w3 w4"] * 8}),
        "reward_funcs": lambda completions, **_: rewards[: len(completions)],
    }


def grpo_trainer(checkpoint: Path, **config) -> GRPOTrainer:
    args = GRPOConfig(**common_settings(checkpoint), per_device_train_batch_size=4, num_generations=2, **config)
    trainer = GRPOTrainer(args=args, **trainer_kwargs(checkpoint, [0.0] * 4))
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # what Trainer's loop sets with gradient_accumulation_steps=1
    return trainer


def make_batch(pad_id: int) -> dict[str, torch.Tensor]:
    """Two prompts x two completions: left-padded prompts, right-padded completions of different lengths."""
    torch.manual_seed(1)
    prompt_mask = torch.tensor([[1, 1, 1], [1, 1, 1], [0, 1, 1], [0, 1, 1]])
    completion_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 0, 0, 0, 0]])
    return {
        "prompt_ids": torch.randint(0, pad_id, (4, 3)).masked_fill(prompt_mask == 0, pad_id),
        "prompt_mask": prompt_mask,
        "completion_ids": torch.randint(0, pad_id, (4, 5)).masked_fill(completion_mask == 0, pad_id),
        "completion_mask": completion_mask,
        "advantages": torch.tensor([1.2, -0.7, 0.5, -1.0]),
        "num_items_in_batch": completion_mask.sum(),
    }


def full_sequences(batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Input ids, attention mask and response mask of prompt + completion, as our learner sees a trajectory."""
    input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    attention_mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    response_mask = torch.cat([torch.zeros_like(batch["prompt_mask"]), batch["completion_mask"]], dim=1)
    return input_ids, attention_mask, response_mask


def trl_logprobs(trainer: GRPOTrainer, model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """TRL's own per-token log-probs of the completion tokens, ``[B, completion length]``."""
    input_ids, attention_mask, _ = full_sequences(batch)
    logprobs, _, _ = trainer._get_per_token_logps_and_entropies(
        model, input_ids, attention_mask, batch["completion_ids"].size(1)
    )
    return logprobs


def prompt_padded(completion_values: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Place completion-only values at the completion positions of the full sequence (zeros over the prompt)."""
    return torch.nn.functional.pad(completion_values, (batch["prompt_ids"].size(1), 0))


def gradients(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: param.grad.clone() for name, param in model.named_parameters()}


@pytest.mark.parametrize("beta", [0.0, 0.04])
@pytest.mark.parametrize("loss_type", ["grpo", "dr_grpo", "dapo", "bnpo"])
def test_loss_and_gradients_match_grpo_trainer(checkpoint: Path, loss_type: str, beta: float) -> None:
    trainer = grpo_trainer(
        checkpoint,
        loss_type=loss_type,
        beta=beta,
        epsilon=CLIP_LOW,
        epsilon_high=CLIP_HIGH,
        use_bias_correction_kl=False,
    )
    model, batch = trainer.model, make_batch(trainer.processing_class.pad_token_id)
    with torch.no_grad():
        if beta:  # move the policy away from the reference so that the KL term is not zero
            for param in model.parameters():
                param.add_(0.05 * torch.randn_like(param))
            batch["ref_per_token_logps"] = trl_logprobs(trainer, trainer.ref_model, batch)
        # an older policy a little off the current one, so that both clip bounds are reached
        batch["old_per_token_logps"] = trl_logprobs(trainer, model, batch) + 0.3 * torch.randn(4, 5)

    model.zero_grad()
    trl_loss = trainer._compute_loss(model, batch)
    trl_loss.backward()
    trl_grads = gradients(model)
    trl_metrics = {name: values[-1] for name, values in trainer._metrics["train"].items()}

    input_ids, attention_mask, response_mask = full_sequences(batch)
    ref_logprobs = None
    if beta:
        with torch.no_grad():
            ref_logprobs = sequence_logprobs(trainer.ref_model, input_ids, attention_mask, response_mask, TEMPERATURE)
    model.zero_grad()
    logprobs = sequence_logprobs(model, input_ids, attention_mask, response_mask, TEMPERATURE)
    loss, metrics = policy_loss(
        logprobs,
        prompt_padded(batch["old_per_token_logps"], batch),
        batch["advantages"],
        response_mask,
        clip_low=CLIP_LOW,
        clip_high=CLIP_HIGH,
        ref_logprobs=ref_logprobs,
        kl_coef=beta,
        kl_type="k3",
        aggregation=AGGREGATION[loss_type],
        max_len=MAX_COMPLETION_LENGTH,
    )
    loss.backward()

    torch.testing.assert_close(loss, trl_loss, rtol=RTOL, atol=LOSS_ATOL)
    for name, grad in gradients(model).items():
        torch.testing.assert_close(grad, trl_grads[name], rtol=RTOL, atol=GRAD_ATOL, msg=f"gradient of {name}")
    assert 0 < metrics["clip_frac_low"] and 0 < metrics["clip_frac_high"], "the batch should exercise both clips"
    assert metrics["clip_frac_low"] == pytest.approx(trl_metrics["clip_ratio/low_mean"])
    assert metrics["clip_frac_high"] == pytest.approx(trl_metrics["clip_ratio/high_mean"])
    assert metrics["clip_frac"] == pytest.approx(trl_metrics["clip_ratio/region_mean"])
    if beta:
        assert metrics["kl"] > 0
        assert metrics["kl"] == pytest.approx(trl_metrics["kl"], rel=RTOL)


def test_logprobs_and_entropy_match_grpo_trainer(checkpoint: Path) -> None:
    trainer = grpo_trainer(checkpoint)
    batch = make_batch(trainer.processing_class.pad_token_id)
    input_ids, attention_mask, response_mask = full_sequences(batch)
    prompt_length = batch["prompt_ids"].size(1)
    with torch.no_grad():
        theirs, entropies, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model, input_ids, attention_mask, batch["completion_ids"].size(1), compute_entropy=True
        )
        ours = sequence_logprobs(trainer.model, input_ids, attention_mask, response_mask, TEMPERATURE)
        logits = trainer.model(input_ids=input_ids, attention_mask=attention_mask).logits / TEMPERATURE
        entropy = token_entropy(logits[:, prompt_length - 1 : -1], batch["completion_mask"])
    mask = batch["completion_mask"].bool()
    torch.testing.assert_close(ours[:, prompt_length:][mask], theirs[mask], rtol=RTOL, atol=1e-6)
    torch.testing.assert_close(entropy, (entropies * mask).sum() / mask.sum(), rtol=RTOL, atol=1e-6)


# Two groups of four: one with spread, one with a single outlier.
REWARDS = [1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 4.0]
SCORED_PROMPTS = [{"prompt": "w3 w4"}] * 4 + [{"prompt": "w5"}] * 4


@pytest.mark.parametrize(("scale_rewards", "method"), [("group", "grpo"), ("none", "dr_grpo")])
def test_advantages_match_grpo_trainer(checkpoint: Path, scale_rewards: str, method: str) -> None:
    args = GRPOConfig(
        **common_settings(checkpoint), per_device_train_batch_size=8, num_generations=4, scale_rewards=scale_rewards
    )
    trainer = GRPOTrainer(args=args, **trainer_kwargs(checkpoint, REWARDS))
    theirs = trainer._generate_and_score_completions(SCORED_PROMPTS)["advantages"]
    ours = group_advantages(torch.tensor(REWARDS), 4, method=method, eps=1e-4)  # TRL's epsilon is 1e-4
    torch.testing.assert_close(ours, theirs, rtol=RTOL, atol=1e-6)


def test_advantages_match_rloo_trainer(checkpoint: Path) -> None:
    args = RLOOConfig(**common_settings(checkpoint), per_device_train_batch_size=8, num_generations=4, beta=0.0)
    trainer = RLOOTrainer(args=args, **trainer_kwargs(checkpoint, REWARDS))
    theirs = trainer._generate_and_score_completions(SCORED_PROMPTS)["advantages"]
    ours = group_advantages(torch.tensor(REWARDS), 4, method="rloo")
    torch.testing.assert_close(ours, theirs, rtol=RTOL, atol=1e-6)
