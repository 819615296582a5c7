"""Synchronous vs asynchronous GRPO on CPU, in one run: wall time to the same held-out reward.

    python -m bench.async_bench [--steps 40] [--eval-interval 5] [--staleness 1] [--seed 42] [--out runs/async-bench]

Both runs start from one SFT warm start of the arith proof (`examples/arith/arith-grpo-tiny-cpu.yaml`,
built once here: a fresh tiny model, then its capped SFT) and run the same GRPO steps with the same
data order and seeds; the only difference is `trainer.async`. The target is the best held-out reward
the synchronous run reaches; the table gives each run's wall time (GRPO steps and evaluations,
`time/elapsed_s` in the metrics) to reach it, and the mean seconds per step. `--seed` sets both GRPO
runs' seed (sampling, data order); the warm start is the same for every seed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

CONFIG = Path(__file__).resolve().parents[1] / "examples" / "arith" / "arith-grpo-tiny-cpu.yaml"


def train(out: Path, *overrides: str) -> list[dict]:
    command = [sys.executable, "-m", "cli", "train", "--config", str(CONFIG), f"trainer.output_dir={out}", *overrides]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def curve(metrics: list[dict]) -> list[tuple[float, int, float]]:
    """(seconds since the first GRPO step began, step, held-out reward) at each evaluation after it."""
    return [(m["time/elapsed_s"], m["step"], m["val/reward_mean"]) for m in metrics if "val/reward_mean" in m and m["step"] > 0]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--eval-interval", type=int, default=5)
    parser.add_argument("--staleness", type=int, default=1)
    parser.add_argument("--seed", type=int, default=42, help="trainer.seed of both GRPO runs")
    parser.add_argument("--out", type=Path, default=Path("runs/async-bench"))
    args = parser.parse_args()
    model = args.out / "tiny-model"
    if not (model / "config.json").exists():
        subprocess.run([sys.executable, "-m", "cli", "model", "init-tiny", str(model), "--hidden-size", "128"], check=True)
    warm = args.out / "warm"
    if not (warm / "checkpoints" / "global_step_0").exists():
        train(warm, f"trainer.policy.model.path={model}", "trainer.max_steps=0", "data.val_data=[]")
    start = warm / "checkpoints" / "global_step_0"
    common = [f"trainer.policy.model.path={start}", "trainer.sft_warmup=null", f"trainer.max_steps={args.steps}",
              f"trainer.eval_interval={args.eval_interval}", "trainer.warmup_steps=0", "trainer.lr_scheduler=constant",
              "trainer.resume=never", f"trainer.seed={args.seed}"]
    runs = {"sync": curve(train(args.out / "sync", *common)),
            f"async k={args.staleness}": curve(train(args.out / "async", *common, f"trainer.async={args.staleness}"))}
    target = max(r for _, _, r in runs["sync"])
    print(f"target: the synchronous run's best held-out reward, {target:.3f}\n")
    print("| run | held-out curve (step: reward) | wall time to the target | s per step |\n|---|---|---|---|")
    reached = {}
    for name, points in runs.items():
        hit = next(((t, s) for t, s, r in points if r >= target), None)
        reached[name] = hit[0] if hit else None
        shown = "  ".join(f"{s}: {r:.2f}" for _, s, r in points)
        when = f"{hit[0]:.0f} s (step {hit[1]})" if hit else "not reached"
        print(f"| {name} | {shown} | {when} | {points[-1][0] / points[-1][1]:.1f} |")
    sync, other = reached["sync"], reached[f"async k={args.staleness}"]
    if sync and other:
        print(f"\nasync / sync wall time to the target: {other / sync:.2f} (speed-up {sync / other:.2f}x)")


if __name__ == "__main__":
    main()
