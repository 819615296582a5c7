"""Any OpenAI-compatible chat endpoint (vLLM `serve`, SGLang, OpenAI, `harness serve`)."""

from __future__ import annotations

import os
import time

from ..errors import PolicyError
from ..policy import Completion, Policy, Sampling, ToolCall

RETRYABLE = (408, 409, 429, 500, 502, 503, 504)


class EndpointPolicy(Policy):
    """Native `tools` calls through the official client; retries 429/5xx with backoff."""

    def __init__(self, model: str, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 timeout: float = 120.0, retries: int = 4, backoff: float = 1.0):
        import openai

        self.name = model
        self.model = model
        self.retries = retries
        self.backoff = backoff
        base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        self.client = openai.OpenAI(base_url=base_url, api_key=os.environ.get(api_key_env) or "EMPTY",
                                    timeout=timeout, max_retries=0)

    def generate(self, messages, tools, sampling: Sampling) -> Completion:
        import openai

        request = dict(model=self.model, messages=messages, temperature=sampling.temperature, top_p=sampling.top_p,
                       max_tokens=sampling.max_tokens, seed=sampling.seed, stop=sampling.stop or None)
        if tools:
            request["tools"] = tools
        for attempt in range(self.retries + 1):
            try:
                response = self.client.chat.completions.create(**request)
                return _completion(response)
            except openai.APIStatusError as err:
                if err.status_code not in RETRYABLE or attempt == self.retries:
                    raise PolicyError(f"endpoint {self.client.base_url} answered {err.status_code}: {err.message}") from None
            except (openai.APIConnectionError, openai.APITimeoutError) as err:
                if attempt == self.retries:
                    raise PolicyError(f"endpoint {self.client.base_url} unreachable after {attempt + 1} tries: {err}") from None
            except (ValueError, TypeError, KeyError, AttributeError) as err:
                raise PolicyError(f"endpoint {self.client.base_url} returned something that is not a chat completion: {err}") from None
            time.sleep(self.backoff * 2**attempt)
        raise PolicyError("unreachable")

    def close(self) -> None:
        self.client.close()


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
