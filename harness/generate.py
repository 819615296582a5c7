"""`harness generate`: synthetic trajectory datasets (Parquet) for SFT and analysis.

Runs a policy over a task set with k samples per task through `harness eval`'s machinery
(so it is concurrent and resumable), keeps all trajectories or only rewarded ones, and
writes `trajectories.parquet` plus a dataset card (`README.md` with counts, the reward
distribution and the source config).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from infra.runlog import atomic_write

from .evaluate import EvalConfig
from .trajectory import Trajectory

SCHEMA = pa.schema(
    [
        ("task_id", pa.string()),
        ("sample", pa.int32()),
        ("policy", pa.string()),
        ("messages", pa.string()),  # OpenAI chat messages with tool calls, as JSON
        (
            "tools",
            pa.string(),
        ),  # the OpenAI tool schemas offered, as JSON: the chat template renders them into the prompt
        ("tool_calls", pa.int32()),
        ("reward", pa.float64()),
        ("exit_status", pa.string()),
        ("turns", pa.int32()),
        ("token_ids", pa.list_(pa.int32())),  # in-process models: the exact tokens (null otherwise)
        ("loss_mask", pa.list_(pa.int8())),
        ("logprobs", pa.list_(pa.float32())),
        ("metadata", pa.string()),  # JSON: timings, token counts, model patch
    ]
)


def trajectory_row(t: Trajectory) -> dict[str, Any]:
    return {
        "task_id": t.task_id,
        "sample": t.sample,
        "policy": t.policy,
        "messages": json.dumps(t.messages, ensure_ascii=False),
        "tools": json.dumps(t.tools, ensure_ascii=False),
        "tool_calls": sum(len(m.get("tool_calls") or []) for m in t.messages),
        "reward": t.reward,
        "exit_status": t.exit_status,
        "turns": t.turns,
        "token_ids": t.token_ids,
        "loss_mask": t.loss_mask,
        "logprobs": t.logprobs,
        "metadata": json.dumps(
            {
                "timings": t.timings,
                "prompt_tokens": t.prompt_tokens,
                "completion_tokens": t.completion_tokens,
                "model_patch": t.model_patch,
                "error": t.error,
                "untrained_turns": t.untrained_turns,
            }
        ),
    }


def write_dataset(
    run_dir: Path, output: Path, config: EvalConfig, keep: str = "all", min_reward: float = 1.0
) -> dict[str, Any]:
    """Collect the run's trajectories into Parquet (+ card). `keep`: all | rewarded."""
    trajectories = [
        Trajectory.from_dict(json.loads(p.read_text())) for p in sorted((run_dir / "trajectories").glob("*.json"))
    ]
    kept = [t for t in trajectories if keep == "all" or t.reward >= min_reward]
    output.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist([trajectory_row(t) for t in kept], schema=SCHEMA)
    pq.write_table(table, output / "trajectories.parquet")
    card = {
        "generated": len(trajectories),
        "kept": len(kept),
        "keep": keep if keep == "all" else f"reward >= {min_reward}",
        "tasks": len({t.task_id for t in kept}),
        "reward_distribution": dict(sorted(Counter(round(t.reward, 2) for t in trajectories).items())),
        "exit_statuses": dict(Counter(t.exit_status for t in trajectories)),
        "with_tokens": sum(t.token_ids is not None for t in kept),
        "config": config.model_dump(mode="json"),
    }
    atomic_write(output / "dataset_card.json", json.dumps(card, indent=1))
    (output / "README.md").write_text(_card_markdown(card))
    return card


def _card_markdown(card: dict[str, Any]) -> str:
    config = card["config"]
    return "\n".join(
        [
            f"# Trajectories of `{config['checkpoint']}` on `{config['tasks']}`",
            "",
            f"{card['kept']} of {card['generated']} generated trajectories kept ({card['keep']}), over {card['tasks']} tasks,",
            f"{config['samples']} sample(s) per task at temperature {config['temperature']}.",
            "",
            f"- reward distribution (all generated): {card['reward_distribution']}",
            f"- exit statuses: {card['exit_statuses']}",
            f"- trajectories with exact token ids and loss masks: {card['with_tokens']}",
            "",
            "Columns: task_id, sample, policy, messages (OpenAI chat JSON with tool calls), tools (the tool schemas offered,",
            "JSON), tool_calls, reward,",
            "exit_status, turns, token_ids / loss_mask / logprobs (in-process models: exactly as generated; the loss",
            "mask is 1 on policy tokens, 0 on prompt, tool and observation tokens), metadata (JSON).",
            "",
            f"Source config: `{json.dumps(config)}`",
            "",
        ]
    )
