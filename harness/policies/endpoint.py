"""Any OpenAI-compatible chat endpoint (vLLM `serve`, SGLang, OpenAI, `harness serve`).

Every call is bounded: a connect timeout, a read timeout per try, a few retries with backoff for
answers worth retrying (connection errors, timeouts, 408/409/429/5xx; never other 4xx), and an
overall deadline per turn that covers all tries. The defaults fail a dead endpoint (one that
accepts the request and never answers) in under a minute. Calls run on a helper thread, so
`interrupt()` (Ctrl-C) ends them at once whatever the endpoint does.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from ..errors import PolicyError
from ..parsing import ToolCall
from ..policy import Completion, Policy, Sampling

RETRYABLE = (408, 409, 429, 500, 502, 503, 504)


@dataclass(frozen=True)
class EndpointLimits:
    """How long one endpoint call may take; `harness eval --connect-timeout ...` or YAML `endpoint:`."""

    connect_timeout: float = 10.0  # seconds to open the connection
    read_timeout: float = 40.0  # seconds of one try waiting for the answer
    retries: int = 2  # tries after the first, for retryable failures only
    turn_timeout: float = 55.0  # seconds for the whole turn: all tries and backoff
    backoff: float = 1.0  # seconds before the first retry, doubling after

    def __post_init__(self):
        for item in fields(self):
            value, may_be_zero = getattr(self, item.name), item.name in ("retries", "backoff")
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or value < 0
                or (value == 0 and not may_be_zero)
            ):
                raise PolicyError(
                    f"endpoint {item.name} must be a {'non-negative' if may_be_zero else 'positive'} number, got {value!r}"
                )
        if int(self.retries) != self.retries:
            raise PolicyError(f"endpoint retries must be a whole number, got {self.retries!r}")

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> "EndpointLimits":
        data = dict(data or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise PolicyError(f"unknown endpoint setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class EndpointPolicy(Policy):
    """Native `tools` calls through the official client, bounded by `EndpointLimits`."""

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        limits: EndpointLimits | None = None,
        *,
        timeout: float | None = None,
        retries: int | None = None,
        backoff: float | None = None,
    ):
        """`timeout` (read timeout per try), `retries` and `backoff` override those of `limits`."""
        import openai

        self.name = model
        self.model = model
        overrides = {"read_timeout": timeout, "retries": retries, "backoff": backoff}
        self.limits = replace(limits or EndpointLimits(), **{k: v for k, v in overrides.items() if v is not None})
        self._interrupted = threading.Event()
        base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        self.client = openai.OpenAI(
            base_url=base_url,
            api_key=os.environ.get(api_key_env) or "EMPTY",
            timeout=_timeout(self.limits.read_timeout, self.limits.connect_timeout),
            max_retries=0,
        )

    def generate(self, messages, tools, sampling: Sampling) -> Completion:
        import openai

        request = dict(
            model=self.model,
            messages=messages,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_tokens=sampling.max_tokens,
            seed=sampling.seed,
            stop=sampling.stop or None,
        )
        if tools:
            request["tools"] = tools
        limits = self.limits
        deadline = time.monotonic() + limits.turn_timeout
        where = f"endpoint {self.client.base_url}"
        for attempt in range(int(limits.retries) + 1):
            try:
                return _completion(self._call(request, deadline))
            except openai.APIStatusError as err:
                if err.status_code not in RETRYABLE or attempt == limits.retries:
                    raise PolicyError(f"{where} answered {err.status_code}: {err.message}") from None
                failure = f"answered {err.status_code}"
            except (openai.APIConnectionError, openai.APITimeoutError) as err:
                if attempt == limits.retries:
                    raise PolicyError(f"{where} unreachable after {attempt + 1} tries: {err}") from None
                failure = str(err)
            except (ValueError, TypeError, KeyError, AttributeError) as err:
                raise PolicyError(f"{where} returned something that is not a chat completion: {err}") from None
            delay = limits.backoff * 2**attempt
            if time.monotonic() + delay >= deadline:
                raise PolicyError(
                    f"{where} gave no answer within the turn timeout of {limits.turn_timeout:.0f}s (last try: {failure})"
                )
            if self._interrupted.wait(delay):
                raise PolicyError(f"{where}: interrupted")
        raise PolicyError("unreachable")

    def _call(self, request: dict[str, Any], deadline: float):
        """One try on a helper thread; gives up at `deadline` or on `interrupt()`."""
        outcome: dict[str, Any] = {}
        done = threading.Event()
        timeout = min(self.limits.read_timeout, max(deadline - time.monotonic(), 0.1))

        def run():
            try:
                outcome["value"] = self.client.with_options(
                    timeout=_timeout(timeout, self.limits.connect_timeout)
                ).chat.completions.create(**request)
            except BaseException as err:  # noqa: BLE001 - handed to the caller's thread
                outcome["error"] = err
            done.set()

        threading.Thread(target=run, name="endpoint-call", daemon=True).start()
        while not done.wait(0.1):
            if self._interrupted.is_set():
                raise PolicyError(f"endpoint {self.client.base_url}: interrupted")
            if time.monotonic() > deadline + 1.0:  # the client's own timeout should have fired first
                raise PolicyError(
                    f"endpoint {self.client.base_url} gave no answer within the turn timeout of {self.limits.turn_timeout:.0f}s"
                )
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"]

    def interrupt(self) -> None:
        self._interrupted.set()

    def close(self) -> None:
        self._interrupted.set()
        self.client.close()


def _timeout(read: float, connect: float):
    import openai

    return openai.Timeout(read, connect=min(connect, read))


def _completion(response) -> Completion:
    if not getattr(response, "choices", None):
        raise PolicyError(f"the endpoint returned no choices: {str(response)[:200]}")
    choice = response.choices[0]
    message = choice.message
    calls = [ToolCall(c.id, c.function.name, c.function.arguments or "{}") for c in (message.tool_calls or [])]
    usage = response.usage
    return Completion(
        text=message.content or "",
        finish_reason=choice.finish_reason or "stop",
        tool_calls=calls or None,
        prompt_tokens=usage.prompt_tokens if usage else 0,
        completion_tokens=usage.completion_tokens if usage else 0,
    )
