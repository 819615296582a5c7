"""What a context strategy costs and saves: how many episodes end at the context limit under each, the tokens and
time they spend, and what training on a rewritten history's several rows costs the learner against one row.

    python -m bench.context_bench [--tasks 4] [--turns 10] [--max-context 2400] [--budget 300]

- episodes: the tiny checkpoint (harness.tiny_model, untrained: it calls no tool, so each turn adds its reply and
  the loop's feedback) on the first `--tasks` swe-demo tasks, `--turns` turns each, with `--max-context` tokens,
  under keep-all, mask-observations:BUDGET, window:2 and summarize:BUDGET: the share that end `context_exceeded`,
  turns, model tokens (prompts and answers, summaries included), summaries written, agent seconds.
- learner: one step (forward, backward, optimizer) of the tiny model on the rows `trainer.batch.token_rows` makes
  for the same episode under keep-all (one row) and window:1 (a row per rewrite), with room for every turn; the
  rows, padded tokens and seconds (median of 5).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from harness.episode import Limits, run_episode
from harness.policies.hf import HFPolicy
from harness.policy import Sampling
from harness.tiny_model import init_tiny
from sandboxes import get_backend
from tasks.taskset import load_tasks
from trainer.batch import build_batch, token_rows

SAMPLING = Sampling(max_tokens=16)


def episodes(policy, tasks, strategies, turns: int, max_context: int, console: Console) -> None:
    backend = get_backend("docker")
    table = Table("strategy", "context_exceeded", "turns", "model tokens", "summaries", "agent s")
    for strategy in strategies:
        limits = Limits(max_turns=turns, max_format_errors=turns + 1, max_context=max_context, context=strategy)
        runs = [run_episode(task, policy, SAMPLING, limits, backend=backend) for task in tasks]
        exceeded = sum(t.exit_status == "context_exceeded" for t in runs)
        tokens = sum(t.prompt_tokens + t.completion_tokens for t in runs)
        summaries = sum(len(t.metadata.get("context", {}).get("summaries", [])) for t in runs)
        agent_s = sum(t.timings["policy_s"] + t.timings["env_s"] for t in runs)
        table.add_row(
            strategy,
            f"{exceeded}/{len(runs)}",
            f"{statistics.mean(t.turns for t in runs):.1f}",
            str(tokens),
            str(summaries),
            f"{agent_s:.1f}",
        )
    console.print(table)


def learner(policy, task, turns: int, console: Console) -> None:
    model = policy.model
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    table = Table("history", "rows", "tokens (padded)", "trained tokens", "step s")
    for strategy in ("keep-all", "window:1"):
        limits = Limits(max_turns=turns, max_format_errors=turns + 1, context=strategy)
        trajectory = run_episode(task, policy, SAMPLING, limits, backend=get_backend("docker"))
        trajectory.reward = 1.0
        batch = build_batch([[trajectory]], 0, filter_zero_variance=False, filter_truncated=False)
        times = []
        for _ in range(5):
            clock = time.perf_counter()
            logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[:, :-1]
            picked = torch.log_softmax(logits.float(), -1).gather(-1, batch.input_ids[:, 1:, None])[..., 0]
            mask = batch.loss_mask[:, 1:]
            loss = -(picked * mask).sum() / mask.sum()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            times.append(time.perf_counter() - clock)
        rows = token_rows(trajectory)
        table.add_row(
            f"{strategy} ({trajectory.turns} turns)",
            str(len(rows)),
            f"{sum(len(r[0]) for r in rows)} ({batch.input_ids.numel()})",
            str(int(batch.loss_mask.sum())),
            f"{statistics.median(times):.3f}",
        )
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--max-context", type=int, default=2400)
    parser.add_argument("--budget", type=int, default=300)
    args = parser.parse_args()
    torch.set_num_threads(1)
    console = Console()
    with tempfile.TemporaryDirectory() as folder:
        policy = HFPolicy(init_tiny(Path(folder) / "tiny"))
        tasks = load_tasks("swe-demo")[: args.tasks]
        strategies = ["keep-all", f"mask-observations:{args.budget}", "window:2", f"summarize:{args.budget}"]
        episodes(policy, tasks, strategies, args.turns, args.max_context, console)
        learner(policy, tasks[0], args.turns, console)


if __name__ == "__main__":
    main()
