"""`harness train`: GRPO on Ray, read top to bottom.

    rollouts (environment workers, inference engines)  ->  one Batch  ->  learner step
    ->  weight sync to the engines  ->  metrics, evaluation, checkpoint  ->  next step

The driver decides; Ray actors (`trainer.workers`) do. A run killed at any point resumes
from its last checkpoint with the same model, optimizer, scheduler, data position and RNG.
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np
import ray
import torch

from harness.checkpoints import resolve_checkpoint
from harness.episode import Limits
from harness.policy import Sampling
from harness.scaffolds import get_scaffold
from harness.trajectory import infrastructure_failure
from infra.plugins import PLUGINS_ENV, RegistryError, load_plugins
from infra.runlog import rewrite_rows
from tasks.task import Task
from tasks.grading.grade import with_grading_mode
from tasks.gsm8k import with_reward_mode
from tasks.taskset import load_tasks

from .algorithms import ADVANTAGE_ESTIMATORS
from .async_grpo import RolloutsAhead, get_within, rollout_submitter
from .batch import build_batch, token_rows, without_infrastructure_failures
from .checkpoint import latest_checkpoint, load_trainer_state
from .config import save_config, to_dict
from .config_schema import ModelConfig, PolicyConfig, TrainConfig
from .errors import ConfigError, TrainerError
from .learner import LearnerSettings, lr_factor
from .metrics import MetricsLogger, plot_curve, read_metrics, save_rollouts
from .weight_sync import setup_weight_sync, sync_weights

log = logging.getLogger(__name__)


def load_task_sets(
    sources: list[str], reward_mode: str | None = None, grading_mode: str = "default", backend: str | None = None
) -> list[Task]:
    """The tasks of `sources`; `backend` (the sandbox backend's name) answers whether their images are there."""
    tasks = (
        with_reward_mode([task for source in sources for task in load_tasks(source, backend)], reward_mode)
        if sources
        else []
    )
    if grading_mode != "default":
        tasks = with_grading_mode(tasks, grading_mode)
    if sources and not tasks:
        raise ConfigError(f"the task sets {sources} are empty")
    return tasks


def drop_long_prompts(tasks: list[Task], tokenizer, max_length: int) -> list[Task]:
    """The tasks whose prompt fits `data.max_prompt_length` tokens: their first messages with their tools' schemas,
    rendered by the chat template as the episode renders them (SkyRL drops longer prompts the same way)."""
    from harness.tokens import render
    from harness.tools import schemas

    texts = [render(tokenizer, task.prompt, schemas(task.tools), True, False) for task in tasks]
    lengths = [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]] if texts else []
    kept = [task for task, length in zip(tasks, lengths) if length <= max_length]
    if tasks and not kept:
        raise ConfigError(
            f"data.max_prompt_length: every one of the {len(tasks)} training prompts is longer than "
            f"{max_length} tokens; raise it (and generator.max_context with it)"
        )
    if len(kept) < len(tasks):
        log.warning(
            "dropped %d of %d training prompts longer than data.max_prompt_length (%d tokens)",
            len(tasks) - len(kept),
            len(tasks),
            max_length,
        )
    return kept


def data_order(count: int, epoch: int, seed: int, shuffle: bool) -> list[int]:
    order = list(range(count))
    if shuffle:
        random.Random(seed * 1_000_003 + epoch).shuffle(order)
    return order


def learner_settings(cfg: TrainConfig, total_steps: int) -> LearnerSettings:
    t, a, g = cfg.trainer, cfg.trainer.algorithm, cfg.generator
    return LearnerSettings(
        learning_rate=t.learning_rate,
        weight_decay=t.weight_decay,
        warmup_steps=t.warmup_steps,
        total_steps=total_steps,
        lr_scheduler=t.lr_scheduler,
        max_grad_norm=t.max_grad_norm or float("inf"),
        micro_batch_size=t.micro_batch_samples or t.micro_batch_size * g.n_samples_per_prompt,
        gradient_checkpointing=t.gradient_checkpointing,
        precision=t.precision,
        logprob_chunk=t.logprob_chunk,
        ppo_epochs=a.ppo_epochs,
        mini_batches=t.train_batch_size // (t.mini_batch_size or t.train_batch_size),
        clip_low=a.clip_low,
        clip_high=a.clip_high,
        kl_coef=a.kl_coef,
        kl_type=a.kl_type,
        loss_aggregation=a.loss_aggregation,
        max_len=g.max_tokens * g.max_turns,
        temperature=g.temperature,
        strategy=t.strategy if learner_ranks(cfg) > 1 else "single",  # FSDP2 over one rank shards nothing: one device
        is_cap=t.async_.is_cap if t.async_.enabled else None,
    )


def learner_ranks(cfg: TrainConfig) -> int:
    """One rank per learner GPU; on CPUs `placement.cpu_ranks` (several only with fsdp2, over gloo)."""
    p = cfg.trainer.placement
    return p.learner_gpus or p.cpu_ranks


def gpu_shares(cfg: TrainConfig) -> tuple[float, float]:
    """GPUs each learner rank and each engine asks Ray for. Colocated, a rank and an engine share one GPU."""
    p, inf = cfg.trainer.placement, cfg.inference
    if p.learner_gpus == 0:
        return 0, 0
    if p.colocate:
        return 0.5, 0.5
    return 1, inf.tensor_parallel_size


def engine_options(cfg: TrainConfig) -> dict:
    inf = cfg.inference
    if inf.engine != "vllm":
        return {}
    return {
        "gpu_memory_utilization": inf.gpu_memory_utilization,
        "tensor_parallel_size": inf.tensor_parallel_size,
        "weight_sync": inf.weight_sync,
        "max_model_len": cfg.generator.max_context,
    }


def _worker_env() -> dict:
    """Ray workers import this project, the user's modules (the current folder) and the same plugins."""
    path = [str(Path(__file__).resolve().parents[1]), os.getcwd(), os.environ.get("PYTHONPATH", "")]
    return {
        "env_vars": {"PYTHONPATH": os.pathsep.join(p for p in path if p), PLUGINS_ENV: os.environ.get(PLUGINS_ENV, "")}
    }


def check_extensions(cfg: TrainConfig) -> None:
    """Import the plugins and check that the advantage estimator exists, before any actor starts."""
    try:
        load_plugins(cfg.plugins)
        ADVANTAGE_ESTIMATORS.get(cfg.trainer.algorithm.advantage)
    except RegistryError as err:
        raise ConfigError(str(err)) from None


def train(cfg: TrainConfig, on_step: Callable[[int, dict], None] = lambda step, metrics: None) -> Path:
    from .workers import EngineActor, LearnerGroup, RolloutWorker

    check_extensions(cfg)

    run_dir = Path(cfg.trainer.output_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    resume_from = _resume_point(cfg, run_dir)
    if resume_from is None:
        _set_aside_previous_run(run_dir)
    save_config(cfg, run_dir / "config.yaml")
    cfg = _with_imported_models(cfg)
    model_path = cfg.trainer.policy.model.path
    if not model_path or not (Path(model_path) / "config.json").is_file():
        raise ConfigError(f"trainer.policy.model.path: no Hugging Face checkpoint at {model_path!r}")
    train_tasks = load_task_sets(
        cfg.data.train_data, cfg.data.reward_mode, cfg.data.grading_mode, cfg.generator.sandbox_backend
    )
    train_tasks = drop_long_prompts(train_tasks, _tokenizer(model_path), cfg.data.max_prompt_length)
    val_tasks = load_task_sets(
        cfg.data.val_data, cfg.data.reward_mode, cfg.data.grading_mode, cfg.generator.sandbox_backend
    )
    if not train_tasks:
        raise ConfigError("data.train_data is empty: name at least one task set")
    steps_per_epoch = max(len(train_tasks) // cfg.trainer.train_batch_size, 1)
    total_steps = steps_per_epoch * cfg.trainer.epochs
    if cfg.trainer.max_steps is not None:
        total_steps = min(total_steps, cfg.trainer.max_steps)

    start_path = str(resume_from) if resume_from else model_path
    _seed_everything(cfg.trainer.seed)
    ray.init(
        address=cfg.trainer.ray_address,
        ignore_reinit_error=True,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env=_worker_env() if cfg.trainer.ray_address is None else None,
    )
    learner_gpus, engine_gpus = gpu_shares(cfg)
    anchored = run_dir / REFERENCE  # the warm-started policy, once an SFT warm-up has made it the KL reference
    ref_path = cfg.trainer.ref.model.path or (str(anchored) if resume_from and anchored.is_dir() else model_path)
    get_scaffold(cfg.generator.scaffold)  # an unknown scaffold fails here, before the actors start
    learner = LearnerGroup(
        start_path,
        learner_settings(cfg, total_steps),
        ref_path,
        learner_ranks(cfg),
        learner_gpus,
        deadline_s=cfg.trainer.deadlines.learner_step_s,
    )
    engines = [
        EngineActor.options(num_cpus=0, num_gpus=engine_gpus, max_concurrency=256).remote(
            cfg.inference.engine, start_path, cfg.inference.num_engines, **engine_options(cfg)
        )
        for _ in range(cfg.inference.num_engines)
    ]
    workers = [
        RolloutWorker.options(num_cpus=0, max_concurrency=64).remote(
            engines[i % len(engines)],
            start_path,
            cfg.generator.sandbox_backend,
            cfg.generator.env_workers,
            cfg.generator.scaffold,
        )
        for i in range(max(len(engines), 1))
    ]
    logger = MetricsLogger(
        run_dir, cfg.logger.type, cfg.logger.project, cfg.trainer.run_name or run_dir.name, to_dict(cfg)
    )
    step, position = 0, {"epoch": 0, "index": 0}
    ahead = None
    try:
        setup_weight_sync(cfg.inference.weight_sync, learner, engines, cfg.inference.tensor_parallel_size)
        if resume_from:
            state = load_trainer_state(resume_from)
            learner.load_state(state)
            step, position = state["step"], state["data_position"]
            _truncate_metrics(run_dir, step)
            log.info("resumed from %s (step %d)", resume_from, step)
        elif cfg.trainer.sft_warmup is not None:
            _sft_warmup(cfg, learner, engines, train_tasks, logger, workers, val_tasks, run_dir)
            if cfg.trainer.algorithm.kl_coef > 0 and not cfg.trainer.ref.model.path:
                learner.anchor_reference(anchored)
        if step == 0 and val_tasks:
            logger.log(0, validate(cfg, workers, val_tasks))
        pad_id = _pad_id(start_path)
        next_batch = lambda at: _next_batch(cfg, train_tasks, at)  # noqa: E731
        if (
            cfg.trainer.async_.enabled
        ):  # rollouts of the next steps run while the learner trains (trainer/async_grpo.py)
            ahead = RolloutsAhead(
                rollout_submitter(
                    workers, cfg.generator.n_samples_per_prompt, lambda k: _sampling(cfg, k), Limits.of(cfg.generator)
                ),
                cfg.trainer.async_.staleness,
                total_steps,
                next_batch,
            )
        began = time.monotonic()
        while step < total_steps:
            prompts, start, position = next_batch(position)
            metrics = _grpo_step(
                cfg,
                prompts,
                workers,
                learner,
                engines,
                pad_id,
                step,
                ahead,
                position,
                rollouts_to=run_dir / "rollouts" / f"step_{step + 1:06d}.jsonl",
            )
            metrics |= {"data/epoch": start["epoch"], "data/index": start["index"]}
            step += 1
            if val_tasks and (
                step == total_steps or (cfg.trainer.eval_interval and step % cfg.trainer.eval_interval == 0)
            ):
                metrics |= validate(cfg, workers, val_tasks)
            logger.log(
                step, metrics | {"time/elapsed_s": time.monotonic() - began}
            )  # since this run's first step began
            on_step(step, metrics)
            if step == total_steps or (cfg.trainer.ckpt_interval and step % cfg.trainer.ckpt_interval == 0):
                learner.save(run_dir, step, {"data_position": position, "step": step})
        if total_steps == 0:  # an SFT-only run: its checkpoint is the warm-started model
            learner.save(run_dir, 0, {"data_position": position, "step": 0})
    finally:
        if ahead is not None:
            ahead.cancel()
        logger.close()
        for actor in [*learner.actors, *engines, *workers]:
            ray.kill(actor)
    plot_curve(run_dir)
    return run_dir


def _next_batch(cfg: TrainConfig, train_tasks: list[Task], position: dict) -> tuple[list[Task], dict, dict]:
    """The prompts of the next step from data `position`, the position they start at, and the one after them."""
    size = cfg.trainer.train_batch_size
    order = data_order(len(train_tasks), position["epoch"], cfg.data.seed, cfg.data.shuffle)
    if position["index"] + size > len(order):
        position = {"epoch": position["epoch"] + 1, "index": 0}
        order = data_order(len(train_tasks), position["epoch"], cfg.data.seed, cfg.data.shuffle)
    prompts = [train_tasks[i] for i in order[position["index"] : position["index"] + size]]
    return prompts, position, {"epoch": position["epoch"], "index": position["index"] + size}


def _sampling(cfg: TrainConfig, step: int) -> Sampling:
    g = cfg.generator
    return Sampling(
        temperature=g.temperature,
        top_p=g.top_p,
        max_tokens=g.max_tokens,
        seed=cfg.trainer.seed * 100_003 + step * 1_000,
    )


def _grpo_step(
    cfg: TrainConfig,
    prompts: list[Task],
    workers,
    learner,
    engines,
    pad_id: int,
    step: int,
    ahead: RolloutsAhead | None = None,
    after: dict | None = None,
    rollouts_to: Path | None = None,
) -> dict[str, float]:
    g = cfg.generator
    started = time.monotonic()
    if ahead is not None:
        groups, extra = ahead.collect(step, prompts, after, cfg.trainer.deadlines.rollout_s)
    else:
        groups, extra = _rollouts(cfg, workers, prompts, g.n_samples_per_prompt, _sampling(cfg, step), Limits.of(g)), {}
    rollout_s = time.monotonic() - started
    trajectories = [t for group in groups for t in group]
    if rollouts_to is not None:
        save_rollouts(rollouts_to, trajectories)
    crashed = [t for t in trajectories if t.exit_status == "policy_error"]
    if crashed:
        raise TrainerError(
            f"the inference engine failed during rollouts ({crashed[0].error}); no update was made, "
            "the last checkpoint is intact: rerun to resume"
        )
    a = cfg.trainer.algorithm
    groups, failures = without_infrastructure_failures(groups, a.min_valid_samples, a.max_infra_failures)
    batch = build_batch(groups, pad_id, a.advantage, a.filter_zero_variance, a.filter_truncated)
    clock = time.monotonic()
    metrics = learner.train_step(batch)
    train_s = time.monotonic() - clock
    clock = time.monotonic()
    sync_weights(cfg.inference.weight_sync, learner, engines, cfg.trainer.deadlines.weight_sync_s)
    sync_s = time.monotonic() - clock
    generated = sum(sum(mask) for t in trajectories for _, mask, _ in token_rows(t))
    policy_s = sum(t.timings.get("policy_s", 0.0) for t in trajectories)
    env_s = sum(t.timings.get("env_s", 0.0) for t in trajectories)
    return {
        **extra,
        **{f"rollout/{k}": v for k, v in failures.items()},
        **{f"train/{k}": v for k, v in batch.stats.items()},
        **{f"train/{k}": v for k, v in metrics.items()},
        "time/rollout_s": rollout_s,
        "time/generation_s_summed": policy_s,
        "time/environment_s_summed": env_s,
        "time/train_s": train_s,
        "time/weight_sync_s": sync_s,
        "throughput/generated_tokens_per_s": generated / rollout_s if rollout_s else 0.0,
        "train/turns_mean": sum(t.turns for t in trajectories) / len(trajectories),
    }


def _rollouts(cfg: TrainConfig, workers, prompts: list[Task], n: int, sampling: Sampling, limits: Limits):
    refs = rollout_submitter(workers, n, lambda _: sampling, limits)(prompts, 0)
    return get_within(refs, cfg.trainer.deadlines.rollout_s, "rollouts", "trainer.deadlines.rollout_s")


def validate(cfg: TrainConfig, workers, tasks: list[Task]) -> dict[str, float]:
    """Greedy, one sample per validation task, through the same rollout path."""
    g = cfg.generator
    sampling = Sampling(temperature=0.0, max_tokens=g.max_tokens, seed=0)
    groups = _rollouts(cfg, workers, tasks, 1, sampling, Limits.of(cfg.generator))
    trajectories = [t for group in groups for t in group]
    rewards = [t.reward for t in trajectories if not infrastructure_failure(t)]  # a crashed grading is no verdict
    scored = max(len(rewards), 1)
    return {
        "val/reward_mean": sum(rewards) / scored,
        "val/pass_rate": sum(r >= 1.0 for r in rewards) / scored,
        "val/infra_failures": float(len(trajectories) - len(rewards)),
    }


def _sft_warmup(
    cfg: TrainConfig,
    learner,
    engines,
    train_tasks: list[Task],
    logger: MetricsLogger,
    workers,
    val_tasks: list[Task],
    run_dir: Path,
) -> None:
    from transformers import AutoTokenizer

    from .sft import examples_from_parquet, examples_from_tasks, make_batches

    warm = cfg.trainer.sft_warmup
    tokenizer = AutoTokenizer.from_pretrained(cfg.trainer.policy.model.path)
    examples = []
    for source in warm.data:
        examples += (
            examples_from_parquet(source, tokenizer)
            if source.endswith(".parquet")
            else examples_from_tasks(load_tasks(source), tokenizer)
        )
    if not warm.data:
        examples = examples_from_tasks(train_tasks, tokenizer)
    size = warm.batch_size or cfg.trainer.train_batch_size * cfg.generator.n_samples_per_prompt
    pad_id = _pad_id(cfg.trainer.policy.model.path)
    batches = (
        batch
        for epoch in range(warm.epochs)
        for batch in make_batches(examples, size, pad_id, cfg.trainer.seed + epoch)
    )
    total = warm.epochs * -(-len(examples) // size)
    total = min(total, warm.max_steps) if warm.max_steps else total
    best = None  # (validation pass rate, step)
    trained = 0.0  # seconds of optimizer steps
    for number, batch in enumerate(itertools.islice(batches, warm.max_steps), start=1):
        if warm.max_seconds and trained >= warm.max_seconds:
            break
        lr = warm.learning_rate * lr_factor(number - 1, 0, total, warm.lr_scheduler)
        clock = time.monotonic()
        metrics = learner.sft_step(batch, lr) | {"sft/step_s": time.monotonic() - clock}
        trained += metrics["sft/step_s"]
        if warm.eval_interval and (number % warm.eval_interval == 0 or number == total):
            best = max(
                best or (-1.0, 0),
                _sft_checkpoint(cfg, learner, engines, workers, val_tasks, run_dir, number, metrics),
                key=lambda result: (result[0], -result[1]),
            )
            (run_dir / "checkpoints" / "sft_best").write_text(f"sft_step_{best[1]}\n")
        logger.log(0, {**metrics, "sft/step": number, "sft/lr": lr})
    learner.reset_optimizer()
    sync_weights(cfg.inference.weight_sync, learner, engines, cfg.trainer.deadlines.weight_sync_s)


def _sft_checkpoint(
    cfg: TrainConfig, learner, engines, workers, val_tasks: list[Task], run_dir: Path, number: int, metrics: dict
) -> tuple[float, int]:
    """Validate the warm-up's model so far and save it as `checkpoints/sft_step_N`; adds `sft/val_*` to `metrics`."""
    sync_weights(cfg.inference.weight_sync, learner, engines, cfg.trainer.deadlines.weight_sync_s)
    scores = validate(cfg, workers, val_tasks)
    metrics.update({key.replace("val/", "sft/val_"): value for key, value in scores.items()})
    learner.save_model(run_dir / "checkpoints" / f"sft_step_{number}")
    return scores["val/pass_rate"], number


def _resume_point(cfg: TrainConfig, run_dir: Path) -> Path | None:
    if cfg.trainer.resume == "never":
        return None
    if cfg.trainer.resume == "auto":
        return latest_checkpoint(run_dir)
    path = Path(cfg.trainer.resume).expanduser()
    if not (path / "trainer_state.pt").exists():
        raise ConfigError(f"trainer.resume: {path} is not a checkpoint of this trainer (no trainer_state.pt)")
    return path


REFERENCE = "reference"
RUN_OUTPUTS = ("config.yaml", "metrics.jsonl", "tensorboard", "checkpoints", "reward_curve.png", "rollouts", REFERENCE)


def _set_aside_previous_run(run_dir: Path) -> None:
    """A fresh start in a folder that holds an earlier run: move that run's outputs into `previous/<time>/`
    rather than mixing its metrics with the new run's or deleting its checkpoints."""
    found = [run_dir / name for name in RUN_OUTPUTS if (run_dir / name).exists()]
    if not found:
        return
    (run_dir / "previous").mkdir(exist_ok=True)
    aside = Path(tempfile.mkdtemp(prefix=time.strftime("%Y%m%d-%H%M%S-"), dir=run_dir / "previous"))
    for path in found:
        path.rename(aside / path.name)
    log.info("%s held an earlier run; its outputs are now in %s", run_dir, aside)


def _truncate_metrics(run_dir: Path, step: int) -> None:
    """Forget metrics of steps after the checkpoint: they will be run again."""
    rewrite_rows(run_dir / "metrics.jsonl", [m for m in read_metrics(run_dir) if m["step"] <= step])


def _with_imported_models(cfg: TrainConfig) -> TrainConfig:
    """A GGUF file as a model path trains from the Hugging Face folder imported from it (harness.checkpoints)."""
    t = cfg.trainer
    policy, ref = (
        PolicyConfig(model=ModelConfig(path=resolve_checkpoint(path) if path else path))
        for path in (t.policy.model.path, t.ref.model.path)
    )
    return cfg.model_copy(update={"trainer": t.model_copy(update={"policy": policy, "ref": ref})})


def _tokenizer(model_path: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_path)


def _pad_id(model_path: str) -> int:
    tokenizer = _tokenizer(model_path)
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
