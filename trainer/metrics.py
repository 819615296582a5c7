"""Per-step metrics: `metrics.jsonl` always; TensorBoard with `logger: tensorboard`, Weights & Biases with `logger: wandb`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infra.runlog import append_row, drop_partial_line, read_rows, rewrite_rows

from .errors import ConfigError


class MetricsLogger:
    """`logger` is `logger.type`: `jsonl` writes only `metrics.jsonl` (what `harness view` and the reward curve read),
    `tensorboard` also event files under `tensorboard/`, `wandb` also a Weights & Biases run."""

    def __init__(
        self,
        run_dir: Path,
        logger: str = "jsonl",
        project: str = "harness",
        run_name: str = "",
        config: dict | None = None,
    ):
        self.path = run_dir / "metrics.jsonl"
        drop_partial_line(self.path)  # a resumed run appends after the last whole line
        self.tensorboard = self.wandb = None
        if logger == "tensorboard":
            from torch.utils.tensorboard import SummaryWriter

            self.tensorboard = SummaryWriter(str(run_dir / "tensorboard"))
        if logger == "wandb":
            try:
                import wandb
            except ImportError:
                raise ConfigError("logger: wandb needs the wandb package (`pip install wandb`)") from None
            self.wandb = wandb.init(project=project, name=run_name, config=config, dir=str(run_dir))

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        append_row(self.path, {"step": step, **metrics})
        if self.tensorboard is not None:
            for key, value in metrics.items():
                if isinstance(value, (int, float)):
                    self.tensorboard.add_scalar(key, value, step)
        if self.wandb is not None:
            self.wandb.log(metrics, step=step)

    def close(self) -> None:
        if self.tensorboard is not None:
            self.tensorboard.close()
        if self.wandb is not None:
            self.wandb.finish()


def save_rollouts(path: Path, trajectories: list) -> None:
    """The sampled trajectories of one step, one JSON line each (tokens, loss mask and logprobs included):
    what `harness view` shows for a chosen step. Written whole, so a resumed step replaces its file."""
    rewrite_rows(path, (trajectory.to_dict() for trajectory in trajectories))


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    return read_rows(run_dir / "metrics.jsonl")  # a line torn by a kill is skipped


TRAINING_SECONDS = ("sft/step_s", "time/rollout_s", "time/train_s", "time/weight_sync_s")


def training_seconds(rows: list[dict[str, Any]]) -> float:
    """How long a run trained, from its metrics: SFT steps, rollouts, learner steps and weight syncs (evaluations
    and checkpoints excluded), the figure a control arm's `trainer.sft_warmup.max_seconds` is matched to."""
    return sum(row.get(key, 0) for row in rows for key in TRAINING_SECONDS)


def plot_curve(run_dir: Path, key: str = "val/reward_mean", output: str = "reward_curve.png") -> Path | None:
    """Save the curve of one metric over steps as a PNG in the run folder."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = [(m["step"], m[key]) for m in read_metrics(run_dir) if key in m]
    if not points:
        return None
    figure, axes = plt.subplots(figsize=(6, 4))
    axes.plot([p[0] for p in points], [p[1] for p in points], marker="o")
    axes.set_xlabel("step")
    axes.set_ylabel(key)
    axes.set_ylim(-0.02, 1.02)
    axes.grid(alpha=0.3)
    path = run_dir / output
    figure.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(figure)
    return path
