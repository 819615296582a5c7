"""`harness serve`: an OpenAI-compatible server for a local checkpoint.

`GET /v1/models` and `POST /v1/chat/completions` with what clients send: `tools` (tool calls
the model writes in the Hermes format come back as native `tool_calls`), `n` choices,
`stream: true` (server-sent events: a role chunk, the content, tool calls, the finish reason,
optional usage, `data: [DONE]`; on a transformers checkpoint the content as its tokens are sampled, else once
the turn is generated; with `tools`, content up to where the model's format may begin a call, the calls once the
reply is whole, or, for a format read as it is written (gpt-oss's harmony), its final channel as content and its
calls as tool_call deltas while they are generated). Invalid
requests get 400 with an OpenAI-style error body naming the parameter, an unknown model 404, a
body over `max_body` bytes 413 (decided from Content-Length, before reading). Each connection
has its own thread with a socket timeout, and generation goes through the batching policy
(concurrent requests with the same sampling settings share a batch), so a slow or stalled client
holds up nobody. Standard library HTTP server, on localhost by default.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from .batching import shared_policy
from .errors import HarnessError, PolicyError
from .parsing import ParsedTurn, ToolCallFormat, object_arguments, tool_call_format
from .policies.in_process import turn_text
from .policy import Completion, Policy, Sampling
from .tokens import render

log = logging.getLogger(__name__)

MAX_BODY = 4 << 20  # bytes of one request body
MAX_N = 16
ROLES = ("system", "developer", "user", "assistant", "tool")
SOCKET_TIMEOUT = 30.0  # seconds a client may stall while sending its request


class ApiError(Exception):
    """An answer other than 200, with the fields of OpenAI's error body."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param = status, message, param
        self.code = code or {
            400: "invalid_request",
            404: "not_found",
            411: "length_required",
            413: "request_too_large",
        }.get(status, "server_error")

    def body(self) -> dict[str, Any]:
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}


@dataclass
class ChatRequest:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    sampling: Sampling
    n: int
    stream: bool
    include_usage: bool


def parse_request(body: Any, model_name: str) -> ChatRequest:
    """A validated chat-completions request, or ApiError(400/404) saying what is wrong."""
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(400, "`model` is required: a model id from /v1/models", "model")
    if model != model_name:
        raise ApiError(
            404, f"the model {model!r} does not exist; this server serves {model_name!r}", "model", "model_not_found"
        )
    messages = _messages(body.get("messages"))
    tools = _tools(body.get("tools"))
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    sampling = Sampling(
        temperature=_number(body, "temperature", 1.0, 0.0, 2.0),
        top_p=_number(body, "top_p", 1.0, 0.0, 1.0, low_open=True),
        max_tokens=512 if max_tokens is None else _integer(max_tokens, "max_tokens", 1),
        seed=None if body.get("seed") is None else _integer(body["seed"], "seed", -(2**63)),
        stop=_stop(body.get("stop")),
    )
    n = 1 if body.get("n") is None else _integer(body["n"], "n", 1, MAX_N)
    stream = body.get("stream") or False
    if not isinstance(stream, bool):
        raise ApiError(400, "`stream` must be true or false", "stream")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise ApiError(400, "`stream_options` must be an object", "stream_options")
    return ChatRequest(messages, tools, sampling, n, stream, bool(options.get("include_usage")))


def _messages(messages: Any) -> list[dict[str, Any]]:
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "`messages` must be a non-empty list of {role, content} objects", "messages")
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise ApiError(400, f"{where} must be an object with `role` and `content`", where)
        if message.get("role") not in ROLES:
            raise ApiError(
                400, f"{where}.role must be one of {', '.join(ROLES)}, got {message.get('role')!r}", f"{where}.role"
            )
        content = message.get("content")
        if isinstance(content, list):  # content parts: only text can reach a text model
            if not all(
                isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in content
            ):
                raise ApiError(400, f"{where}.content: only text parts are supported", f"{where}.content")
        elif content is not None and not isinstance(content, str):
            raise ApiError(400, f"{where}.content must be a string, a list of text parts, or null", f"{where}.content")
        elif content is None and not message.get("tool_calls"):
            raise ApiError(400, f"{where}.content is required (null only with tool_calls)", f"{where}.content")
    return [_template_ready(m) for m in messages]


def _tools(tools: Any) -> list[dict[str, Any]]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise ApiError(400, "`tools` must be a list of function tools", "tools")
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(function, dict):
            raise ApiError(400, f"{where} must be {{type: 'function', function: {{name, parameters}}}}", where)
        name = function.get("name")
        if not isinstance(name, str) or not name or len(name) > 64 or not all(c.isalnum() or c in "_-" for c in name):
            raise ApiError(
                400,
                f"{where}.function.name must be 1-64 letters, digits, _ or -, got {name!r}",
                f"{where}.function.name",
            )
        parameters = function.get("parameters", {})
        if not isinstance(parameters, dict) or ("type" in parameters and parameters["type"] != "object"):
            raise ApiError(
                400, f"{where}.function.parameters must be a JSON Schema object", f"{where}.function.parameters"
            )
    return tools


def _number(body: dict, name: str, default: float, low: float, high: float, low_open: bool = False) -> float:
    value = body.get(name)
    if value is None:
        return default
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or value > high
        or value < low
        or (low_open and value == low)
    ):
        raise ApiError(
            400, f"`{name}` must be a number in {'(' if low_open else '['}{low:g}, {high:g}], got {value!r}", name
        )
    return float(value)


def _integer(value: Any, name: str, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        bounds = f"at least {low}" if high is None else f"between {low} and {high}"
        raise ApiError(400, f"`{name}` must be an integer {bounds}, got {value!r}", name)
    return value


def _stop(stop: Any) -> list[str]:
    if stop is None:
        return []
    stops = [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or len(stops) > 4 or not all(isinstance(s, str) and s for s in stops):
        raise ApiError(400, "`stop` must be a string or a list of up to 4 non-empty strings", "stop")
    return stops


def _template_ready(message: dict[str, Any]) -> dict[str, Any]:
    """Chat templates expect text content and tool-call arguments as objects."""
    if isinstance(message.get("content"), list):
        message = {**message, "content": "".join(part["text"] for part in message["content"])}
    return object_arguments(message) if message.get("tool_calls") else message


class ChatService:
    """The model side: checks a request against the context, generates its `n` choices."""

    def __init__(self, policy: Policy, model_name: str):
        self.policy = policy
        self.model_name = model_name
        self.shared = shared_policy(policy)
        self.context = getattr(policy, "context", None)
        self.pool = ThreadPoolExecutor(max_workers=MAX_N, thread_name_prefix="choice")

    @property
    def streams_tokens(self) -> bool:
        return self.shared.streams_tokens

    def complete(self, request: ChatRequest) -> tuple[list[Completion], int]:
        """The request's `n` choices and its prompt's token count (what every service behind the handler answers)."""
        prompt_tokens = self.check(request)
        return self.generate(request), prompt_tokens

    def generate(self, request: ChatRequest, listeners: list[Callable] | None = None) -> list[Completion]:
        """The request's `n` choices; `listeners[i]` (where the policy streams tokens) hears choice i's tokens."""
        seeds = request.sampling.row_seeds(request.n)
        samplings = [Sampling(**{**request.sampling.__dict__, "seed": seed}) for seed in seeds]
        if listeners is None:
            futures = [self.pool.submit(self.shared.generate, request.messages, request.tools, s) for s in samplings]
        else:
            ids = list(render(self.policy.tokenizer, request.messages, request.tools, True, True))
            futures = [self.pool.submit(self.shared.generate_ids, ids, s, h) for s, h in zip(samplings, listeners)]
        try:
            return [f.result() for f in futures]
        except PolicyError as err:
            raise ApiError(400, str(err)) from None

    def check(self, request: ChatRequest) -> int:
        """The prompt's token count; ApiError(400) where the template rejects it or it exceeds the context."""
        if self.policy.tokenizer is None:
            return 0
        try:
            ids = render(self.policy.tokenizer, request.messages, request.tools, True, True)
        except Exception as err:  # noqa: BLE001 - the chat template rejected the conversation
            raise ApiError(400, f"the chat template cannot render these messages: {err}", "messages") from None
        if self.context and len(ids) >= self.context:
            raise ApiError(
                400,
                f"the prompt has {len(ids)} tokens; this model's context is {self.context} tokens",
                "messages",
                "context_length_exceeded",
            )
        return len(ids)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        if self.shared is not self.policy:
            self.shared.close()


def choices(
    completions: list[Completion], tools: list[dict[str, Any]], tool_format: ToolCallFormat
) -> list[dict[str, Any]]:
    """OpenAI `choices` from completions: tool calls in the model's own format become native `tool_calls`."""
    out = []
    for index, completion in enumerate(completions):
        if completion.tool_calls is not None:  # native calls (an endpoint, a scripted turn) pass as they are
            turn = ParsedTurn(completion.text, list(completion.tool_calls))
        elif tools:
            turn = tool_format.parse(completion.text, f"call_{uuid.uuid4().hex[:8]}")
        else:  # no tools offered: the text as generated, whatever it looks like
            turn = ParsedTurn(completion.text)
        # a format whose replies are channels (harmony) answers with its final channel, not with its markup
        parsed = turn.tool_calls or (tools and tool_format.partial is not None)
        message: dict[str, Any] = {"role": "assistant", "content": turn.content if parsed else completion.text}
        finish = completion.finish_reason
        if turn.tool_calls and tools:
            message["tool_calls"] = [c.to_openai() for c in turn.tool_calls]
            finish = "tool_calls"
        out.append({"index": index, "message": message, "finish_reason": finish, "logprobs": None})
    return out


def usage(completions: list[Completion], prompt_tokens: int) -> dict[str, int]:
    prompt = completions[0].prompt_tokens if completions and completions[0].prompt_tokens else prompt_tokens
    generated = sum(c.completion_tokens for c in completions)
    return {"prompt_tokens": prompt, "completion_tokens": generated, "total_tokens": prompt + generated}


def _response(
    model_name: str, completions: list[Completion], prompt_tokens: int, tools, tool_format: ToolCallFormat
) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model_name,
        "choices": choices(completions, tools, tool_format),
        "usage": usage(completions, prompt_tokens),
    }


def chunk(response: dict[str, Any], index: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    """One server-sent chunk of `response` (its id, creation time and model): `delta` for choice `index`."""
    return {
        "id": response["id"],
        "object": "chat.completion.chunk",
        "created": response["created"],
        "model": response["model"],
        "choices": [{"index": index, "delta": delta, "finish_reason": finish}],
    }


ROLE_DELTA = {"role": "assistant", "content": ""}


def closing_chunks(
    response: dict[str, Any],
    include_usage: bool,
    sent: list[str],
    calls_sent: list[list[tuple[str, str, str]]] | None = None,
) -> list[dict[str, Any]]:
    """The chunks that end each choice of a finished response, after the role chunk and the `sent[index]` text
    already streamed (and the calls, `calls_sent[index]`: id, name, arguments): the rest of its content, its tool
    calls (the rest of those begun), its finish reason; then the usage if asked for."""
    chunks = []
    for choice in response["choices"]:
        index, message = choice["index"], choice["message"]
        content, already = message.get("content") or "", sent[index]
        if not content.startswith(already) and message.get("tool_calls") and content.startswith(already.lstrip()):
            already = already.lstrip()  # the whitespace the reply began with, which its parsed content drops
        if not content.startswith(already):
            log.warning("choice %d: the streamed text is not a prefix of the turn's content", index)
        elif rest := content[len(already) :]:
            chunks.append(chunk(response, index, {"content": rest}))
        begun = calls_sent[index] if calls_sent else []
        for position, call in enumerate(message.get("tool_calls") or []):
            if position >= len(begun):
                chunks.append(chunk(response, index, {"tool_calls": [{"index": position, **call}]}))
            elif (arguments := call["function"]["arguments"]).startswith(begun[position][2]) and (
                rest := arguments[len(begun[position][2]) :]
            ):
                delta = {"tool_calls": [{"index": position, "function": {"arguments": rest}}]}
                chunks.append(chunk(response, index, delta))
        chunks.append(chunk(response, index, {}, choice["finish_reason"]))
    if include_usage:
        chunks.append({**chunk(response, 0, {}), "choices": [], "usage": response["usage"]})
    return chunks


def stream_chunks(response: dict[str, Any], include_usage: bool) -> list[dict[str, Any]]:
    """The server-sent chunks of a finished response, in the order OpenAI sends them."""
    starts = [chunk(response, choice["index"], ROLE_DELTA) for choice in response["choices"]]
    return starts + closing_chunks(response, include_usage, [""] * len(response["choices"]))


class TextDeltas:
    """A turn's text as its tokens arrive, cut as the finished turn's text will be (`completion`): each update
    gives the deltas that may be sent now, holding back what an end token, a stop string or an unfinished
    UTF-8 character could still change, and, where tools were offered (`tool_format`), what may be a call. A format
    that reads partial replies (harmony) streams its content and its calls as they are written: a call's id, type
    and name once its arguments begin, then their text (`calls`: the id, name and arguments sent of each)."""

    def __init__(self, tokenizer, eos_ids: set[int], stops: list[str], tool_format: ToolCallFormat | None = None):
        self.tokenizer, self.eos_ids, self.stops, self.tool_format = tokenizer, eos_ids, stops, tool_format
        self.sent = ""
        self.calls: list[tuple[str, str, str]] = []
        self._call_prefix = f"call_{uuid.uuid4().hex[:8]}"

    def update(self, ids: list[int]) -> list[dict[str, Any]]:
        text = turn_text(self.tokenizer, self.eos_ids, ids, self.stops)
        # a suffix that may begin a stop string waits (once a stop is met the turn ends; the rest is sent with it)
        held = max((n for stop in self.stops for n in range(1, len(stop)) if text.endswith(stop[:n])), default=0)
        text = text[: len(text) - held]
        text = text.rstrip("\ufffd")
        partial = self.tool_format.partial if self.tool_format is not None else None
        if partial is not None:
            turn = partial(text)
            return self._content(turn.content) + self._call_deltas(turn.calls)
        if self.tool_format is not None:
            text = text[: self.tool_format.streamable(text)]
        return self._content(text)

    def _content(self, text: str) -> list[dict[str, Any]]:
        if not text.startswith(self.sent):  # a decoder that rewrote earlier text: the rest goes at the end
            return []
        delta, self.sent = text[len(self.sent) :], text
        return [{"content": delta}] if delta else []

    def _call_deltas(self, calls: list[tuple[str, str]]) -> list[dict[str, Any]]:
        deltas = []
        for position, (name, arguments) in enumerate(calls):
            if position == len(self.calls):
                call_id = f"{self._call_prefix}_{position}"
                self.calls.append((call_id, name, ""))
                head = {"id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
                deltas.append({"tool_calls": [{"index": position, **head}]})
            call_id, name, sent = self.calls[position]
            if arguments.startswith(sent) and arguments != sent:
                self.calls[position] = (call_id, name, arguments)
                deltas.append({"tool_calls": [{"index": position, "function": {"arguments": arguments[len(sent) :]}}]})
        return deltas


class ChatServer(ThreadingHTTPServer):
    """Binds at once (a busy port fails before any model is loaded); `attach` the model later."""

    daemon_threads = True

    def __init__(self, host: str = "127.0.0.1", port: int = 8000, max_body: int = MAX_BODY):
        self.max_body = max_body
        self.service: ChatService | None = None
        try:
            super().__init__((host, port), _Handler)
        except OSError as err:
            raise HarnessError(
                f"cannot listen on {host}:{port}: {err.strerror or err} "
                "(another server holds that port? choose another with --port)"
            ) from None

    def attach(self, policy: Policy, model_name: str) -> "ChatServer":
        self.service = ChatService(policy, model_name)
        return self

    def server_close(self) -> None:
        super().server_close()
        if self.service is not None:
            self.service.close()


def make_server(policy: Policy, model_name: str, host: str = "127.0.0.1", port: int = 8000) -> ChatServer:
    return ChatServer(host, port).attach(policy, model_name)


class _Handler(BaseHTTPRequestHandler):
    server: ChatServer
    timeout = SOCKET_TIMEOUT  # a client that stalls mid-request is dropped, its thread freed

    def do_GET(self):
        service = self._service()
        if self.path.rstrip("/") == "/v1/models" and service is not None:
            self._send(
                200, {"object": "list", "data": [{"id": service.model_name, "object": "model", "owned_by": "harness"}]}
            )
        else:
            self._send_error(ApiError(404, f"no route GET {self.path}"))

    def do_POST(self):
        try:
            if self.path.rstrip("/") != "/v1/chat/completions":
                raise ApiError(404, f"no route POST {self.path}")
            service = self._service()
            if service is None:
                raise ApiError(503, "the model is still loading")
            request = parse_request(self._read_json(), service.model_name)
            if request.stream and getattr(service, "streams_tokens", False):
                return self._stream_as_sampled(service, request, service.check(request))
            completions, prompt_tokens = service.complete(request)
            response = _response(
                service.model_name,
                completions,
                prompt_tokens,
                request.tools,
                tool_call_format(service.policy.tokenizer),
            )
            if request.stream:
                self._send_stream(stream_chunks(response, request.include_usage))
            else:
                self._send(200, response)
        except ApiError as err:
            self._send_error(err)
        except Exception as err:  # noqa: BLE001 - the model failed: say so, keep serving
            log.exception("generation failed")
            self._send_error(ApiError(500, f"generation failed: {err}"))

    def _service(self) -> ChatService | None:
        return self.server.service

    def _read_json(self) -> Any:
        length = self.headers.get("Content-Length")
        if length is None:
            raise ApiError(411, "a Content-Length header is required")
        try:
            size = int(length)
        except ValueError:
            raise ApiError(400, f"bad Content-Length {length!r}") from None
        if size > self.server.max_body:
            self.close_connection = True  # the body is never read
            raise ApiError(413, f"the request body has {size} bytes; the limit is {self.server.max_body}")
        try:
            return json.loads(self.rfile.read(size) or b"null")
        except (ValueError, UnicodeDecodeError) as err:
            raise ApiError(400, f"the body is not JSON: {err}") from None

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client left before its answer
            self.close_connection = True

    def _send_error(self, err: ApiError) -> None:
        self._send(err.status, err.body())

    def _send_stream(self, chunks: list[dict[str, Any]]) -> None:
        self._start_events()
        for one in chunks:
            self._event(one)
        self._event("[DONE]")

    def _stream_as_sampled(self, service: ChatService, request: ChatRequest, prompt_tokens: int) -> None:
        """Each choice's text as its tokens are sampled (the generation runs on a thread of its own; this one
        writes), then the closing chunks of the finished response. A client that leaves ends the writing, not the
        turn."""
        policy = service.policy
        eos = getattr(policy, "eos_ids", set())
        tool_format = tool_call_format(policy.tokenizer)
        calls = tool_format if request.tools else None
        trackers = [TextDeltas(policy.tokenizer, eos, request.sampling.stop, calls) for _ in range(request.n)]
        deltas: queue.Queue[tuple[int, dict[str, Any]]] = queue.Queue()

        def listener(index: int) -> Callable[[list[int]], None]:
            return lambda ids: [deltas.put((index, delta)) for delta in trackers[index].update(ids)]

        outcome: dict[str, Any] = {}

        def generate() -> None:
            try:
                outcome["completions"] = service.generate(request, [listener(i) for i in range(request.n)])
            except Exception as err:  # noqa: BLE001 - reported to the client as an error event
                outcome["error"] = err

        thread = threading.Thread(target=generate, name="stream", daemon=True)
        thread.start()
        head = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()), "model": service.model_name}
        try:
            self._start_events()
            for index in range(request.n):
                self._event(chunk(head, index, ROLE_DELTA))
            while thread.is_alive() or not deltas.empty():
                try:
                    index, delta = deltas.get(timeout=0.05)
                except queue.Empty:
                    continue
                self._event(chunk(head, index, delta))
            if "error" in outcome:
                log.error("generation failed mid-stream: %s", outcome["error"])
                self._event(ApiError(500, f"generation failed: {outcome['error']}").body())
            else:
                completions = outcome["completions"]
                response = _response(service.model_name, completions, prompt_tokens, request.tools, tool_format)
                response |= head  # the id and time the streamed chunks carried
                sent, calls = [t.sent for t in trackers], [t.calls for t in trackers]
                for one in closing_chunks(response, request.include_usage, sent, calls):
                    self._event(one)
            self._event("[DONE]")
        except (BrokenPipeError, ConnectionResetError):  # the client left mid-stream
            self.close_connection = True

    def _start_events(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _event(self, payload: dict[str, Any] | str) -> None:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        self.wfile.write(f"data: {data}\n\n".encode())
        self.wfile.flush()

    def log_message(self, fmt, *args):
        log.info("%s %s", self.address_string(), fmt % args)
