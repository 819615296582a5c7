"""GRPO step on CPU: our learner against TRL's GRPOTrainer, same model, batch and settings.

    python -m bench.trainer_bench [--steps 5] [--prompts 8] [--group 8] [--completion-length 128]
                                  [--micro-batch N] [--vocab N] [--threads 1] [--full-steps 3]

Both sides train the same tiny random Qwen2 (`harness.tiny_model.init_tiny`, hidden 128, 4
layers, vocabulary 2048 by default) in float32 on the CPU, with the same number of torch
threads (`--threads`, 1 by default: on a shared machine more threads mostly measure the
scheduler), on the same rollout batch: `--prompts` prompts of `--prompt-length` tokens, `--group`
completions each of between half and all of `--completion-length` tokens (right-padded), group
advantages from 0/1 rewards, and old log-probs taken from the starting weights plus noise (so
that the ratios move off 1 and some tokens are clipped). Same loss (DAPO token mean: TRL's
`loss_type="dapo"` is our `token_mean`; clip 0.2 / 0.28, beta 0, temperature 1), same
optimizer (`torch.optim.AdamW`, lr 1e-5, no weight decay, constant schedule), gradient norm
clipped at 1.0, the whole batch in one forward (`--micro-batch` splits it on both sides: our
`micro_batch_size`, TRL's gradient accumulation). As a check that both sides do the same step,
the table shows both losses at step 1; they agree to float rounding. (With `--micro-batch`
below the batch they differ a little by design: our `token_mean` weights micro-batches by their
sequences, as TRL's `bnpo` does, while TRL's `dapo` divides by the whole batch's tokens.)

Measured (the headline, "learner step"): one optimizer step on an already generated batch.
- ours: `trainer.learner.Learner.train_step(Batch)`.
- TRL: `GRPOTrainer.train()` itself, with `_generate_and_score_completions` replaced by a
  function that hands back the prepared batch in the dict TRL builds (prompt and completion
  ids and masks, advantages, `old_per_token_logps`, `num_items_in_batch`); a step is timed
  from the Trainer's `on_step_begin` to its `on_step_end` callback: `training_step`
  (`_prepare_inputs`, `compute_loss` -> `_compute_loss` with TRL's fused, chunked LM head,
  backward), gradient clipping, `optimizer.step()`, `lr_scheduler.step()`, `zero_grad()`.
TRL's defaults that would make the sides differ are pinned: `bf16=False` (TRL autocasts to
bf16 by default), `activation_checkpointing=False` (on by default; ours has none), and
`optim="adamw_torch"` (TRL's default is the fused AdamW kernel).

Also measured, reported separately ("full step", `--full-steps`, 0 to skip): generation +
scoring + the same update. ours: `HFPolicy.generate_ids_batch` (its own copy of the weights,
as our inference engines have), `build_batch`, `Learner.train_step`, then the weight sync into
the policy; TRL: `GRPOTrainer.train()` as it is, generating with `model.generate`. Both sample
`--completion-length` new tokens at most, temperature 1, from the same prompt texts, with the
same reward function.

Throughput is completion tokens trained per second (the tokens in the loss), the median over
the timed steps after `--warmup` untimed ones. The same per CPU-second of the process
(`time.process_time`) is shown beside it: on a machine that other jobs share, wall-clock
figures move with their load, CPU time much less. Memory is each process's peak resident set:
every run is a fresh subprocess, so the figure is that side's own peak (read as `VmHWM`, see
`max_rss_mb` for why not `ru_maxrss`); "step memory" is the peak minus the peak before the
first step (libraries, model and batch loaded), the part the training step itself adds.
tracemalloc is not used: torch's CPU tensors are not allocated through Python's allocator.
The sides run `--rounds` times each, the order flipping every round, so that drift in the
machine's load falls on both. `--vocab` grows the vocabulary toward a real model's, where the
LM head dominates a step.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

TARGET_SPEED = 1.0  # ours / TRL tokens per second: at least
TARGET_MEMORY = 1.0  # ours / TRL peak RSS: at most
RESULT_TAG = "TRAINER_BENCH_RESULT "
SIDES = ("ours", "trl")
CLIP_LOW, CLIP_HIGH = 0.2, 0.28
OLD_LOGPROB_NOISE = 0.1
ROOT = Path(__file__).resolve().parents[1]


class BenchError(RuntimeError):
    pass


@dataclass
class Spec:
    """What one worker process runs; passed to it as JSON."""

    side: str  # ours | trl
    mode: str  # learner | full
    checkpoint: str
    batch: str  # torch.save'd rollout batch (learner mode) or prompt texts (full mode)
    out_dir: str
    steps: int
    warmup: int
    prompts: int
    group: int
    completion_length: int
    micro_batch: int
    threads: int
    learning_rate: float


def max_rss_mb() -> float:
    """This process's peak resident set so far, in MiB: `VmHWM` of /proc/self/status.

    Not `getrusage(RUSAGE_SELF).ru_maxrss`: on Linux that also counts the parent's resident set at the fork, carried
    over the exec, so a worker started by this benchmark (which holds torch, TRL and a model) would report at least
    the parent's size. `VmHWM` belongs to the worker's own address space. ru_maxrss is the fallback without /proc.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


# ----------------------------------------------------------------------------------------------- the shared batch


def regular_token_range(tokenizer) -> int:
    """Token ids below this are plain BPE tokens (the special and tool tokens come last)."""
    return min(tokenizer.convert_tokens_to_ids(t) for t in tokenizer.all_special_tokens)


def make_rollout_batch(
    checkpoint: Path, prompts: int, group: int, prompt_length: int, completion_length: int, seed: int = 0
) -> dict:
    """One rollout batch in TRL's layout (the dict `_generate_and_score_completions` returns), plus rewards.

    Prompts have exactly `prompt_length` tokens (no padding), so TRL's `[prompt | completion]` and our right-padded
    sequences are the same tensors. Completions end in EOS unless they fill `completion_length`.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainer.algorithms import group_advantages, sequence_logprobs

    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    pad_id, eos_id = tokenizer.pad_token_id, tokenizer.eos_token_id
    regular = regular_token_range(tokenizer)
    rows = prompts * group
    gen = torch.Generator().manual_seed(seed)
    prompt_ids = torch.randint(0, regular, (prompts, prompt_length), generator=gen).repeat_interleave(group, 0)
    lengths = torch.randint(completion_length // 2, completion_length + 1, (rows,), generator=gen).clamp(min=1)
    lengths[0] = completion_length  # the padded width is the full completion length
    completion_mask = (torch.arange(completion_length) < lengths[:, None]).long()
    completion_ids = torch.randint(0, regular, (rows, completion_length), generator=gen)
    ended = lengths < completion_length
    completion_ids[ended, lengths[ended] - 1] = eos_id
    completion_ids = completion_ids.masked_fill(completion_mask == 0, pad_id)
    rewards = torch.randint(0, 2, (rows,), generator=gen).float()
    rewards[0::group], rewards[1::group] = 1.0, 0.0  # every group has a spread, so every sample has an advantage
    advantages = group_advantages(rewards, group, method="grpo", eps=1e-4)  # TRL's scale_rewards="group"

    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32).eval()
    input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
    attention_mask = torch.cat([torch.ones_like(prompt_ids), completion_mask], dim=1)
    response_mask = torch.cat([torch.zeros_like(prompt_ids), completion_mask], dim=1)
    with torch.no_grad():
        logprobs = sequence_logprobs(model, input_ids, attention_mask, response_mask)[:, prompt_length:]
    old = (logprobs + OLD_LOGPROB_NOISE * torch.randn(logprobs.shape, generator=gen)) * completion_mask
    return {
        "prompt_ids": prompt_ids,
        "prompt_mask": torch.ones_like(prompt_ids),
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "advantages": advantages,
        "num_items_in_batch": completion_mask.sum(),
        "old_per_token_logps": old,
        "rewards": rewards,
    }


def grow_vocabulary(checkpoint: Path, size: int) -> None:
    """Resize the checkpoint's (tied) embedding and LM head to `size` rows; the new ids are never sampled in the
    prepared batch, but every logit row has `size` entries, which is what makes the LM head costly in real models."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
    if size < model.config.vocab_size:
        raise SystemExit(f"--vocab {size} is below the tokenizer's {model.config.vocab_size} tokens")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model.resize_token_embeddings(size, mean_resizing=False)
    model.save_pretrained(checkpoint, safe_serialization=True)


def prompt_texts(checkpoint: Path, prompts: int, prompt_length: int, seed: int = 0) -> list[str]:
    """Plain-text prompts of about `prompt_length` tokens for the full-step runs (both sides tokenize them)."""
    import torch
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, regular_token_range(tokenizer), (prompts, prompt_length), generator=gen)
    return [tokenizer.decode(row) for row in ids.tolist()]


def reward_of(text: str) -> float:
    """The reward both sides' full steps use: cheap, deterministic, and spread within a group."""
    return float(len(text) % 2)


# ----------------------------------------------------------------------------------------------- the workers


def run_ours(spec: Spec) -> dict:
    import torch

    from trainer.batch import Batch
    from trainer.learner import Learner, LearnerSettings

    settings = LearnerSettings(
        learning_rate=spec.learning_rate,
        weight_decay=0.0,
        lr_scheduler="constant",
        max_grad_norm=1.0,
        micro_batch_size=spec.micro_batch,
        clip_low=CLIP_LOW,
        clip_high=CLIP_HIGH,
        kl_coef=0.0,
        loss_aggregation="token_mean",
        temperature=1.0,
        total_steps=spec.warmup + spec.steps,
    )
    learner = Learner(spec.checkpoint, settings)
    if spec.mode == "learner":
        data = torch.load(spec.batch)
        prompt_length = data["prompt_ids"].shape[1]
        batch = Batch(
            input_ids=torch.cat([data["prompt_ids"], data["completion_ids"]], dim=1),
            attention_mask=torch.cat([data["prompt_mask"], data["completion_mask"]], dim=1),
            loss_mask=torch.cat([torch.zeros_like(data["prompt_mask"]), data["completion_mask"]], dim=1).float(),
            old_logprobs=torch.nn.functional.pad(data["old_per_token_logps"], (prompt_length, 0)),
            advantages=data["advantages"],
            rewards=data["rewards"],
            groups=torch.arange(len(data["rewards"])) // spec.group,
        )

        def step(index: int) -> tuple[int, float]:
            metrics = learner.train_step(batch)
            return int(metrics["trained_tokens"]), metrics["loss"]
    else:
        step = _our_full_step(spec, learner)
    setup_rss = max_rss_mb()
    times, cpu_times, tokens, losses = [], [], [], []
    for index in range(spec.warmup + spec.steps):
        started, cpu_started = time.perf_counter(), time.process_time()
        trained, loss = step(index)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        losses.append(loss)
        if index >= spec.warmup:
            times.append(elapsed)
            cpu_times.append(cpu)
            tokens.append(trained)
    return {
        "step_s": times,
        "step_cpu_s": cpu_times,
        "tokens": tokens,
        "first_loss": losses[0],
        "setup_rss_mb": setup_rss,
    }


def _our_full_step(spec: Spec, learner):
    """Rollout with HFPolicy (its own weights, as our engines), build_batch, train_step, weight sync."""
    import torch

    from harness.policies.hf import HFPolicy
    from harness.policy import Sampling
    from harness.trajectory import Trajectory
    from trainer.batch import build_batch

    policy = HFPolicy(spec.checkpoint, device="cpu", dtype=torch.float32)
    texts = json.loads(Path(spec.batch).read_text())
    prompts = [policy.tokenizer(text=t)["input_ids"] for t in texts]

    def step(index: int) -> tuple[int, float]:
        requests = [p for p in prompts for _ in range(spec.group)]
        completions = policy.generate_ids_batch(
            requests, Sampling(temperature=1.0, max_tokens=spec.completion_length, seed=1000 * index)
        )
        trajectories = [
            Trajectory(
                task_id=str(i // spec.group),
                sample=i % spec.group,
                exit_status="submitted",
                reward=reward_of(c.text),
                token_ids=list(prompt) + c.token_ids,
                loss_mask=[0] * len(prompt) + [1] * len(c.token_ids),
                logprobs=[0.0] * len(prompt) + c.logprobs,
            )
            for i, (prompt, c) in enumerate(zip(requests, completions))
        ]
        groups = [trajectories[i : i + spec.group] for i in range(0, len(trajectories), spec.group)]
        batch = build_batch(groups, policy.pad_id, "grpo", filter_zero_variance=False, filter_truncated=False)
        metrics = learner.train_step(batch)
        policy.load_weights(learner.weights())
        return int(metrics["trained_tokens"]), metrics["loss"]

    return step


def run_trl(spec: Spec) -> dict:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    rows = spec.prompts * spec.group
    accumulation = rows // spec.micro_batch
    args = GRPOConfig(
        output_dir=str(Path(spec.out_dir) / "trl"),
        use_cpu=True,
        bf16=False,
        report_to="none",
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
        activation_checkpointing=False,
        seed=0,
        dataloader_num_workers=0,
        per_device_train_batch_size=spec.micro_batch,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=accumulation,
        num_generations=spec.group,
        max_completion_length=spec.completion_length,
        loss_type="dapo",
        beta=0.0,
        epsilon=CLIP_LOW,
        epsilon_high=CLIP_HIGH,
        temperature=1.0,
        learning_rate=spec.learning_rate,
        lr_scheduler_type="constant",
        optim="adamw_torch",
        weight_decay=0.0,
        max_grad_norm=1.0,
        max_steps=spec.warmup + spec.steps,
    )
    if spec.mode == "learner":
        texts = ["learner step"] * spec.prompts
    else:
        texts = json.loads(Path(spec.batch).read_text())
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(spec.checkpoint, dtype=torch.float32),
        processing_class=AutoTokenizer.from_pretrained(spec.checkpoint),
        train_dataset=Dataset.from_dict({"prompt": texts}),
        reward_funcs=lambda completions, **_: [reward_of(c) for c in completions],
        args=args,
    )
    step_tokens: list[int] = []
    if spec.mode == "learner":
        data = torch.load(spec.batch)
        prepared = {k: v for k, v in data.items() if k != "rewards"}

        def generate_and_score(inputs):  # the batch as TRL's own generation would hand it over
            step_tokens.append(int(prepared["num_items_in_batch"]))
            return dict(prepared)
    else:
        generate = trainer._generate_and_score_completions

        def generate_and_score(inputs):
            output = generate(inputs)
            step_tokens.append(int(output["completion_mask"].sum()))
            return output

    trainer._generate_and_score_completions = generate_and_score

    losses: list[float] = []
    compute_loss = trainer.compute_loss

    def recorded_loss(*a, **kw):
        loss = compute_loss(*a, **kw)
        losses.append(loss.item())
        return loss

    trainer.compute_loss = recorded_loss

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.started, self.cpu_started, self.times, self.cpu_times = 0.0, 0.0, [], []

        def on_step_begin(self, args, state, control, **kwargs):
            self.started, self.cpu_started = time.perf_counter(), time.process_time()

        def on_step_end(self, args, state, control, **kwargs):
            self.times.append(time.perf_counter() - self.started)
            self.cpu_times.append(time.process_time() - self.cpu_started)

    timer = StepTimer()
    trainer.add_callback(timer)
    setup_rss = max_rss_mb()
    trainer.train()
    if len(timer.times) != spec.warmup + spec.steps:
        raise BenchError(f"TRL ran {len(timer.times)} optimizer steps, expected {spec.warmup + spec.steps}")
    return {
        "step_s": timer.times[spec.warmup :],
        "step_cpu_s": timer.cpu_times[spec.warmup :],
        "tokens": step_tokens[spec.warmup :],
        "first_loss": sum(losses[:accumulation]),
        "setup_rss_mb": setup_rss,
    }


def worker(spec: Spec) -> None:
    import torch

    torch.set_num_threads(spec.threads)
    result = run_ours(spec) if spec.side == "ours" else run_trl(spec)
    result |= {"peak_rss_mb": max_rss_mb(), "threads": torch.get_num_threads()}
    print(RESULT_TAG + json.dumps(result), flush=True)


def run_worker(spec: Spec, timeout: float = 3600) -> dict:
    """One side in a fresh interpreter; its stdout's tagged line is the result."""
    threads = str(spec.threads)
    python_path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = os.environ | {
        "OMP_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "CUDA_VISIBLE_DEVICES": "",
        "PYTHONPATH": python_path,
    }
    done = subprocess.run(
        [sys.executable, "-m", "bench.trainer_bench", "--worker", json.dumps(asdict(spec))],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_TAG)]
    if done.returncode != 0 or not lines:
        raise BenchError(
            f"the {spec.side} worker ({spec.mode}) failed (exit {done.returncode}):\n"
            f"{done.stderr[-4000:]}\n{done.stdout[-2000:]}"
        )
    return json.loads(lines[-1][len(RESULT_TAG) :])


# ----------------------------------------------------------------------------------------------- the comparison


def summarize(runs: list[dict]) -> dict:
    """Median over every timed step of every run of one side; memory: the median over runs."""
    per_step = [tokens / seconds for run in runs for tokens, seconds in zip(run["tokens"], run["step_s"])]
    per_cpu_s = [tokens / seconds for run in runs for tokens, seconds in zip(run["tokens"], run["step_cpu_s"])]
    peaks = [run["peak_rss_mb"] for run in runs]
    setups = [run["setup_rss_mb"] for run in runs]
    return {
        "tokens_per_s": statistics.median(per_step),
        "tokens_per_cpu_s": statistics.median(per_cpu_s),
        "step_s": statistics.median(s for run in runs for s in run["step_s"]),
        "tokens_per_step": statistics.median(t for run in runs for t in run["tokens"]),
        "peak_rss_mb": statistics.median(peaks),
        "setup_rss_mb": statistics.median(setups),
        "step_rss_mb": statistics.median(p - s for p, s in zip(peaks, setups)),
        "first_loss": runs[0]["first_loss"],
        "threads": runs[0]["threads"],
        "runs": len(runs),
    }


def compare(make_spec, rounds: int, console) -> dict:
    runs: dict[str, list[dict]] = {side: [] for side in SIDES}
    for round_number in range(rounds):
        for side in SIDES if round_number % 2 == 0 else SIDES[::-1]:
            spec = make_spec(side)
            console.print(f"round {round_number + 1}/{rounds}: {side}, {spec.mode} step")
            runs[side].append(run_worker(spec))
    result = {side: summarize(runs[side]) for side in SIDES}
    ours, trl = result["ours"], result["trl"]
    result["ratio_tokens_per_s"] = ours["tokens_per_s"] / trl["tokens_per_s"]
    result["ratio_tokens_per_cpu_s"] = ours["tokens_per_cpu_s"] / trl["tokens_per_cpu_s"]
    result["ratio_peak_rss"] = ours["peak_rss_mb"] / trl["peak_rss_mb"]
    result["ratio_step_rss"] = ours["step_rss_mb"] / max(trl["step_rss_mb"], 1e-9)
    return result


def add_rows(table, step: str, result: dict, targets: bool) -> None:
    o, t = result["ours"], result["trl"]
    speed_target = f" (target >= {TARGET_SPEED:.0f})" if targets else ""
    memory_target = f" (target <= {TARGET_MEMORY:.0f})" if targets else ""
    table.add_row(
        step,
        "completion tokens / s",
        f"{o['tokens_per_s']:,.0f}",
        f"{t['tokens_per_s']:,.0f}",
        f"{result['ratio_tokens_per_s']:.2f}{speed_target}",
    )
    table.add_row("", "step time", f"{o['step_s']:.3f} s", f"{t['step_s']:.3f} s", f"{o['step_s'] / t['step_s']:.2f}")
    table.add_row(
        "",
        "completion tokens / CPU-second",
        f"{o['tokens_per_cpu_s']:,.0f}",
        f"{t['tokens_per_cpu_s']:,.0f}",
        f"{result['ratio_tokens_per_cpu_s']:.2f}",
    )
    table.add_row(
        "",
        "peak RSS",
        f"{o['peak_rss_mb']:,.0f} MB",
        f"{t['peak_rss_mb']:,.0f} MB",
        f"{result['ratio_peak_rss']:.2f}{memory_target}",
    )
    table.add_row(
        "",
        "step memory (peak - peak before step 1)",
        f"{o['step_rss_mb']:,.0f} MB",
        f"{t['step_rss_mb']:,.0f} MB",
        f"{result['ratio_step_rss']:.2f}",
        end_section=True,
    )


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=5, help="timed learner steps per run (default 5)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps before them (default 1)")
    parser.add_argument("--prompts", type=int, default=8, help="prompts per batch (default 8)")
    parser.add_argument("--group", type=int, default=8, help="completions per prompt (default 8)")
    parser.add_argument("--prompt-length", type=int, default=64, help="prompt tokens (default 64)")
    parser.add_argument("--completion-length", type=int, default=128, help="longest completion in tokens (default 128)")
    parser.add_argument(
        "--micro-batch",
        type=int,
        default=None,
        help="sequences per forward pass on both sides (default: the whole batch)",
    )
    parser.add_argument("--hidden", type=int, default=128, help="model hidden size (default 128)")
    parser.add_argument("--layers", type=int, default=4, help="model layers (default 4)")
    parser.add_argument(
        "--vocab",
        type=int,
        default=None,
        help="grow the model's vocabulary (embedding and LM head) to this size, as real models are "
        "(e.g. 151936 for Qwen2.5); default: the tiny tokenizer's (2048)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads on both sides (default 1: steady figures on a shared machine)",
    )
    parser.add_argument(
        "--rounds", type=int, default=2, help="runs per side, the order flipping each round (default 2)"
    )
    parser.add_argument(
        "--full-steps",
        type=int,
        default=3,
        help="timed full steps (generation + update) per run; 0 skips them (default 3)",
    )
    parser.add_argument("--learning-rate", type=float, default=1e-5, help=argparse.SUPPRESS)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(Spec(**json.loads(args.worker)))
        return {}

    import torch
    import trl
    from rich.console import Console
    from rich.table import Table

    from harness.tiny_model import init_tiny

    console = Console()
    rows = args.prompts * args.group
    micro = args.micro_batch or rows
    if rows % micro:
        raise SystemExit(f"--micro-batch {micro} must divide the batch of {rows} sequences (--prompts x --group)")
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="trainer-bench-") as tmp:
        checkpoint = init_tiny(Path(tmp) / "model", hidden_size=args.hidden, layers=args.layers)
        if args.vocab:
            grow_vocabulary(checkpoint, args.vocab)
        vocab = json.loads((checkpoint / "config.json").read_text())["vocab_size"]
        console.print(
            f"[bold]building the rollout batch ({args.prompts} prompts x {args.group} completions, "
            f"{args.prompt_length} + up to {args.completion_length} tokens)..."
        )
        batch_path = Path(tmp) / "batch.pt"
        torch.save(
            make_rollout_batch(checkpoint, args.prompts, args.group, args.prompt_length, args.completion_length),
            batch_path,
        )
        texts_path = Path(tmp) / "prompts.json"
        texts_path.write_text(json.dumps(prompt_texts(checkpoint, args.prompts, args.prompt_length)))

        def spec(side: str, mode: str, steps: int) -> Spec:
            return Spec(
                side=side,
                mode=mode,
                checkpoint=str(checkpoint),
                batch=str(batch_path if mode == "learner" else texts_path),
                out_dir=tmp,
                steps=steps,
                warmup=args.warmup,
                prompts=args.prompts,
                group=args.group,
                completion_length=args.completion_length,
                micro_batch=micro,
                threads=args.threads,
                learning_rate=args.learning_rate,
            )

        console.print("[bold]learner step (the same prepared batch on both sides)...")
        learner = compare(lambda side: spec(side, "learner", args.steps), args.rounds, console)
        full = None
        if args.full_steps > 0:
            console.print("[bold]full step (generation + scoring + update)...")
            full = compare(lambda side: spec(side, "full", args.full_steps), args.rounds, console)

    threads_seen = {result[side]["threads"] for result in filter(None, (learner, full)) for side in SIDES}
    if threads_seen != {args.threads}:
        raise BenchError(f"the runs used {sorted(threads_seen)} torch threads, not the {args.threads} asked for")
    loss_gap = abs(learner["ours"]["first_loss"] - learner["trl"]["first_loss"])
    result = {
        "config": {
            "prompts": args.prompts,
            "group": args.group,
            "prompt_length": args.prompt_length,
            "completion_length": args.completion_length,
            "micro_batch": micro,
            "hidden": args.hidden,
            "layers": args.layers,
            "vocab": vocab,
            "threads": args.threads,
            "steps": args.steps,
            "warmup": args.warmup,
            "rounds": args.rounds,
            "full_steps": args.full_steps,
            "dtype": "float32",
            "loss": "TRL dapo / our token_mean",
            "optimizer": "torch.optim.AdamW",
        },
        "peer": f"trl {trl.__version__}",
        "learner": learner,
        "full": full,
        "ratio_tokens_per_s": learner["ratio_tokens_per_s"],
        "ratio_peak_rss": learner["ratio_peak_rss"],
        "first_loss_gap": loss_gap,
        "load_average": [load_before, os.getloadavg()[0]],
        "target": {"tokens_per_s": TARGET_SPEED, "peak_rss": TARGET_MEMORY},
    }

    table = Table(
        title=f"GRPO step on CPU: ours vs TRL {trl.__version__} GRPOTrainer (medians; ratios are ours / TRL)",
        caption=f"{args.prompts} prompts x {args.group} samples, {args.prompt_length} + <= "
        f"{args.completion_length} tokens, Qwen2 hidden {args.hidden} x {args.layers} layers, "
        f"vocabulary {vocab}, fp32, "
        f"micro-batch {micro}, {args.threads} torch thread(s), {args.rounds} runs per side, "
        f"{args.steps} learner / {args.full_steps} full steps per run; load average "
        f"{load_before:.1f} -> {result['load_average'][1]:.1f}",
    )
    table.add_column("step")
    table.add_column("measure")
    table.add_column("ours", justify="right")
    table.add_column("TRL", justify="right")
    table.add_column("ours / TRL", justify="right")
    add_rows(table, "learner (same batch)", learner, targets=True)
    if full is not None:
        add_rows(table, "full (generate + update)", full, targets=False)
    table.add_row(
        "check",
        "loss at step 1 (same weights, same batch)",
        f"{learner['ours']['first_loss']:.6f}",
        f"{learner['trl']['first_loss']:.6f}",
        f"|diff| {loss_gap:.1e}",
    )
    console.print(table)
    return result


if __name__ == "__main__":
    main()
