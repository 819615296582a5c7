"""What each turn's prompt holds of an episode's history: a **context strategy** (`--context` on `harness
eval`, `generator.context` in a training config).

- `keep-all`: the whole history (the default);
- `mask-observations:BUDGET`: tool results beyond the newest BUDGET tokens of them are replaced by a
  placeholder that says how long they were;
- `window:N`: the messages before the first reply (system prompt, task), the first turn, and the last
  N turns (a turn: a reply and the observations that follow it).

A strategy sees the full history (the trajectory keeps it whole) and gives the messages to prompt
with. Where that is not the last prompt with the last turn appended, the history was rewritten: the
tokens recorded so far become a segment of their own (trained as sampled) and the next prompt is
rendered afresh. Your own joins with `register_context_strategy`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from infra.plugins import Registry

from .errors import HarnessError

Messages = list[dict[str, Any]]


@dataclass(frozen=True)
class ContextStrategy:
    """`view(messages, value, count_tokens) -> messages`: the prompt's messages for a full history; `value` is the
    number after the name's colon (None without one); `count_tokens(text) -> int`."""

    name: str
    view: Callable[[Messages, int | None, Callable[[str], int]], Messages]
    takes_value: bool = False


CONTEXT_STRATEGIES: Registry[ContextStrategy] = Registry("context strategy", "harness.context_strategies")


def register_context_strategy(strategy: ContextStrategy, replace: bool = False) -> ContextStrategy:
    CONTEXT_STRATEGIES.register(strategy.name, strategy, replace=replace)
    return strategy


def parse_context(spec: str) -> tuple[ContextStrategy, int | None]:
    """`NAME` or `NAME:VALUE` (a positive integer) as a registered strategy and its value; a clear error otherwise."""
    name, _, value = spec.partition(":")
    if name not in CONTEXT_STRATEGIES.names():
        raise HarnessError(f"context {spec!r}: no such strategy (known: {', '.join(CONTEXT_STRATEGIES.names())})")
    strategy = CONTEXT_STRATEGIES.get(name)
    if strategy.takes_value != bool(value) or (value and not (value.isdigit() and int(value) > 0)):
        shape = f"{name}:N with N a positive integer" if strategy.takes_value else name
        raise HarnessError(f"context {spec!r}: write it as {shape}")
    return strategy, int(value) if value else None


def _turns(messages: Messages) -> tuple[Messages, list[Messages]]:
    """The messages before the first reply, and the turns (each a reply and the observations after it)."""
    first = next((i for i, m in enumerate(messages) if m.get("role") == "assistant"), len(messages))
    turns: list[Messages] = []
    for message in messages[first:]:
        if message.get("role") == "assistant":
            turns.append([])
        turns[-1].append(message)
    return messages[:first], turns


def keep_all(messages: Messages, value: int | None, count_tokens: Callable[[str], int]) -> Messages:
    return messages


def masked_observations(messages: Messages, budget: int | None, count_tokens: Callable[[str], int]) -> Messages:
    """Tool results, newest first, keep their text while their tokens sum to at most `budget`; older ones (and all
    before them: the placeholder never comes back to text) become a placeholder."""
    out, used, masking = list(messages), 0, False
    for index in range(len(out) - 1, -1, -1):
        message = out[index]
        if message.get("role") != "tool":
            continue
        tokens = count_tokens(str(message.get("content") or ""))
        used += tokens
        masking = masking or used > (budget or 0)
        if masking:
            out[index] = {**message, "content": f"[output omitted from the context: {tokens} tokens]"}
    return out


def window(messages: Messages, turns: int | None, count_tokens: Callable[[str], int]) -> Messages:
    """The task (everything before the first reply), the first turn, and the last `turns` turns."""
    head, all_turns = _turns(messages)
    kept = all_turns[:1] + all_turns[1:][-(turns or 1) :]
    return head + [message for turn in kept for message in turn]


KEEP_ALL = register_context_strategy(ContextStrategy("keep-all", keep_all))
register_context_strategy(ContextStrategy("mask-observations", masked_observations, takes_value=True))
register_context_strategy(ContextStrategy("window", window, takes_value=True))


def token_counter(tokenizer) -> Callable[[str], int]:
    """Tokens of a text: the policy's tokenizer's count, or about 4 characters a token for an endpoint."""
    if tokenizer is None:
        return lambda text: -(-len(text) // 4)
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False))


class Context:
    """One episode's strategy: the messages to prompt with, and whether they rewrite what was last prompted."""

    def __init__(self, spec: str, count_tokens: Callable[[str], int]):
        self.spec = spec
        self._last: tuple[Messages, int] | None = None  # the last prompt, and the history's length then
        self.strategy, self.value = parse_context(spec)
        self.count_tokens = count_tokens

    def view(self, messages: Messages) -> Messages:
        return self.strategy.view(messages, self.value, self.count_tokens)

    def prompt(self, history: Messages, ledger, turn: int, record: dict[str, Any]) -> Messages:
        """The messages of the next prompt. Where they rewrite the last prompt and what followed it, `ledger` (if
        any) starts a new token segment from them and `record` (the trajectory's metadata) notes the turn."""
        view = self.view(history)
        if self._last is not None and view != self._last[0] + history[self._last[1] :]:
            if ledger is not None:
                ledger.restart(view)
            record.setdefault("context", {"strategy": self.spec, "rewritten_at_turns": []})
            record["context"]["rewritten_at_turns"].append(turn)
        self._last = (list(view), len(history))  # a copy: keep-all's view is the history itself, which grows
        return view
