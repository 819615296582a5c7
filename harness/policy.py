"""The policy concept: whatever produces the next assistant turn.

Vocabulary: a **policy** is what an episode asks for its next turn (`Policy.generate`); every backend is one
(`EndpointPolicy`, `HFPolicy`, `VLLMPolicy`, the scripted ones, and wrappers such as `BatchingPolicy` and the
trainer's `RemotePolicy`). An **engine** is only the machinery that samples a checkpoint in-process: the
`--engine` / `inference.engine` choice (transformers or vLLM) and, in training, the Ray actor that holds one
such policy for many episodes (`trainer.workers.EngineActor`).
"""

from __future__ import annotations

import json
from abc import ABC
from dataclasses import dataclass, field
from typing import Any

from .errors import PolicyError
from .parsing import ToolCall
from .tokens import render


@dataclass
class Sampling:
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 1024
    seed: int | None = None
    stop: list[str] = field(default_factory=list)

    def row_seeds(self, rows: int) -> list[int | None]:
        """Seeds of a batch's rows: seed, seed + 1, ... (None: the engine's own randomness)."""
        return [None if self.seed is None else self.seed + row for row in range(rows)]


@dataclass
class Completion:
    """One assistant turn. In-process policies fill in the exact tokens they produced."""

    text: str
    finish_reason: str = "stop"  # stop | length | tool_calls | error
    token_ids: list[int] | None = None  # generated tokens, exactly as sampled
    logprobs: list[float] | None = None  # one per generated token
    tool_calls: list[ToolCall] | None = None  # native calls (endpoints); None: parse the text
    prompt_tokens: int = 0
    completion_tokens: int = 0
    trained: bool = True  # False: kept out of the training loss (a scripted mistake a demonstration recovers from)


def tool_turn(name: str, **arguments: Any) -> Completion:
    """An assistant turn that makes one tool call (scripted turns, e.g. a task kind's gold solution)."""
    return Completion(
        text="", finish_reason="tool_calls", tool_calls=[ToolCall(f"call_{name}", name, json.dumps(arguments))]
    )


class Policy(ABC):
    """Produces assistant turns from a conversation (endpoints) or from token ids (local)."""

    name: str = "policy"
    tokenizer: Any = None  # set by in-process policies: the trajectory keeps their exact tokens
    concurrent: bool = False  # takes many requests at once and batches them itself (vLLM): no BatchingPolicy
    streams_tokens: bool = False  # generate_ids_batch(..., listeners=) calls a row's listener with its tokens so far
    scripted: bool = False  # plays fixed turns whatever it is asked: it answers no request beside its turns (a summary)

    def generate(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], sampling: Sampling) -> Completion:
        """The next assistant turn for an OpenAI-format conversation. Policies with a tokenizer (in-process ones and
        their wrappers) inherit this: the chat template renders the conversation, `generate_ids` continues it.
        Endpoints and scripted policies override it."""
        if self.tokenizer is None:
            raise PolicyError(
                f"{self.name} has no tokenizer to render a conversation with: it must implement generate()"
            )
        return self.generate_ids(list(render(self.tokenizer, messages, tools, True, True)), sampling)

    def for_task(self, task) -> "Policy":
        """The policy to use for one episode of `task` (scripted policies specialise here)."""
        return self

    def generate_ids(self, prompt_ids: list[int], sampling: Sampling) -> Completion:
        """The next turn continuing exactly these tokens (in-process policies and their wrappers only)."""
        raise PolicyError(f"{self.name} cannot continue raw token ids")

    def interrupt(self) -> None:
        """Make calls in flight end now (Ctrl-C): they raise PolicyError. Default: nothing to stop."""

    def close(self) -> None:
        pass
