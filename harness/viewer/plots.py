"""Plots rendered on the server with matplotlib, as SVG: nothing is fetched by the browser but the image."""

from __future__ import annotations

import io
import threading
from collections import Counter
from typing import Any

_LOCK = threading.Lock()  # pyplot's state is global: one figure at a time


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _svg(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    _pyplot().close(figure)
    return buffer.getvalue()


def overview(rows: list[dict[str, Any]]) -> bytes:
    """Exit statuses, reward, turns, tokens and wall time of a run's episodes, as one figure."""
    with _LOCK:
        plt = _pyplot()
        figure, axes = plt.subplots(1, 5, figsize=(16, 2.8))
        statuses = Counter(r["exit_status"] or "?" for r in rows)
        names = sorted(statuses, key=lambda s: -statuses[s])
        axes[0].barh(names, [statuses[n] for n in names], color="#4c72b0")
        axes[0].invert_yaxis()
        axes[0].set_title("exit status")
        for ax, key, title in zip(
            axes[1:],
            ("reward", "turns", "tokens", "wall_s"),
            ("reward", "turns", "tokens (prompt + completion)", "wall time (s)"),
        ):
            values = [r[key] for r in rows]
            ax.hist(values, bins=min(30, max(len(set(values)), 1)), color="#55a868")
            ax.set_title(title)
        for ax in axes:
            ax.tick_params(labelsize=8)
            ax.grid(alpha=0.3)
        figure.tight_layout()
        return _svg(figure)


ORDER = ("reward", "pass_rate", "resolve", "kl", "entropy", "clip", "loss", "grad_norm", "ratio", "length", "turns")


def metric_panels(metrics: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """The panels of the training page: one per numeric key of metrics.jsonl (reward, pass rate, KL, entropy,
    clipping, lengths first), except the time split, whose keys share one panel."""
    keys = sorted(
        {k for m in metrics for k, v in m.items() if isinstance(v, (int, float)) and not isinstance(v, bool)} - {"step"}
    )
    keys = [k for k in keys if not k.startswith("data/")]
    times = [k for k in keys if k.startswith("time/")]
    rank = lambda k: next((i for i, word in enumerate(ORDER) if word in k.split("/")[-1]), len(ORDER))  # noqa: E731
    rest = sorted((k for k in keys if k not in times), key=lambda k: (rank(k), k))
    panels = [(k, [k]) for k in rest]
    if times:
        panels.insert(min(len(panels), 6), ("time split (s)", times))
    return panels


def training_curves(metrics: list[dict[str, Any]]) -> bytes:
    """Each panel's keys over step."""
    panels = metric_panels(metrics)
    with _LOCK:
        plt = _pyplot()
        columns = 4
        lines = max((len(panels) + columns - 1) // columns, 1)
        figure, axes = plt.subplots(lines, columns, figsize=(16, 2.4 * lines), squeeze=False)
        for ax, (title, keys) in zip(axes.flat, panels):
            for key in keys:
                points = [(m["step"], m[key]) for m in metrics if isinstance(m.get(key), (int, float)) and "step" in m]
                if points:
                    ax.plot(
                        [p[0] for p in points],
                        [p[1] for p in points],
                        marker="o" if len(points) < 40 else None,
                        markersize=3,
                        label=key.removeprefix("time/"),
                    )
            ax.set_title(title, fontsize=9)
            ax.grid(alpha=0.3)
            if len(keys) > 1:
                ax.legend(fontsize=7)
            ax.tick_params(labelsize=7)
        for ax in list(axes.flat)[len(panels) :]:
            ax.set_visible(False)
        figure.tight_layout()
        return _svg(figure)
