"""Synchronous vs asynchronous GRPO on CPU, in one run: wall time to the same held-out reward.

    python -m bench.async_bench [--steps 40] [--eval-interval 5] [--staleness 1] [--lr 3e-4] [--gain 0.8]
                                [--seeds 42 1 2] [--out runs/async-bench]

Both runs start from one SFT warm start of the arith proof (`examples/arith/arith-grpo-tiny-cpu.yaml`,
built once here: a fresh tiny model, then its capped SFT) and run the same GRPO steps with the same
data order and seeds, at a constant learning rate; the only difference is `trainer.async`. The target
is the warm start's held-out reward plus `--gain` of the best gain the synchronous run makes; the
table gives each run's curve, its wall time (GRPO steps and evaluations, `time/elapsed_s` in the
metrics) to reach the target, and the mean seconds per step. One pair of runs per seed (`--seeds`:
sampling and data order); the warm start is the same for all.
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
    """(seconds since the first GRPO step began, step, held-out reward) at each evaluation, the warm start's first."""
    return [(m.get("time/elapsed_s", 0.0), m["step"], m["val/reward_mean"]) for m in metrics if "val/reward_mean" in m]


def compare(out: Path, common: list[str], staleness: int, gain: float) -> float | None:
    """One seed: both runs, their table; the async / sync ratio of wall time to the target (None: not both reached)."""
    runs = {
        "sync": curve(train(out / "sync", *common)),
        f"async k={staleness}": curve(train(out / "async", *common, f"trainer.async={staleness}")),
    }
    start = runs["sync"][0][2]
    best = max(r for _, _, r in runs["sync"])
    target = start + gain * (best - start)
    print(
        f"\n{out}: held-out {start:.3f} after the warm start; the synchronous run's best {best:.3f}; "
        f"target {target:.3f} ({gain:g} of that gain)\n"
    )
    print(
        "| run | held-out curve (step: reward) | best | wall time to the target | s per step |\n|---|---|---|---|---|"
    )
    reached = {}
    for name, points in runs.items():
        hit = next(((t, s) for t, s, r in points[1:] if r >= target), None)
        reached[name] = hit[0] if hit else None
        shown = "  ".join(f"{s}: {r:.2f}" for _, s, r in points[1:])
        when = f"{hit[0]:.0f} s (step {hit[1]})" if hit else "not reached"
        print(
            f"| {name} | {shown} | {max(r for _, _, r in points):.3f} | {when} | {points[-1][0] / points[-1][1]:.1f} |"
        )
    sync, other = reached["sync"], reached[f"async k={staleness}"]
    return other / sync if sync and other else None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--eval-interval", type=int, default=5)
    parser.add_argument("--staleness", type=int, default=1)
    parser.add_argument("--lr", type=float, default=3e-4, help="constant GRPO learning rate of both runs")
    parser.add_argument(
        "--gain",
        type=float,
        default=0.8,
        help="target: the warm start's held-out reward plus this share of the synchronous run's best gain",
    )
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=[42], help="trainer.seed of both GRPO runs, one pair per seed"
    )
    parser.add_argument("--out", type=Path, default=Path("runs/async-bench"))
    args = parser.parse_args()
    model = args.out / "tiny-model"
    if not (model / "config.json").exists():
        subprocess.run(
            [sys.executable, "-m", "cli", "model", "init-tiny", str(model), "--hidden-size", "128"], check=True
        )
    warm = args.out / "warm"
    if not (warm / "checkpoints" / "global_step_0").exists():
        train(warm, f"trainer.policy.model.path={model}", "trainer.max_steps=0", "data.val_data=[]")
    common = [
        f"trainer.policy.model.path={warm / 'checkpoints' / 'global_step_0'}",
        "trainer.sft_warmup=null",
        f"trainer.max_steps={args.steps}",
        f"trainer.eval_interval={args.eval_interval}",
        "trainer.warmup_steps=0",
        "trainer.lr_scheduler=constant",
        f"trainer.learning_rate={args.lr}",
        "trainer.resume=never",
    ]
    ratios = {
        seed: compare(args.out / f"seed-{seed}", [*common, f"trainer.seed={seed}"], args.staleness, args.gain)
        for seed in args.seeds
    }
    print(
        "\nasync / sync wall time to the target, by seed: "
        + ", ".join(
            f"{seed}: {'not both reached' if r is None else f'{r:.2f} (speed-up {1 / r:.2f}x)'}"
            for seed, r in ratios.items()
        )
    )


if __name__ == "__main__":
    main()
