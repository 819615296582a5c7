"""Harness throughput: episodes per minute, our runtime against mini-swe-agent's, same actions.

    python -m bench.harness_bench [--episodes 16] [--workers 4] [--rounds 2]

Both sides play the gold policy's three turns on the swe-demo tasks, in the same images, with
the same number of episodes and the same concurrency, in one run (the order flips every
round, so the ratio holds on a noisy machine):

1. write /tmp/gold.patch with the gold patch,
2. `cd /testbed && git apply /tmp/gold.patch && rm /tmp/gold.patch && git status --short`,
3. submit: the patch is taken with `git add -A && git diff --cached <base commit>`.

An episode is the agent loop only: sandbox start, the three turns, the patch extraction and
teardown. Final grading is excluded on both sides (ours: the verifier is stubbed out for the
run); each side's patches are checked against the gold patch instead.

- ours: `harness.episode.run_episode` with `GoldPolicy`, episodes in a thread pool.
- peer: mini-swe-agent (from PyPI, in its own venv under the harness cache, made on first
  use) driving its `DockerEnvironment` with the environment settings of its SWE-bench config:
  `docker run -d` per episode, one `docker exec bash -c` per action (the patch file written
  through a heredoc, the submission through its `COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`
  convention), and its `cleanup()`, which stops the container in the background. A driver
  script runs inside that venv with the same thread pool and reports its own timings, so
  neither side's interpreter start counts. Its containers get our sandbox's settings that
  matter here: no network, an init process, the task's CPU, memory and pids limits, never
  a pull. Its episode time ends when `cleanup()` returns, as its own loop sees it; how long
  its containers took to be gone is shown beside.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import docker.errors
from rich.console import Console
from rich.table import Table

from harness.episode import run_episode
from harness.policies.scripted import GoldPolicy
from harness.policy import Sampling
from sandboxes import Backend, get_backend
from sandboxes.docker_backend import docker_client
from sandboxes.images import cache_dir
from tasks.task import Reward, Task
from tasks.taskset import load_tasks

TARGET = 3.0  # ours / peer episodes per minute
MINI_SWE_AGENT = "mini-swe-agent==2.4.6"  # the driver below uses its 2.x environment API
PEER_LABEL = "harness.bench.run"

PEER_DRIVER = r'''
"""Plays the gold policy's actions through mini-swe-agent's DockerEnvironment; prints JSON timings."""
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import minisweagent
import yaml
from minisweagent.config import get_config_path
from minisweagent.environments.docker import DockerEnvironment
from minisweagent.exceptions import Submitted

job = json.load(sys.stdin)
settings = yaml.safe_load(get_config_path("swebench").read_text())["environment"]  # its SWE-bench run's
settings.pop("environment_class")


def run(env, command):
    output = env.execute({"command": command})
    if output["returncode"] != 0:
        raise RuntimeError(f"{command[:80]!r} failed: {output}")


def episode(spec):
    started = time.perf_counter()
    env = DockerEnvironment(**{**settings, "image": spec["image"], "cwd": spec["workdir"], "run_args": job["run_args"]})
    try:
        run(env, f"cat > /tmp/gold.patch <<'EOF_GOLD_PATCH'\n{spec['patch']}EOF_GOLD_PATCH")
        run(env, f"cd {spec['workdir']} && git apply /tmp/gold.patch && rm /tmp/gold.patch && git status --short")
        try:
            env.execute({"command": f"echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached {spec['base_commit']}"})
        except Submitted as submitted:
            patch = submitted.messages[0]["extra"]["submission"]
        else:
            raise RuntimeError("the submit command did not submit")
    finally:
        env.cleanup()
    return {"seconds": time.perf_counter() - started, "patch": patch}


def containers_left():
    listing = subprocess.run(["docker", "ps", "-aq", "--filter", f"label={job['label']}"], capture_output=True, text=True)
    return listing.stdout.split()


started = time.perf_counter()
with ThreadPoolExecutor(job["workers"]) as pool:
    episodes = list(pool.map(episode, job["episodes"]))
wall = time.perf_counter() - started
while containers_left() and time.perf_counter() - started < wall + 60:
    time.sleep(0.1)
drained = time.perf_counter() - started
print(json.dumps({"version": minisweagent.__version__, "wall_s": wall, "drained_s": drained, "episodes": episodes}))
'''


class BenchError(RuntimeError):
    pass


class PeerUnavailable(BenchError):
    """mini-swe-agent could not be installed into its venv."""


@dataclass
class Batch:
    wall_s: float  # all episodes, from the first start to the last end
    episode_s: list[float]
    drained_s: float = 0.0  # the peer: until its last container was gone


def peer_venv() -> Path:
    return cache_dir() / "bench" / "mini-swe-agent-venv"


def peer_python(console: Console) -> Path:
    """The venv's python with mini-swe-agent installed (made once, then reused)."""
    venv = peer_venv()
    python = venv / "bin" / "python"
    wanted = MINI_SWE_AGENT.split("==")[1]
    probe = [str(python), "-c", "import minisweagent; print(minisweagent.__version__)"]
    if python.exists() and subprocess.run(probe, capture_output=True, text=True, env=_quiet(), check=False).stdout.strip() == wanted:
        return python
    console.print(f"[bold]installing {MINI_SWE_AGENT} into {venv} (once; a few minutes)...")
    for command in ([sys.executable, "-m", "venv", "--clear", str(venv)], [str(python), "-m", "pip", "install", "-q", MINI_SWE_AGENT]):
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise PeerUnavailable(f"`{' '.join(command)}` failed: {(done.stderr or done.stdout)[-2000:]}")
    return python


def _quiet() -> dict[str, str]:
    return {**os.environ, "MSWEA_SILENT_STARTUP": "1"}


def no_grading(task: Task, outcome: str, backend: Backend | None = None, default_method: str | None = None) -> Reward:
    return Reward(0.0, {"graded": False})


def run_ours(tasks: list[Task], workers: int, backend: Backend) -> Batch:
    def episode(task: Task) -> float:
        started = time.perf_counter()
        trajectory = run_episode(task, GoldPolicy(), Sampling(), backend=backend)
        seconds = time.perf_counter() - started
        if trajectory.exit_status != "submitted" or trajectory.model_patch != task.metadata["instance"]["patch"]:
            raise BenchError(f"our gold episode on {task.id} ended {trajectory.exit_status!r} without the gold patch: {trajectory.error}")
        return seconds

    with mock.patch("harness.environments.verify", no_grading):
        started = time.perf_counter()
        with ThreadPoolExecutor(workers) as pool:
            seconds = list(pool.map(episode, tasks))
        return Batch(time.perf_counter() - started, seconds)


def peer_run_args(task: Task, label: str) -> list[str]:
    spec = task.sandbox  # every swe-demo task has the same limits
    return ["--rm", "--init", "--network=none", "--pull=never", f"--cpus={spec.cpus}", f"--memory={spec.memory}",
            f"--memory-swap={spec.memory}", f"--pids-limit={spec.pids}", f"--label={label}"]


def run_peer(python: Path, tasks: list[Task], workers: int) -> tuple[Batch, str]:
    """(the batch, mini-swe-agent's version), all its containers removed whatever happens."""
    label = f"{PEER_LABEL}={uuid.uuid4().hex[:12]}"
    instances = [task.metadata["instance"] for task in tasks]
    job = {
        "workers": workers,
        "label": label,
        "run_args": peer_run_args(tasks[0], label),
        "episodes": [{"image": i["image"], "workdir": i["workdir"], "patch": i["patch"], "base_commit": i["base_commit"]} for i in instances],
    }
    try:
        done = subprocess.run([str(python), "-c", PEER_DRIVER], input=json.dumps(job), capture_output=True, text=True,
                              env=_quiet(), timeout=300 + 30 * len(tasks), check=False)
    finally:
        for container in docker_client().containers.list(all=True, filters={"label": label}):
            try:
                container.remove(force=True)
            except docker.errors.NotFound:
                pass  # removed meanwhile (--rm)
    if done.returncode != 0:
        raise BenchError(f"the mini-swe-agent driver failed:\n{done.stderr[-3000:]}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    for instance, episode in zip(instances, report["episodes"]):
        if episode["patch"] != instance["patch"]:
            raise BenchError(f"mini-swe-agent's episode on {instance['instance_id']} did not submit the gold patch")
    batch = Batch(report["wall_s"], [e["seconds"] for e in report["episodes"]], report["drained_s"])
    return batch, report["version"]


def per_minute(batches: list[Batch]) -> float:
    return 60 * sum(len(b.episode_s) for b in batches) / sum(b.wall_s for b in batches)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=16, help="episodes per side and round (default 16)")
    parser.add_argument("--workers", type=int, default=4, help="episodes run concurrently (default 4)")
    parser.add_argument("--rounds", type=int, default=2, help="batches per side, alternating which goes first (default 2)")
    args = parser.parse_args(argv)
    console = Console()
    python = peer_python(console)
    backend = get_backend("docker")
    console.print("[bold]loading the swe-demo tasks...")
    swe_demo = load_tasks("swe-demo")
    tasks = [swe_demo[i % len(swe_demo)] for i in range(args.episodes)]
    ours: list[Batch] = []
    peer: list[Batch] = []
    version = ""
    for round_number in range(args.rounds):
        for side in ("ours", "peer") if round_number % 2 == 0 else ("peer", "ours"):
            console.print(f"round {round_number + 1}/{args.rounds}: {side}, {args.episodes} episodes x {args.workers} workers")
            if side == "ours":
                ours.append(run_ours(tasks, args.workers, backend))
            else:
                batch, version = run_peer(python, tasks, args.workers)
                peer.append(batch)

    result = {
        "episodes": args.episodes,
        "workers": args.workers,
        "rounds": args.rounds,
        "grading": "excluded on both sides",
        "mini_swe_agent": version,
        "ours": {"episodes_per_minute": per_minute(ours), "episode_s": statistics.median(s for b in ours for s in b.episode_s)},
        "peer": {"episodes_per_minute": per_minute(peer), "episode_s": statistics.median(s for b in peer for s in b.episode_s),
                 "drained_s": statistics.median(b.drained_s for b in peer), "wall_s": statistics.median(b.wall_s for b in peer)},
        "target": TARGET,
    }
    result["ratio"] = result["ours"]["episodes_per_minute"] / result["peer"]["episodes_per_minute"]

    o, p = result["ours"], result["peer"]
    table = Table(title=f"agent-loop throughput, grading excluded ({args.episodes} episodes x {args.workers} workers x "
                        f"{args.rounds} rounds; ratios are ours / peer)")
    table.add_column("measure")
    table.add_column("ours", justify="right")
    table.add_column(f"mini-swe-agent {version}", justify="right")
    table.add_column("ratio", justify="right")
    table.add_row("episodes per minute", f"{o['episodes_per_minute']:.0f}", f"{p['episodes_per_minute']:.0f}",
                  f"{result['ratio']:.2f} (target >= {TARGET:.0f})")
    table.add_row("episode p50", f"{o['episode_s']:.2f} s", f"{p['episode_s']:.2f} s", f"{o['episode_s'] / p['episode_s']:.2f}")
    table.add_row("peer batch: episodes done / containers gone", "", f"{p['wall_s']:.1f} s / {p['drained_s']:.1f} s", "")
    console.print(table)
    return result


if __name__ == "__main__":
    main()
