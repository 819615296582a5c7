"""SkyRL's configs load: its key names and shapes are aliases of ours, every mapping is noted,
and a key harness cannot honour is an error that says so."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from tests.cli_helpers import harness
from trainer.config import config_from_dict, load_config, save_config
from trainer.errors import ConfigError

HOME = os.path.expanduser("~")

# The GRPO YAML of the SkyRL walkthrough, exactly as users have it.
WALKTHROUGH_YAML = """\
data:
  train_data: ["~/data/gsm8k/train.parquet"]
  val_data: ["~/data/gsm8k/validation.parquet"]

trainer:
  algorithm:
    name: grpo
    advantage_estimator: grpo
  policy:
    model:
      path: Qwen/Qwen2.5-1.5B-Instruct   # Start small; scale to 7B–32B
  epochs: 2                             # Increase for real training
  strategy: fsdp2                       # Or ddp for single node
  placement:
    colocate_all: true
    policy_num_gpus_per_node: 4         # Adjust to your hardware

inference:
  backend: vllm                         # Fast inference for rollouts

logger: wandb
"""

# The overrides of SkyRL's examples/train/gsm8k/run_gsm8k.sh (NUM_GPUS=4, LOGGER=wandb, INFERENCE_BACKEND=vllm,
# DATA_DIR=~/data/gsm8k), in its order; its `trainer.policy_mini_batch_size=256` is tested on its own below.
RUN_GSM8K = [
    "data.train_data=['~/data/gsm8k/train.parquet']",
    "data.val_data=['~/data/gsm8k/validation.parquet']",
    "trainer.algorithm.advantage_estimator=grpo",
    "trainer.policy.model.path=Qwen/Qwen2.5-1.5B-Instruct",
    "trainer.placement.colocate_all=true",
    "trainer.strategy=fsdp",
    "trainer.placement.policy_num_gpus_per_node=4",
    "trainer.placement.critic_num_gpus_per_node=4",
    "trainer.placement.ref_num_gpus_per_node=4",
    "generator.inference_engine.num_engines=4",
    "generator.inference_engine.tensor_parallel_size=1",
    "trainer.epochs=20",
    "trainer.eval_batch_size=1024",
    "trainer.eval_before_train=true",
    "trainer.eval_interval=5",
    "trainer.update_epochs_per_batch=1",
    "trainer.train_batch_size=1024",
    "trainer.micro_forward_batch_size_per_gpu=64",
    "trainer.micro_train_batch_size_per_gpu=64",
    "trainer.ckpt_interval=10",
    "trainer.max_prompt_length=512",
    "generator.sampling_params.max_generate_length=1024",
    "trainer.policy.optimizer_config.lr=1.0e-6",
    "trainer.algorithm.use_kl_loss=true",
    "generator.inference_engine.backend=vllm",
    "generator.inference_engine.run_engines_locally=true",
    "generator.inference_engine.weight_sync_backend=nccl",
    "generator.batched=true",
    "environment.env_class=gsm8k",
    "generator.n_samples_per_prompt=5",
    "generator.inference_engine.gpu_memory_utilization=0.8",
    "trainer.logger=wandb",
    "trainer.project_name=gsm8k",
    "trainer.run_name=gsm8k_test",
    "trainer.resume_mode=null",
    "trainer.log_path=/tmp/skyrl-logs",
    "trainer.ckpt_path=~/ckpts/gsm8k_1.5B_ckpt",
]


@pytest.fixture
def walkthrough(tmp_path: Path) -> Path:
    path = tmp_path / "gsm8k-grpo.yaml"
    path.write_text(WALKTHROUGH_YAML)
    return path


def test_the_walkthrough_yaml_loads_as_written(walkthrough: Path):
    config = load_config(walkthrough)
    t = config.trainer
    assert t.algorithm.advantage == "grpo" and t.epochs == 2 and t.strategy == "fsdp2"
    assert t.placement.colocate is True and t.placement.learner_gpus == 4
    assert config.inference.engine == "vllm" and config.inference.num_engines == 4  # one engine per colocated GPU
    assert config.logger.type == "wandb"
    assert config.data.train_data == [f"{HOME}/data/gsm8k/train.parquet"]
    assert t.policy.model.path == "Qwen/Qwen2.5-1.5B-Instruct"
    notes = "\n".join(config.skyrl_aliases)
    assert "trainer.placement.colocate_all -> trainer.placement.colocate (True)" in notes
    assert "trainer.algorithm.advantage_estimator -> trainer.algorithm.advantage ('grpo')" in notes
    assert "policy_num_gpus_per_node × policy_num_nodes -> trainer.placement.learner_gpus (4 × 1 = 4)" in notes


def test_resolved_config_notes_the_mapping_and_reads_back(walkthrough: Path, tmp_path: Path):
    config = load_config(walkthrough, ["trainer.policy.model.path=/models/tiny"])
    saved = save_config(config, tmp_path / "config.yaml")
    text = saved.read_text()
    assert (
        "# SkyRL keys read as aliases of ours:\n#   trainer.algorithm.name -> trainer.algorithm.advantage ('grpo')"
        in text
    )
    body = yaml.safe_load(text)
    assert "skyrl_aliases" not in body and body["trainer"]["placement"]["learner_gpus"] == 4
    assert load_config(saved) == config


def test_skyrl_run_script_overrides(tmp_path: Path):
    config = load_config(None, RUN_GSM8K)
    t, g, inf = config.trainer, config.generator, config.inference
    assert config.data.train_data == [f"{HOME}/data/gsm8k/train.parquet"]
    assert t.algorithm.advantage == "grpo" and t.strategy == "fsdp2" and t.placement.learner_gpus == 4
    assert inf.num_engines == 4 and inf.tensor_parallel_size == 1 and inf.engine == "vllm"
    assert inf.gpu_memory_utilization == 0.8 and inf.weight_sync == "load"
    assert t.epochs == 20 and t.eval_interval == 5 and t.ckpt_interval == 10 and t.algorithm.ppo_epochs == 1
    assert t.train_batch_size == 1024 and config.data.max_prompt_length == 512 and g.max_tokens == 1024
    assert t.micro_batch_samples == 64  # SkyRL's micro-batch counts samples, as ours does with this key
    from trainer.recipe import learner_settings

    assert learner_settings(config, total_steps=10).micro_batch_size == 64
    assert t.learning_rate == 1e-6 and t.algorithm.kl_coef == 0.001  # SkyRL's default coefficient
    assert g.n_samples_per_prompt == 5
    assert config.logger.type == "wandb" and config.logger.project == "gsm8k" and t.run_name == "gsm8k_test"
    assert t.resume == "never" and t.output_dir == f"{HOME}/ckpts/gsm8k_1.5B_ckpt"
    notes = "\n".join(config.skyrl_aliases)
    for no_effect in (
        "generator.batched",
        "trainer.micro_forward_batch_size_per_gpu",
        "environment.env_class",
        "trainer.placement.critic_num_gpus_per_node",
        "trainer.log_path",
    ):
        assert f"{no_effect}: " in notes and "has no effect here (" in notes
    assert "generator.inference_engine.weight_sync_backend -> inference.weight_sync ('nccl' -> 'load')" in notes


def test_skyrl_overrides_on_our_yaml_win_in_order():
    config = load_config(
        None,
        [
            "data.train_data=gsm8k",
            "trainer.policy.model.path=m",
            "trainer.learning_rate=0.5",
            "trainer.policy.optimizer_config.lr=0.25",
            "generator.sampling_params.temperature=0.7",
            "generator.temperature=0.9",
        ],
    )
    assert config.trainer.learning_rate == 0.25 and config.generator.temperature == 0.9


def test_mini_batches_are_optimizer_steps_and_must_divide_the_batch():
    config = load_config(None, [*RUN_GSM8K, "trainer.policy_mini_batch_size=256"])  # as run_gsm8k.sh passes it
    assert config.trainer.mini_batch_size == 256 and config.trainer.train_batch_size == 1024
    assert "trainer.policy_mini_batch_size -> trainer.mini_batch_size (256)" in config.skyrl_aliases
    with pytest.raises(
        ConfigError, match=r"trainer.mini_batch_size: 300 does not divide trainer.train_batch_size \(1024\)"
    ):
        load_config(None, [*RUN_GSM8K, "trainer.policy_mini_batch_size=300"])


@pytest.mark.parametrize(
    "override, words",
    [
        (
            "trainer.algorithm.advantage_estimator=gae",
            "'gae' is not supported by harness (group-relative estimators only; gae needs a critic",
        ),
        ("trainer.strategy=megatron", "trainer.strategy: 'megatron' is not supported by harness"),
        ("trainer.strategy=ddp", "trainer.strategy: 'ddp' is not supported by harness"),
        (
            "trainer.policy.model.lora.rank=32",
            "trainer.policy.model.lora.rank: SkyRL's trainer.policy.model.lora section is not supported by harness: LoRA",
        ),
        (
            "generator.inference_engine.enable_prefix_caching=false",
            "generator.inference_engine.enable_prefix_caching: a SkyRL key that harness does not support",
        ),
        (
            "generator.inference_engine.run_engines_locally=false",
            "run_engines_locally: False is not supported by harness: engines are Ray actors",
        ),
        ("trainer.algorithm.use_kl_in_reward=true", "use_kl_in_reward: True is not supported by harness"),
        ("generator.sampling_params.top_k=20", "top_k: 20 is not supported by harness: top-k sampling is not built"),
        ("trainer.eval_before_train=false", "eval_before_train: False is not supported by harness"),
        ("trainer.resume_mode=from_path", "trainer.resume_mode: from_path needs trainer.resume_path"),
        ("trainer.critic.model.path=x", "SkyRL's trainer.critic section is not supported by harness"),
    ],
)
def test_unsupported_skyrl_keys_are_errors_that_say_so(override: str, words: str):
    with pytest.raises(ConfigError) as info:
        load_config(None, ["data.train_data=gsm8k", "trainer.policy.model.path=m", override])
    assert words in str(info.value)


def test_combined_keys():
    base = ["data.train_data=gsm8k", "trainer.policy.model.path=m"]
    off = load_config(None, [*base, "trainer.algorithm.kl_loss_coef=0.05", "trainer.algorithm.use_kl_loss=false"])
    assert off.trainer.algorithm.kl_coef == 0.0
    on = load_config(None, [*base, "trainer.algorithm.use_kl_loss=true", "trainer.algorithm.kl_loss_coef=0.05"])
    assert on.trainer.algorithm.kl_coef == 0.05
    dr = load_config(None, [*base, "trainer.algorithm.grpo_norm_by_std=false"])
    assert dr.trainer.algorithm.advantage == "dr_grpo"
    path = load_config(None, [*base, "trainer.resume_mode=from_path", "trainer.resume_path=~/ckpts/step_10"])
    assert path.trainer.resume == f"{HOME}/ckpts/step_10"
    cpu = load_config(None, [*base, "trainer.placement.policy_num_gpus_per_node=0"])
    assert cpu.trainer.placement.learner_gpus == 0
    sched = load_config(
        None,
        [
            *base,
            "trainer.policy.optimizer_config.scheduler=constant_with_warmup",
            "trainer.policy.optimizer_config.num_warmup_steps=3",
        ],
    )
    assert sched.trainer.lr_scheduler == "constant" and sched.trainer.warmup_steps == 3


def test_a_key_and_its_alias_disagreeing_in_one_file_is_an_error():
    raw = {
        "data": {"train_data": ["gsm8k"]},
        "trainer": {
            "policy": {"model": {"path": "m"}},
            "learning_rate": 0.1,
            "algorithm": {"name": "grpo", "advantage_estimator": "rloo"},
        },
    }
    with pytest.raises(ConfigError) as info:
        config_from_dict(raw)
    assert "trainer.algorithm.advantage_estimator: 'rloo' disagrees with trainer.algorithm.advantage: 'grpo'" in str(
        info.value
    )
    raw["trainer"]["policy"]["optimizer_config"] = {"lr": 0.1}
    raw["trainer"]["algorithm"] = {"name": "grpo"}
    assert config_from_dict(raw).trainer.learning_rate == 0.1


@pytest.mark.parametrize("form", ["--config", "positional"])
def test_cli_takes_the_config_with_or_without_flag(walkthrough: Path, tmp_path: Path, form: str):
    out = tmp_path / f"run-{form}"
    args = ["--config", str(walkthrough)] if form == "--config" else [str(walkthrough)]
    result = harness(
        "train",
        *args,
        "trainer.policy.model.path=/nonexistent/model",
        f"trainer.output_dir={out}",
        "trainer.policy.optimizer_config.lr=3.0e-6",
        timeout=120,
    )
    assert result.returncode == 1
    said = " ".join(result.stdout.split())  # rich wraps long lines
    assert "SkyRL key: trainer.placement.colocate_all -> trainer.placement.colocate (True)" in said
    assert "no Hugging Face checkpoint at '/nonexistent/model'" in said
    saved = (out / "config.yaml").read_text()  # written before the model is loaded
    assert "#   trainer.policy.optimizer_config.lr -> trainer.learning_rate (3e-06)" in saved
    assert yaml.safe_load(saved)["trainer"]["learning_rate"] == 3e-6


def test_cli_refuses_two_configs(walkthrough: Path):
    result = harness("train", "--config", str(walkthrough), str(walkthrough), timeout=60)
    assert result.returncode == 1 and "two configs" in " ".join(result.stdout.split())


def test_the_docs_table_lists_every_skyrl_key():
    from trainer.skyrl_compat import ALIASES, REFUSED_SECTIONS

    page = (Path(__file__).resolve().parents[2] / "docs" / "skyrl.md").read_text()
    table = page[page.index("| SkyRL key | harness |") :]
    missing = [key for key in ALIASES if f"| `{key}` |" not in table]
    missing += [key for key in REFUSED_SECTIONS if f"| `{key}.*` | refused" not in table]
    assert not missing, f"add these SkyRL keys to the table in docs/skyrl.md: {missing}"
