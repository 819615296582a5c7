"""The intercepting model endpoint: an OpenAI-compatible server in front of a Policy, which a
third-party scaffold talks to instead of a model. One server per process, on 127.0.0.1; the API
key the scaffold sends names its episode.

Every call is recorded: the prompt token ids the engine saw, the sampled ids and their logprobs,
the tool calls parsed. With a local policy the episode keeps one growing token record, as our own
loop does (`harness.tokens.TokenLedger`): a call whose history is what the endpoint saw before plus
its own answers continues the sampled tokens. The re-sent history is rendered as well, and where
its tokens differ from the sampled ones (the chat template re-tokenizes an answer differently)
that drift is recorded while the sampled tokens stay what the engine continues and the trainer
sees. A history the scaffold rewrote (an earlier message changed or dropped) is drift of another
kind: it is recorded and starts a new token segment.

Beside the chat routes the server is the scaffold's shell: `POST /harness/exec` runs a command in
the episode's sandbox (its persistent shell), `POST /harness/submit` ends the episode. The client
is `harness/scaffolds/programs/harness_shell.py`.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable

from sandboxes import Sandbox, SandboxError

from ..errors import PolicyError
from ..parsing import tool_call_format
from ..policy import Completion, Policy, Sampling
from ..chat_server import ApiError, ChatRequest, ChatServer, _Handler, choices
from ..tokens import TokenLedger, render

log = logging.getLogger(__name__)


@dataclass
class Drift:
    """Where a re-sent history stopped matching: `tokens` (the rendering of the sampled answers differs
    from the sampled ids, at token `position`) or `history` (message `position` was rewritten)."""

    call: int
    kind: str
    position: int


class TokenRecord:
    """The exact tokens of an episode whose turns a scaffold drives (local policies)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.ledger: TokenLedger | None = None
        self.seen: list[dict[str, Any]] = []  # the history so far: what the scaffold sent plus the answers
        self.segments: list[TokenLedger] = []  # ended by a rewritten history
        self.drifts: list[Drift] = []

    def prompt(self, call: int, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[int]:
        """The token ids to continue for this call's `messages`."""
        if self.ledger is not None:
            kept = _kept_prefix(self.seen, messages)
            if kept == len(self.seen) < len(messages):
                self.ledger.add_observations(messages[kept:])
                rendered = list(render(self.tokenizer, messages, tools, True, True))
                if rendered != self.ledger.ids:
                    self.drifts.append(Drift(call, "tokens", _kept_prefix(rendered, self.ledger.ids)))
                return list(self.ledger.ids)
            self.drifts.append(Drift(call, "history", kept))
            self.segments.append(self.ledger)
        self.ledger = TokenLedger(self.tokenizer, messages, tools)
        return list(self.ledger.ids)

    def add(self, messages: list[dict[str, Any]], completion: Completion, answer: dict[str, Any]) -> None:
        self.ledger.add_completion(completion)
        self.seen = [_comparable(m) for m in messages] + [_comparable(answer)]


def _comparable(message: dict[str, Any]) -> Any:
    """What must stay the same in a re-sent message: role, text, tool calls (not their ids or extra keys)."""
    if not isinstance(message, dict):
        return message
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function", {})
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments or "{}")
            except json.JSONDecodeError:
                pass
        calls.append((function.get("name"), json.dumps(arguments, sort_keys=True)))
    return message.get("role"), message.get("content") or "", calls


def _openai_message(message: dict[str, Any]) -> dict[str, Any]:
    """A request message as OpenAI writes it: tool-call arguments as JSON text (the server gives templates objects)."""
    if not message.get("tool_calls"):
        return message
    calls = [
        {**call, "function": {**call["function"], "arguments": json.dumps(call["function"]["arguments"])}}
        if isinstance(call.get("function", {}).get("arguments"), dict)
        else call
        for call in message["tool_calls"]
    ]
    return {**message, "tool_calls": calls}


def _kept_prefix(before: list, now: list) -> int:
    """How many leading items of `now` equal those of `before` (messages compared as `_comparable`)."""
    count = 0
    for old, new in zip(before, now):
        if old != (_comparable(new) if isinstance(new, dict) else new):
            break
        count += 1
    return count


@dataclass
class EpisodeEndpoint:
    """One episode behind the server: its policy, sampling, sandbox, limits and everything recorded."""

    policy: Policy
    sampling: Sampling
    sandbox: Sandbox | None
    max_turns: int
    max_context: int
    command_timeout: float
    express: Callable[[Completion], Completion] | None = None  # scripted turns in the scaffold's action format
    model_name: str = "harness"
    calls: list[dict[str, Any]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)  # the last history sent plus its answer
    rejected: list[str] = field(default_factory=list)  # requests answered with an error
    commands: list[dict[str, Any]] = field(default_factory=list)  # what ran in the sandbox, after which model call
    submitted: bool = False
    ended: str = ""  # an exit status the endpoint decided (max_turns, context_exceeded, policy_error, sandbox_error)
    error: str = ""

    def __post_init__(self):
        self.lock = threading.Lock()
        self.tokens = TokenRecord(self.policy.tokenizer) if self.policy.tokenizer is not None else None

    def complete(self, request: ChatRequest) -> tuple[list[Completion], int]:
        if request.n != 1:
            raise ApiError(400, "`n` must be 1: each call is one turn of the episode", "n")
        with self.lock:
            if self.ended or self.submitted:
                raise ApiError(409, f"the episode has ended ({self.ended or 'submitted'})", code="episode_ended")
            if len(self.calls) >= self.max_turns:
                self._end("max_turns", f"{self.max_turns} model calls")
                raise ApiError(
                    429, f"the episode's turn limit ({self.max_turns} model calls) is reached", code="max_turns"
                )
            return self._complete(request)

    def _complete(self, request: ChatRequest) -> tuple[list[Completion], int]:
        call = len(self.calls)
        # The run's sampling settings hold; a scaffold's own stop sequences are kept.
        sampling = replace(self.sampling, stop=request.sampling.stop or self.sampling.stop)
        started = time.monotonic()
        ids: list[int] = []
        try:
            if self.tokens is not None:
                ids = self.tokens.prompt(call, request.messages, request.tools)
                if len(ids) + sampling.max_tokens > self.max_context:
                    self._end(
                        "context_exceeded",
                        f"{len(ids)} tokens + {sampling.max_tokens} to generate > {self.max_context}",
                    )
                    raise ApiError(400, self.error, "messages", "context_length_exceeded")
                completion = self.policy.generate_ids(ids, sampling)
            else:
                completion = self.policy.generate(request.messages, request.tools, sampling)
        except PolicyError as err:
            self._end("policy_error", str(err))
            raise ApiError(502, f"the policy failed: {err}") from None
        if self.express is not None and completion.tool_calls:
            completion = self.express(completion)
        answer = choices([completion], request.tools, tool_call_format(self.policy.tokenizer))[0]["message"]
        if self.tokens is not None:
            self.tokens.add(request.messages, completion, answer)
            segment = len(self.tokens.segments)
        self.messages = [*map(_openai_message, request.messages), answer]
        self.calls.append(
            {
                "call": call,
                "policy_s": round(time.monotonic() - started, 4),
                "finish_reason": completion.finish_reason,
                # the engine's prompt: the first `prompt_length` ids of token segment `segment`
                "segment": segment if self.tokens is not None else None,
                "prompt_length": len(ids) or completion.prompt_tokens,
                "token_ids": completion.token_ids,
                "logprobs": completion.logprobs,
                "tool_calls": answer.get("tool_calls") or [],
                "completion_tokens": completion.completion_tokens or len(completion.token_ids or []),
            }
        )
        return [completion], len(ids)

    def run(self, command: str, timeout: float | None) -> dict[str, Any]:
        if self.submitted or self.ended:
            raise ApiError(409, f"the episode has ended ({self.ended or 'submitted'})", code="episode_ended")
        if self.sandbox is None:
            raise ApiError(400, "this task has no sandbox to run commands in")
        limit = self.command_timeout if timeout is None else min(float(timeout), self.command_timeout)
        record = {"after_call": len(self.calls) - 1, "command": command, "exit_code": None}
        self.commands.append(record)
        try:
            result = self.sandbox.exec(command, timeout=limit)
        except SandboxError as err:
            self._end("sandbox_error", str(err))
            raise ApiError(500, f"the sandbox failed: {err}") from None
        record.update(exit_code=result.exit_code, duration=round(result.duration, 4))
        return {"output": result.output, "exit_code": result.exit_code, "timed_out": result.timed_out}

    def _end(self, status: str, error: str) -> None:
        if not self.ended:
            self.ended, self.error = status, error

    def token_record(self) -> dict[str, Any]:
        """The trajectory's token fields and what the metadata keeps of the interception."""
        out: dict[str, Any] = {"calls": self.calls, "rejected_requests": self.rejected, "commands": self.commands}
        if self.tokens is not None and self.tokens.ledger is not None:
            ledger = self.tokens.ledger
            out.update(
                token_ids=ledger.ids,
                loss_mask=ledger.mask,
                logprobs=ledger.logprobs,
                drift=[asdict(d) for d in self.tokens.drifts],
                token_segments=[
                    {"token_ids": s.ids, "loss_mask": s.mask, "logprobs": s.logprobs} for s in self.tokens.segments
                ],
            )
        return out


class InterceptServer(ChatServer):
    """The chat routes of `harness serve`, one episode per API key, plus the shell routes."""

    def __init__(self):
        super().__init__("127.0.0.1", 0)
        self.RequestHandlerClass = _InterceptHandler
        self.episodes: dict[str, EpisodeEndpoint] = {}
        self.thread = threading.Thread(target=self.serve_forever, name="intercept", daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def open(self, endpoint: EpisodeEndpoint) -> str:
        key = "hx-" + secrets.token_hex(16)
        self.episodes[key] = endpoint
        return key

    def close_episode(self, key: str) -> None:
        self.episodes.pop(key, None)


_SERVER: InterceptServer | None = None
_SERVER_LOCK = threading.Lock()


def intercept_server() -> InterceptServer:
    """This process's intercepting server, started on first use."""
    global _SERVER
    with _SERVER_LOCK:
        if _SERVER is None:
            _SERVER = InterceptServer()
        return _SERVER


class _InterceptHandler(_Handler):
    server: InterceptServer

    def _service(self) -> EpisodeEndpoint | None:
        key = (self.headers.get("Authorization") or "").removeprefix("Bearer ").strip()
        return self.server.episodes.get(key)

    def do_GET(self):
        if self._service() is None:
            return self._send_error(ApiError(401, "unknown API key: each episode has its own", code="invalid_api_key"))
        super().do_GET()

    def do_POST(self):
        episode = self._service()
        if episode is None:
            return self._send_error(ApiError(401, "unknown API key: each episode has its own", code="invalid_api_key"))
        if not self.path.startswith("/harness/"):
            return super().do_POST()
        try:
            body = self._read_json()
            if self.path == "/harness/exec":
                command = body.get("command") if isinstance(body, dict) else None
                timeout = body.get("timeout") if isinstance(body, dict) else None
                if not isinstance(command, str) or not command.strip():
                    raise ApiError(400, "`command` must be a non-empty string", "command")
                if timeout is not None and (
                    isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0
                ):
                    raise ApiError(400, "`timeout` must be a positive number of seconds", "timeout")
                self._send(200, episode.run(command, timeout))
            elif self.path == "/harness/submit":
                episode.submitted = True
                self._send(200, {"submitted": True})
            else:
                raise ApiError(404, f"no route POST {self.path}")
        except ApiError as err:
            self._send_error(err)

    def _send_error(self, err: ApiError) -> None:
        episode = self._service()
        if episode is not None:
            episode.rejected.append(f"{err.status} {self.path}: {err.message}"[:500])
        super()._send_error(err)
