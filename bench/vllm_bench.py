"""The vLLM engine against the transformers engine, same model, same workloads, one run.

    .venv-vllm/bin/python -m bench.vllm_bench [--episodes 64] [--prompts 64] [--max-tokens 32] [--grpo-steps 2]
    .venv-vllm/bin/python -m bench.vllm_bench --model SmolLM2-135M-Instruct.Q4_1.gguf --episode-tasks gsm8k --episodes 32

Runs in the venv that has vLLM (the transformers engine runs there too). Each engine works in a fresh
interpreter of its own, one after the other, on `--model` (a checkpoint folder, or a GGUF file already
imported by `harness model import` or any `--checkpoint FILE.gguf`), by default a tiny Qwen2 (hidden 128,
head_dim 32: vLLM's CPU kernels need head_dim >= 32) built once for both:

1. single-turn batch generation: `--prompts` arith prompts in one `generate_ids_batch` call, sampled at
   temperature 1 with seeds, `--max-tokens` each: generated tokens per second.
2. `--episodes` concurrent episodes of `--episode-tasks` (by default `arith-tool`: multi-turn, `python`
   and `submit` tools in sandboxes, up to 5 turns) through the code `harness eval` uses: the transformers engine behind `BatchingPolicy`,
   vLLM on its own (continuous batching). Episodes per second and generated tokens per second.
3. memory: the peak resident set of the engine's process tree (vLLM's engine core is a child process),
   sampled every 0.1 s, and the model load time.
4. `--grpo-steps` GRPO steps of `harness train` on arith with each engine (`inference.engine`): the
   median step time and its parts (rollout, learner, weight sync).

Prints a table with the ratio vLLM / transformers for each figure, and the JSON of all of it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULT_TAG = "VLLM_BENCH_RESULT "
ENGINES = ("transformers", "vllm")


class TreeMemory:
    """Peak resident set (MiB) of this process and all its descendants, sampled in a thread."""

    def __init__(self, period_s: float = 0.1):
        import psutil

        self.process, self.period_s, self.peak = psutil.Process(), period_s, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> float:
        import psutil

        total = 0
        for proc in [self.process, *self.process.children(recursive=True)]:
            try:
                total += proc.memory_info().rss
            except psutil.Error:
                pass
        return total / 2**20

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self.peak = max(self.peak, self._sample())

    def __enter__(self):
        self.peak = self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._sample())


def load(engine: str, model: str):
    if engine == "vllm":
        from harness.policies.vllm import VLLMPolicy

        return VLLMPolicy(model)
    from harness.policies.hf import HFPolicy

    return HFPolicy(model, device="cpu")


def worker(spec: dict) -> dict:
    """One engine's figures (run in a fresh interpreter)."""
    from harness.batching import shared_policy
    from harness.episode import Limits, run_episode
    from harness.policy import Sampling
    from harness.tokens import render
    from sandboxes import get_backend
    from tasks.taskset import load_tasks

    result: dict = {"engine": spec["engine"]}
    with TreeMemory() as memory:
        clock = time.monotonic()
        policy = load(spec["engine"], spec["model"])
        result["load_s"] = time.monotonic() - clock
        try:
            tasks = load_tasks("arith")[: spec["prompts"]]
            prompts = [list(render(policy.tokenizer, t.prompt, None, True, True)) for t in tasks]
            sampling = Sampling(temperature=1.0, max_tokens=spec["max_tokens"], seed=0)
            policy.generate_ids_batch(prompts[:2], Sampling(temperature=1.0, max_tokens=2, seed=0))  # warm up
            clock = time.monotonic()
            done = policy.generate_ids_batch(prompts, sampling)
            seconds = time.monotonic() - clock
            tokens = sum(c.completion_tokens for c in done)
            result["batch"] = {
                "prompts": len(prompts),
                "tokens": tokens,
                "seconds": seconds,
                "tokens_per_s": tokens / seconds,
            }

            if spec["episodes"]:
                tool_tasks = load_tasks(spec["episode_tasks"])
                jobs = [tool_tasks[i % len(tool_tasks)] for i in range(spec["episodes"])]
                backend = get_backend(spec["backend"])
                shared = shared_policy(policy)
                limits = Limits(max_context=spec["max_context"])
                clock = time.monotonic()
                with ThreadPoolExecutor(len(jobs)) as pool:
                    trajectories = list(
                        pool.map(
                            lambda job: run_episode(
                                job[1],
                                shared,
                                Sampling(temperature=1.0, max_tokens=spec["max_tokens"], seed=job[0]),
                                limits,
                                backend=backend,
                                sample=job[0],
                            ),
                            enumerate(jobs),
                        )
                    )
                seconds = time.monotonic() - clock
                if shared is not policy:
                    shared.close()
                errors = [t.error for t in trajectories if t.exit_status in ("policy_error", "sandbox_error")]
                if errors:
                    raise RuntimeError(f"{len(errors)} episodes failed: {errors[0]}")
                tokens = sum(sum(t.loss_mask) for t in trajectories)
                result["episodes"] = {
                    "episodes": len(jobs),
                    "turns": sum(t.turns for t in trajectories),
                    "tokens": tokens,
                    "seconds": seconds,
                    "episodes_per_s": len(jobs) / seconds,
                    "episodes_per_min": 60 * len(jobs) / seconds,
                    "tokens_per_s": tokens / seconds,
                }
        finally:
            policy.close()
    result["peak_rss_mb"] = memory.peak
    return result


def run_worker(spec: dict, timeout: float = 3600) -> dict:
    env = os.environ | {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [sys.executable, "-m", "bench.vllm_bench", "--worker", json.dumps(spec)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_TAG)]
    if done.returncode != 0 or not lines:
        raise RuntimeError(
            f"the {spec['engine']} worker failed (exit {done.returncode}):\n{done.stderr[-4000:]}\n{done.stdout[-2000:]}"
        )
    return json.loads(lines[-1][len(RESULT_TAG) :])


def grpo_steps(engine: str, model: str, steps: int, run_dir: Path) -> dict:
    """`harness train` on arith with this engine; the median of its steps' times."""
    args = [
        sys.executable,
        "-m",
        "cli",
        "train",
        f"trainer.policy.model.path={model}",
        f"trainer.output_dir={run_dir}",
        'data.train_data=["arith-train"]',
        "trainer.train_batch_size=4",
        "generator.n_samples_per_prompt=8",
        "generator.max_tokens=32",
        "generator.max_context=512",
        "data.max_prompt_length=256",
        "trainer.learning_rate=1e-4",
        "trainer.eval_interval=0",
        f"trainer.max_steps={steps}",
        "trainer.ckpt_interval=0",
        f"inference.engine={engine}",
    ]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=3600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"harness train with {engine} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "time/rollout_s" in r]
    parts = ("time/rollout_s", "time/train_s", "time/weight_sync_s")
    figures = {part.removeprefix("time/"): statistics.median(r[part] for r in rows) for part in parts}
    figures["step_s"] = statistics.median(sum(r[p] for p in parts) for r in rows)
    figures["generated_tokens_per_s"] = statistics.median(r["throughput/generated_tokens_per_s"] for r in rows)
    return figures


def ratios(results: dict) -> dict:
    hf, vl = results["transformers"], results["vllm"]
    out = {
        "batch_tokens_per_s": vl["batch"]["tokens_per_s"] / hf["batch"]["tokens_per_s"],
        "peak_rss": vl["peak_rss_mb"] / hf["peak_rss_mb"],
    }
    if "episodes" in hf:
        out["episodes_per_s"] = vl["episodes"]["episodes_per_s"] / hf["episodes"]["episodes_per_s"]
        out["episode_tokens_per_s"] = vl["episodes"]["tokens_per_s"] / hf["episodes"]["tokens_per_s"]
    if "grpo" in hf:
        out["grpo_step_s"] = vl["grpo"]["step_s"] / hf["grpo"]["step_s"]
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--episodes", type=int, default=64, help="concurrent arith-tool episodes (0: skip)")
    parser.add_argument("--prompts", type=int, default=64, help="prompts of the single-turn batch")
    parser.add_argument("--max-tokens", type=int, default=32, help="tokens per turn")
    parser.add_argument("--grpo-steps", type=int, default=2, help="GRPO steps per engine (0: skip)")
    parser.add_argument("--hidden", type=int, default=128, help="tiny model width (4 heads: head_dim = hidden / 4)")
    parser.add_argument(
        "--model", help="a checkpoint folder or an imported GGUF file (default: a tiny model of --hidden)"
    )
    parser.add_argument("--episode-tasks", default="arith-tool", help="task set of the concurrent episodes")
    parser.add_argument("--max-context", type=int, default=2048, help="tokens of an episode's whole conversation")
    parser.add_argument("--backend", default="auto", help="sandboxes of the tool episodes: docker, local or auto")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    if args.worker:
        print(RESULT_TAG + json.dumps(worker(json.loads(args.worker))), flush=True)
        return {}
    from rich.console import Console
    from rich.table import Table

    from harness.checkpoints import resolve_checkpoint
    from harness.tiny_model import init_tiny

    console = Console()
    with tempfile.TemporaryDirectory(prefix="vllm-bench-") as scratch:
        model = (
            resolve_checkpoint(args.model)
            if args.model
            else str(init_tiny(Path(scratch) / "model", hidden_size=args.hidden))
        )
        results = {}
        for engine in ENGINES:
            console.print(
                f"[bold]{engine}[/]: batch of {args.prompts}, {args.episodes} concurrent {args.episode_tasks} episodes"
            )
            results[engine] = run_worker(
                {
                    "engine": engine,
                    "model": model,
                    "prompts": args.prompts,
                    "episodes": args.episodes,
                    "max_tokens": args.max_tokens,
                    "backend": args.backend,
                    "episode_tasks": args.episode_tasks,
                    "max_context": args.max_context,
                }
            )
            if args.grpo_steps:
                console.print(f"[bold]{engine}[/]: {args.grpo_steps} GRPO steps")
                results[engine]["grpo"] = grpo_steps(engine, model, args.grpo_steps, Path(scratch) / f"run-{engine}")
    summary = {
        "settings": vars(args) | {"json": str(args.json) if args.json else None},
        **results,
        "ratio_vllm_over_transformers": ratios(results),
    }
    table = Table(title=f"vLLM vs transformers engine on {args.model or 'a tiny model'} (same workload)")
    for column in ("figure", "transformers", "vllm", "vllm / transformers"):
        table.add_column(column, justify="right" if column != "figure" else "left")
    rows = [
        ("single-turn batch: tokens/s", ("batch", "tokens_per_s"), "batch_tokens_per_s"),
        ("concurrent episodes: episodes/min", ("episodes", "episodes_per_min"), "episodes_per_s"),
        ("concurrent episodes: tokens/s", ("episodes", "tokens_per_s"), "episode_tokens_per_s"),
        ("peak memory, MiB (process tree)", ("peak_rss_mb",), "peak_rss"),
        ("model load, s", ("load_s",), None),
        ("GRPO step, s (median)", ("grpo", "step_s"), "grpo_step_s"),
        ("  of which rollout, s", ("grpo", "rollout_s"), None),
        ("  of which learner, s", ("grpo", "train_s"), None),
        ("  of which weight sync, s", ("grpo", "weight_sync_s"), None),
    ]
    for label, path, ratio in rows:
        values = []
        for engine in ENGINES:
            value = results[engine]
            for key in path:
                value = value.get(key) if isinstance(value, dict) else None
            values.append(value)
        if values[0] is None:
            continue
        r = summary["ratio_vllm_over_transformers"].get(ratio) if ratio else None
        table.add_row(label, f"{values[0]:.3g}", f"{values[1]:.3g}", f"{r:.2f}" if r is not None else "")
    console.print(table)
    console.print_json(json.dumps(summary))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    return summary


if __name__ == "__main__":
    main()
