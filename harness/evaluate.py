"""`harness eval`: run a policy over a task set, k samples per task, and report.

The run directory holds the resolved config, `results.jsonl` (appended as each episode ends,
so a killed run resumes without redoing or losing work), `trajectories/`, SWE-bench
`predictions.jsonl`, and `report.json` / `report.md`.
"""

from __future__ import annotations

import json
import threading
from collections import Counter, defaultdict
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass
from math import comb
from pathlib import Path
from statistics import mean
from typing import Any, Callable

from sandboxes import Backend, close_all
from tasks.grade_run import drop_partial_line, read_results
from tasks.task import Task

from .batching import shared_engine
from .episode import EpisodeLimits, run_episode
from .errors import HarnessError
from .policy import Policy, Sampling
from .trajectory import Trajectory

RESULTS = "results.jsonl"


@dataclass
class EvalConfig:
    tasks: str
    checkpoint: str
    output: str
    samples: int = 1
    workers: int = 4
    max_turns: int | None = None
    temperature: float = 0.0
    max_tokens: int = 1024
    max_context: int = 32_768
    seed: int | None = 0
    backend: str = "auto"


def evaluate(
    tasks: list[Task],
    policy: Policy,
    config: EvalConfig,
    backend: Backend | None,
    resume: bool = False,
    on_result: Callable[[dict[str, Any]], None] = lambda row: None,
) -> dict[str, Any]:
    out = Path(config.output)
    results_path = out / RESULTS
    if results_path.exists() and not resume:
        raise HarnessError(f"{out} already holds results: pass --resume to finish that run, or choose another --output")
    (out / "trajectories").mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(asdict(config), indent=1))
    drop_partial_line(results_path)
    done = {(r["task_id"], r["sample"]) for r in read_results(results_path)}
    jobs = [(t, k) for t in tasks for k in range(config.samples) if (t.id, k) not in done]
    lock = threading.Lock()
    # In-process models serve all episodes at once: their turns are batched, not queued one by one.
    shared = shared_engine(policy)
    limits = EpisodeLimits(max_turns=config.max_turns, max_context=config.max_context)

    def one(task: Task, sample: int) -> dict[str, Any]:
        seed = None if config.seed is None else config.seed + sample
        sampling = Sampling(temperature=config.temperature, max_tokens=config.max_tokens, seed=seed)
        trajectory = run_episode(task, shared, sampling, limits, backend=backend, sample=sample)
        trajectory.save(out / "trajectories" / f"{_safe(task.id)}__{sample}.json")
        return result_row(trajectory)

    pool = ThreadPoolExecutor(max_workers=max(config.workers, 1))
    try:
        pending = {pool.submit(one, t, k) for t, k in jobs}
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                row = future.result()
                with lock, results_path.open("a") as handle:
                    handle.write(json.dumps(row) + "\n")
                on_result(row)
    except BaseException:
        # Ctrl-C or a crash: episodes in flight end at once and are not recorded, so that
        # --resume runs them again; everything already in results.jsonl is kept.
        close_all()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        if shared is not policy:
            shared.close()
    rows = read_results(results_path)
    report = build_report(rows, config)
    write_outputs(rows, report, tasks, out)
    return report


def result_row(t: Trajectory) -> dict[str, Any]:
    return {
        "task_id": t.task_id, "sample": t.sample, "reward": t.reward, "resolved": t.reward >= 1.0,
        "exit_status": t.exit_status, "error": t.error, "turns": t.turns,
        "prompt_tokens": t.prompt_tokens, "completion_tokens": t.completion_tokens,
        "wall_s": t.timings.get("total_s", 0.0), "model_patch": t.model_patch, "policy": t.policy,
    }


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimator of Chen et al. (2021): 1 - C(n-c, k) / C(n, k)."""
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def build_report(rows: list[dict[str, Any]], config: EvalConfig) -> dict[str, Any]:
    by_task: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_task[row["task_id"]].append(row)
    ks = sorted({1, config.samples})
    pass_k = {f"pass@{k}": mean(pass_at_k(len(r), sum(x["resolved"] for x in r), k) for r in by_task.values()) if by_task else 0.0
              for k in ks if all(len(r) >= k for r in by_task.values())}
    return {
        "checkpoint": config.checkpoint,
        "tasks": config.tasks,
        "episodes": len(rows),
        "task_count": len(by_task),
        "resolve_rate": mean(r["resolved"] for r in rows) if rows else 0.0,
        "mean_reward": mean(r["reward"] for r in rows) if rows else 0.0,
        **pass_k,
        "mean_turns": mean(r["turns"] for r in rows) if rows else 0.0,
        "total_prompt_tokens": sum(r["prompt_tokens"] for r in rows),
        "total_completion_tokens": sum(r["completion_tokens"] for r in rows),
        "mean_wall_s": mean(r["wall_s"] for r in rows) if rows else 0.0,
        "exit_statuses": dict(Counter(r["exit_status"] for r in rows)),
        "errors": sum(bool(r["error"]) for r in rows),
        "per_task": {t: {"samples": len(r), "resolved": sum(x["resolved"] for x in r), "mean_reward": mean(x["reward"] for x in r)}
                     for t, r in sorted(by_task.items())},
    }


def write_outputs(rows: list[dict], report: dict, tasks: list[Task], out: Path) -> None:
    (out / "report.json").write_text(json.dumps(report, indent=1))
    swe = {t.id for t in tasks if t.env_class == "swe"}
    with (out / "predictions.jsonl").open("w") as handle:
        for row in rows:
            if row["task_id"] in swe and row["sample"] == 0:
                handle.write(json.dumps({"instance_id": row["task_id"], "model_name_or_path": row["policy"], "model_patch": row["model_patch"]}) + "\n")
    lines = [
        f"# Evaluation of `{report['checkpoint']}` on `{report['tasks']}`", "",
        f"- episodes: {report['episodes']} over {report['task_count']} tasks",
        f"- resolve rate: {report['resolve_rate']:.1%}; mean reward {report['mean_reward']:.3f}",
        *[f"- {k}: {v:.3f}" for k, v in report.items() if k.startswith("pass@")],
        f"- mean turns {report['mean_turns']:.1f}; tokens {report['total_prompt_tokens']} prompt / {report['total_completion_tokens']} completion",
        f"- mean wall time per episode {report['mean_wall_s']:.1f}s; exit statuses {report['exit_statuses']}", "",
        "| task | samples | resolved | mean reward |", "|---|---|---|---|",
        *[f"| {t} | {v['samples']} | {v['resolved']} | {v['mean_reward']:.2f} |" for t, v in report["per_task"].items()],
    ]
    (out / "report.md").write_text("\n".join(lines) + "\n")


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
