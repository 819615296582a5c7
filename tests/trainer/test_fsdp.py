"""The fsdp2 strategy on real Ray and real torch.distributed (two CPU ranks over gloo): a step of two
data-parallel ranks equals the single-process step on the whole batch, and its checkpoints are the same
Hugging Face folders, with resumable optimizer state. Mini-batches (several optimizer steps per batch) too."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import ray
import torch
from transformers import AutoModelForCausalLM

from harness.tiny_model import init_tiny
from trainer.batch import Batch
from trainer.checkpoint import load_trainer_state
from trainer.learner import Learner, LearnerSettings
from trainer.workers import LearnerGroup

SETTINGS = LearnerSettings(learning_rate=1e-2, micro_batch_size=2, loss_aggregation="token_mean", max_grad_norm=0.5)


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return init_tiny(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def cluster():
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        ignore_reinit_error=True,
        runtime_env={"env_vars": {"PYTHONPATH": str(Path(__file__).resolve().parents[2])}},
    )
    yield
    ray.shutdown()


def rl_batch(rows: int, seed: int = 0) -> Batch:
    """Random sequences of different lengths; the second half of each is the scored response."""
    generator = torch.Generator().manual_seed(seed)
    width = 24
    ids = torch.randint(10, 2000, (rows, width), generator=generator)
    lengths = torch.randint(12, width + 1, (rows,), generator=generator)
    attention = (torch.arange(width)[None] < lengths[:, None]).long()
    loss_mask = ((torch.arange(width)[None] >= lengths[:, None] // 2) & attention.bool()).float()
    old = -torch.rand((rows, width), generator=generator) * 3 * loss_mask
    advantages = torch.randn(rows, generator=generator)
    return Batch(ids, attention, loss_mask, old, advantages, torch.zeros(rows), torch.arange(rows))


def single_learner(model: Path) -> Learner:
    torch.manual_seed(0)
    return Learner(model, SETTINGS)


def assert_same_weights(actual: dict, expected: dict) -> None:
    """Equal up to the order of float additions in the gradient reduction. Adam magnifies that order where a gradient
    is a near-cancellation (its step is about lr whatever the gradient's size), so a rare weight may differ by a small
    part of a step (2.2e-5 in 1 of 8,192 on one machine); the gradient norms, which Adam's scale invariance would hide,
    are compared on their own."""
    assert actual.keys() == expected.keys()
    for name in expected:
        off = (actual[name] - expected[name]).abs()
        loose = off > 1e-5 + 1e-4 * expected[name].abs()
        assert loose.float().mean() <= 1e-3 and off.max() <= 1e-3, (
            f"{name}: {int(loose.sum())} of {off.numel()} weights differ, by up to {float(off.max()):.2e}"
        )


def test_two_ranks_take_the_single_process_step(model, cluster):
    group = LearnerGroup(str(model), replace(SETTINGS, strategy="fsdp2"), None, ranks=2, gpus_per_rank=0)
    single = single_learner(model)
    start = single.weights()
    for step in range(2):
        batch = rl_batch(8, seed=step)
        expected = single.train_step(batch)
        got = group.train_step(batch)
        assert got["grad_norm"] == pytest.approx(expected["grad_norm"], rel=1e-4)
        assert got["trained_tokens"] == expected["trained_tokens"]
    weights = ray.get(group.weights())
    assert_same_weights(weights, single.weights())
    assert any(not torch.equal(weights[name], start[name]) for name in start)  # the step did change them


def test_gradient_checkpointing_takes_the_same_step(model):
    """Recomputing activations in the backward pass changes memory, not the step."""
    plain = single_learner(model)
    torch.manual_seed(0)
    checkpointed = Learner(model, replace(SETTINGS, gradient_checkpointing=True))
    assert checkpointed.model.is_gradient_checkpointing and not plain.model.is_gradient_checkpointing
    start = plain.weights()
    for step in range(2):
        batch = rl_batch(8, seed=step)
        expected = plain.train_step(batch)
        got = checkpointed.train_step(batch)
        assert got["grad_norm"] == pytest.approx(expected["grad_norm"], rel=1e-5)
    assert_same_weights(checkpointed.weights(), plain.weights())
    assert any(not torch.equal(plain.weights()[name], start[name]) for name in start)


def test_bf16_autocast_takes_nearly_the_fp32_step(model):
    """Mixed precision moves the weights where fp32 does, up to bfloat16's rounding; the weights stay fp32."""
    plain = single_learner(model)
    torch.manual_seed(0)
    mixed = Learner(model, replace(SETTINGS, precision="bf16"))
    start = plain.weights()
    batch = rl_batch(8)
    expected, got = plain.train_step(batch), mixed.train_step(batch)
    assert got["grad_norm"] == pytest.approx(expected["grad_norm"], rel=0.05)
    assert got["grad_norm"] != expected["grad_norm"]  # the forward pass did run in bfloat16
    moved = {name: plain.weights()[name] - start[name] for name in start}
    mixed_moved = {name: mixed.weights()[name] - start[name] for name in start}
    assert all(w.dtype == torch.float32 for w in mixed.weights().values())
    flat, mixed_flat = (torch.cat([m[n].flatten() for n in start]) for m in (moved, mixed_moved))
    assert torch.nn.functional.cosine_similarity(flat, mixed_flat, dim=0) > 0.9


def test_mini_batches_are_optimizer_steps_in_row_order(model):
    """At a constant learning rate, a step of 2 mini-batches is the two steps of its halves, one after the other."""
    batch = rl_batch(8, seed=5)
    torch.manual_seed(0)
    split = Learner(model, replace(SETTINGS, mini_batches=2))
    metrics = split.train_step(batch)
    assert metrics["optimizer_steps"] == 2 and metrics["micro_batches"] == 4
    one_by_one = single_learner(model)
    for half in (slice(0, 4), slice(4, 8)):
        one_by_one.train_step(batch.rows(half))
    assert all(torch.equal(a, b) for a, b in zip(split.weights().values(), one_by_one.weights().values()))
    whole = single_learner(model)
    whole.train_step(batch)
    assert any(not torch.equal(a, b) for a, b in zip(split.weights().values(), whole.weights().values()))


def test_two_ranks_take_the_single_process_mini_batch_steps(model, cluster):
    """Each mini-batch is split over the ranks on its own: rank r holds the same part of every mini-batch."""
    settings = replace(SETTINGS, mini_batches=2)
    group = LearnerGroup(str(model), replace(settings, strategy="fsdp2"), None, ranks=2, gpus_per_rank=0)
    torch.manual_seed(0)
    single = Learner(model, settings)
    batch = rl_batch(8, seed=6)
    expected, got = single.train_step(batch), group.train_step(batch)
    assert got["optimizer_steps"] == expected["optimizer_steps"] == 2
    assert got["grad_norm"] == pytest.approx(expected["grad_norm"], rel=1e-4)
    assert_same_weights(ray.get(group.weights()), single.weights())


def test_an_uneven_split_takes_the_single_process_step(model, cluster):
    """7 rows in mini-batches of 4 and 3, each split over 2 ranks. The second's padding row counts neither in the loss
    nor in the mean over rows: each of its rows weighs 1/3 as in one process, not 1/4. In the first, the second rank's
    rows have nothing to score: it joins the step with zero gradients. A batch with nothing to learn is skipped."""
    settings = replace(SETTINGS, loss_aggregation="seq_mean_token_mean", mini_batches=2)
    group = LearnerGroup(str(model), replace(settings, strategy="fsdp2"), None, ranks=2, gpus_per_rank=0)
    assert group.train_step(replace(rl_batch(7), loss_mask=torch.zeros(7, 24))) == {"skipped": 1.0}
    torch.manual_seed(0)
    single = Learner(model, settings)
    batch = rl_batch(7, seed=11)
    batch.loss_mask[2:4] = 0
    expected, got = single.train_step(batch), group.train_step(batch)
    assert got["grad_norm"] == pytest.approx(expected["grad_norm"], rel=1e-4)
    assert got["trained_tokens"] == expected["trained_tokens"] == batch.loss_mask.sum().item()
    assert_same_weights(ray.get(group.weights()), single.weights())


def test_sft_step_matches_and_checkpoints_resume(model, cluster, tmp_path):
    group = LearnerGroup(str(model), replace(SETTINGS, strategy="fsdp2"), None, ranks=2, gpus_per_rank=0)
    single = single_learner(model)
    batch = rl_batch(6, seed=3)
    sft = Batch(batch.input_ids, batch.attention_mask, batch.loss_mask)  # tokens and a loss mask only
    expected = single.sft_step(sft, lr=5e-3)
    got = group.sft_step(sft, lr=5e-3)
    assert got["sft/loss"] == pytest.approx(expected["sft/loss"], rel=1e-5)
    assert got["sft/grad_norm"] == pytest.approx(expected["sft/grad_norm"], rel=1e-4)
    assert got["sft/tokens"] == expected["sft/tokens"]
    group.train_step(rl_batch(8))
    single.train_step(rl_batch(8))

    saved = Path(group.save(tmp_path, 1, {"step": 1, "data_position": {"epoch": 0, "index": 8}}))
    loaded = AutoModelForCausalLM.from_pretrained(saved).state_dict()
    assert all(torch.equal(loaded[name], value) for name, value in ray.get(group.weights()).items())
    assert_same_weights(loaded, single.weights())
    state = load_trainer_state(saved)
    moments = state["optimizer"]["state"]
    assert set(moments) == {name for name, _ in single.model.named_parameters()}
    torch.testing.assert_close(
        moments["model.norm.weight"]["exp_avg_sq"],
        single.optimizer.state[single.model.model.norm.weight]["exp_avg_sq"],
        atol=1e-9,
        rtol=1e-5,
    )

    # Resume the same checkpoint on two ranks and on one: the next step agrees.
    resumed = LearnerGroup(str(saved), replace(SETTINGS, strategy="fsdp2"), None, ranks=2, gpus_per_rank=0)
    resumed.load_state(state)
    alone = Learner(saved, SETTINGS)
    alone.load_state(state)
    resumed.train_step(rl_batch(8, seed=9))
    alone.train_step(rl_batch(8, seed=9))
    assert_same_weights(ray.get(resumed.weights()), alone.weights())
