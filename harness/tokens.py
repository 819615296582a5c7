"""The exact token record of a multi-turn episode with a local model.

The prompt is rendered once with the chat template. After that the sequence only grows:
each turn's generated tokens are appended exactly as sampled (loss mask 1, with their
logprobs), and observations are appended as the tokens of their own rendering (mask 0).
The next turn continues these ids, so what the trainer sees is what the engine produced;
nothing is ever re-tokenized.
"""

from __future__ import annotations

from typing import Any

from .policy import Completion
from .tool_prompt import plain_turns, takes_tools

_PROBE = [{"role": "user", "content": "."}, {"role": "assistant", "content": "."}]


def render(tokenizer, messages: list[dict], tools: list[dict] | None, generation_prompt: bool, tokenize: bool):
    if not takes_tools(tokenizer):  # the harness's own tool prompt and plain turns
        messages, tools = plain_turns(messages, tools), None
    out = tokenizer.apply_chat_template(messages, tools=tools or None, add_generation_prompt=generation_prompt, tokenize=tokenize)
    if tokenize and not isinstance(out, list):  # newer transformers return a BatchEncoding
        out = out["input_ids"]
    return out


class TokenLedger:
    def __init__(self, tokenizer, messages: list[dict[str, Any]], tools: list[dict[str, Any]]):
        self.tokenizer = tokenizer
        self.end_text = "<|im_end|>"
        self.end_id = tokenizer.convert_tokens_to_ids(self.end_text)
        prompt = list(render(tokenizer, messages, tools, True, True))
        self.ids: list[int] = prompt
        self.mask: list[int] = [0] * len(prompt)
        self.logprobs: list[float] = [0.0] * len(prompt)
        self.prompt_length = len(prompt)

    def add_completion(self, completion: Completion) -> None:
        if completion.token_ids is None or completion.logprobs is None:
            raise ValueError("a local policy must return the token ids and logprobs it generated")
        self._extend(completion.token_ids, 1, completion.logprobs)
        if not completion.token_ids or completion.token_ids[-1] != self.end_id:
            self._extend([self.end_id], 0)  # close a turn cut at max_tokens; not a policy token

    def add_observations(self, messages: list[dict[str, Any]]) -> None:
        """Append the tokens that render `messages` after an assistant turn, plus the next prompt."""
        base = render(self.tokenizer, _PROBE, None, False, False)
        full = render(self.tokenizer, _PROBE + messages, None, True, False)
        cut = base.rindex(self.end_text) + len(self.end_text)
        if full[:cut] != base[:cut]:
            raise ValueError("the chat template renders earlier turns differently once more follow")
        self._extend(self.tokenizer.encode(full[cut:], add_special_tokens=False), 0)

    def _extend(self, ids: list[int], mask: int, logprobs: list[float] | None = None) -> None:
        self.ids += ids
        self.mask += [mask] * len(ids)
        self.logprobs += logprobs if logprobs is not None else [0.0] * len(ids)
