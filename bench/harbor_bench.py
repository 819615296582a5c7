"""Oracle episodes per minute: the real `harbor` CLI on our Harbor export beside `harness eval`.

    python -m bench.harbor_bench [--tasks swe-demo] [--limit 16] [--workers 2]

The task set is exported (`harness tasks export --format harbor`), then run with the gold patch by
`harbor run -a oracle -e docker` (Harbor's docker environment: docker compose, one container per
trial, the verifier in the same container), and by `harness eval --checkpoint gold` on the docker
and overlay backends (each episode in a fresh sandbox, graded in another fresh one). Every side
runs `--workers` episodes at once; each side's rewards must all be 1. Prints episodes per minute
and the ratio against Harbor's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from harness.scaffolds.venvs import HARBOR, venv_python

ROOT = Path(__file__).resolve().parents[1]


def harbor_run(dataset: Path, agent: str, jobs_dir: Path, workers: int = 2, timeout: float = 3600) -> dict[str, float]:
    """`harbor run` of `agent` (oracle, nop) on a folder of Harbor tasks: {task name: reward}."""
    harbor = Path(venv_python(HARBOR)).with_name("harbor")
    command = [str(harbor), "run", "-p", str(dataset), "-a", agent, "-e", "docker", "-n", str(workers)]
    command += ["-o", str(jobs_dir), "--job-name", agent, "--yes", "--quiet"]
    # litellm (imported by Harbor) fetches a model price list at start, retrying for seconds without a network
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False, env=env)
    results = sorted((jobs_dir / agent).glob("*/result.json"))
    if done.returncode != 0 or not results:
        raise RuntimeError(f"`{' '.join(command)}` failed ({done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")
    rewards = {}
    for path in results:
        trial = json.loads(path.read_text())
        verdict = trial.get("verifier_result") or {}
        rewards[trial["task_name"]] = float((verdict.get("rewards") or {}).get("reward", 0.0))
    return rewards


def on_built_images(tasks: list, out: Path) -> Path:
    """Copies of loaded Harbor tasks (`--tasks harbor:`) for `harbor run`: each Dockerfile names the image this
    project built for it (stand-in bases, what it fetches had ahead), so both runners run the same images; the
    container on no network through compose, as in the export (`tasks.harbor.export`): Harbor's own no-network
    policy needs a sidecar image this machine cannot pull, so the task's own network keys are taken out."""
    from tasks.harbor.export import NO_NETWORK_COMPOSE

    for task in tasks:
        copy = out / task.id
        shutil.copytree(task.metadata["harbor_dir"], copy, ignore=shutil.ignore_patterns("__pycache__"))
        (copy / "environment" / "Dockerfile").write_text(f"FROM {task.sandbox.image}\nWORKDIR {task.sandbox.workdir}\n")
        (copy / "environment" / "docker-compose.yaml").write_text(NO_NETWORK_COMPOSE)
        toml = (copy / "task.toml").read_text()
        (copy / "task.toml").write_text(re.sub(r"(?m)^\s*(allow_internet|network_mode)\s*=.*$", "", toml))
        separate = [("tests", task.metadata.get("verifier_sandbox"))] + [
            (f"steps/{step['name']}/tests", step.get("verifier_sandbox")) for step in task.metadata.get("steps", [])
        ]
        for tests, verifier in separate:
            if verifier and (copy / tests / "Dockerfile").is_file():
                (copy / tests / "Dockerfile").write_text(f"FROM {verifier['image']}\nWORKDIR {verifier['workdir']}\n")
                (copy / tests / "docker-compose.yaml").write_text(NO_NETWORK_COMPOSE)
    return out


def harness_eval(tasks: str, limit: int, backend: str, output: Path, workers: int) -> dict[str, float]:
    """`harness eval --checkpoint gold` on the first `limit` tasks: {task id: reward}."""
    command = [sys.executable, "-m", "cli", "eval", "--checkpoint", "gold", "--tasks", tasks, "--limit", str(limit)]
    command += ["--backend", backend, "--workers", str(workers), "--output", str(output), "--force"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"`{' '.join(command)}` failed:\n{(done.stdout + done.stderr)[-3000:]}")
    rows = [json.loads(line) for line in (output / "results.jsonl").read_text().splitlines() if line.strip()]
    return {row["task_id"]: row["reward"] for row in rows if "task_id" in row}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="swe-demo")
    parser.add_argument("--limit", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    console = Console(width=120)
    with tempfile.TemporaryDirectory(prefix="harbor-bench-") as scratch:
        work = Path(scratch)
        export = [sys.executable, "-m", "cli", "tasks", "export", str(work / "tasks"), "--tasks", args.tasks]
        subprocess.run([*export, "--limit", str(args.limit)], cwd=ROOT, check=True, capture_output=True)
        sides = {
            "harbor run -a oracle -e docker": lambda: harbor_run(work / "tasks", "oracle", work / "jobs", args.workers),
            "harness eval (docker)": lambda: harness_eval(
                args.tasks, args.limit, "docker", work / "docker", args.workers
            ),
            "harness eval (overlay)": lambda: harness_eval(
                args.tasks, args.limit, "overlay", work / "overlay", args.workers
            ),
        }
        table = Table("side", "episodes", "all reward 1", "wall s", "episodes/min", "vs harbor")
        reference = None
        for name, run in sides.items():
            started = time.monotonic()
            rewards = run()
            wall = time.monotonic() - started
            rate = len(rewards) / wall * 60
            reference = reference or rate
            solved = all(r == 1.0 for r in rewards.values()) and len(rewards) == args.limit
            table.add_row(
                name, str(len(rewards)), str(solved), f"{wall:.1f}", f"{rate:.1f}", f"{rate / reference:.2f}x"
            )
        console.print(table)


if __name__ == "__main__":
    main()
