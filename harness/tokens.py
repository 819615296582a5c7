"""The exact token record of a multi-turn episode with an in-process model.

The prompt is rendered once with the chat template. After that the sequence only grows:
each turn's generated tokens are appended exactly as sampled (loss mask 1, with their
logprobs), and observations are appended as the tokens of their own rendering (mask 0).
The next turn continues these ids, so what the trainer sees is what the engine produced;
nothing is ever re-tokenized.
"""

from __future__ import annotations

import json
from typing import Any

from .errors import PolicyError
from .parsing import tool_call_format
from .tool_prompt import plain_turns, takes_tools

_REPLY = "Sure."
_PROBE = [{"role": "user", "content": "."}, {"role": "assistant", "content": _REPLY}]


class TemplateError(PolicyError):
    """The chat template cannot render a conversation, or shows no end-of-turn token."""


def render(tokenizer, messages: list[dict], tools: list[dict] | None, generation_prompt: bool, tokenize: bool):
    """The conversation through the tokenizer's chat template, in the form its tool-call format expects."""
    if not takes_tools(tokenizer):  # the harness's own tool prompt and plain turns
        messages, tools = plain_turns(messages, tools), None
    else:
        messages = tool_call_format(tokenizer).prepare(messages)
    out = tokenizer.apply_chat_template(
        messages, tools=tools or None, add_generation_prompt=generation_prompt, tokenize=tokenize
    )
    if tokenize and not isinstance(out, list):  # newer transformers return a BatchEncoding
        out = out["input_ids"]
    return out


def checked_render(tokenizer, messages: list[dict], tools: list[dict] | None, generation_prompt: bool, tokenize: bool):
    """`render`, with a template's own exception (raise_exception, a None it cannot add to) as a TemplateError."""
    try:
        return render(tokenizer, messages, tools, generation_prompt, tokenize)
    except Exception as err:  # noqa: BLE001 - jinja raises anything a template does
        roles = ", ".join(m.get("role", "?") for m in messages)
        raise TemplateError(
            f"the chat template cannot render a conversation of {roles}: {type(err).__name__}: {err}"
        ) from err


def turn_end(tokenizer) -> str:
    """The special token the chat template writes right after an assistant reply (`<|im_end|>`, `<|eot_id|>`,
    `</s>`): the token a model ends its turn with."""
    text = checked_render(tokenizer, _PROBE, None, False, False)
    end = _special_at(tokenizer, text, text.rindex(_REPLY) + len(_REPLY)) if _REPLY in text else None
    if end:
        return end
    after = text[text.rindex(_REPLY) + len(_REPLY) :] if _REPLY in text else ""
    raise TemplateError(
        f"the chat template writes {after[:40]!r} after an assistant reply, not a special token that ends "
        "the turn: a model could not say where its turn ends"
    )


def _special_at(tokenizer, text: str, at: int) -> str | None:
    """The special token that `text` has at `at`, if any."""
    specials = sorted(
        {t.content for t in tokenizer.added_tokens_decoder.values()} | set(tokenizer.all_special_tokens),
        key=len,
        reverse=True,
    )
    return next((token for token in specials if token and text.startswith(token, at)), None)


class TokenLedger:
    def __init__(self, tokenizer, messages: list[dict[str, Any]], tools: list[dict[str, Any]]):
        self.tokenizer = tokenizer
        self.end_text = turn_end(tokenizer)
        self.end_id = tokenizer.convert_tokens_to_ids(self.end_text)
        self._probe_ends = checked_render(tokenizer, _PROBE, None, False, False).count(self.end_text)
        self.call_end = tool_call_format(tokenizer).call_end
        self.call_end_id = tokenizer.convert_tokens_to_ids(self.call_end) if self.call_end else None
        prompt = list(checked_render(tokenizer, messages, tools, True, True))
        self.ids: list[int] = prompt
        self.mask: list[int] = [0] * len(prompt)
        self.logprobs: list[float] = [0.0] * len(prompt)
        self.prompt_length = len(prompt)
        self.tools = tools
        self.segments: list[dict[str, list]] = []  # earlier records, before the history was rewritten

    def restart(self, messages: list[dict[str, Any]]) -> None:
        """Continue from `messages` rendered afresh (a context strategy rewrote the history): the tokens so far
        become a segment of their own, trained as they were sampled."""
        self.segments.append({"token_ids": self.ids, "loss_mask": self.mask, "logprobs": self.logprobs})
        prompt = self.render(messages)
        self.ids, self.mask, self.logprobs = prompt, [0] * len(prompt), [0.0] * len(prompt)

    def render(self, messages: list[dict[str, Any]]) -> list[int]:
        """A prompt for `messages`, with the episode's tools."""
        return list(checked_render(self.tokenizer, messages, self.tools, True, True))

    def add_segment(self, prompt: list[int], completion) -> None:
        """A call beside the episode's turns (a summary a context strategy asked for) as a segment of its own: its
        prompt, and its answer trained as sampled."""
        sampled = list(completion.token_ids or [])
        self.segments.append(
            {
                "token_ids": prompt + sampled,
                "loss_mask": [0] * len(prompt) + [int(completion.trained)] * len(sampled),
                "logprobs": [0.0] * len(prompt) + list(completion.logprobs or []),
            }
        )

    def add_completion(self, completion) -> None:
        """Append a policy's Completion (`harness.policy`, which renders through this module): its tokens as sampled."""
        if completion.token_ids is None or completion.logprobs is None:
            raise ValueError("an in-process policy must return the token ids and logprobs it generated")
        self._extend(completion.token_ids, int(completion.trained), completion.logprobs)
        if not completion.token_ids or completion.token_ids[-1] not in (self.end_id, self.call_end_id):
            self._extend([self.end_id], 0)  # close a turn cut at max_tokens; not a policy token

    def add_observations(self, messages: list[dict[str, Any]]) -> None:
        """Append the tokens that render `messages` after an assistant turn, plus the next prompt.

        They are what the template writes after the end token of a probe reply. Templates that render
        earlier turns differently once more follow (Qwen3 drops a last reply's empty <think>) still
        end each turn with one end token, so the probe reply ends at the same count of them."""
        if self.call_end:
            self._extend(self.tokenizer.encode(self._after_probe(messages), add_special_tokens=False), 0)
            return
        full = checked_render(self.tokenizer, _PROBE + messages, None, True, False)
        cut = -len(self.end_text)
        for _ in range(self._probe_ends):
            cut = full.find(self.end_text, cut + len(self.end_text))
            if cut < 0:
                raise TemplateError(
                    f"the chat template ends no reply with {self.end_text!r} once {messages[0]['role']} messages follow"
                )
        self._extend(self.tokenizer.encode(full[cut + len(self.end_text) :], add_special_tokens=False), 0)

    def _after_probe(self, messages: list[dict[str, Any]]) -> str:
        """What follows a probe reply, for a template whose replies end in more than one way (harmony: a call
        with <|call|>, a final answer with <|return|>, written <|end|> once more follows): the probe is a call
        to the function whose results come first, or a plain reply, cut after its text and the special token
        that ends it there (after its text, or the call's arguments that hold it)."""
        first = messages[0]
        probe = _PROBE
        if first.get("role") == "tool":
            call = {"id": first.get("tool_call_id", "probe"), "type": "function"}
            call["function"] = {"name": first.get("name", ""), "arguments": json.dumps({"probe": _REPLY})}
            probe = [_PROBE[0], {"role": "assistant", "content": "", "tool_calls": [call]}]
        start = len(checked_render(self.tokenizer, probe[:1], None, True, False))
        full = checked_render(self.tokenizer, probe + messages, None, True, False)
        at = full.find(_REPLY, start)
        for cut in range(at + len(_REPLY), len(full)) if at >= 0 else ():  # the call's JSON closes before its end
            end = _special_at(self.tokenizer, full, cut)
            if end:
                return full[cut + len(end) :]
        raise TemplateError(
            f"the chat template ends no reply with a special token once {first['role']} messages follow"
        )

    def _extend(self, ids: list[int], mask: int, logprobs: list[float] | None = None) -> None:
        self.ids += ids
        self.mask += [mask] * len(ids)
        self.logprobs += logprobs if logprobs is not None else [0.0] * len(ids)
