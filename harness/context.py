"""What each turn's prompt holds of an episode's history: a **context strategy** (`--context` on `harness
eval`, `generator.context` in a training config).

- `keep-all`: the whole history (the default);
- `mask-observations:BUDGET`: tool results beyond the newest BUDGET tokens of them are replaced by a
  placeholder that says how long they were;
- `window:N`: the messages before the first reply (system prompt, task), the first turn, and the last
  N turns (a turn: a reply and the observations that follow it);
- `summarize:BUDGET`: once a prompt would hold more than BUDGET tokens, the policy writes a summary of the
  turns between the first and the last, which replaces them (a `Summarizer`, one per episode).

A strategy sees the full history (the trajectory keeps it whole) and gives the messages to prompt
with. Where that is not the last prompt with the last turn appended, the history was rewritten: the
tokens recorded so far become a segment of their own (trained as sampled) and the next prompt is
rendered afresh. Your own joins with `register_context_strategy`.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Callable

from infra.plugins import Registry

from .errors import HarnessError, PolicyError

Messages = list[dict[str, Any]]


@dataclass(frozen=True)
class ContextStrategy:
    """`view(messages, value, count_tokens) -> messages`: the prompt's messages for a full history; `value` is the
    number after the name's colon (None without one); `count_tokens(text) -> int`. A strategy that `writes` gets
    the episode's `Summarizer` as a fourth argument."""

    name: str
    view: Callable[..., Messages]
    takes_value: bool = False
    writes: bool = False


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


def parse_summarizer(spec: str) -> tuple[str, str]:
    """`MODEL@URL`, an OpenAI-compatible endpoint that writes the summaries (`--summarizer`), as (model, base URL)."""
    model, at, url = spec.partition("@")
    if not (model and at and url.startswith(("http://", "https://"))):
        raise HarnessError(f"summarizer {spec!r}: write it as MODEL@URL, e.g. Qwen3-8B@http://127.0.0.1:8000/v1")
    return model, url


def check_summarizer(context: str, summarizer: str) -> None:
    """A named summarizer is well formed and goes with a strategy that writes summaries."""
    if not summarizer:
        return
    parse_summarizer(summarizer)
    strategy, _ = parse_context(context)
    if not strategy.writes:
        raise HarnessError(f"summarizer {summarizer!r}: only a strategy that summarizes uses one, not {context!r}")


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


SUMMARY_REQUEST = (
    "Summarize the conversation above for your own later use: what you learned about the task and the code "
    "(files, functions, line numbers, errors), what you changed, what you tried that failed, and what is left to do. "
    "Write only the summary."
)


@dataclass
class Summary:
    """A summary an episode wrote: at which turn, which turns it replaces, its text, and what writing it cost."""

    at_turn: int
    first_turn: int  # the turns it replaces (1-based)
    last_turn: int
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0


class Summarizer:
    """One episode's summary so far. `write(messages) -> (text, prompt_tokens, completion_tokens)` asks the policy
    to answer a conversation (raising PolicyError where it fails); an empty text or a failure makes the episode
    mask observations from then on (`failed` says why)."""

    def __init__(self, write: Callable[[Messages], tuple[str, int, int]]):
        self._write = write
        self.turn = 0  # the turn about to be prompted, for the record
        self.summaries: list[Summary] = []
        self.failed = ""

    @property
    def covered(self) -> int:
        """How many turns after the first the summary replaces."""
        return self.summaries[-1].last_turn - 1 if self.summaries else 0

    def message(self) -> Messages:
        if not self.summaries:
            return []
        summary = self.summaries[-1]
        text = f"[summary of turns {summary.first_turn}-{summary.last_turn}, written in place of them]\n{summary.text}"
        return [{"role": "user", "content": text}]

    def summarize(self, head: Messages, older: Messages, last_turn: int) -> None:
        """Replace the turns up to `last_turn` by a summary of the current one and `older` (the turns after it)."""
        request = head + self.message() + older + [{"role": "user", "content": SUMMARY_REQUEST}]
        clock = time.monotonic()
        try:
            text, prompt_tokens, completion_tokens = self._write(request)
        except PolicyError as err:
            self.failed = f"the summary of turns 2-{last_turn} failed: {err}"
            return
        if not text.strip():
            self.failed = f"the summary of turns 2-{last_turn} came back empty"
            return
        seconds = round(time.monotonic() - clock, 4)
        self.summaries.append(Summary(self.turn, 2, last_turn, text.strip(), prompt_tokens, completion_tokens, seconds))


def _size(messages: Messages, count_tokens: Callable[[str], int]) -> int:
    return sum(count_tokens(str(m.get("content") or "")) for m in messages)


def summarized(
    messages: Messages, budget: int | None, count_tokens: Callable[[str], int], summarizer: Summarizer
) -> Messages:
    """The task, the first turn, the summary, the turns after it; past `budget` tokens, the turns between the
    first and the last are summarized afresh (with the summary they extend). Once a summary fails, observations
    are masked to the budget instead."""
    head, turns = _turns(messages)

    def current() -> Messages:
        rest = [m for turn in turns[1 + summarizer.covered :] for m in turn]
        return head + [m for turn in turns[:1] for m in turn] + summarizer.message() + rest

    if not summarizer.failed and _size(current(), count_tokens) > (budget or 0):
        older = turns[1 + summarizer.covered : -1]
        if older:
            summarizer.summarize(head + turns[0], [m for turn in older for m in turn], len(turns) - 1)
    if summarizer.failed:
        return masked_observations(current(), budget, count_tokens)
    return current()


KEEP_ALL = register_context_strategy(ContextStrategy("keep-all", keep_all))
register_context_strategy(ContextStrategy("mask-observations", masked_observations, takes_value=True))
register_context_strategy(ContextStrategy("window", window, takes_value=True))
register_context_strategy(ContextStrategy("summarize", summarized, takes_value=True, writes=True))


def token_counter(tokenizer) -> Callable[[str], int]:
    """Tokens of a text: the policy's tokenizer's count, or about 4 characters a token for an endpoint."""
    if tokenizer is None:
        return lambda text: -(-len(text) // 4)
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False))


class Context:
    """One episode's strategy: the messages to prompt with, and whether they rewrite what was last prompted.
    `write` (a Summarizer's) answers a conversation, for a strategy that writes; `writer` names the endpoint that
    does (MODEL@URL) where it is not the policy, for the record."""

    def __init__(self, spec: str, count_tokens: Callable[[str], int], write=None, writer: str = ""):
        self.spec, self.writer = spec, writer
        self._last: tuple[Messages, int] | None = None  # the last prompt, and the history's length then
        self.strategy, self.value = parse_context(spec)
        self.count_tokens = count_tokens
        self.summarizer = Summarizer(write or _cannot_write) if self.strategy.writes else None

    def view(self, messages: Messages) -> Messages:
        if self.summarizer is not None:
            return self.strategy.view(messages, self.value, self.count_tokens, self.summarizer)
        return self.strategy.view(messages, self.value, self.count_tokens)

    def prompt(self, history: Messages, ledger, turn: int, record: dict[str, Any]) -> Messages:
        """The messages of the next prompt. Where they rewrite the last prompt and what followed it, `ledger` (if
        any) starts a new token segment from them and `record` (the trajectory's metadata) notes the turn."""
        if self.summarizer is not None:
            self.summarizer.turn = turn
        view = self.view(history)
        if self._last is not None and view != self._last[0] + history[self._last[1] :]:
            if ledger is not None:
                ledger.restart(view)
            self._note(record)["rewritten_at_turns"].append(turn)
        if self.summarizer is not None and (self.summarizer.summaries or self.summarizer.failed):
            noted = self._note(record)
            noted["summaries"] = [asdict(summary) for summary in self.summarizer.summaries]
            if self.summarizer.failed:  # the episode goes on, masking observations to the budget
                noted["fallback"] = f"mask-observations:{self.value}: {self.summarizer.failed}"
        self._last = (list(view), len(history))  # a copy: keep-all's view is the history itself, which grows
        return view

    def _note(self, record: dict[str, Any]) -> dict[str, Any]:
        noted = record.setdefault("context", {"strategy": self.spec, "rewritten_at_turns": []})
        if self.writer:
            noted["summarizer"] = self.writer
        return noted


def _cannot_write(messages: Messages) -> tuple[str, int, int]:
    raise PolicyError("no policy to write a summary with")
