"""The `harness train` config: examples load, overrides apply, every mistake is named by its dotted key."""

from __future__ import annotations

import os
from pathlib import Path

import pydantic
import pytest
import yaml

from trainer.config import config_from_dict, load_config, save_config, to_dict
from trainer.config_schema import AlgorithmConfig, GeneratorConfig, InferenceConfig, LoggerConfig, TrainConfig
from trainer.errors import ConfigError, TrainerError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").rglob("*.yaml"))
HOME = os.path.expanduser("~")

MINIMAL = {"data": {"train_data": ["gsm8k"]}, "trainer": {"policy": {"model": {"path": "runs/tiny-model"}}}}


def write(tmp_path: Path, raw: dict, name: str = "run.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(raw))
    return path


def error_of(raw: dict, overrides: list[str] = ()) -> str:
    """The message of the ConfigError that MINIMAL merged with `raw`, then `overrides`, raise."""
    with pytest.raises(ConfigError) as info:
        if overrides:
            load_config(None, ["data.train_data=gsm8k", "trainer.policy.model.path=m", *overrides])
        else:
            config_from_dict(_merge({**MINIMAL}, raw))
    return str(info.value)


def _merge(base: dict, extra: dict) -> dict:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = _merge(dict(base[key]), value)
        else:
            base[key] = value
    return base


# ----------------------------------------------------------------------------- examples


def test_the_four_examples_exist():
    names = {p.relative_to(ROOT / "examples").as_posix() for p in EXAMPLES}
    assert {
        "gsm8k/gsm8k-grpo.yaml",
        "gsm8k/gsm8k-grpo-tiny-cpu.yaml",
        "swe/swe-grpo.yaml",
        "swe/swe-grpo-tiny-cpu.yaml",
    } <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.relative_to(ROOT / "examples").as_posix())
def test_every_example_loads(path: Path):
    config = load_config(str(path), [])
    assert config.data.train_data and config.trainer.policy.model.path
    assert config.trainer.run_name == path.stem
    assert config.trainer.output_dir == f"runs/{path.stem}"
    assert config.trainer.ref.model.path is None  # the run's start, or its warm-started policy (trainer/recipe.py)
    assert all(not p.startswith("~") for p in config.data.train_data + config.data.val_data)


def test_examples_say_what_the_brief_asks():
    gpu = load_config(str(ROOT / "examples/gsm8k/gsm8k-grpo.yaml"))
    assert gpu.trainer.policy.model.path == "Qwen/Qwen2.5-1.5B-Instruct"
    assert gpu.inference.engine == "vllm" and gpu.inference.num_engines == 2
    assert gpu.trainer.strategy == "fsdp2" and gpu.trainer.placement.learner_gpus == 2
    assert gpu.generator.n_samples_per_prompt == 8
    assert gpu.data.train_data == [f"{HOME}/data/gsm8k/train.parquet"]
    assert gpu.data.val_data == [f"{HOME}/data/gsm8k/validation.parquet"]

    cpu = load_config(str(ROOT / "examples/gsm8k/gsm8k-grpo-tiny-cpu.yaml"))
    assert cpu.inference.engine == "transformers" and cpu.trainer.placement.learner_gpus == 0
    assert cpu.trainer.policy.model.path == "runs/tiny-model"

    swe = load_config(str(ROOT / "examples/swe/swe-grpo.yaml"))
    assert swe.generator.max_turns == 30 and swe.inference.engine == "vllm"
    assert swe.trainer.placement.learner_gpus + swe.trainer.placement.inference_gpus == 8
    assert swe.data.train_data == ["swe-demo"]

    swe_cpu = load_config(str(ROOT / "examples/swe/swe-grpo-tiny-cpu.yaml"))
    assert swe_cpu.generator.max_turns == 4 and swe_cpu.data.train_data == ["swe-demo"]
    assert swe_cpu.inference.engine == "transformers"


# ----------------------------------------------------------------------------- defaults


def test_absent_sections_get_their_defaults(tmp_path: Path):
    config = load_config(str(write(tmp_path, MINIMAL, "mini.yaml")), [])
    assert config.generator == GeneratorConfig()
    assert config.inference == InferenceConfig()
    assert config.logger == LoggerConfig()
    assert config.trainer.algorithm == AlgorithmConfig()
    assert config.trainer.sft_warmup is None and config.trainer.max_steps is None
    assert config.trainer.ray_address is None and config.trainer.resume == "auto"
    assert config.trainer.run_name == "mini" and config.trainer.output_dir == "runs/mini"
    assert config.trainer.ref.model.path is None
    assert config.data.val_data == []


def test_empty_sections_and_no_file_mean_defaults(tmp_path: Path):
    path = tmp_path / "empty-sections.yaml"
    path.write_text("data:\n  train_data: swe-demo\ntrainer:\n  policy: {model: {path: m}}\ngenerator:\ninference:\n")
    config = load_config(str(path), [])
    assert config.data.train_data == ["swe-demo"]  # one string is a list of one
    assert config.generator == GeneratorConfig()

    config = load_config(None, ["data.train_data=gsm8k", "trainer.policy.model.path=m"])
    assert config.trainer.run_name == "train" and config.trainer.output_dir == "runs/train"


def test_logger_accepts_a_plain_string():
    config = config_from_dict({**MINIMAL, "logger": "wandb"})
    assert config.logger == LoggerConfig(type="wandb")


def test_explicit_ref_model_and_paths_are_expanded():
    config = config_from_dict(
        _merge(
            {**MINIMAL},
            {
                "trainer": {
                    "ref": {"model": {"path": "~/ref"}},
                    "output_dir": "~/out",
                    "resume": "~/ckpt/step-5",
                    "sft_warmup": {"data": "~/sft.parquet"},
                }
            },
        )
    )
    assert config.trainer.ref.model.path == f"{HOME}/ref"
    assert config.trainer.output_dir == f"{HOME}/out"
    assert config.trainer.resume == f"{HOME}/ckpt/step-5"
    assert config.trainer.sft_warmup.data == [f"{HOME}/sft.parquet"]
    assert config.trainer.sft_warmup.epochs == 1


def test_yaml_exponent_without_dot_is_a_number():
    # PyYAML reads `1e-6` as a string; the config takes it as the number that was meant.
    config = load_config(None, ["data.train_data=gsm8k", "trainer.policy.model.path=m", "trainer.learning_rate=1e-6"])
    assert config.trainer.learning_rate == 1e-6


# ----------------------------------------------------------------------------- overrides


def test_overrides_nested_lists_and_home(tmp_path: Path):
    path = write(tmp_path, MINIMAL)
    config = load_config(
        str(path),
        [
            "trainer.epochs=5",
            'data.train_data=["~/x.parquet", "swe-demo"]',
            "trainer.algorithm.advantage=rloo",
            "trainer.placement.colocate=false",
            "trainer.max_steps=100",
            "generator.temperature=0.7",
            "trainer.run_name=exp1",
            "logger=wandb",
            "logger.project=p",
        ],
    )
    assert config.trainer.epochs == 5
    assert config.data.train_data == [f"{HOME}/x.parquet", "swe-demo"]
    assert config.trainer.algorithm.advantage == "rloo"
    assert config.trainer.placement.colocate is False
    assert config.trainer.max_steps == 100
    assert config.generator.temperature == 0.7
    assert config.trainer.output_dir == "runs/exp1"
    assert config.logger == LoggerConfig(type="wandb", project="p")


def test_later_overrides_win_and_null_resets(tmp_path: Path):
    path = write(tmp_path, _merge({**MINIMAL}, {"trainer": {"max_steps": 3}}))
    config = load_config(str(path), ["trainer.epochs=2", "trainer.epochs=3", "trainer.max_steps=null"])
    assert config.trainer.epochs == 3 and config.trainer.max_steps is None


def test_override_creates_missing_sections(tmp_path: Path):
    config = load_config(str(write(tmp_path, MINIMAL)), ["trainer.sft_warmup.data=a.jsonl", "inference.num_engines=2"])
    assert config.trainer.sft_warmup.data == ["a.jsonl"]
    assert config.inference.num_engines == 2


@pytest.mark.parametrize(
    "override, words",
    [
        ("trainer.epochs", "must look like key=value"),
        ("=5", "must look like key=value"),
        ("trainer..epochs=5", "not a dotted key"),
        ("data.train_data=[unclosed", "not valid YAML"),
        ("trainer.epochs.deep=1", "trainer.epochs is 1, not a section"),
    ],
)
def test_malformed_overrides(tmp_path: Path, override: str, words: str):
    path = write(tmp_path, _merge({**MINIMAL}, {"trainer": {"epochs": 1}}))
    with pytest.raises(ConfigError, match=words.replace(".", r"\.").replace("[", r"\[")):
        load_config(str(path), [override])


# ----------------------------------------------------------------------------- validation errors


def test_unknown_key_suggests_and_lists_allowed():
    message = error_of({"trainer": {"epoch": 3}})
    assert "unknown key trainer.epoch (did you mean trainer.epochs?); allowed: epochs, max_steps," in message


def test_unknown_key_deep_and_top_level():
    assert "unknown key trainer.algorithm.kl_coeff (did you mean trainer.algorithm.kl_coef?)" in error_of(
        {"trainer": {"algorithm": {"kl_coeff": 0.1}}}
    )
    message = error_of({"trainr": {}})
    assert "unknown key trainr (did you mean trainer?); allowed: data, trainer, generator, inference, logger" in message


def test_unknown_key_knows_trl_names():
    message = error_of({"trainer": {"algorithm": {"beta": 0.1}}})
    assert "unknown key trainer.algorithm.beta (did you mean trainer.algorithm.kl_coef?)" in message


def test_unknown_key_without_a_close_match():
    message = error_of({"generator": {"zzzz": 1}})
    assert "unknown key generator.zzzz; allowed: n_samples_per_prompt, temperature" in message


def test_bad_choice_lists_the_allowed_values():
    message = error_of({"trainer": {"algorithm": {"advantage": "ppo"}}})
    assert "trainer.algorithm.advantage: 'ppo' is not one of grpo, dr_grpo, rloo" in message
    assert "inference.engine: 'sglang' is not one of transformers, vllm" in error_of(
        {"inference": {"engine": "sglang"}}
    )
    assert "logger.type: 'mlflow' is not one of jsonl, tensorboard, wandb" in error_of({"logger": "mlflow"})


@pytest.mark.parametrize(
    "raw, words",
    [
        ({"trainer": {"epochs": "five"}}, "trainer.epochs: expected an integer, got 'five'"),
        ({"trainer": {"epochs": 2.5}}, "trainer.epochs: expected an integer, got 2.5"),
        ({"trainer": {"epochs": True}}, "trainer.epochs: expected an integer, got True"),
        ({"trainer": {"learning_rate": "fast"}}, "trainer.learning_rate: expected a number, got 'fast'"),
        ({"data": {"shuffle": "yes please"}}, "data.shuffle: expected true or false, got 'yes please'"),
        ({"trainer": {"policy": {"model": {"path": 7}}}}, "trainer.policy.model.path: expected a string, got 7"),
        ({"data": {"train_data": ["ok", 3]}}, "data.train_data[1]: expected a string, got 3"),
        ({"data": {"val_data": {"a": 1}}}, "data.val_data: expected a list, got {'a': 1}"),
        (
            {"trainer": {"placement": 4}},
            "trainer.placement: expected a section with keys (colocate, learner_gpus, inference_gpus, cpu_ranks), got 4",
        ),
    ],
)
def test_wrong_types_name_the_key(raw: dict, words: str):
    assert words in error_of(raw)


def test_wrong_type_through_an_override():
    assert "trainer.epochs: expected an integer, got 'five'" in error_of({}, ["trainer.epochs=five"])


@pytest.mark.parametrize(
    "raw, words",
    [
        ({"trainer": {"epochs": 0}}, "trainer.epochs: 0 is below the minimum 1"),
        ({"trainer": {"learning_rate": 0}}, "trainer.learning_rate: 0.0 must be greater than 0.0"),
        ({"trainer": {"algorithm": {"clip_low": 1.0}}}, "trainer.algorithm.clip_low: 1.0 must be less than 1.0"),
        ({"trainer": {"algorithm": {"kl_coef": -0.1}}}, "trainer.algorithm.kl_coef: -0.1 is below the minimum 0.0"),
        ({"generator": {"top_p": 1.5}}, "generator.top_p: 1.5 is above the maximum 1.0"),
        (
            {"inference": {"gpu_memory_utilization": 0}},
            "inference.gpu_memory_utilization: 0.0 must be greater than 0.0",
        ),
    ],
)
def test_out_of_range_values(raw: dict, words: str):
    assert words in error_of(raw)


@pytest.mark.parametrize(
    "raw, words",
    [
        (
            {"trainer": {"train_batch_size": 10, "micro_batch_size": 4}},
            "trainer.train_batch_size: 10 is not divisible by trainer.micro_batch_size (4)",
        ),
        (
            {
                "trainer": {
                    "train_batch_size": 12,
                    "micro_batch_size": 4,
                    "strategy": "fsdp2",
                    "placement": {"learner_gpus": 2},
                }
            },
            "trainer.train_batch_size: 12 is not divisible by trainer.micro_batch_size (4) × trainer.placement.learner_gpus (2)",
        ),
        ({"generator": {"n_samples_per_prompt": 1}}, "generator.n_samples_per_prompt: 1 sample per prompt"),
        ({"generator": {"n_samples_per_prompt": 1}, "trainer": {"algorithm": {"advantage": "rloo"}}}, "advantage=rloo"),
        ({"trainer": {"placement": {"learner_gpus": 2}}}, "trainer.strategy: 'single' trains on one device"),
        (
            {
                "trainer": {
                    "strategy": "fsdp2",
                    "placement": {"colocate": False, "learner_gpus": 2, "inference_gpus": 2},
                },
                "inference": {"backend": "vllm", "num_engines": 1},
            },
            "inference.num_engines × inference.tensor_parallel_size = 1 but trainer.placement.inference_gpus is 2",
        ),
        (
            {"trainer": {"placement": {"colocate": True, "learner_gpus": 1, "inference_gpus": 3}}},
            "trainer.placement.inference_gpus: 3 with colocate: true",
        ),
        (
            {"generator": {"max_tokens": 5000, "max_context": 4096}},
            "generator.max_tokens: 5000 is more than generator.max_context",
        ),
        ({"data": {"max_prompt_length": 4096}}, "data.max_prompt_length: 4096 leaves no room"),
        ({"trainer": {"sft_warmup": {"epochs": 2}}}, "trainer.sft_warmup.data: required"),
        ({"trainer": {"run_name": "a/b"}}, "trainer.run_name: 'a/b' must be a plain name"),
        (
            {"trainer": {"placement": {"cpu_ranks": 2}}},
            "trainer.strategy: 'single' trains on one device but trainer.placement.cpu_ranks is 2",
        ),
        (
            {"trainer": {"strategy": "fsdp2", "placement": {"learner_gpus": 2, "cpu_ranks": 2}}},
            "trainer.placement.cpu_ranks: 2 with learner GPUs",
        ),
        ({"inference": {"weight_sync": "disk"}}, "inference.weight_sync: 'disk' is a vLLM transport"),
        (
            {"inference": {"backend": "vllm", "weight_sync": "nccl"}},
            "inference.weight_sync: 'nccl' broadcasts from the learner's GPU",
        ),
        (
            {
                "trainer": {"placement": {"learner_gpus": 1}},
                "inference": {"backend": "vllm", "tensor_parallel_size": 2},
            },
            "inference.tensor_parallel_size: 2 with colocate: true",
        ),
    ],
)
def test_cross_field_checks(raw: dict, words: str):
    assert words in error_of(raw)


def test_required_keys():
    with pytest.raises(ConfigError) as info:
        load_config(None, [])
    message = str(info.value)
    assert "data.train_data: required" in message and "trainer.policy.model.path: required" in message
    assert "2 problems" in message


def test_every_problem_is_reported_at_once():
    message = error_of({"trainer": {"epoch": 1, "algorithm": {"advantage": "ppo"}}, "generator": {"top_p": "x"}})
    assert "3 problems" in message
    for words in ("trainer.epoch", "trainer.algorithm.advantage", "generator.top_p"):
        assert words in message


def test_sft_only_run_needs_a_warm_up():
    assert "trainer.max_steps: 0 runs only the SFT warm-up" in error_of({"trainer": {"max_steps": 0}})
    config_from_dict(_merge({**MINIMAL}, {"trainer": {"max_steps": 0, "sft_warmup": {"data": ["arith-train"]}}}))


def test_error_names_the_file(tmp_path: Path):
    path = write(tmp_path, _merge({**MINIMAL}, {"trainer": {"epochs": "five"}}))
    with pytest.raises(ConfigError, match=f"in {path}"):
        load_config(str(path), [])


def test_file_problems(tmp_path: Path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(str(tmp_path / "missing.yaml"), [])
    bad = tmp_path / "bad.yaml"
    bad.write_text("trainer: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(str(bad), [])
    bad.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must hold a mapping of sections"):
        load_config(str(bad), [])


def test_config_error_is_a_trainer_error():
    assert issubclass(ConfigError, TrainerError)


# ----------------------------------------------------------------------------- saving


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.relative_to(ROOT / "examples").as_posix())
def test_round_trip_through_save_config(tmp_path: Path, path: Path):
    config = load_config(str(path), ["trainer.algorithm.kl_coef=0.01", "trainer.sft_warmup.data=[a.parquet]"])
    saved = save_config(config, tmp_path / "run" / "config.yaml")
    assert saved.exists()
    again = load_config(str(saved), [])
    assert again == config
    assert to_dict(again) == to_dict(config)
    assert yaml.safe_load(saved.read_text())["trainer"]["run_name"] == path.stem  # not the saved file's name


def test_to_dict_is_plain_data():
    config = config_from_dict(MINIMAL)
    raw = to_dict(config)
    assert raw["trainer"]["algorithm"]["advantage"] == "grpo"
    assert raw["trainer"]["placement"] == {"colocate": True, "learner_gpus": 0, "inference_gpus": 0, "cpu_ranks": 1}
    assert config_from_dict(raw) == config
    assert isinstance(config, TrainConfig)


def test_config_is_frozen():
    config = config_from_dict(MINIMAL)
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        config.trainer.epochs = 3  # type: ignore[misc]


def test_a_former_key_name_is_read_with_a_note(tmp_path):
    path = tmp_path / "old.yaml"
    path.write_text(
        "data: {train_data: [gsm8k]}\ntrainer: {policy: {model: {path: m}}}\ninference:\n  backend: vllm\n"
        "grading:\n  mode: strict\nlogger:\n  backend: wandb\n"
    )
    config = load_config(path)
    assert config.inference.engine == "vllm" and config.data.grading_mode == "refuse" and config.logger.type == "wandb"
    assert "inference.backend -> inference.engine ('vllm')" in config.skyrl_aliases
    assert "logger.backend -> logger.type ('wandb')" in config.skyrl_aliases
    assert "grading.mode -> data.grading_mode ('strict' -> 'refuse')" in config.skyrl_aliases
