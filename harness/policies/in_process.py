"""What every in-process engine (transformers, vLLM) does the same way around its sampling."""

from __future__ import annotations

from ..errors import PolicyError
from ..policy import Completion


def token_budget(name: str, context: int | None, prompt: list[int], max_tokens: int) -> int:
    """Tokens one turn may generate: max_tokens, capped by the room the context leaves after the prompt."""
    if not prompt:
        raise PolicyError("the prompt is empty: give at least one token to continue")
    if max_tokens < 1:
        raise PolicyError(f"max_tokens is {max_tokens}: it must be at least 1")
    room = context - len(prompt) if context else max_tokens
    if room < 1:
        raise PolicyError(f"the prompt has {len(prompt)} tokens, which fills the context of {name} ({context} tokens)")
    return min(max_tokens, room)


def eos_ids(*ids: int | list[int] | None) -> set[int]:
    flat: set[int] = set()
    for value in ids:
        flat.update([value] if isinstance(value, int) else value or [])
    if not flat:
        raise PolicyError("the checkpoint names no end-of-sequence token (generation_config.json or tokenizer)")
    return flat


def turn_text(tokenizer, eos: set[int], ids: list[int], stops: list[str]) -> str:
    """The text of sampled ids: a final end token dropped, cut before the first stop string."""
    body = ids[:-1] if ids and ids[-1] in eos else ids
    text = tokenizer.decode(body, skip_special_tokens=False)
    cuts = [text.find(stop) for stop in stops if stop in text]
    return text[: min(cuts)] if cuts else text


def completion(
    tokenizer, eos: set[int], prompt_len: int, ids: list[int], logprobs: list[float], reason: str, stops: list[str]
) -> Completion:
    """A turn from the exact sampled ids: `token_ids` keep them all (the end token included), `text` drops a
    final end token and is cut before the first stop string."""
    return Completion(
        text=turn_text(tokenizer, eos, ids, stops),
        finish_reason=reason,
        token_ids=ids,
        logprobs=logprobs,
        prompt_tokens=prompt_len,
        completion_tokens=len(ids),
    )
