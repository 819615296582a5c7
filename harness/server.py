"""`harness serve`: an OpenAI-compatible server for a local checkpoint.

`GET /v1/models` and `POST /v1/chat/completions` (with `tools`; tool calls the model writes
in the Hermes format come back as native `tool_calls`). Standard library HTTP server on
localhost: one generation at a time, which is what a CPU or single-GPU checkpoint does anyway.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .parsing import parse_tool_calls
from .policy import Policy, Sampling

log = logging.getLogger(__name__)


class BadRequest(Exception):
    pass


def chat_completion(policy: Policy, model_name: str, body: dict[str, Any]) -> dict[str, Any]:
    """The response body for one chat-completions request."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) and "role" in m for m in messages):
        raise BadRequest("`messages` must be a list of {role, content} objects")
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise BadRequest("`tools` must be a list")
    try:
        sampling = Sampling(
            temperature=float(body.get("temperature", 1.0)),
            top_p=float(body.get("top_p", 1.0)),
            max_tokens=int(body.get("max_tokens") or body.get("max_completion_tokens") or 512),
            seed=body.get("seed"),
            stop=[body["stop"]] if isinstance(body.get("stop"), str) else list(body.get("stop") or []),
        )
    except (TypeError, ValueError) as err:
        raise BadRequest(f"bad sampling parameter: {err}") from None
    completion = policy.generate([_template_ready(m) for m in messages], tools, sampling)
    turn = parse_tool_calls(completion.text, call_prefix=f"call_{uuid.uuid4().hex[:8]}")
    message: dict[str, Any] = {"role": "assistant", "content": turn.content if turn.tool_calls else completion.text}
    finish = completion.finish_reason
    if turn.tool_calls and tools:
        message["tool_calls"] = [c.to_openai() for c in turn.tool_calls]
        finish = "tool_calls"
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model_name,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": completion.prompt_tokens, "completion_tokens": completion.completion_tokens,
                  "total_tokens": completion.prompt_tokens + completion.completion_tokens},
    }


def _template_ready(message: dict[str, Any]) -> dict[str, Any]:
    """Chat templates expect tool-call arguments as objects; the API carries them as JSON text."""
    if not message.get("tool_calls"):
        return message
    calls = []
    for call in message["tool_calls"]:
        function = dict(call.get("function", {}))
        if isinstance(function.get("arguments"), str):
            try:
                function["arguments"] = json.loads(function["arguments"] or "{}")
            except json.JSONDecodeError:
                pass
        calls.append({**call, "function": function})
    return {**message, "tool_calls": calls}


def make_server(policy: Policy, model_name: str, host: str = "127.0.0.1", port: int = 8000) -> ThreadingHTTPServer:
    lock = contextlib.nullcontext() if policy.concurrent else threading.Lock()  # vLLM batches requests itself

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.rstrip("/") == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": model_name, "object": "model", "owned_by": "harness"}]})
            else:
                self._error(404, f"no route {self.path}")

        def do_POST(self):
            if self.path.rstrip("/") != "/v1/chat/completions":
                return self._error(404, f"no route {self.path}")
            try:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not isinstance(body, dict):
                    raise BadRequest("the request body must be a JSON object")
                with lock:
                    self._send(200, chat_completion(policy, model_name, body))
            except (json.JSONDecodeError, BadRequest) as err:
                self._error(400, str(err))
            except Exception as err:  # the model failed: say so, keep serving
                log.exception("generation failed")
                self._error(500, f"generation failed: {err}")

        def _send(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str) -> None:
            self._send(status, {"error": {"message": message, "type": "invalid_request_error" if status < 500 else "server_error", "code": status}})

        def log_message(self, fmt, *args):
            log.info("%s %s", self.address_string(), fmt % args)

    return ThreadingHTTPServer((host, port), Handler)
