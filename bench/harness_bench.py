"""Harness throughput: episodes per minute, our eval driver against mini-swe-agent, same actions.

    python -m bench.harness_bench [--policy gold|replay] [--episodes 16] [--workers 4] [--rounds 2] [--prestart 2] [--overlay] [--podman] [--starts 10]

Both sides play the same actions on the swe-demo tasks, in the same images, with the same
number of episodes and the same concurrency, in one run (the order of the sides flips every
round, so the ratios hold on a noisy machine). Two kinds of episode:

- `gold`: the gold policy's three turns: write /tmp/gold.patch, `git apply` it, submit.
- `replay`: a realistic agent trajectory of 20-40 commands per episode, replayed
  (`ReplayPolicy` on our side): look around the repository (`ls`, `find`, `git log`), read
  the files the fix touches (`cat -n`, `sed -n`, `grep -n` for the names it changes), run the
  test suite before and after the fix, write the fix with a heredoc, `git apply`, `git diff`,
  then submit. The count and mix are drawn per task from a fixed seed.

Submitting takes the patch with `git add -A && git diff --cached <base commit>`. An episode is
the agent loop only: sandbox start, the turns, the patch extraction and teardown. Final
grading is excluded on both sides (ours: the verifier is stubbed out and the driver is told
so); each side's patches are checked against the gold patch instead.

- ours: `harness.evaluate.evaluate`, the eval driver, run directory and all, with `--prestart`
  sandboxes per image started ahead of its queue; and the same driver without pre-start
  (`ours, cold`), for reference.
- ours, overlay: the same driver and pre-start on the overlay backend: no daemon, each
  episode a bubblewrap sandbox over a copy-on-write layer of the same image, unpacked once
  (`--overlay` adds this side, and each backend's start p50: create until the shell answers).
- ours, podman: the same driver and pre-start on the podman backend (`--podman`), each episode a
  Podman container of the same image.
- floor: no agent at all, only each episode's container created, started and killed with our
  sandbox's options at the same concurrency: the most episodes per minute any driver that
  gives every episode a fresh container gets from this machine's engine (floor / peer is the
  ceiling of the ratio).
- peer: mini-swe-agent (from PyPI, in its own venv under the harness cache, made on first
  use) driving its `DockerEnvironment` with the environment settings of its SWE-bench config:
  `docker run -d` per episode, one `docker exec bash -c` per action (the submission through
  its `COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT` convention), and its `cleanup()`, which stops
  the container in the background. A driver script runs inside that venv with the same
  thread pool and reports its own timings, so neither side's interpreter start counts. Its
  containers get our sandbox's settings that matter here: no network, an init process, the
  task's CPU, memory and pids limits, never a pull. Its episode time ends when `cleanup()`
  returns, as its own loop sees it; how long its containers took to be gone is shown beside.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import re
import shlex
import statistics
import subprocess
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import docker.errors
from rich.console import Console
from rich.table import Table

from harness.evaluate import EvalConfig, evaluate
from harness.policies.scripted import GoldPolicy, ReplayPolicy
from harness.policy import Policy, tool_turn
from harness.scaffolds.venvs import MINI_SWE_AGENT, ScaffoldUnavailable, venv_path, venv_python
from harness.trajectory import Trajectory
from sandboxes import Backend, SandboxSpec, get_backend
from sandboxes.docker_backend import docker_client
from infra.rundir import RESULTS
from infra.runlog import read_rows
from tasks.task import Reward, Task
from tasks.taskset import load_tasks

TARGET = 3.0  # ours / peer episodes per minute
MAX_TURNS = 64  # the replayed trajectories run up to 41 turns
PEER_LABEL = "harness.bench.run"

PEER_DRIVER = r'''
"""Plays each episode's commands through mini-swe-agent's DockerEnvironment, then submits; prints JSON timings."""
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


def episode(spec):
    started = time.perf_counter()
    env = DockerEnvironment(**{**settings, "image": spec["image"], "cwd": spec["workdir"], "run_args": job["run_args"]})
    try:
        for command in spec["commands"]:
            env.execute({"command": command})  # a failing command is an observation, as in an agent's loop
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
    return venv_path(MINI_SWE_AGENT)


def peer_python(console: Console) -> Path:
    """The venv's python with mini-swe-agent installed (the one `--scaffold mini-swe-agent` runs in)."""
    if not (peer_venv() / "installed.txt").exists():
        console.print(f"[bold]installing {MINI_SWE_AGENT.requirement} into {peer_venv()} (once; a few minutes)...")
    try:
        return venv_python(MINI_SWE_AGENT)
    except ScaffoldUnavailable as err:
        raise PeerUnavailable(str(err)) from None


def _quiet() -> dict[str, str]:
    return {**os.environ, "MSWEA_SILENT_STARTUP": "1"}


def no_grading(task: Task, outcome: str, backend: Backend | None = None, default_method: str | None = None) -> Reward:
    return Reward(0.0, {"graded": False})


def episode_only(task: Task) -> list[SandboxSpec]:
    """What the driver is told an episode creates while grading is stubbed out: its own sandbox only."""
    return [task.sandbox]


# -- the actions ------------------------------------------------------------------------------


def gold_commands(instance: dict) -> list[str]:
    """The gold policy's actions as shell commands (the peer's side of `gold`)."""
    return [
        f"cat > /tmp/gold.patch <<'EOF_GOLD_PATCH'\n{instance['patch']}EOF_GOLD_PATCH",
        f"cd {instance['workdir']} && git apply /tmp/gold.patch && rm /tmp/gold.patch && git status --short",
    ]


def agent_commands(instance: dict, low: int = 20, high: int = 40) -> list[str]:
    """A realistic trajectory for one instance: low..high commands, ending with the fix written and applied."""
    rng = random.Random(f"harness-bench:{instance['instance_id']}")
    workdir = instance["workdir"]
    files = re.findall(r"^diff --git a/(\S+) ", instance["patch"], flags=re.MULTILINE)
    names = sorted(
        {
            n
            for n in re.findall(r"^[-+ ].*?\b([A-Za-z_][A-Za-z0-9_]{3,})\b", instance["patch"], flags=re.MULTILINE)
            if n not in {"self", "return", "None", "True", "False", "import", "from", "def", "class"}
        }
    )
    tests = f"cd {workdir} && PYTHONDONTWRITEBYTECODE=1 timeout 120 python -m pytest -q -p no:cacheprovider -x 2>&1 | tail -15"
    opening = [
        f"ls -la {workdir}",
        f"cd {workdir} && git status --short && git log --oneline -3",
        f"find {workdir} -name '*.py' -not -path '*/.git/*' | sort | head -50",
        tests,
    ]
    closing = gold_commands(instance)[:1] + [
        f"cd {workdir} && git apply /tmp/gold.patch && rm /tmp/gold.patch",
        f"cd {workdir} && git diff",
        tests,
        f"cd {workdir} && git status --short",
    ]
    reading = [f"cat -n {workdir}/{f}" for f in files] + [f"wc -l {workdir}/{f}" for f in files]
    pool = reading + [f"grep -rn {shlex.quote(n)} {workdir} --include='*.py' | head -20" for n in names]
    pool += [f"sed -n '{start},{start + 30}p' {workdir}/{rng.choice(files)}" for start in range(1, 200, 20)]
    pool += [f"cd {workdir} && git log -3 --stat -- {f}" for f in files] + ["python3 --version", f"ls {workdir}/tests"]
    middle = [rng.choice(pool) for _ in range(rng.randint(low, high) - len(opening) - len(closing))]
    return opening + middle + closing


def write_replays(tasks: list[Task], folder: Path) -> Path:
    """The trajectories `ReplayPolicy` plays: per task, one bash call per command, then submit."""
    for task in tasks:
        turns = [tool_turn("bash", command=c) for c in agent_commands(task.metadata["instance"])] + [
            tool_turn("submit")
        ]
        messages = [
            {"role": "assistant", "content": "", "tool_calls": [c.to_openai() for c in t.tool_calls]} for t in turns
        ]
        Trajectory(task_id=task.id, messages=messages).save(folder / f"{task.id}.json")
    return folder


def commands_for(policy: str, instance: dict) -> list[str]:
    return gold_commands(instance) if policy == "gold" else agent_commands(instance)


# -- the sides --------------------------------------------------------------------------------


def run_ours(tasks: list[Task], workers: int, backend: Backend, policy: Policy, prestart: int) -> Batch:
    """Our eval driver over the episodes; (the batch) from its results."""
    with (
        tempfile.TemporaryDirectory(prefix="harness-bench-") as out,
        mock.patch("harness.environments.verify", no_grading),
        mock.patch("harness.eval_queue.job_specs", episode_only),
        mock.patch("harness.evaluate.job_specs", episode_only),
    ):
        config = EvalConfig(
            tasks="swe-demo",
            checkpoint=policy.name,
            output=out,
            workers=workers,
            max_turns=MAX_TURNS,
            prestart=prestart,
        )
        started = time.perf_counter()
        evaluate(tasks, policy, config, backend)
        wall = time.perf_counter() - started
        rows = read_rows(Path(out) / RESULTS)
    gold = {t.id: t.metadata["instance"]["patch"] for t in tasks}
    for row in rows:
        if row["exit_status"] != "submitted" or row["model_patch"] != gold[row["task_id"]]:
            raise BenchError(
                f"our episode on {row['task_id']} ended {row['exit_status']!r} without the gold patch: {row['error']}"
            )
    if len(rows) != len(tasks):
        raise BenchError(f"our driver recorded {len(rows)} of {len(tasks)} episodes")
    return Batch(wall, [row["wall_s"] for row in rows])


def peer_run_args(task: Task, label: str) -> list[str]:
    spec = task.sandbox  # every swe-demo task has the same limits
    return [
        "--rm",
        "--init",
        "--network=none",
        "--pull=never",
        f"--cpus={spec.cpus}",
        f"--memory={spec.memory}",
        f"--memory-swap={spec.memory}",
        f"--pids-limit={spec.pids}",
        f"--label={label}",
    ]


def run_peer(python: Path, tasks: list[Task], workers: int, policy: str) -> tuple[Batch, str]:
    """(the batch, mini-swe-agent's version), all its containers removed whatever happens."""
    label = f"{PEER_LABEL}={uuid.uuid4().hex[:12]}"
    instances = [task.metadata["instance"] for task in tasks]
    job = {
        "workers": workers,
        "label": label,
        "run_args": peer_run_args(tasks[0], label),
        "episodes": [
            {
                "image": i["image"],
                "workdir": i["workdir"],
                "commands": commands_for(policy, i),
                "base_commit": i["base_commit"],
            }
            for i in instances
        ],
    }
    try:
        done = subprocess.run(
            [str(python), "-c", PEER_DRIVER],
            input=json.dumps(job),
            capture_output=True,
            text=True,
            env=_quiet(),
            timeout=300 + 60 * len(tasks),
            check=False,
        )
    finally:
        for container in docker_client().containers.list(all=True, filters={"label": label}, ignore_removed=True):
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


def run_floor(tasks: list[Task], workers: int, backend: Backend) -> Batch:
    """The engine's floor: per episode only a container created, started and killed (no shell, no
    command), with our sandbox's options and the same concurrency. No driver that starts a fresh
    container per episode can run more episodes per minute than this on the machine."""

    def cycle(task: Task) -> float:
        started = time.perf_counter()
        container = backend._create_and_start(backend._container_options(task.sandbox))
        backend.api.kill(container.id)
        return time.perf_counter() - started

    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        seconds = list(pool.map(cycle, tasks))
    return Batch(time.perf_counter() - started, seconds)


def start_p50(backend: Backend, spec: SandboxSpec, samples: int = 10) -> float:
    """Median seconds from create until the sandbox's shell has answered a command, then closed."""
    backend.create(spec).close()  # an image unpacked, a cache warmed: not a start
    seconds = []
    for _ in range(samples):
        started = time.perf_counter()
        with backend.create(spec) as sandbox:
            sandbox.exec("true")
            seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def per_minute(batches: list[Batch]) -> float:
    return 60 * sum(len(b.episode_s) for b in batches) / sum(b.wall_s for b in batches)


SIDES = ("ours", "ours_cold", "overlay", "podman", "peer", "floor")
OTHER_BACKENDS = ("overlay", "podman")  # sides of our driver on another backend, each with its own flag


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--policy", choices=("gold", "replay"), default="replay", help="the actions played (default replay)"
    )
    parser.add_argument("--episodes", type=int, default=16, help="episodes per side and round (default 16)")
    parser.add_argument("--workers", type=int, default=4, help="episodes run concurrently (default 4)")
    parser.add_argument("--rounds", type=int, default=2, help="batches per side, rotating which goes first (default 2)")
    parser.add_argument("--prestart", type=int, default=2, help="our sandboxes per image started ahead (default 2)")
    parser.add_argument("--overlay", action="store_true", help="also run our driver on the overlay backend (no daemon)")
    parser.add_argument("--podman", action="store_true", help="also run our driver on the podman backend")
    parser.add_argument("--starts", type=int, default=10, help="sandbox starts timed per backend (default 10)")
    args = parser.parse_args(argv)
    others = {name: None for name in OTHER_BACKENDS if getattr(args, name)}
    sides = tuple(side for side in SIDES if side not in OTHER_BACKENDS or side in others)
    if args.prestart < 1:
        parser.error("--prestart must be >= 1 (the cold side runs without)")
    console = Console()
    python = peer_python(console)
    backend = get_backend("docker")
    others = {name: get_backend(name) for name in others}
    console.print("[bold]loading the swe-demo tasks...")
    # Replayed trajectories run 20-40 commands: each task's own turn limit is raised to the driver's cap.
    swe_demo = [dataclasses.replace(task, max_turns=MAX_TURNS) for task in load_tasks("swe-demo")]
    tasks = [swe_demo[i % len(swe_demo)] for i in range(args.episodes)]
    batches: dict[str, list[Batch]] = {side: [] for side in sides}
    starts = {"docker": start_p50(backend, tasks[0].sandbox, args.starts)}
    for name, other in others.items():
        starts[name] = start_p50(other, tasks[0].sandbox, args.starts)
        for spec in {t.sandbox.image: t.sandbox for t in tasks}.values():  # every image stored, as the engine has them
            other.create(spec).close()
    version = ""
    with tempfile.TemporaryDirectory(prefix="harness-bench-replays-") as folder:
        policy = GoldPolicy() if args.policy == "gold" else ReplayPolicy(write_replays(swe_demo, Path(folder)))
        for round_number in range(args.rounds):
            for side in sides[round_number % len(sides) :] + sides[: round_number % len(sides)]:
                console.print(
                    f"round {round_number + 1}/{args.rounds}: {side}, {args.episodes} {args.policy} episodes x {args.workers} workers"
                )
                if side == "peer":
                    batch, version = run_peer(python, tasks, args.workers, args.policy)
                elif side == "floor":
                    batch = run_floor(tasks, args.workers, backend)
                elif side in others:
                    batch = run_ours(tasks, args.workers, others[side], policy, args.prestart)
                else:
                    batch = run_ours(tasks, args.workers, backend, policy, args.prestart if side == "ours" else 0)
                batches[side].append(batch)

    def summary(side: str) -> dict:
        done = batches[side]
        return {
            "episodes_per_minute": per_minute(done),
            "episode_s": statistics.median(s for b in done for s in b.episode_s),
            "wall_s": statistics.median(b.wall_s for b in done),
        }

    result = {
        "policy": args.policy,
        "commands_per_episode": statistics.median(
            len(commands_for(args.policy, t.metadata["instance"])) + 1 for t in tasks
        ),
        "episodes": args.episodes,
        "workers": args.workers,
        "rounds": args.rounds,
        "prestart": args.prestart,
        "grading": "excluded on both sides",
        "mini_swe_agent": version,
        **{side: summary(side) for side in sides},
        "start_s": starts,
        "target": TARGET,
    }
    result["peer"]["drained_s"] = statistics.median(b.drained_s for b in batches["peer"])
    result["ratio"] = result["ours"]["episodes_per_minute"] / result["peer"]["episodes_per_minute"]
    result["ratio_cold"] = result["ours_cold"]["episodes_per_minute"] / result["peer"]["episodes_per_minute"]
    result["ratio_ceiling"] = result["floor"]["episodes_per_minute"] / result["peer"]["episodes_per_minute"]
    for name in others:
        result[f"ratio_{name}"] = result[name]["episodes_per_minute"] / result["peer"]["episodes_per_minute"]

    o, c, p = result["ours"], result["ours_cold"], result["peer"]
    table = Table(
        title=f"agent-loop throughput, {args.policy} episodes ({result['commands_per_episode']:.0f} turns median), grading "
        f"excluded ({args.episodes} episodes x {args.workers} workers x {args.rounds} rounds; ratios are ours / peer)"
    )
    for column in ("measure", f"ours (pre-start {args.prestart})", "ours, cold", f"mini-swe-agent {version}", "ratio"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    table.add_row(
        "episodes per minute",
        f"{o['episodes_per_minute']:.0f}",
        f"{c['episodes_per_minute']:.0f}",
        f"{p['episodes_per_minute']:.0f}",
        f"{result['ratio']:.2f} (cold {result['ratio_cold']:.2f}; target >= {TARGET:.0f})",
    )
    table.add_row(
        "episode p50",
        f"{o['episode_s']:.2f} s",
        f"{c['episode_s']:.2f} s",
        f"{p['episode_s']:.2f} s",
        f"{o['episode_s'] / p['episode_s']:.2f}",
    )
    table.add_row(
        "peer batch: episodes done / containers gone", "", "", f"{p['wall_s']:.1f} s / {p['drained_s']:.1f} s", ""
    )
    table.add_row(
        "engine floor: create + start + kill only",
        "",
        "",
        "",
        f"{result['floor']['episodes_per_minute']:.0f} /min: ceiling {result['ratio_ceiling']:.2f}x",
    )
    for name in others:
        v = result[name]
        table.add_row(
            f"{name} backend (pre-start): episodes per minute / p50",
            "",
            "",
            "",
            f"{v['episodes_per_minute']:.0f} /min, {v['episode_s']:.2f} s: {result[f'ratio_{name}']:.2f}x peer",
        )
    table.add_row(
        "start p50 (create until a command answered)",
        "",
        "",
        "",
        ", ".join(f"{name} {seconds * 1000:.0f} ms" for name, seconds in starts.items()),
    )
    console.print(table)
    return result


if __name__ == "__main__":
    main()
