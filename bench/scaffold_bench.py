"""What a scaffold costs: each scaffold's per-episode overhead beside our own loop, and the
intercepting endpoint's added latency per model call.

    python -m bench.scaffold_bench [--episodes 4] [--calls 200] [--skip-episodes]

- episodes: the gold policy on the first `--episodes` swe-demo tasks, one at a time, driven by
  our loop, by the example scaffold (examples/scaffolds), by mini-swe-agent and by OpenHands,
  alternating the order per task, after one untimed episode of each; the agent part of each
  episode (sandbox start, turns, patch; grading excluded, it ends when the agent's turns are
  over) and the whole episode. Ratios against our loop.
- interception: `--calls` model calls straight to the policy and the same calls through the
  endpoint over HTTP (a new connection each, as litellm's client makes them), for a scripted
  policy (the endpoint's own cost) and for the tiny checkpoint with its exact-token record.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path

from rich.console import Console
from rich.table import Table

from harness.episode import Limits, run_episode
from harness.policies.scripted import GoldPolicy, ScriptedPolicy
from harness.policy import Completion, Sampling
from harness.scaffolds import get_scaffold
from harness.scaffolds.intercept import EpisodeEndpoint, intercept_server
from sandboxes import get_backend
from tasks.taskset import load_tasks

ROOT = Path(__file__).resolve().parents[1]


def episodes(count: int, console: Console) -> dict[str, dict[str, float]]:
    import sys

    sys.path.insert(0, str(ROOT))
    from examples.scaffolds.scaffold import bash_agent

    drivers = {"harness": None, "bash-agent": bash_agent}
    drivers |= {name: get_scaffold(name) for name in ("mini-swe-agent", "openhands")}
    backend = get_backend("docker")
    tasks = load_tasks("swe-demo")[:count]
    agent_s: dict[str, list[float]] = {name: [] for name in drivers}
    total_s: dict[str, list[float]] = {name: [] for name in drivers}

    def episode(name: str, task) -> tuple[float, float]:
        marks = [time.monotonic()]
        with tempfile.TemporaryDirectory() as folder:
            trajectory = run_episode(
                task,
                GoldPolicy(),
                Sampling(temperature=0.0),
                Limits(),
                backend,
                on_agent_done=lambda: marks.append(time.monotonic()),
                scaffold=drivers[name],
                artifacts=Path(folder) if drivers[name] else None,
            )
        if trajectory.reward != 1.0:
            raise RuntimeError(
                f"{name} on {task.id}: reward {trajectory.reward} ({trajectory.exit_status}: {trajectory.error})"
            )
        console.print(f"{task.id} {name}: {trajectory.timings['total_s']:.1f} s, {trajectory.turns} turns")
        return trajectory.timings["total_s"], marks[1] - marks[0]

    for name in drivers:  # one untimed episode each first: imports, caches and the image's first start
        episode(name, tasks[0])
    for index, task in enumerate(tasks):
        for name in list(drivers) if index % 2 == 0 else list(reversed(drivers)):
            total, agent = episode(name, task)
            total_s[name].append(total)
            agent_s[name].append(agent)
    return {
        name: {"episode_s": statistics.mean(total_s[name]), "agent_s": statistics.mean(agent_s[name])}
        for name in drivers
    }


def _post(url: str, key: str, body: dict) -> dict:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())


def interception(policy_of, calls: int, max_tokens: int) -> dict[str, float]:
    """Mean ms per call: straight to the policy, and through the endpoint (the same prompt, the two
    alternating call by call so that a busy machine slows both alike; one warm-up call each first)."""
    sampling = Sampling(temperature=1.0, max_tokens=max_tokens, seed=0)
    history = [{"role": "system", "content": "Fix the bug."}, {"role": "user", "content": "The tests fail in x.py."}]
    server = intercept_server()
    direct, through = [], []
    for _ in range(calls + 1):
        policy = policy_of()
        clock = time.perf_counter()
        policy.generate(history, [], sampling)
        direct.append(time.perf_counter() - clock)
        endpoint = EpisodeEndpoint(policy_of(), sampling, None, max_turns=2, max_context=1 << 20, command_timeout=10)
        key = server.open(endpoint)  # a fresh episode per call: the same prompt as the direct call
        clock = time.perf_counter()
        _post(f"{server.url}/v1/chat/completions", key, {"model": "harness", "messages": history})
        through.append(time.perf_counter() - clock)
        server.close_episode(key)
    direct_ms, through_ms = statistics.mean(direct[1:]) * 1e3, statistics.mean(through[1:]) * 1e3
    return {"direct_ms": direct_ms, "intercepted_ms": through_ms, "added_ms": through_ms - direct_ms}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=4, help="swe-demo tasks per scaffold (default 4)")
    parser.add_argument("--calls", type=int, default=200, help="model calls per interception measurement (default 200)")
    parser.add_argument(
        "--tiny-model", help="a tiny checkpoint folder (harness model init-tiny) for the token-record latency"
    )
    parser.add_argument("--skip-episodes", action="store_true", help="only the interception latency (no Docker needed)")
    args = parser.parse_args(argv)
    console = Console()
    result: dict = {}
    reply = Completion(text="THOUGHT: look.\n\n```bash\nls\n```\n")
    result["scripted"] = interception(lambda: ScriptedPolicy("scripted", [reply]), args.calls, 16)
    if args.tiny_model:
        import torch

        from harness.policies.hf import HFPolicy

        torch.set_num_threads(1)  # a tiny model on a busy machine: thread hand-offs would dominate both sides
        model = HFPolicy(args.tiny_model)
        model.name = "tiny"
        result["tiny"] = interception(lambda: model, max(args.calls // 10, 5), 16)
    table = Table(title="interception, ms per model call")
    for column in ("policy", "direct", "through the endpoint", "added"):
        table.add_column(column)
    for name in ("scripted", "tiny"):
        if name in result:
            row = result[name]
            table.add_row(name, f"{row['direct_ms']:.2f}", f"{row['intercepted_ms']:.2f}", f"{row['added_ms']:.2f}")
    console.print(table)
    if not args.skip_episodes:
        result["episodes"] = episodes(args.episodes, console)
        own = result["episodes"]["harness"]
        table = Table(title=f"gold on {args.episodes} swe-demo tasks, seconds per episode (mean)")
        for column in ("scaffold", "agent part", "ratio to ours", "whole episode", "ratio to ours"):
            table.add_column(column)
        for name, row in result["episodes"].items():
            table.add_row(
                name,
                f"{row['agent_s']:.2f}",
                f"{row['agent_s'] / own['agent_s']:.2f}",
                f"{row['episode_s']:.2f}",
                f"{row['episode_s'] / own['episode_s']:.2f}",
            )
        console.print(table)
    console.print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
