"""`harness eval`: run a policy over a task set, k samples per task, and report.

The run directory holds `run.json` (what the run is: policy, task set, sampling, limits; a
`--resume` with anything else is refused, see `infra.rundir`), the resolved `config.json`,
`results.jsonl` (appended as each episode ends, so a killed run resumes without redoing or
losing work), `trajectories/`, SWE-bench `predictions.jsonl`, and `report.json` / `report.md`
(written atomically). An episode that fails for any reason is an error row, never a crashed run.
"""

from __future__ import annotations

import json
from dataclasses import fields
from collections import Counter, defaultdict
from contextlib import nullcontext
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from math import comb
from pathlib import Path
from statistics import mean
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sandboxes import Backend, close_all
from sandboxes.cluster import Cluster
from infra.renames import take_renamed
from infra.rundir import RESULTS, content_hash, open_run
from infra.runlog import append_row, atomic_write, drop_partial_line, read_rows as read_results
from tasks.task import Task

from .batching import shared_policy
from .distributed import PolicySource, run_episodes
from .context import KEEP_ALL, check_summarizer, parse_context
from .episode import Limits, run_episode
from .errors import HarnessError, PolicyError
from .policies.endpoint import EndpointLimits
from .policy import Policy, Sampling
from .eval_queue import AgentSlots, job_specs, start_ahead
from .scaffolds import OWN_LOOP, get_scaffold
from .scaffolds.run import stop_all as stop_scaffolds
from .trajectory import SCORING_FAILED, result_row, scaffold_folder, trajectory_file
from .trajectory_formats import OWN_FORMAT, check_format, export_trajectories

# What makes two runs the same run: these EvalConfig fields, plus the task ids (`identity`).
IDENTITY_FIELDS = (
    "checkpoint",
    "base_url",
    "tasks",
    "limit",
    "samples",
    "max_turns",
    "temperature",
    "max_tokens",
    "max_context",
    "seed",
)


class EvalConfig(BaseModel):
    """One evaluation run's settings, built whole where the run is asked for (`harness eval|generate`'s flags and
    `--config` YAML, or Python) and passed whole to `prepare_eval` and `evaluate`."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    tasks: str
    checkpoint: str
    output: str = ""  # the run directory; empty: runs/eval-<checkpoint>-<tasks>
    samples: int = Field(1, ge=1)
    workers: int = Field(4, ge=1)
    max_turns: int | None = Field(None, ge=1)  # a cap: a task's own limit applies if lower
    temperature: float = Field(0.0, ge=0.0)
    max_tokens: int = Field(1024, ge=1)
    max_context: int = Field(Limits.max_context, ge=1)
    seed: int | None = 0
    backend: str = "auto"
    limit: int | None = Field(None, ge=1)
    base_url: str | None = None  # kept for endpoint:MODEL checkpoints only
    episode_timeout: float = Field(Limits.episode_timeout, gt=0)  # seconds per episode (checked between turns)
    max_format_errors: int = Field(Limits.max_format_errors, ge=1)  # turns in a row without a usable tool call
    # Sandboxes of one image started ahead of the queue (0: none); with it, grading overlaps the next episodes.
    prestart: int = Field(0, ge=0)
    # SWE-bench grading: default (test and runner-config edits neutralized) or refuse (scored 0); None: default, and
    # no SWE-bench task needed.
    grading_mode: str | None = None
    reward_mode: str | None = None  # GSM8K's rule for every task; None: each task's own
    # What drives the turns: `harness` (our own loop) or a registered scaffold (harness.scaffolds).
    scaffold: str = "harness"
    # What each prompt holds of an episode's history (harness.context): keep-all, mask-observations:N, window:N,
    # summarize:N.
    context: str = "keep-all"
    summarizer: str = ""  # MODEL@URL: the endpoint that writes summarize's summaries ("": the policy)
    engine: str = "auto"  # how a checkpoint folder is run: transformers, vllm or auto
    # Trajectories are always written in our own format (trajectories/); another registered format (`atif`) is
    # written beside them, in `<run>/<format>/`, same file names.
    trajectory_format: str = OWN_FORMAT
    ray_address: str | None = None  # episodes on a Ray cluster's nodes
    endpoint: EndpointLimits | None = Field(None, exclude=True)  # bounds on endpoint calls
    # What the reader of the report should know about how the episodes ran (e.g. the harness's own tool prompt).
    notes: list[str] = Field(default_factory=list)

    @field_validator("context")
    @classmethod
    def _known_context(cls, value: str) -> str:
        parse_context(value)
        return value

    @field_validator("trajectory_format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        return check_format(value)

    @field_validator("episode_timeout", "engine", "backend", "scaffold", "context", "trajectory_format", mode="before")
    @classmethod
    def _unset_is_default(cls, value: Any, info) -> Any:
        return cls.model_fields[info.field_name].default if value is None else value

    @model_validator(mode="after")
    def _resolved(self) -> "EvalConfig":
        check_summarizer(self.context, self.summarizer)
        self.output = self.output or str(default_output(self.checkpoint, self.tasks))
        if not self.checkpoint.startswith("endpoint:"):
            self.base_url = None
        return self

    def identity(self, tasks: list[Task]) -> dict[str, Any]:
        """What this run is; `--resume` must ask for the same."""
        return {
            **{k: getattr(self, k) for k in IDENTITY_FIELDS},
            **({"scaffold": self.scaffold} if self.scaffold != OWN_LOOP else {}),  # runs of our own loop as before
            **({"context": self.context} if self.context != KEEP_ALL.name else {}),
            **({"summarizer": self.summarizer} if self.summarizer else {}),
            "task_ids_sha256": content_hash(json.dumps([t.id for t in tasks])),
        }


def default_output(checkpoint: str, tasks: str) -> Path:
    name = Path(checkpoint).name or checkpoint
    return Path("runs") / f"eval-{name.replace(':', '_')}-{Path(tasks).stem}"


def check_run_dir(tasks: list[Task], config: EvalConfig, resume: bool, force: bool) -> None:
    """Refuse a run `evaluate` would refuse, before anything expensive (loading a model) happens."""
    open_run(Path(config.output), "eval", config.identity(tasks), resume=resume, force=force, check_only=True)


def evaluate(
    tasks: list[Task],
    policy: Policy,
    config: EvalConfig,
    backend: Backend | None,
    resume: bool = False,
    on_result: Callable[[dict[str, Any]], None] = lambda row: None,
    force: bool = False,
    cluster: Cluster | None = None,
    source: PolicySource | None = None,
) -> dict[str, Any]:
    out = Path(config.output)
    results_path = out / RESULTS
    if not open_run(out, "eval", config.identity(tasks), resume=resume, force=force):
        atomic_write(out / "config.json", config.model_dump_json(indent=1))
    (out / "trajectories").mkdir(parents=True, exist_ok=True)
    drop_partial_line(results_path)
    done = {(r["task_id"], r["sample"]) for r in read_results(results_path)}
    jobs = [(t, k) for t in tasks for k in range(config.samples) if (t.id, k) not in done]
    limits = Limits.of(config)
    if cluster is not None:  # the episodes run on the nodes of a Ray cluster; `source` builds the policy there
        run_episodes(
            jobs,
            source or PolicySource(config.checkpoint),
            lambda k: _sampling(config, k),
            limits,
            cluster,
            out,
            on_result,
        )
        return finish(tasks, config, out)
    # In-process models serve all episodes at once: their turns are batched, not queued one by one.
    shared = shared_policy(policy)

    scaffold = get_scaffold(config.scaffold)
    ahead = (
        start_ahead(jobs, backend, config.prestart, config.workers)
        if config.prestart > 0 and backend is not None
        else None
    )
    slots = AgentSlots(config.workers)

    def one(task: Task, sample: int) -> dict[str, Any]:
        with slots.slot() as agent_done, ahead.job(job_specs(task)) if ahead else nullcontext():
            try:
                trajectory = run_episode(
                    task,
                    shared,
                    _sampling(config, sample),
                    limits,
                    backend=ahead or backend,
                    sample=sample,
                    on_agent_done=agent_done if ahead else None,
                    scaffold=scaffold,
                    artifacts=scaffold_folder(out, task.id, sample) if scaffold else None,
                )
            except Exception as err:  # noqa: BLE001 - a bad record or a policy bug fails one episode, not the run
                return error_row(task, sample, err, policy.name)
        trajectory.save(trajectory_file(out, task.id, sample))
        return result_row(trajectory)

    # With pre-start, a worker grading one episode does not hold back the next: twice the threads, same agent slots.
    pool = ThreadPoolExecutor(max_workers=max(config.workers, 1) * (2 if ahead else 1))
    try:
        pending = {pool.submit(one, t, k) for t, k in jobs}
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            # Every episode that ended is recorded before one that raised (Ctrl-C) stops the run.
            for future in sorted(finished, key=lambda f: f.exception() is not None):
                row = future.result()
                append_row(results_path, row)
                on_result(row)
    except BaseException:
        # Ctrl-C or a crash: episodes in flight end at once and are not recorded, so that
        # --resume runs them again; everything already in results.jsonl is kept. Closing the
        # sandboxes and interrupting the policy's calls lets the workers return within seconds.
        pool.shutdown(wait=False, cancel_futures=True)
        policy.interrupt()
        stop_scaffolds()
        if ahead is not None:
            ahead.close()
        close_all()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        if ahead is not None:
            ahead.close()
        if shared is not policy:
            shared.close()
    return finish(tasks, config, out)


def finish(tasks: list[Task], config: EvalConfig, out: Path) -> dict[str, Any]:
    """The report of everything in the run's results.jsonl."""
    rows = read_results(out / RESULTS)
    report = build_report(rows, config)
    write_outputs(rows, report, tasks, out)
    if config.trajectory_format != OWN_FORMAT and any((out / "trajectories").glob("*.json")):
        export_trajectories(out, config.trajectory_format)
    return report


def _sampling(config: EvalConfig, sample: int) -> Sampling:
    return Sampling(
        temperature=config.temperature,
        max_tokens=config.max_tokens,
        seed=None if config.seed is None else config.seed + sample,
    )


#: The `endpoint:` mapping's keys, which `harness eval` also takes as flags of their own.
ENDPOINT_KEYS = tuple(f.name for f in fields(EndpointLimits))


def load_eval_config(
    path: str | Path | None, flags: dict[str, Any] | None = None, defaults: dict[str, Any] | None = None
) -> EvalConfig:
    """One eval run's `EvalConfig`, as `harness train --config` reads a `TrainConfig`: the YAML at `path` read whole
    (any EvalConfig key; `endpoint:` a mapping of EndpointLimits keys), under `flags` (what was given on the command
    line, which wins; the endpoint's keys among them go into `endpoint`) and over `defaults` (the command's own, for
    what neither sets). Former spellings are read with a warning."""
    settings = _read_eval_yaml(path) if path is not None else {}
    flags = dict(flags or {})
    endpoint = {**settings.pop("endpoint", {}), **{k: flags.pop(k) for k in ENDPOINT_KEYS if k in flags}}
    try:
        limits = EndpointLimits.from_dict(endpoint)
    except PolicyError as err:
        raise HarnessError(f"eval config {path}: {err}") from None
    return EvalConfig(**{**(defaults or {}), **settings, **flags, "endpoint": limits})


def _read_eval_yaml(path: str | Path) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as err:
        raise HarnessError(f"cannot read eval config {path}: {err}") from None
    known = sorted(EvalConfig.model_fields)
    if not isinstance(data, dict):
        raise HarnessError(f"eval config {path} must be a mapping with keys among {', '.join(known)}")
    if "grading" in data:  # the former `grading: {mode: ...}`
        grading = data.pop("grading")
        if not isinstance(grading, dict) or set(grading) != {"mode"}:
            raise HarnessError(f"eval config {path}: write `grading_mode: default` or `grading_mode: refuse`")
        data["grading.mode"] = grading["mode"]
    try:
        data = take_renamed(data, "grading.mode", "grading_mode", f"eval config {path}: ")
    except ValueError as err:
        raise HarnessError(str(err)) from None
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise HarnessError(f"eval config {path}: unknown key(s) {', '.join(unknown)}; known: {', '.join(known)}")
    if not isinstance(data.get("endpoint", {}), dict):
        raise HarnessError(f"eval config {path}: `endpoint` must be a mapping of timeouts and retries")
    return data


def error_row(task: Task, sample: int, err: Exception, policy_name: str) -> dict[str, Any]:
    """The result of an episode that could not even run (a malformed record, a policy bug)."""
    return {
        "task_id": task.id,
        "sample": sample,
        "reward": 0.0,
        "resolved": False,
        "exit_status": "error",
        "error": f"{type(err).__name__}: {err}",
        "turns": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "wall_s": 0.0,
        "model_patch": "",
        "policy": policy_name,
        "verdict": "error",
        "reason": f"{type(err).__name__}: {err}",
    }


# Kinds of error that mean the harness could not evaluate the episode (not that the model did badly).
FAILURE_KINDS = ("policy_error", "sandbox_error", "scoring_error", "scaffold_error", "error")


def error_kind(row: dict[str, Any]) -> str:
    """What kind of error a row carries: its exit status, or `scoring_error` when only scoring failed."""
    if row["exit_status"] not in FAILURE_KINDS and SCORING_FAILED in row["error"]:
        return "scoring_error"
    return row["exit_status"]


def failed(row: dict[str, Any]) -> bool:
    return bool(row["error"]) and error_kind(row) in FAILURE_KINDS


def row_verdict(row: dict[str, Any]) -> tuple[str, str]:
    """(verdict, reason) of a row: `error` where the harness could not evaluate the episode, else the grader's."""
    if failed(row):
        return "error", row["error"]
    return row.get("verdict") or ("resolved" if row["resolved"] else "unresolved"), row.get("reason", "")


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
    pass_k = {
        f"pass@{k}": mean(pass_at_k(len(r), sum(x["resolved"] for x in r), k) for r in by_task.values())
        if by_task
        else 0.0
        for k in ks
        if all(len(r) >= k for r in by_task.values())
    }
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
        "errors_by_kind": dict(Counter(error_kind(r) for r in rows if r["error"])),
        "error_examples": _error_examples(rows),
        "all_failed": bool(rows) and all(failed(r) for r in rows),
        "grading_mode": config.grading_mode or "default",
        "neutralized": sum(bool(r.get("neutralized")) for r in rows),
        "verdicts": dict(sorted(Counter(row_verdict(r)[0] for r in rows).items())),
        "notes": config.notes,
        "per_task": {
            t: {
                "samples": len(r),
                "resolved": sum(x["resolved"] for x in r),
                "mean_reward": mean(x["reward"] for x in r),
                "verdicts": dict(sorted(Counter(row_verdict(x)[0] for x in r).items())),
                "reason": next((why for x in r if (why := row_verdict(x)[1])), ""),
                **(
                    {"steps": {x["sample"]: x["steps"] for x in r if "steps" in x}}
                    if any("steps" in x for x in r)
                    else {}
                ),
            }
            for t, r in sorted(by_task.items())
        },
    }


def _error_examples(rows: list[dict[str, Any]], per_kind: int = 3) -> dict[str, list[str]]:
    examples: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        if row["error"] and len(examples[error_kind(row)]) < per_kind:
            examples[error_kind(row)].append(f"{row['task_id']}#{row['sample']}: {row['error'][:300]}")
    return dict(examples)


def _step_lines(report: dict) -> list[str]:
    """Each sample of a multi-step task: its steps' rewards in the order they ran, and where a step ended it."""
    return [
        f"- {task}#{sample}: "
        + ", ".join(
            f"{s['step']} {'no verdict' if s['reward'] is None else format(s['reward'], 'g')}"
            + (f" (stopped: {s['stopped']})" if "stopped" in s else "")
            for s in steps
        )
        for task, summary in report["per_task"].items()
        for sample, steps in sorted(summary.get("steps", {}).items())
    ]


def write_outputs(rows: list[dict], report: dict, tasks: list[Task], out: Path) -> None:
    from .kinds import kind_of

    report["task_notes"] = {
        t.id: lines for t in tasks if kind_of(t).report_notes and (lines := kind_of(t).report_notes(t))
    }
    atomic_write(out / "report.json", json.dumps(report, indent=1))

    swe = {t.id for t in tasks if kind_of(t).outcome == "patch"}  # their patches are SWE-bench predictions
    predictions = [
        json.dumps(
            {"instance_id": row["task_id"], "model_name_or_path": row["policy"], "model_patch": row["model_patch"]}
        )
        for row in rows
        if row["task_id"] in swe and row["sample"] == 0
    ]
    atomic_write(out / "predictions.jsonl", "".join(line + "\n" for line in predictions))
    errors = [
        f"- {kind}: {count}" + "".join(f"\n  - `{example}`" for example in report["error_examples"].get(kind, []))
        for kind, count in sorted(report["errors_by_kind"].items())
    ]
    lines = [
        f"# Evaluation of `{report['checkpoint']}` on `{report['tasks']}`",
        "",
        f"- episodes: {report['episodes']} over {report['task_count']} tasks",
        f"- resolve rate: {report['resolve_rate']:.1%}; mean reward {report['mean_reward']:.3f}",
        *[f"- {k}: {v:.3f}" for k, v in report.items() if k.startswith("pass@")],
        f"- mean turns {report['mean_turns']:.1f}; tokens {report['total_prompt_tokens']} prompt / {report['total_completion_tokens']} completion",
        f"- mean wall time per episode {report['mean_wall_s']:.1f}s; exit statuses {report['exit_statuses']}",
        "- verdicts: " + ", ".join(f"{verdict} {count}" for verdict, count in report["verdicts"].items()),
        *(
            [
                f"- grading mode {report['grading_mode']}; patches with test or runner-config edits neutralized: {report['neutralized']}"
            ]
            if swe
            else []
        ),
        *[f"- note: {note}" for note in report["notes"]],
        "",
        *(
            [
                f"## Errors: {report['errors']} of {report['episodes']} episodes"
                + (" (every episode failed)" if report["all_failed"] else ""),
                "",
                *errors,
                "",
            ]
            if errors
            else []
        ),
        "| task | samples | resolved | mean reward | verdicts | reason |",
        "|---|---|---|---|---|---|",
        *[
            f"| {t} | {v['samples']} | {v['resolved']} | {v['mean_reward']:.2f} | "
            + ", ".join(f"{verdict} {count}" for verdict, count in v["verdicts"].items())
            + f" | {v['reason'].replace('|', '/').replace(chr(10), ' ')[:200]} |"
            for t, v in report["per_task"].items()
        ],
        *(["", "## Steps (multi-step tasks)", "", *steps] if (steps := _step_lines(report)) else []),
        *(
            [
                "",
                "## How the tasks were made",
                "",
                *[f"- {t}: " + "; ".join(n) for t, n in report["task_notes"].items()],
            ]
            if report["task_notes"]
            else []
        ),
    ]
    atomic_write(out / "report.md", "\n".join(lines) + "\n")
