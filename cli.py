"""The `harness` command. Thin: parse arguments, call a package, print."""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Optional

import pydantic
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sandboxes import SandboxError, SandboxSpec, get_backend, install_signal_handlers
from sandboxes.images import BASE_IMAGE, DEFAULT_PYTHON
from harness.errors import HarnessError
from harness.policies.factory import HELP as POLICY_HELP
from infra.errors import InfraError
from trainer.errors import TrainerError
from tasks.errors import TaskError

app = typer.Typer(
    help="Agentic coding harness: sandboxes, verifiable rewards, eval, RL training.", no_args_is_help=True
)
sandbox_app = typer.Typer(help="Create, use and clean up sandboxes.", no_args_is_help=True)
data_app = typer.Typer(help="Prepare datasets in the SkyRL-compatible Parquet schema.", no_args_is_help=True)
tasks_app = typer.Typer(help="List, inspect, validate and export task sets.", no_args_is_help=True)
app.add_typer(sandbox_app, name="sandbox")
app.add_typer(data_app, name="data")
app.add_typer(tasks_app, name="tasks")
trajectories_app = typer.Typer(help="Write a run's trajectories in other formats.", no_args_is_help=True)
app.add_typer(trajectories_app, name="trajectories")
console = Console()
BackendOption = typer.Option(
    "auto",
    "--backend",
    help="docker, local (bubblewrap, base image only), overlay (bubblewrap, any image), podman or auto.",
)
PythonOption = typer.Option(
    None,
    "--python",
    help="The base's Python (3.9, 3.11, 3.13); default: chosen from the project's "
    "declared range (requires-python, python_requires, classifiers) and its dependencies' date.",
)
RayAddressOption = typer.Option(
    None,
    "--ray-address",
    help="Run on the nodes of this Ray cluster (auto, HOST:PORT): each node runs "
    "as many sandboxes at once as its `sandbox` resource says, on its own engine.",
)
ScaffoldOption = typer.Option(
    "harness",
    "--scaffold",
    help="What drives the turns: harness (our own loop), mini-swe-agent, "
    "or a registered scaffold / module:Name (docs/scaffolds.md).",
)
TrajectoryFormatOption = typer.Option(
    "harness",
    "--trajectory-format",
    help="Also write each trajectory in this format, beside our own, in <output>/<format>/ "
    "(atif: Harbor's Agent Trajectory Interchange Format); harness: our own only.",
)
ContextOption = typer.Option(
    "keep-all",
    "--context",
    help="What each prompt holds of the history: keep-all, mask-observations:TOKENS (older tool results "
    "replaced past that many tokens of them), window:N (the task, the first turn and the last N turns), "
    "summarize:TOKENS (past that many tokens the policy summarizes the turns between the first and the last).",
)
SummarizerOption = typer.Option(
    "",
    "--summarizer",
    help="MODEL@URL: an OpenAI-compatible endpoint that writes summarize:TOKENS's summaries instead of the policy.",
)
GradingModeOption = typer.Option(
    None,
    "--grading-mode",
    help="SWE-bench grading: default (edits to test files and runner "
    "configuration are neutralized, as the official harness does) or refuse (any such edit scores 0).",
)
FormerGradingOption = typer.Option(None, "--grading", hidden=True, help="Former name of --grading-mode.")
EngineOption = typer.Option(
    "auto",
    "--engine",
    help="What samples a checkpoint folder: transformers, vllm, or auto (vLLM on a GPU when installed).",
)
# The policy of eval, generate and run: one help; eval alone runs `gold` when none is named (a setup check),
# generate and run need one named.
CheckpointOption = typer.Option("gold", "--checkpoint", help=POLICY_HELP)
RequiredCheckpointOption = typer.Option(..., "--checkpoint", help=POLICY_HELP)
TasksOption = typer.Option(
    "swe-demo", "--tasks", help="Task set: built-in name (swe-demo, gsm8k, gsm8k-tool; `harness tasks ls`) or path."
)
LimitOption = typer.Option(None, "--limit", min=1, help="Only the first N tasks of the set.")
MaxTurnsOption = typer.Option(
    None,
    "--max-turns",
    min=1,
    help="A cap on the turns per episode: a task's own limit applies if lower (30 for a request on --repo).",
)
MaxTokensOption = typer.Option(1024, "--max-tokens", min=1, help="Tokens per assistant turn.")
SamplesOption = typer.Option(1, "--samples", min=1, help="Episodes per task (the k of pass@k).")
TEMPERATURE_HELP = "Sampling temperature (0 = greedy)."
# generate samples at 1.0: several trajectories per task for a dataset are alike at 0
TemperatureOption = typer.Option(0.0, "--temperature", min=0.0, max=10.0, help=TEMPERATURE_HELP)
DatasetTemperatureOption = typer.Option(1.0, "--temperature", min=0.0, max=10.0, help=TEMPERATURE_HELP)
BaseUrlOption = typer.Option(None, "--base-url", help="Endpoint base URL for endpoint:MODEL (else $OPENAI_BASE_URL).")
EpisodeWorkersOption = typer.Option(4, "--workers", min=1, max=1024, help="Episodes run at once.")
# grade, tasks synth and tasks mine run test suites, heavier than an episode's turns: fewer at once
SandboxWorkersOption = typer.Option(2, "--workers", min=1, max=256, help="Test runs at once, each in its own sandbox.")
EvalConfigOption = typer.Option(
    None,
    "--config",
    help="YAML of the run's settings, read whole as `harness train --config` is: any flag's key in snake_case "
    "(tasks, checkpoint, max_turns, max_context, episode_timeout, max_format_errors, grading_mode, ...) and "
    "`endpoint:` (connect_timeout, read_timeout, retries, turn_timeout, backoff); flags given win.",
)
ResumeOption = typer.Option(
    False, "--resume", help="Finish an interrupted run in --output without redoing its episodes."
)
ForceOption = typer.Option(
    False, "--force", help="--output holds another run: set it aside (renamed .old-<time>) and start anew."
)


def friendly_errors(command):
    """Print our own errors as one clear line and exit non-zero, without a traceback."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        install_signal_handlers()
        try:
            return command(*args, **kwargs)
        except (SandboxError, TaskError, HarnessError, TrainerError, InfraError) as err:
            console.print(f"[bold red]error:[/] {escape(str(err))}", highlight=False)
            raise typer.Exit(1)
        except pydantic.ValidationError as err:  # a setting built here from flags and YAML (EvalConfig)
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors())
            console.print(f"[bold red]error:[/] invalid setting: {escape(problems)}", highlight=False)
            raise typer.Exit(1)
        except KeyboardInterrupt:
            console.print("[yellow]interrupted; sandboxes closed[/]")
            raise typer.Exit(130)

    return wrapper


@app.callback()
def main(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log diagnostics to stderr."),
    plugin: list[str] = typer.Option(
        [],
        "--plugin",
        metavar="MODULE",
        help="Import MODULE first, for the task kinds, tools, rewards, "
        "policies or advantage estimators it registers (repeatable).",
    ),
):
    from infra.plugins import RegistryError, load_env_plugins, load_plugins

    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    sys.path.insert(0, os.getcwd())  # `--plugin my_module` and `module:Name` paths find the user's own files
    warnings.showwarning = _show_warning
    try:
        load_env_plugins()
        load_plugins(plugin)
    except RegistryError as err:
        console.print(f"[bold red]error:[/] {escape(str(err))}", highlight=False)
        raise typer.Exit(1)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Former spellings (infra.renames) as one line on stderr; other warnings as Python shows them."""
    if issubclass(category, FutureWarning):
        Console(stderr=True).print(f"[yellow]warning: {message}[/]", highlight=False)
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def _given(ctx: typer.Context, skip: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the options given on the command line, the others at their defaults): a --config YAML goes between them."""
    given, defaults = {}, {}
    for name, value in ctx.params.items():
        if name in skip:
            continue
        value = str(value) if isinstance(value, Path) else value
        if ctx.get_parameter_source(name).name != "DEFAULT":  # the enum of the click that Typer runs on
            given[name] = value
        elif value is not None:
            defaults[name] = value
    return given, defaults


def _grading_mode(grading_mode: Optional[str], former: Optional[str]) -> Optional[str]:
    """--grading-mode, or the former --grading (with a warning); the value as a grading mode."""
    from infra.renames import warn_renamed
    from tasks.grading.patch_policy import as_grading_mode

    if former is not None:
        warn_renamed("--grading", "--grading-mode")
        grading_mode = grading_mode or former
    try:
        return None if grading_mode is None else as_grading_mode(grading_mode, "--grading-mode")
    except ValueError as err:
        raise HarnessError(str(err)) from None


# -- sandbox -------------------------------------------------------------------------------------


@sandbox_app.command("build-base")
@friendly_errors
def sandbox_build_base(
    rootfs_only: bool = typer.Option(
        False,
        help="Only debootstrap the root filesystem (what the local and overlay backends run the base from, no engine).",
    ),
    python: str = typer.Option(
        DEFAULT_PYTHON, help="The base's Python: 3.9 (bullseye), 3.11 (bookworm) or 3.13 (trixie)."
    ),
):
    """Build a base locally: its root filesystem (debootstrap) and its image (docker import); a no-op for what is up to
    date. The root filesystem is built again if its cache was cleared while the image stayed."""
    from sandboxes.images import base_of, build_base_image, build_rootfs

    recipe = base_of(python).recipe
    with console.status(f"building the Python {python} base (debootstrap takes minutes)") as status:
        show = lambda line: status.update(f"[dim]{line[:100]}")  # noqa: E731
        root = build_rootfs(recipe, on_line=show)
        image = "" if rootfs_only else f"image: {build_base_image(recipe, on_line=show)}; "
        console.print(f"{image}root filesystem: {root}")


@sandbox_app.command("exec")
@friendly_errors
def sandbox_exec(
    command: str = typer.Argument(..., help="A bash command line."),
    image: str = typer.Option(BASE_IMAGE, help="Image (docker) or root filesystem directory (local)."),
    timeout: float = typer.Option(60.0, min=0.001, help="Seconds before the command is interrupted."),
    backend: str = BackendOption,
):
    """Run one command in a fresh sandbox, print its output and exit with its exit code."""
    import shlex

    with get_backend(backend).create(SandboxSpec(image=image)) as sb:
        # Its own bash: `exit N` ends that one with N, not the sandbox's persistent shell.
        result = sb.exec(f"bash -c {shlex.quote(command)}", timeout=timeout)
    sys.stdout.write(result.output)
    if result.message:
        console.print(f"[yellow]{result.message}", highlight=False)
    raise typer.Exit(result.exit_code if 0 <= result.exit_code < 256 else 1)


@sandbox_app.command("shell")
@friendly_errors
def sandbox_shell(
    image: str = typer.Option(BASE_IMAGE, help="Image (docker) or root filesystem directory (local)."),
    timeout: float = typer.Option(300.0, min=0.001, help="Seconds before each command is interrupted."),
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
    """List the sandboxes that exist now, with their owner process, run id and what each wrote on disk; for
    backends that store images themselves (overlay), the images too, least recently used last."""
    chosen = get_backend(backend)
    rows = chosen.list()
    table = Table("id", "status", "image", "owner", "run id", "disk")
    for row in rows:
        table.add_row(
            row["id"],
            row.get("status", ""),
            row.get("image", ""),
            row.get("harness.owner", ""),
            row.get("harness.run_id", ""),
            _mib(row["bytes"]) if "bytes" in row else "",
        )
    console.print(table if rows else "no sandboxes")
    images = chosen.images()
    if images:
        table = Table("image (sha256)", "names", "layers", "disk", "own disk", "last used", "in use")
        table.columns[0].no_wrap = True
        for image in images:
            table.add_row(
                image["digest"][7:19],
                ", ".join(image["names"]),
                str(image["layers"]),
                _mib(image["bytes"]),
                _mib(image["own_bytes"]),
                time.strftime("%m-%d %H:%M", time.localtime(image["last_used"])),
                "yes" if image["in_use"] else "",
            )
        console.print(table)


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


@sandbox_app.command("prune")
@friendly_errors
def sandbox_prune(
    all_: bool = typer.Option(False, "--all", help="Also remove sandboxes of processes that still run."),
    backend: str = BackendOption,
):
    """Remove sandboxes and snapshots left behind by crashed processes (overlay: also half-unpacked layers,
    and least recently used images down to HARNESS_IMAGE_CACHE_MAX)."""
    removed = get_backend(backend).prune(everything=all_)
    for name in removed:
        console.print(f"removed {name}", highlight=False, soft_wrap=True)
    console.print(f"{len(removed)} removed")


@sandbox_app.command("bench")
@friendly_errors
def sandbox_bench():
    """Benchmark the runtime against `docker exec` and docker-py in one run (prints ratios)."""
    from sandboxes.bench import main as run_bench

    run_bench()


# -- evaluation ----------------------------------------------------------------------------------


@app.command("eval")
@friendly_errors
def eval_command(
    ctx: typer.Context,
    checkpoint: str = CheckpointOption,
    tasks: str = TasksOption,
    max_turns: Optional[int] = MaxTurnsOption,
    workers: int = EpisodeWorkersOption,
    samples: int = SamplesOption,
    temperature: float = TemperatureOption,
    max_tokens: int = MaxTokensOption,
    limit: Optional[int] = LimitOption,
    output: Optional[Path] = typer.Option(None, help="Run directory (default runs/eval-<checkpoint>-<tasks>)."),
    resume: bool = ResumeOption,
    force: bool = ForceOption,
    base_url: Optional[str] = BaseUrlOption,
    config: Optional[Path] = EvalConfigOption,
    connect_timeout: Optional[float] = typer.Option(None, min=0.001, help="Endpoint: seconds to connect (default 10)."),
    read_timeout: Optional[float] = typer.Option(
        None, min=0.001, help="Endpoint: seconds one try waits for the answer (default 40)."
    ),
    retries: Optional[int] = typer.Option(
        None, min=0, max=20, help="Endpoint: tries after the first, for timeouts, 429 and 5xx only (default 2)."
    ),
    turn_timeout: Optional[float] = typer.Option(
        None, min=0.001, help="Endpoint: seconds for one turn, all tries included (default 55)."
    ),
    episode_timeout: Optional[float] = typer.Option(
        None, min=0.001, help="Seconds per episode, checked between turns (default 1800)."
    ),
    backend: str = BackendOption,
    reward_mode: Optional[str] = typer.Option(
        None,
        "--reward-mode",
        help="GSM8K rule: strict or flexible (numbers), or "
        "skyrl (SkyRL's exact string rule); default: each task's own.",
    ),
    grading_mode: Optional[str] = GradingModeOption,
    grading: Optional[str] = FormerGradingOption,
    ray_address: Optional[str] = RayAddressOption,
    engine: str = EngineOption,
    prestart: int = typer.Option(
        0,
        min=0,
        max=64,
        help="Sandboxes per image started ahead of the queue, grading overlapped with the next episodes (0: off).",
    ),
    scaffold: str = ScaffoldOption,
    context: str = ContextOption,
    summarizer: str = SummarizerOption,
    trajectory_format: str = TrajectoryFormatOption,
):
    """Evaluate a checkpoint, endpoint or scripted policy on a task set; writes a report."""
    from harness.evaluate import load_eval_config

    flags, defaults = _given(ctx, ("config", "resume", "force", "grading"))
    if grading is not None or grading_mode is not None:
        flags["grading_mode"] = _grading_mode(grading_mode, grading)
    eval_config = load_eval_config(config, flags, defaults)
    _run_eval(eval_config, resume=resume, force=force)


def _progress(label: str, fields: str):
    """A progress bar: `label`, the bar, done of total, `fields` (a format of the task's fields), time elapsed."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = [TextColumn(label), BarColumn(), MofNCompleteColumn(), TextColumn(fields), TimeElapsedColumn()]
    return Progress(*columns, console=console)


def _run_eval(config, resume: bool = False, force: bool = False):
    """An eval run (harness.eval_setup) with a progress bar, then its report; exit 1 when every episode failed."""
    from harness.eval_setup import prepare_eval

    with console.status(f"loading {config.tasks}"):
        run = prepare_eval(
            config, resume=resume, force=force, note=lambda message: console.print(f"[yellow]{message}[/]")
        )
    stats = {"resolved": 0, "errors": 0}
    with _progress("episodes", "resolved {task.fields[resolved]} errors {task.fields[errors]}") as progress:
        bar = progress.add_task("eval", total=run.episodes, resolved=0, errors=0)

        def advance(row):
            stats["resolved"] += row["resolved"]
            stats["errors"] += bool(row["error"])
            progress.update(bar, advance=1, **stats)

        report = run.run(on_result=advance)
    console.print((run.output / "report.md").read_text(), highlight=False, markup=False)
    console.print(f"run directory: {run.output}")
    if config.trajectory_format != "harness":
        console.print(f"trajectories as {config.trajectory_format}: {run.output / config.trajectory_format}")
    if report["all_failed"]:
        console.print(
            f"[bold red]error:[/] every episode failed ({report['errors_by_kind']}); see {run.output / 'report.md'}",
            highlight=False,
        )
        raise typer.Exit(1)
    return run


@app.command("generate")
@friendly_errors
def generate_command(
    ctx: typer.Context,
    checkpoint: str = RequiredCheckpointOption,
    tasks: str = TasksOption,
    output: Path = typer.Option(..., help="Dataset directory (trajectories.parquet, README.md, dataset_card.json)."),
    samples: int = SamplesOption,
    keep: str = typer.Option("all", help="all, or rewarded (reward >= --min-reward)."),
    min_reward: float = typer.Option(1.0, min=0.0, help="Threshold for --keep rewarded."),
    temperature: float = DatasetTemperatureOption,
    max_turns: Optional[int] = MaxTurnsOption,
    max_tokens: int = MaxTokensOption,
    workers: int = EpisodeWorkersOption,
    limit: Optional[int] = LimitOption,
    resume: bool = ResumeOption,
    base_url: Optional[str] = BaseUrlOption,
    backend: str = BackendOption,
    ray_address: Optional[str] = RayAddressOption,
    engine: str = EngineOption,
    scaffold: str = ScaffoldOption,
    context: str = ContextOption,
    summarizer: str = SummarizerOption,
    trajectory_format: str = TrajectoryFormatOption,
    config: Optional[Path] = EvalConfigOption,
):
    """Write a synthetic trajectory dataset (Parquet, ready for SFT) with a dataset card."""
    from harness.evaluate import load_eval_config
    from harness.generate import write_dataset

    if keep not in ("all", "rewarded"):
        raise HarnessError(f"--keep must be all or rewarded, not {keep!r}")
    flags, defaults = _given(ctx, ("config", "resume", "keep", "min_reward", "output"))
    run_config = load_eval_config(config, {**flags, "output": str(output / "run")}, defaults)
    run = _run_eval(run_config, resume=resume)
    card = write_dataset(run.output, output, run.config, keep=keep, min_reward=min_reward)
    console.print(f"kept {card['kept']} of {card['generated']} trajectories: {output / 'trajectories.parquet'}")


@app.command("serve")
@friendly_errors
def serve_command(
    checkpoint: str = typer.Option(..., help="A Hugging Face checkpoint folder or GGUF file."),
    host: str = typer.Option("127.0.0.1", help="Address to listen on (localhost by default)."),
    port: int = typer.Option(8000, min=0, max=65535, help="Port (0: any free one)."),
    model_name: Optional[str] = typer.Option(None, help="Model id in /v1/models (default: the folder name)."),
    engine: str = EngineOption,
):
    """Serve a local checkpoint as an OpenAI-compatible /v1/chat/completions endpoint (with tools)."""
    from harness.checkpoints import resolve_checkpoint, template_warnings
    from harness.policies.factory import make_policy
    from harness.chat_server import ChatServer

    server = ChatServer(host, port)  # a busy port fails here, before the model loads
    try:
        folder = resolve_checkpoint(checkpoint)
        if not (Path(folder) / "config.json").is_file():
            raise HarnessError(
                f"--checkpoint {checkpoint}: not a Hugging Face checkpoint folder (config.json is missing)"
            )
        name = model_name or Path(checkpoint).name
        policy = make_policy(folder, engine=engine)
        for warning in template_warnings(policy.tokenizer):
            console.print(f"[yellow]{warning}[/]", highlight=False)
        server.attach(policy, name)
    except BaseException:
        server.server_close()
        raise
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
    vocab_size: int = typer.Option(
        2048, "--vocab-size", min=512, help="Tokens, BPE merges and special tokens included."
    ),
    seed: int = typer.Option(0, "--seed", help="Fixes the tokenizer's corpus and the weights."),
    tool_use: bool = typer.Option(
        False, "--tool-use", help="Fit the tokenizer to tool-calling turns (shorter agent prompts)."
    ),
    tokenizer: Path = typer.Option(
        None,
        "--tokenizer",
        help="A real tokenizer folder (tokenizer.json, tokenizer_config.json, "
        "optionally a .jinja chat template beside them): random Llama-architecture weights on it "
        "instead of a trained tokenizer (--vocab-size and --tool-use do not apply).",
    ),
    chat_template: Path = typer.Option(None, "--chat-template", help="With --tokenizer: this .jinja chat template."),
):
    """Build a tiny random checkpoint (tests, CPU runs): a Qwen2 architecture with a locally trained tokenizer, or a Llama
    architecture on a real tokenizer and chat template (--tokenizer)."""
    from harness.tiny_model import init_tiny, init_tiny_on_tokenizer

    if tokenizer is not None:
        path = init_tiny_on_tokenizer(
            output_dir, tokenizer, chat_template, seed=seed, hidden_size=hidden_size, layers=layers
        )
    elif chat_template is not None:
        raise HarnessError("--chat-template goes with --tokenizer (the trained tokenizer has its own template)")
    else:
        path = init_tiny(
            output_dir, vocab_size=vocab_size, seed=seed, hidden_size=hidden_size, layers=layers, tool_use=tool_use
        )
    console.print(f"tiny checkpoint: {path}")


@model_app.command("check-template")
@friendly_errors
def model_check_template(
    checkpoint: Path = typer.Argument(
        ..., help="A checkpoint folder (or any folder a tokenizer with a chat template loads from)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
):
    """Run a multi-turn tool conversation through the checkpoint's chat template, check by check; exit 1 when the
    template cannot be used for exact multi-turn RL, with the reason."""
    from trainer.template_check import check_checkpoint

    report = check_checkpoint(str(checkpoint))
    if as_json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        styles = {"pass": "green", "fail": "bold red", "warn": "yellow"}
        console.print(f"[bold]{checkpoint}[/]: tool-call format {report.tool_format or 'none'}")
        for check in report.checks:
            console.print(f"  [{styles[check.status]}]{check.status:4}[/] {check.name}: ", end="")
            console.print(check.detail, highlight=False, markup=False)
        verdict = (
            "usable for exact multi-turn RL"
            if report.usable
            else f"not usable for exact multi-turn RL: {report.reason}"
        )
        console.print(f"[bold]verdict:[/] {verdict}", highlight=False)
    if not report.usable:
        raise typer.Exit(1)


@model_app.command("import")
@friendly_errors
def model_import(
    gguf_file: Path = typer.Argument(..., help="A GGUF file (llama.cpp's format, quantized or not)."),
    output_dir: Path = typer.Argument(..., help="Where the Hugging Face folder goes (new or empty)."),
    dtype: str = typer.Option("float32", "--dtype", help="Weights of the folder: float32, bfloat16 or float16."),
):
    """Dequantize a GGUF file into a Hugging Face checkpoint folder (weights, config, tokenizer, chat template)."""
    from transformers import AutoTokenizer

    from harness.checkpoints import import_gguf, template_warnings

    with console.status(f"importing {gguf_file}"):
        path = import_gguf(gguf_file, output_dir, dtype)
    for warning in template_warnings(AutoTokenizer.from_pretrained(path)):
        console.print(f"[yellow]{warning}[/]", highlight=False)
    console.print(f"checkpoint: {path}")


def _show_message(message: dict, limit: int = 1500) -> None:
    """One message of an episode as it happens: the request, the model's turns and tool calls, tool output."""
    role = message["role"]
    text = (message.get("content") or "").strip()
    if len(text) > limit:
        text = text[: limit // 2] + f"\n... ({len(text) - limit} characters) ...\n" + text[-limit // 2 :]
    style = {"user": "bold cyan", "assistant": "bold green", "tool": "bold yellow"}.get(role, "bold")
    label = f"{role} ({message.get('name')})" if role == "tool" else role
    console.print(f"[{style}]── {label}[/]")
    if text:
        console.print(text, highlight=False, markup=False)
    for call in message.get("tool_calls") or []:
        console.print(
            f"[green]→ {call['function']['name']}[/] {call['function']['arguments'][:limit]}", highlight=False
        )


@app.command("run")
@friendly_errors
def run_command(
    request: Optional[str] = typer.Argument(
        None, help='What to do, e.g. "Fix this bug: parse() drops the last field" (with --repo).'
    ),
    checkpoint: str = RequiredCheckpointOption,
    repo: Optional[Path] = typer.Option(
        None, "--repo", help="Your repository (copied into the sandbox, never mounted)."
    ),
    tasks: Optional[str] = typer.Option(
        None,
        "--tasks",
        help="Instead of a request on --repo: each task of this task set (harbor:PATH, a built-in name or a path), "
        "one after another, scored by its own verifier.",
    ),
    limit: Optional[int] = LimitOption,
    max_turns: Optional[int] = MaxTurnsOption,
    test: Optional[str] = typer.Option(
        None,
        "--test",
        help="Judge the patch with this command in a fresh sandbox, "
        'e.g. "python3 -m pytest -q tests/test_x.py" (exit 0 = success).',
    ),
    backend: str = BackendOption,
    runtime: Optional[str] = typer.Option(None, "--runtime", hidden=True, help="Former name of --backend."),
    scaffold: str = ScaffoldOption,
    context: str = ContextOption,
    summarizer: str = SummarizerOption,
    patch_out: Optional[Path] = typer.Option(None, "--patch-out", help="Write the agent's patch to this file."),
    branch: Optional[str] = typer.Option(None, "--branch", help="Commit the patch on this new branch of --repo."),
    output: Optional[Path] = typer.Option(
        None, help="Where the trajectory and patch go (default runs/run-<repo>, with --tasks runs/run-<tasks>)."
    ),
    temperature: float = TemperatureOption,
    max_tokens: int = MaxTokensOption,
    base_url: Optional[str] = BaseUrlOption,
    trajectory_format: str = TrajectoryFormatOption,
):
    """An agent on your own repository: carry out a request, stream its turns, return the patch and a verdict. With
    --tasks, the agent on each task of a task set (e.g. harbor:PATH), its turns streamed and its reward given."""
    from harness.agent import Agent
    from harness.trajectory_formats import check_format

    if runtime is not None:
        from infra.renames import warn_renamed

        warn_renamed("--runtime", "--backend (the same choice `harness eval` takes)")
        backend = runtime
    check_format(trajectory_format)
    make_agent = functools.partial(
        Agent.from_checkpoint, checkpoint, base_url=base_url, temperature=temperature, max_tokens=max_tokens
    )
    options = dict(
        max_turns=max_turns,
        backend=backend,
        scaffold=scaffold,
        context=context,
        summarizer=summarizer,
        on_message=_show_message,
    )
    if tasks is not None:
        if request is not None or repo is not None or test or branch or patch_out:
            raise HarnessError(
                "--tasks runs a task set's own tasks: it takes no request, --repo, --test, --branch or --patch-out"
            )
        return _run_tasks(tasks, limit, make_agent, output, trajectory_format, **options)
    if request is None or repo is None:
        raise HarnessError("give a request and --repo (your repository), or --tasks (a task set, e.g. harbor:PATH)")
    if limit is not None:
        raise HarnessError("--limit goes with --tasks")
    output = output or Path("runs") / f"run-{repo.expanduser().resolve().name}"
    with make_agent() as agent:
        result = agent.run_task(request, repo, **{**options, "max_turns": max_turns or 30}, test=test)
    saved = result.save(output, trajectory_format)
    if patch_out is not None:
        console.print(f"patch: {result.write_patch(patch_out)}")
    if branch is not None:
        console.print(f"branch {branch}: commit {result.apply_to_branch(branch)[:12]}")
    _print_run_verdict(result, saved)


def _print_run_verdict(result, saved: Path) -> None:
    """How `harness run` on a repository ended; exit 1 when the test command failed."""
    verdict = {True: "[green]tests pass[/]", False: "[red]tests fail[/]", None: "not judged (no --test)"}[
        result.success
    ]
    files = sum(line.startswith("diff --git") for line in result.patch.splitlines())
    changed = f"{files} file(s) changed" if files else "no changes"
    console.print(f"exit status: {result.exit_status}; {changed}; {verdict}; trajectory: {saved}", soft_wrap=True)
    if result.trajectory.error:
        console.print(f"[yellow]{escape(result.trajectory.error)}", highlight=False)
    if result.success is False:
        raise typer.Exit(1)


def _run_tasks(source, limit, make_agent, output, trajectory_format, **run):
    """`harness run --tasks`: each task in turn, streamed; trajectories where eval writes them. Exit 1 unless every
    task is resolved."""
    from harness.evaluate import failed
    from tasks.taskset import load_tasks

    with console.status(f"loading {source}"):
        loaded = load_tasks(source, run["backend"])[:limit]
    output = output or Path("runs") / f"run-{Path(source.partition(':')[2] or source).expanduser().name}"
    rows = []
    with make_agent() as agent:
        for done in agent.run_each(loaded, output, trajectory_format, lambda task: console.rule(task.id), **run):
            row = done.row
            rows.append(row)
            verdict = "error" if failed(row) else "[green]resolved[/]" if row["resolved"] else "[red]unresolved[/]"
            console.print(
                f"{done.task.id}: exit status {row['exit_status']}; reward {row['reward']:g}; {verdict}; "
                f"trajectory: {done.saved}",
                soft_wrap=True,
            )
            if done.trajectory.error:
                console.print(f"[yellow]{escape(done.trajectory.error)}", highlight=False)
    resolved = sum(row["resolved"] for row in rows)
    console.print(f"{resolved} of {len(rows)} task(s) resolved; run directory: {output}")
    if resolved < len(rows):
        raise typer.Exit(1)


# -- training ------------------------------------------------------------------------------------


@app.command("train", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
@friendly_errors
def train_command(
    ctx: typer.Context,
    config: Optional[Path] = typer.Option(
        None,
        "--config",
        help="YAML config (see examples/; SkyRL's keys are read too); "
        "or give it first without --config. Dotted overrides follow, e.g. trainer.epochs=5.",
    ),
):
    """GRPO on Ray with transformers (CPU/GPU) or vLLM (GPU) rollouts; resumes from the last checkpoint."""
    from trainer.config import load_config
    from trainer.recipe import train

    overrides = list(ctx.args)
    if overrides and "=" not in overrides[0]:  # `harness train X k=v`: the config file comes first
        if config is not None:
            raise TrainerError(
                f"two configs: --config {config} and {overrides[0]}; give one (then key=value overrides)"
            )
        config = Path(overrides.pop(0))
    cfg = load_config(str(config) if config else None, overrides)
    for note in cfg.skyrl_aliases:
        console.print(f"[dim]SkyRL key: {note}[/]", highlight=False)
    console.print(f"run directory: {cfg.trainer.output_dir}")

    def show(step, metrics):
        labels = {
            "train/reward_mean": "reward",
            "val/reward_mean": "held-out reward",
            "train/loss": "loss",
            "time/rollout_s": "rollout_s",
        }
        parts = [f"step {step}"] + [f"{label} {metrics[k]:.3f}" for k, label in labels.items() if k in metrics]
        console.print("  ".join(parts), highlight=False)

    run_dir = train(cfg, on_step=show)
    console.print(f"done: {run_dir} (checkpoints in {run_dir / 'checkpoints'})")


# -- viewer --------------------------------------------------------------------------------------


@app.command("view")
@friendly_errors
def view_command(
    run_dirs: list[Path] = typer.Argument(..., help="Run directories of harness eval, grade, generate or train."),
    host: str = typer.Option("127.0.0.1", help="Address to listen on (localhost by default)."),
    port: int = typer.Option(0, help="Port (0: a free one)."),
):
    """Browse runs in a local web page: overview, trajectories, compare, training curves, search, audit flags."""
    import time

    from harness.viewer.runs import open_runs
    from harness.viewer.server import index_runs, make_server

    runs = open_runs(run_dirs)
    started = time.monotonic()
    rows = index_runs(runs)
    server = make_server(runs, host, port)
    console.print(
        f"harness view: http://{host}:{server.server_address[1]}/ ({len(runs)} runs, {rows} rows indexed in "
        f"{time.monotonic() - started:.1f}s; Ctrl-C stops)",
        highlight=False,
        soft_wrap=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


# -- grading -------------------------------------------------------------------------------------


@app.command("grade")
@friendly_errors
def grade_command(
    predictions: str = typer.Option(..., help="SWE-bench predictions (.jsonl/.json), or `gold` / `empty`."),
    tasks: Optional[str] = typer.Option(
        None,
        "--tasks",
        help="Task set: built-in name or path of SWE-bench instances "
        "[default: swe-demo; with --check-only: none, each patch judged on its own].",
    ),
    output: Path = typer.Option(Path("runs/grade"), help="Run directory (results.jsonl, report.json, report.md)."),
    workers: int = SandboxWorkersOption,
    fractional: bool = typer.Option(False, help="Reward the share of FAIL_TO_PASS fixed (0 if a PASS_TO_PASS breaks)."),
    force: bool = ForceOption,
    grading_mode: Optional[str] = GradingModeOption,
    grading: Optional[str] = FormerGradingOption,
    check_only: bool = typer.Option(
        False,
        "--check-only",
        help="Only the static review, no sandbox: which predictions "
        "would be neutralized or refused, and why (writes check.json / check.md in --output).",
    ),
    backend: str = BackendOption,
    ray_address: Optional[str] = RayAddressOption,
    compare_official: Optional[Path] = typer.Option(
        None,
        "--compare-official",
        help="Official verdicts (run_evaluation's report.json folder or run summary, or a JSONL): "
        "write per-instance agreement with reasons to parity.json / parity.md.",
    ),
):
    """Grade predictions like SWE-bench does, in fresh sandboxes; resumable (rerun to finish)."""
    from tasks.grading.grade_run import prepare_grade

    mode = _grading_mode(grading_mode, grading) or "default"
    if check_only:
        return _check_only(predictions, tasks, output, mode)
    tasks = tasks or "swe-demo"
    with console.status(f"loading {tasks} (images are built once and cached)"):
        run = prepare_grade(
            predictions,
            tasks,
            output,
            workers=workers,
            fractional=fractional,
            force=force,
            grading_mode=mode,
            backend=backend,
            ray_address=ray_address,
            compare_official=compare_official,
        )
    counts = {"resolved": 0}
    with _progress("grading", "resolved {task.fields[resolved]}") as progress:
        bar = progress.add_task("grade", total=len(run.predictions), resolved=0)

        def advance(report):
            counts["resolved"] += report.resolved
            progress.update(bar, advance=1, resolved=counts["resolved"])

        outcome = run.run(advance)
    _print_grade(outcome, output, mode)


def _print_grade(outcome, output: Path, mode: str) -> None:
    """A grading run's table, summary and agreement with the official verdicts; exit 1 when no instance graded."""
    from tasks.grading.predictions import row_note

    results, summary = outcome.results, outcome.summary
    table = Table("instance", "verdict", "resolution", "reward", "note")
    for row in results:
        table.add_row(
            row["instance_id"], row.get("verdict", ""), row["resolution"], f"{row['reward']:.2f}", row_note(row)[:100]
        )
    console.print(table)
    console.print(
        f"resolved {summary['resolved']}/{summary['total']} ({summary['resolve_rate']:.1%}), grading mode {mode}, "
        f"neutralized {summary['neutralized']}, refused {summary['rejected']}; verdicts "
        + ", ".join(f"{verdict} {count}" for verdict, count in summary["verdicts"].items())
        + f"; report: {output / 'report.md'}"
    )
    if outcome.agreements is not None:
        _print_parity(outcome.agreements, outcome.parity, output)
    if results and summary["errors"] == summary["total"]:
        console.print(f"[bold red]error:[/] every instance failed to grade; see {output / 'report.md'}")
        raise typer.Exit(1)


def _print_parity(agreements, summary: dict, output: Path) -> None:
    disagreements = [a for a in agreements if a.outcome in ("ours_only", "theirs_only")]
    if disagreements:
        table = Table("instance", "here", "official", "reason")
        for a in disagreements:
            table.add_row(a.instance_id, str(a.ours), str(a.theirs), a.reason[:160])
        console.print(table)
    console.print(
        f"agreement with the official verdicts: {summary['agreement']:.1%} of {summary['compared']} "
        f"(resolved here only {summary['ours_only']}, officially only {summary['theirs_only']}, "
        f"not graded here {summary['not_graded_here']}); {output / 'parity.md'}"
    )


def _check_only(predictions: str, tasks: Optional[str], output: Path, mode: str) -> None:
    """`harness grade --check-only`: the static review of every prediction, printed and written."""
    from tasks.grading.grade_run import check_only

    rows, counts = check_only(predictions, tasks, output, mode)
    table = Table("instance", "verdict", "why")
    for row in rows:
        if row["verdict"] != "clean":
            table.add_row(row["instance_id"], row["verdict"], "; ".join(row["refused"] or row["neutralized"])[:120])
    console.print(table)
    console.print(
        f"{len(rows)} predictions, grading mode {mode}: "
        + ", ".join(f"{k} {v}" for k, v in counts.items())
        + f"; details: {output / 'check.md'}"
    )


# -- data and tasks ------------------------------------------------------------------------------


@data_app.command("gsm8k")
@friendly_errors
def data_gsm8k(
    output_dir: Path = typer.Option(..., "--output-dir", help="Where train.parquet and validation.parquet go."),
    source: Optional[str] = typer.Option(
        None,
        help="'hf' (openai/gsm8k on the hub) or a local folder/file of the JSONL or "
        "Parquet; default: $HARNESS_GSM8K_PATH, else 'hf'.",
    ),
):
    """Write GSM8K as train/validation Parquet in the SkyRL schema."""
    from tasks.gsm8k import default_gsm8k_source, prepare_gsm8k

    for split, path in prepare_gsm8k(output_dir.expanduser(), source=source or default_gsm8k_source()).items():
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
    repo: str = typer.Option(
        ...,
        "--repo",
        help="A local git repository, a git URL, a PyPI project name, or an npm package (npm:NAME or NAME@VERSION).",
    ),
    output: Path = typer.Option(..., help="JSONL of SWE-bench instances to write (appended as tasks are kept)."),
    max_tasks: int = typer.Option(200, min=1, help="Stop after this many validated tasks."),
    seed: int = typer.Option(0, help="Seed of the mutation order (a run is reproducible)."),
    workers: int = SandboxWorkersOption,
    test_command: Optional[str] = typer.Option(
        None, help="Override the detected test command (pytest, or the runner of package.json's test script)."
    ),
    max_candidates: Optional[int] = typer.Option(None, help="Judge at most this many candidates."),
    early_stop: int = typer.Option(
        20, help="Stop when this many candidates in a row are all rejected for one systemic reason (0: never)."
    ),
    python: Optional[str] = PythonOption,
    backend: str = BackendOption,
):
    """Synthesize validated repo-fix tasks from a real Python or JavaScript/TypeScript project by planting bugs (AST mutations)."""
    from harness.episode_check import episode_check
    from tasks.synth.pipeline import synthesize

    sandboxes = get_backend(backend)
    with _progress("{task.description}", "kept {task.fields[kept]}") as progress:
        bar = progress.add_task("preparing", total=None, kept=0)

        def show(event):
            progress.update(
                bar, description=event.stage, completed=event.decided, total=event.planned or None, kept=event.kept
            )
            if event.stage != "candidate":
                progress.console.print(f"[dim]{event.stage}: {event.message}", highlight=False)

        summary = synthesize(
            repo,
            output,
            max_tasks=max_tasks,
            seed=seed,
            workers=workers,
            test_command=test_command,
            backend=sandboxes,
            on_event=show,
            max_candidates=max_candidates,
            early_stop=early_stop,
            python=python,
            check=lambda instance: episode_check(instance, sandboxes),
        )
    console.print(
        f"kept {summary.kept} of {summary.decided} candidates ({summary.flaky} flaky); rejected: {summary.rejected}"
    )
    console.print(
        f"disk: environment image {summary.disk['environment_mb']} MB (shared), "
        f"{summary.disk['per_task_mb']} MB more per task; {summary.duration:.0f}s"
    )
    console.print(f"tasks: {output}; summary: {output}.summary.json")


@tasks_app.command("mine")
@friendly_errors
def tasks_mine(
    source: str = typer.Argument(
        ...,
        help="A git repository (path, URL or git bundle), or a JSONL of raw SWE-bench-style records with repos/<instance_id>.tar.gz beside it.",
    ),
    pulls: Optional[list[str]] = typer.Argument(
        None,
        help="Merged pull requests of the repository: numbers or merge commits. "
        "None: candidates are found in the repository's history (--since, --limit).",
    ),
    output: Path = typer.Option(
        ..., help="JSONL of validated SWE-bench instances (appended; a rerun finishes an interrupted one)."
    ),
    since: Optional[str] = typer.Option(
        None, help="History: scan the main line's commits since this date (YYYY-MM-DD)."
    ),
    until: Optional[str] = typer.Option(None, help="History: and up to this date."),
    limit: Optional[int] = typer.Option(None, min=1, help="History: mine at most this many candidates, newest first."),
    early_stop: int = typer.Option(
        5, help="History: stop when this many first candidates all fail for one reason (0: never)."
    ),
    workers: int = SandboxWorkersOption,
    timeout: float = typer.Option(900.0, help="Seconds per test run."),
    share_env: bool = typer.Option(
        False,
        "--share-env",
        help="One environment image per repository where its tests pass: "
        "no instance image, the repository (base commit only) put into each sandbox at start.",
    ),
    python: Optional[str] = PythonOption,
    backend: str = BackendOption,
):
    """SWE-bench instances from real merged pull requests: base = first parent, FAIL_TO_PASS/PASS_TO_PASS by running the tests."""
    from harness.episode_check import episode_check
    from tasks.mining.mining_run import prepare_mining

    run = prepare_mining(source, pulls, since=since, until=until, limit=limit, python=python)
    if run.funnel is not None:
        console.print(
            f"{len(run.records)} candidates in {run.funnel.counts['commits scanned']} commits", highlight=False
        )
    sandboxes = get_backend(backend)
    results = run.run(
        output,
        sandboxes,
        workers,
        on_result=_show_mined,
        on_step=lambda text: console.print(f"[dim]{text}", highlight=False),
        timeout=timeout,
        share_env=share_env,
        early_stop=early_stop,
        check=lambda instance: episode_check(instance, sandboxes),
    )
    if run.funnel is not None:
        console.print("\n".join(run.funnel.lines()), highlight=False)
    if run.stopped is not None:
        raise run.stopped
    console.print(f"mined {sum(bool(m.instance) for m in results)} of {len(results)} new; instances: {output}")


def _show_mined(mined) -> None:
    note = (
        f"{len(mined.instance['FAIL_TO_PASS'])} FAIL_TO_PASS, {len(mined.instance['PASS_TO_PASS'])} PASS_TO_PASS, "
        f"{len(mined.flaky)} flaky, dependencies {mined.dependencies}"
        if mined.instance
        else f"[red]skipped: {mined.reason[:300]}"
    )
    console.print(f"{mined.instance_id}: {note} ({mined.duration:.0f}s)", highlight=False)


@tasks_app.command("pull")
@friendly_errors
def tasks_pull(
    source: str = typer.Argument(..., help="A task set (built-in name or path) whose images to pull."),
    backend: str = typer.Option(
        "docker",
        "--backend",
        help="Where to: docker (the engine), podman (its store) or overlay (the image store: no engine needed).",
    ),
):
    """Pull the images of a task set from their registry (SWE-bench's official images by default), with progress."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn

    from tasks.pull import pull_task_images

    with Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), console=console) as progress:
        bars = {}

        def show(p):
            if p.image not in bars:
                bars[p.image] = progress.add_task(p.image, total=None)
            progress.update(bars[p.image], completed=p.done, total=p.total or None)

        images = pull_task_images(
            source, show, lambda image, id_: console.print(f"{image}: {id_[:19]}", highlight=False), backend
        )
    console.print(f"{len(images)} image(s) of {source} present")


@tasks_app.command("export")
@friendly_errors
def tasks_export(
    output: Path = typer.Argument(..., help="The folder to write into: one directory per task."),
    source: str = TasksOption,
    format_name: str = typer.Option(
        "harbor", "--format", help="harbor, swebench (a task repository), or a registered export format."
    ),
    limit: Optional[int] = LimitOption,
):
    """Write a task set in another tool's format (harbor: task directories that `harbor run -p` runs; swebench: a
    SWE-bench 5 task repository that `swebench dataset build` and `swebench eval` take)."""
    from tasks.exporters import export_tasks
    from tasks.taskset import load_tasks

    with console.status(f"loading {source}"):
        tasks = load_tasks(source)[:limit]
    written = export_tasks(tasks, format_name, output)
    console.print(f"{len(written)} task(s) of {source} written to {output} ({format_name})", highlight=False)


@trajectories_app.command("export")
@friendly_errors
def trajectories_export(
    run_dir: Path = typer.Argument(..., help="An eval run directory (its trajectories/)."),
    format_name: str = typer.Option("atif", "--format", help="atif (Harbor's ATIF), or a registered format."),
    output: Optional[Path] = typer.Option(None, help="Where the files go (default RUN_DIR/<format>/)."),
):
    """Write every trajectory of a run in another format, one JSON file each."""
    from harness.trajectory_formats import export_trajectories

    written = export_trajectories(run_dir, format_name, output)
    console.print(f"{len(written)} trajectories written to {written[0].parent} ({format_name})", highlight=False)


@tasks_app.command("validate")
@friendly_errors
def tasks_validate(
    path: Path = typer.Argument(..., help="A .jsonl, .json or .parquet task file, or a SWE-bench task repository."),
):
    """Report every malformed record with its line and field (or every broken task of a task repository, with
    its file); exit 1 if there is any."""
    from tasks.swebench_repo import repo_problems, repo_source
    from tasks.taskset import validate_file

    repo = repo_source(str(path))
    if repo is not None:
        problems = repo_problems(repo[0])
        for problem in problems:
            console.print(f"{path}: {problem}", highlight=False)
        if problems:
            console.print(f"[red]{len(problems)} problem(s)[/]")
            raise typer.Exit(1)
        console.print(f"[green]{path}: ok")
        return
    problems = validate_file(path)
    unit = "line" if path.suffix == ".jsonl" else "index"
    for problem in problems:
        console.print(f"{path}: {problem.describe(unit)}", highlight=False)
    if problems:
        console.print(f"[red]{len(problems)} problem(s)[/]")
        raise typer.Exit(1)
    console.print(f"[green]{path}: ok")


if __name__ == "__main__":
    app()
