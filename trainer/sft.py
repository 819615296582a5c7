"""Supervised fine-tuning with the same loss masks as RL: the warm start before GRPO, and
rejection-sampling fine-tuning on trajectory Parquet written by `harness generate`.

Trajectories that carry token ids are trained on as recorded. Trajectories from endpoints
(messages only) and reference answers are rendered with the chat template, turn by turn,
masking everything but the assistant's own tokens.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from harness.tokens import render, turn_end
from harness.tools import task_schemas
from tasks.task import Task

from .batch import Batch, token_batch
from .errors import TrainerError

Example = tuple[list[int], list[int]]  # (token ids, loss mask)


def examples_from_tasks(tasks: list[Task], tokenizer) -> list[Example]:
    """Prompt (with the task's tool schemas, as its episodes render it) + reference answer, answered in text
    (GSM8K-format tasks keep it in metadata['answer'])."""
    examples, end_id = [], tokenizer.convert_tokens_to_ids(turn_end(tokenizer))
    for task in tasks:
        answer = task.metadata.get("answer")
        if answer is None:
            raise TrainerError(f"task {task.id} has no reference answer to fine-tune on")
        prompt = list(render(tokenizer, task.prompt, task_schemas(task) or None, True, True))
        reply = tokenizer.encode(answer, add_special_tokens=False) + [end_id]  # the template's end of a reply
        examples.append((prompt + reply, [0] * len(prompt) + [1] * len(reply)))
    return examples


def examples_from_parquet(path: str | Path, tokenizer, min_reward: float | None = None) -> list[Example]:
    import pyarrow.parquet as pq

    examples = []
    for row in pq.read_table(path).to_pylist():
        if min_reward is not None and row["reward"] < min_reward:
            continue
        if row.get("token_ids"):
            examples.append((list(row["token_ids"]), list(row["loss_mask"])))
        else:
            untrained = json.loads(row.get("metadata") or "{}").get("untrained_turns", [])
            messages, tools = json.loads(row["messages"]), json.loads(row.get("tools") or "[]")
            examples.append(_render_messages(messages, tools, tokenizer, set(untrained)))
    if not examples:
        raise TrainerError(f"{path} holds no trajectories to fine-tune on")
    return examples


def _render_messages(messages: list[dict], tools: list[dict], tokenizer, untrained: set[int] = frozenset()) -> Example:
    """Mask 1 on each assistant turn (0 on those numbered in `untrained`, 1 = the first): the difference between
    rendering up to it and before it, through the turn's end token. What the template writes after that token (a
    newline) is not the model's to generate, as in a rollout, where it comes with the next prompt.

    Rendered with the tool schemas the episode offered, as the episode's prompt was."""
    ids: list[int] = []
    mask: list[int] = []
    turn, end_id = 0, tokenizer.convert_tokens_to_ids(turn_end(tokenizer))
    for end in range(1, len(messages) + 1):
        if messages[end - 1]["role"] != "assistant":
            continue
        turn += 1
        before = list(render(tokenizer, messages[: end - 1], tools or None, True, True))
        through = list(render(tokenizer, messages[:end], tools or None, False, True))
        if through[: len(before)] != before:
            raise TrainerError("the chat template renders a conversation prefix differently; cannot mask turns")
        reply = through[len(before) :]
        own = len(reply) - reply[::-1].index(end_id) if end_id in reply else len(reply)
        mask += [0] * (len(before) - len(ids)) + [int(turn not in untrained)] * own + [0] * (len(reply) - own)
        ids = through
    return ids, mask


def make_batches(examples: list[Example], batch_size: int, pad_id: int, seed: int) -> list[Batch]:
    """The examples shuffled (by `seed`) into batches of tokens and loss masks, for `Learner.sft_step`."""
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    batches = []
    for start in range(0, len(order), batch_size):
        batch = token_batch([examples[i] for i in order[start : start + batch_size]], pad_id)
        batch.loss_mask[:, 0] = 0  # the first token has no logprob
        batches.append(batch)
    return batches
