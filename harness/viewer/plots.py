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
        for ax, key, title in zip(axes[1:], ("reward", "turns", "tokens", "wall_s"),
                                  ("reward", "turns", "tokens (prompt + completion)", "wall time (s)")):
            values = [r[key] for r in rows]
            ax.hist(values, bins=min(30, max(len(set(values)), 1)), color="#55a868")
            ax.set_title(title)
        for ax in axes:
            ax.tick_params(labelsize=8)
            ax.grid(alpha=0.3)
        figure.tight_layout()
        return _svg(figure)


GROUPS = (
    ("reward and pass rate", ("reward", "pass_rate", "resolve")),
    ("KL and entropy", ("kl", "entropy")),
    ("loss, clipping, gradients", ("loss", "clip", "grad_norm", "ratio")),
    ("lengths and turns", ("length", "turns", "tokens_mean")),
    ("time split (s)", ("time/",)),
    ("throughput", ("throughput/",)),
)


def metric_groups(metrics: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """The numeric keys of metrics.jsonl sorted into the panels of the training page (leftovers in `other`)."""
    keys = sorted({k for m in metrics for k, v in m.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
                  - {"step"})
    keys = [k for k in keys if not k.startswith("data/")]
    groups, used = [], set()
    for title, needles in GROUPS:
        chosen = [k for k in keys if k not in used and any(n in k for n in needles)]
        used.update(chosen)
        if chosen:
            groups.append((title, chosen))
    rest = [k for k in keys if k not in used]
    if rest:
        groups.append(("other", rest))
    return groups


def training_curves(metrics: list[dict[str, Any]]) -> bytes:
    """One panel per group of metrics.jsonl keys, value over step; SFT warm-up losses are left to their own panel."""
    groups = metric_groups(metrics)
    with _LOCK:
        plt = _pyplot()
        columns = 3
        lines = max((len(groups) + columns - 1) // columns, 1)
        figure, axes = plt.subplots(lines, columns, figsize=(15, 3.2 * lines), squeeze=False)
        for ax, (title, keys) in zip(axes.flat, groups):
            for key in keys:
                points = [(m["step"], m[key]) for m in metrics if isinstance(m.get(key), (int, float)) and "step" in m]
                if points:
                    ax.plot([p[0] for p in points], [p[1] for p in points], marker="o" if len(points) < 40 else None,
                            markersize=3, label=key)
            ax.set_title(title)
            ax.set_xlabel("step")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
            ax.tick_params(labelsize=8)
        for ax in list(axes.flat)[len(groups):]:
            ax.set_visible(False)
        figure.tight_layout()
        return _svg(figure)
