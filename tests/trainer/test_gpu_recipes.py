"""The GPU recipe's configs (examples/swe-gpu/, docs/gpu-recipe.md): each loads, and its rollout side runs on the CPU
with a tiny model, its own sandbox backend and its sandbox counts scaled down: episodes graded by SWE-bench's rules,
the learner's memory settings (one sample per pass, gradient checkpointing, bf16 autocast) taking a step."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_helpers import ROOT, harness, rows_of
from trainer.config import load_config

RECIPES = sorted((ROOT / "examples" / "swe-gpu").glob("*.yaml"))
SCALE = 16  # sandboxes and prompts per step, divided by this on a 2-core machine


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from harness.tiny_model import init_tiny

    return init_tiny(tmp_path_factory.mktemp("tiny"))


def test_each_scale_has_a_recipe_that_fits_its_gpus():
    gpus = {}
    for path in RECIPES:
        cfg = load_config(str(path))
        placement, inference = cfg.trainer.placement, cfg.inference
        assert cfg.trainer.policy.model.path.startswith("Qwen/Qwen2.5-Coder-")
        assert cfg.generator.sandbox_backend == "overlay" and cfg.trainer.gradient_checkpointing
        assert cfg.trainer.micro_batch_samples == 1 and cfg.trainer.precision == "bf16" and cfg.trainer.logprob_chunk
        engine_gpus = 0 if placement.colocate else placement.inference_gpus
        assert inference.num_engines * inference.tensor_parallel_size == (engine_gpus or placement.learner_gpus)
        gpus[path.stem] = placement.learner_gpus + engine_gpus
    assert sorted(gpus.values()) == [1, 8, 32], gpus


@pytest.mark.slow
@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.stem)
def test_the_rollout_side_runs_on_the_cpu_scaled_down(path: Path, tiny_model, tmp_path, docker_backend):
    cfg = load_config(str(path))
    prompts = max(cfg.trainer.train_batch_size // SCALE, 1)
    workers = max(cfg.generator.env_workers // SCALE, 1)
    run_dir = tmp_path / "run"
    done = harness(
        "train",
        str(path.relative_to(ROOT)),
        f"trainer.policy.model.path={tiny_model}",
        f"trainer.output_dir={run_dir}",
        'data.train_data=["swe-demo"]',
        "data.val_data=[]",
        "trainer.max_steps=1",
        f"trainer.train_batch_size={prompts}",
        "trainer.strategy=single",
        "trainer.placement.colocate=true",
        "trainer.placement.learner_gpus=0",
        "trainer.placement.inference_gpus=0",
        "trainer.algorithm.filter_zero_variance=false",  # a random model resolves nothing: the step still runs
        "trainer.algorithm.filter_truncated=false",  # nor do its turns end before max_tokens
        "logger.type=jsonl",
        "generator.n_samples_per_prompt=2",
        "generator.max_turns=1",
        "generator.max_tokens=16",
        "generator.max_context=4096",
        "data.max_prompt_length=2048",
        f"generator.env_workers={workers}",
        "inference.engine=transformers",
        "inference.num_engines=1",
        "inference.tensor_parallel_size=1",
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [step] = rows_of(run_dir / "metrics.jsonl")
    episodes = rows_of(run_dir / "rollouts" / "step_000001.jsonl")
    assert step["step"] == 1 and len(episodes) == 2 * prompts
    assert "train/loss" in step and step["train/grad_norm"] >= 0
    for episode in episodes:
        assert episode["exit_status"] != "sandbox_error", episode["error"]
        assert episode["reward_details"], "every episode is graded"
