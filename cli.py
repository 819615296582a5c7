"""The `harness` command. Thin: parse arguments, call a package, print."""

from __future__ import annotations

import functools
import json
import logging
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from sandboxes import SandboxError, SandboxSpec, get_backend, install_signal_handlers
from sandboxes.images import BASE_IMAGE
from harness.errors import HarnessError
from trainer.errors import TrainerError
from tasks.errors import TaskError

app = typer.Typer(help="Agentic coding harness: sandboxes, verifiable rewards, eval, RL training.", no_args_is_help=True)
sandbox_app = typer.Typer(help="Create, use and clean up sandboxes.", no_args_is_help=True)
data_app = typer.Typer(help="Prepare datasets in the SkyRL-compatible Parquet schema.", no_args_is_help=True)
tasks_app = typer.Typer(help="List, inspect and validate task sets.", no_args_is_help=True)
app.add_typer(sandbox_app, name="sandbox")
app.add_typer(data_app, name="data")
app.add_typer(tasks_app, name="tasks")
console = Console()
BackendOption = typer.Option("auto", "--backend", help="docker, local (bubblewrap) or auto.")
EngineOption = typer.Option("auto", "--engine", help="What samples a checkpoint folder: transformers, vllm, or auto (vLLM on a GPU when installed).")


def friendly_errors(command):
    """Print our own errors as one clear line and exit non-zero, without a traceback."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        install_signal_handlers()
        try:
            return command(*args, **kwargs)
        except (SandboxError, TaskError, HarnessError, TrainerError) as err:
            console.print(f"[bold red]error:[/] {err}", highlight=False)
            raise typer.Exit(1)
        except KeyboardInterrupt:
            console.print("[yellow]interrupted; sandboxes closed[/]")
            raise typer.Exit(130)

    return wrapper


@app.callback()
def main(verbose: bool = typer.Option(False, "--verbose", "-v", help="Log diagnostics to stderr.")):
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")


# -- sandbox -------------------------------------------------------------------------------------


@sandbox_app.command("build-base")
@friendly_errors
def sandbox_build_base(
    rootfs_only: bool = typer.Option(False, help="Only debootstrap the root filesystem (for the local backend)."),
):
    """Build the default base image locally (debootstrap + docker import); a no-op when up to date."""
    from sandboxes.images import base_rootfs, build_base_image, build_rootfs

    with console.status("building the base image (debootstrap takes about a minute)") as status:
        show = lambda line: status.update(f"[dim]{line[:100]}")  # noqa: E731
        if rootfs_only:
            console.print(f"root filesystem: {build_rootfs(on_line=show)}")
        else:
            console.print(f"image: {build_base_image(on_line=show)} (also tagged {BASE_IMAGE}); root filesystem: {base_rootfs()}")


@sandbox_app.command("exec")
@friendly_errors
def sandbox_exec(
    command: str = typer.Argument(..., help="A bash command line."),
    image: str = typer.Option(BASE_IMAGE, help="Image (docker) or root filesystem directory (local)."),
    timeout: float = typer.Option(60.0, help="Seconds before the command is interrupted."),
    backend: str = BackendOption,
):
    """Run one command in a fresh sandbox, print its output and exit with its exit code."""
    with get_backend(backend).create(SandboxSpec(image=image)) as sb:
        result = sb.exec(command, timeout=timeout)
    sys.stdout.write(result.output)
    if result.message:
        console.print(f"[yellow]{result.message}", highlight=False)
    raise typer.Exit(result.exit_code if 0 <= result.exit_code < 256 else 1)


@sandbox_app.command("shell")
@friendly_errors
def sandbox_shell(
    image: str = typer.Option(BASE_IMAGE, help="Image (docker) or root filesystem directory (local)."),
    timeout: float = typer.Option(300.0, help="Seconds before each command is interrupted."),
    backend: str = BackendOption,
):
    """An interactive session in a new sandbox (state persists between lines; Ctrl-D leaves)."""
    with get_backend(backend).create(SandboxSpec(image=image)) as sb:
        console.print(f"sandbox {sb.id} ({sb.backend}); Ctrl-D to leave", style="dim")
        while True:
            try:
                line = input("$ ")
            except EOFError:
                break
            if line.strip():
                result = sb.exec(line, timeout=timeout)
                sys.stdout.write(result.output)
                if result.exit_code or result.message:
                    console.print(f"[dim]exit {result.exit_code} {result.message}", highlight=False)


@sandbox_app.command("ls")
@friendly_errors
def sandbox_ls(backend: str = BackendOption):
    """List the sandboxes that exist now, with their owner process and run id."""
    rows = get_backend(backend).list()
    table = Table("id", "status", "image", "owner", "run id")
    for row in rows:
        table.add_row(row["id"], row.get("status", ""), row.get("image", ""), row.get("harness.owner", ""), row.get("harness.run_id", ""))
    console.print(table if rows else "no sandboxes")


@sandbox_app.command("prune")
@friendly_errors
def sandbox_prune(
    all_: bool = typer.Option(False, "--all", help="Also remove sandboxes of processes that still run."),
    backend: str = BackendOption,
):
    """Remove sandboxes and snapshots left behind by crashed processes."""
    removed = get_backend(backend).prune(everything=all_)
    for name in removed:
        console.print(f"removed {name}")
    console.print(f"{len(removed)} removed")


@sandbox_app.command("bench")
@friendly_errors
def sandbox_bench():
    """Benchmark the runtime against `docker exec` and docker-py in one run (prints ratios)."""
    from bench.sandbox_bench import main as run_bench

    run_bench()


# -- evaluation ----------------------------------------------------------------------------------


@app.command("eval")
@friendly_errors
def eval_command(
    checkpoint: str = typer.Option("gold", help="gold, gold-no-tools, empty, replay:PATH, a checkpoint folder, or endpoint:MODEL."),
    tasks: str = typer.Option("swe-demo", "--tasks", help="Task set: built-in name (swe-demo, gsm8k, gsm8k-tool) or path."),
    max_turns: Optional[int] = typer.Option(None, help="Turn limit per episode (default: the task's own, 30 for repo tasks)."),
    workers: int = typer.Option(4, help="Episodes run at once."),
    samples: int = typer.Option(1, help="Attempts per task (k of pass@k)."),
    temperature: float = typer.Option(0.0, help="Sampling temperature (0 = greedy)."),
    max_tokens: int = typer.Option(1024, help="Tokens per assistant turn."),
    limit: Optional[int] = typer.Option(None, help="Only the first N tasks of the set."),
    output: Optional[Path] = typer.Option(None, help="Run directory (default runs/eval-<checkpoint>-<tasks>)."),
    resume: bool = typer.Option(False, help="Finish an interrupted run in --output without redoing its episodes."),
    base_url: Optional[str] = typer.Option(None, help="Endpoint base URL for endpoint:MODEL (else $OPENAI_BASE_URL)."),
    backend: str = BackendOption,
    engine: str = EngineOption,
):
    """Evaluate a checkpoint, endpoint or scripted policy on a task set; writes a report."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from harness.evaluate import EvalConfig, evaluate
    from harness.policies.factory import make_policy
    from tasks.taskset import load_tasks

    with console.status(f"loading {tasks}"):
        task_list = load_tasks(tasks)[:limit]
    sandbox_backend = get_backend(backend) if any(t.sandbox for t in task_list) else None
    if sandbox_backend is not None and sandbox_backend.name != "docker":
        console.print("[yellow]no Docker engine answers: episodes run in the local bubblewrap backend[/]")
    name = Path(checkpoint).name or checkpoint
    output = output or Path("runs") / f"eval-{name.replace(':', '_')}-{Path(tasks).stem}"
    config = EvalConfig(tasks=tasks, checkpoint=checkpoint, output=str(output), samples=samples, workers=workers,
                        max_turns=max_turns, temperature=temperature, max_tokens=max_tokens, backend=backend)
    policy = make_policy(checkpoint, base_url=base_url, engine=engine)
    stats = {"resolved": 0, "errors": 0}
    columns = [TextColumn("episodes"), BarColumn(), MofNCompleteColumn(), TextColumn("resolved {task.fields[resolved]} errors {task.fields[errors]}"), TimeElapsedColumn()]
    with Progress(*columns, console=console) as progress:
        bar = progress.add_task("eval", total=len(task_list) * samples, resolved=0, errors=0)

        def advance(row):
            stats["resolved"] += row["resolved"]
            stats["errors"] += bool(row["error"])
            progress.update(bar, advance=1, **stats)

        try:
            report = evaluate(task_list, policy, config, sandbox_backend, resume=resume, on_result=advance)
        finally:
            policy.close()
    console.print((output / "report.md").read_text(), highlight=False)
    console.print(f"run directory: {output}")
    return report


@app.command("generate")
@friendly_errors
def generate_command(
    checkpoint: str = typer.Option(..., help="gold, gold-no-tools, empty, replay:PATH, a checkpoint folder, or endpoint:MODEL."),
    tasks: str = typer.Option("swe-demo", "--tasks", help="Task set: built-in name or path."),
    output: Path = typer.Option(..., help="Dataset directory (trajectories.parquet, README.md, dataset_card.json)."),
    samples: int = typer.Option(1, help="Trajectories per task."),
    keep: str = typer.Option("all", help="all, or rewarded (reward >= --min-reward)."),
    min_reward: float = typer.Option(1.0, help="Threshold for --keep rewarded."),
    temperature: float = typer.Option(1.0, help="Sampling temperature."),
    max_turns: Optional[int] = typer.Option(None, help="Turn limit per episode."),
    max_tokens: int = typer.Option(1024, help="Tokens per assistant turn."),
    workers: int = typer.Option(4, help="Episodes run at once."),
    limit: Optional[int] = typer.Option(None, help="Only the first N tasks."),
    resume: bool = typer.Option(False, help="Finish an interrupted generation in --output."),
    base_url: Optional[str] = typer.Option(None, help="Endpoint base URL for endpoint:MODEL."),
    backend: str = BackendOption,
    engine: str = EngineOption,
):
    """Write a synthetic trajectory dataset (Parquet, ready for SFT) with a dataset card."""
    from harness.generate import write_dataset

    if keep not in ("all", "rewarded"):
        raise HarnessError(f"--keep must be all or rewarded, not {keep!r}")
    run_dir = output / "run"
    eval_command(checkpoint=checkpoint, tasks=tasks, max_turns=max_turns, workers=workers, samples=samples,
                 temperature=temperature, max_tokens=max_tokens, limit=limit, output=run_dir, resume=resume,
                 base_url=base_url, backend=backend, engine=engine)
    from harness.evaluate import EvalConfig

    config = EvalConfig(**json.loads((run_dir / "config.json").read_text()))
    card = write_dataset(run_dir, output, config, keep=keep, min_reward=min_reward)
    console.print(f"kept {card['kept']} of {card['generated']} trajectories: {output / 'trajectories.parquet'}")


@app.command("serve")
@friendly_errors
def serve_command(
    checkpoint: str = typer.Option(..., help="A Hugging Face checkpoint folder."),
    host: str = typer.Option("127.0.0.1", help="Address to listen on (localhost by default)."),
    port: int = typer.Option(8000, help="Port."),
    model_name: Optional[str] = typer.Option(None, help="Model id in /v1/models (default: the folder name)."),
    engine: str = EngineOption,
):
    """Serve a local checkpoint as an OpenAI-compatible /v1/chat/completions endpoint (with tools)."""
    from harness.policies.factory import make_policy
    from harness.server import make_server

    if not (Path(checkpoint) / "config.json").is_file():
        raise HarnessError(f"--checkpoint {checkpoint}: not a Hugging Face checkpoint folder (config.json is missing)")
    policy = make_policy(checkpoint, engine=engine)
    name = model_name or Path(checkpoint).name
    server = make_server(policy, name, host, port)
    console.print(f"serving {name} at http://{host}:{server.server_address[1]}/v1 (Ctrl-C stops)")
    try:
        server.serve_forever()
    finally:
        server.server_close()
        policy.close()


model_app = typer.Typer(help="Build and inspect models.", no_args_is_help=True)
app.add_typer(model_app, name="model")


@model_app.command("init-tiny")
@friendly_errors
def model_init_tiny(
    output_dir: Path = typer.Argument(..., help="Where the checkpoint goes."),
    hidden_size: int = typer.Option(64, "--hidden-size", min=8, help="Model width (heads: 4, key/value heads: 2)."),
    layers: int = typer.Option(2, "--layers", min=1, help="Transformer layers."),
    vocab_size: int = typer.Option(2048, "--vocab-size", min=512, help="Tokens, BPE merges and special tokens included."),
    seed: int = typer.Option(0, "--seed", help="Fixes the tokenizer's corpus and the weights."),
    tool_use: bool = typer.Option(False, "--tool-use", help="Fit the tokenizer to tool-calling turns (shorter agent prompts)."),
):
    """Build a tiny random Qwen2-architecture checkpoint with a locally trained tokenizer (tests, CPU runs)."""
    from harness.tiny_model import init_tiny

    path = init_tiny(output_dir, vocab_size=vocab_size, seed=seed, hidden_size=hidden_size, layers=layers, tool_use=tool_use)
    console.print(f"tiny checkpoint: {path}")


# -- training ------------------------------------------------------------------------------------


@app.command("train", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
@friendly_errors
def train_command(
    ctx: typer.Context,
    config: Optional[Path] = typer.Option(None, "--config", help="YAML config (see examples/); dotted overrides follow, e.g. trainer.epochs=5."),
):
    """GRPO on Ray with transformers (CPU/GPU) or vLLM (GPU) rollouts; resumes from the last checkpoint."""
    from trainer.config import load_config
    from trainer.recipe import train

    cfg = load_config(str(config) if config else None, list(ctx.args))
    console.print(f"run directory: {cfg.trainer.output_dir}")

    def show(step, metrics):
        labels = {"train/reward_mean": "reward", "val/reward_mean": "held-out reward", "train/loss": "loss", "time/rollout_s": "rollout_s"}
        parts = [f"step {step}"] + [f"{label} {metrics[k]:.3f}" for k, label in labels.items() if k in metrics]
        console.print("  ".join(parts), highlight=False)

    run_dir = train(cfg, on_step=show)
    console.print(f"done: {run_dir} (checkpoints in {run_dir / 'checkpoints'})")


# -- grading -------------------------------------------------------------------------------------


@app.command("grade")
@friendly_errors
def grade_command(
    predictions: str = typer.Option(..., help="SWE-bench predictions (.jsonl/.json), or `gold` / `empty`."),
    tasks: str = typer.Option("swe-demo", "--tasks", help="Task set: built-in name or path of SWE-bench instances."),
    output: Path = typer.Option(Path("runs/grade"), help="Run directory (results.jsonl, report.json, report.md)."),
    workers: int = typer.Option(2, help="Instances graded at once."),
    fractional: bool = typer.Option(False, help="Reward the share of FAIL_TO_PASS fixed (0 if a PASS_TO_PASS breaks)."),
    backend: str = BackendOption,
):
    """Grade predictions like SWE-bench does, in fresh sandboxes; resumable (rerun to finish)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from tasks.grade_run import grade_predictions, load_predictions, scripted_predictions, summarize
    from tasks.taskset import load_tasks

    with console.status(f"loading {tasks} (images are built once and cached)"):
        instances = [t.metadata["instance"] for t in load_tasks(tasks) if t.env_class == "swe"]
    if not instances:
        raise TaskError(f"{tasks} holds no SWE-bench instances")
    preds = scripted_predictions(instances, predictions) if predictions in ("gold", "empty") else load_predictions(predictions)
    counts = {"resolved": 0, "done": 0}
    columns = [TextColumn("grading"), BarColumn(), MofNCompleteColumn(), TextColumn("resolved {task.fields[resolved]}"), TimeElapsedColumn()]
    with Progress(*columns, console=console) as progress:
        bar = progress.add_task("grade", total=len(preds), resolved=0)

        def advance(report):
            counts["resolved"] += report.resolved
            progress.update(bar, advance=1, resolved=counts["resolved"])

        results = grade_predictions(instances, preds, get_backend(backend), output, workers, fractional, advance)
    summary = summarize(results)
    table = Table("instance", "resolution", "reward", "note")
    for row in results:
        table.add_row(row["instance_id"], row["resolution"], f"{row['reward']:.2f}", ("; ".join(row["rejected"]) or row["invalid_log"] or row["error"])[:80])
    console.print(table)
    console.print(f"resolved {summary['resolved']}/{summary['total']} ({summary['resolve_rate']:.1%}); report: {output / 'report.md'}")


# -- data and tasks ------------------------------------------------------------------------------


@data_app.command("gsm8k")
@friendly_errors
def data_gsm8k(
    output_dir: Path = typer.Option(..., "--output-dir", help="Where train.parquet and validation.parquet go."),
    source: str = typer.Option("hf", help="'hf' (openai/gsm8k on the hub) or a local folder/file of the JSONL or Parquet."),
):
    """Write GSM8K as train/validation Parquet in the SkyRL schema."""
    from tasks.gsm8k import prepare_gsm8k

    for split, path in prepare_gsm8k(output_dir.expanduser(), source=source).items():
        console.print(f"{split}: {path}")


@tasks_app.command("ls")
@friendly_errors
def tasks_ls(source: Optional[str] = typer.Argument(None, help="A task set: built-in name or path.")):
    """List the built-in task sets, or the tasks of one set."""
    from tasks.taskset import BUILTIN_TASKSETS, load_tasks

    if source is None:
        for name in sorted(BUILTIN_TASKSETS):
            console.print(name)
        return
    table = Table("id", "env", "turns", "tools")
    for task in load_tasks(source):
        table.add_row(task.id, task.env_class, str(task.max_turns), ",".join(task.tools))
    console.print(table)


@tasks_app.command("show")
@friendly_errors
def tasks_show(
    task_id: str = typer.Argument(..., help="The task id."),
    source: str = typer.Option(..., "--tasks", help="The task set holding it (built-in name or path)."),
):
    """Print one task: prompt, reward spec, sandbox and metadata."""
    from dataclasses import asdict

    from tasks.taskset import load_tasks

    for task in load_tasks(source):
        if task.id == task_id:
            console.print_json(json.dumps(asdict(task), default=str))
            return
    raise TaskError(f"no task {task_id!r} in {source}; `harness tasks ls {source}` lists them")


@tasks_app.command("synth")
@friendly_errors
def tasks_synth(
    repo: str = typer.Option(..., "--repo", help="A local git repository, a git URL, or a PyPI project name."),
    output: Path = typer.Option(..., help="JSONL of SWE-bench instances to write (appended as tasks are kept)."),
    max_tasks: int = typer.Option(200, help="Stop after this many validated tasks."),
    seed: int = typer.Option(0, help="Seed of the mutation order (a run is reproducible)."),
    workers: int = typer.Option(2, help="Candidates validated at once (each in its own sandbox)."),
    test_command: Optional[str] = typer.Option(None, help="Override the detected test command (pytest by default)."),
    backend: str = BackendOption,
):
    """Synthesize validated repo-fix tasks from a real Python project by planting bugs (AST mutations)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from tasks.synth.pipeline import synthesize

    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("kept {task.fields[kept]}"), TimeElapsedColumn()]
    with Progress(*columns, console=console) as progress:
        bar = progress.add_task("preparing", total=None, kept=0)

        def show(event):
            progress.update(bar, description=event.stage, completed=event.decided, total=event.planned or None, kept=event.kept)
            if event.stage != "candidate":
                progress.console.print(f"[dim]{event.stage}: {event.message}", highlight=False)

        summary = synthesize(repo, output, max_tasks=max_tasks, seed=seed, workers=workers, test_command=test_command,
                             backend=get_backend(backend), on_event=show)
    console.print(f"kept {summary.kept} of {summary.decided} candidates ({summary.flaky} flaky); rejected: {summary.rejected}")
    console.print(f"tasks: {output}; summary: {output}.summary.json")


@tasks_app.command("validate")
@friendly_errors
def tasks_validate(path: Path = typer.Argument(..., help="A .jsonl, .json or .parquet task file.")):
    """Report every malformed record with its line and field; exit 1 if there is any."""
    from tasks.taskset import validate_file

    problems = validate_file(path)
    for problem in problems:
        console.print(f"{path}: {problem}", highlight=False)
    if problems:
        console.print(f"[red]{len(problems)} problem(s)[/]")
        raise typer.Exit(1)
    console.print(f"[green]{path}: ok")


if __name__ == "__main__":
    app()
