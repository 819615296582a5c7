"""The agent loop: one policy works one task in one environment until the episode ends.

Every way an episode ends is an exception caught in one place (`run_episode`), which then
scores the end state with the task's verifier, whatever the ending.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from infra.errors import InfraError
from sandboxes import Backend, Sandbox, SandboxError, SandboxExpired
from tasks.errors import TaskError
from tasks.task import Task

from .context import Context, parse_summarizer, token_counter
from .kinds import kind_of, make_environment
from .errors import PolicyError
from .parsing import ParsedTurn, tool_call_format
from .policy import Completion, Policy, Sampling
from .tokens import TokenLedger
from .tools import schemas
from .trajectory import EXIT_STATUSES, SCORING_FAILED, Trajectory


#: The limits every kind of run sets by these names: `harness eval` (flags and `--config`), training's `generator`
#: section and `Agent.run_task`.
LIMIT_KEYS = ("max_turns", "max_context", "episode_timeout", "max_format_errors")


@dataclass
class Limits:
    """What ends an episode whatever the agent does (exit statuses max_turns, context_exceeded, wall_time,
    format_errors), the time each tool call may take, and what each prompt holds of the history."""

    max_turns: int | None = None  # a cap on the task's own turn limit (None: the task's limit)
    max_context: int = 32_768  # tokens, in-process models
    episode_timeout: float = 1800.0  # seconds for the whole episode, checked between turns
    max_format_errors: int = 3  # turns in a row without a usable tool call
    command_timeout: float = 120.0  # seconds per tool call
    context: str = "keep-all"  # what each prompt holds of the history (harness.context)
    summarizer: str = ""  # MODEL@URL: the endpoint that writes summaries ("": the policy)

    @classmethod
    def of(cls, settings: Any) -> Limits:
        """The limits (and context strategy) of a run's settings: an EvalConfig, training's generator section."""
        return cls(**{key: getattr(settings, key) for key in (*LIMIT_KEYS, "context", "summarizer")})


class EpisodeEnd(Exception):
    def __init__(self, status: str, error: str = ""):
        if status not in EXIT_STATUSES:  # the statuses are one list, which docs/concepts.md shows
            raise ValueError(f"unknown exit status {status!r}: one of {', '.join(EXIT_STATUSES)}")
        super().__init__(status)
        self.status = status
        self.error = error


def run_episode(
    task: Task,
    policy: Policy,
    sampling: Sampling,
    limits: Limits = Limits(),
    backend: Backend | None = None,
    sandbox: Sandbox | None = None,
    sample: int = 0,
    on_message: Callable[[dict[str, Any]], None] | None = None,
    on_agent_done: Callable[[], None] | None = None,
    scaffold=None,
    artifacts: Path | None = None,
) -> Trajectory:
    """`on_message` (if given) sees each message as the episode adds it: the prompt, turns, tool results.
    `on_agent_done` (if given) is called once the agent's turns are over, before scoring (an eval
    driver starts the next episode then, so grading overlaps it). `scaffold` (a harness.scaffolds.Scaffold)
    drives the turns instead of our own loop, keeping its own records in `artifacts` (a folder)."""
    policy = policy.for_task(task)
    started = time.monotonic()
    trajectory = Trajectory(task_id=task.id, sample=sample, policy=policy.name)
    if task.sandbox is not None:
        trajectory.metadata["workdir"] = task.sandbox.workdir  # what the viewer's audit counts as inside
    timings = trajectory.timings = {"policy_s": 0.0, "env_s": 0.0}  # a scaffold adds its turns' times here
    env = make_environment(task, backend, sandbox, limits.command_timeout)
    ledger = None
    sessions: list[dict[str, Any]] = []  # the agent sessions before the last one, each ended
    try:
        try:
            clock = time.monotonic()
            env.deadline = started + limits.episode_timeout
            messages = env.init()
            timings["env_s"] += time.monotonic() - clock
            tools = schemas(env.tools, compact=bool(task.metadata.get("compact_tools"))) if env.tools else []
            tell = on_message or (lambda message: None)
            while True:  # one agent session per instruction the task gives (one, but for a multi-step task)
                trajectory.messages, trajectory.tools = messages, tools
                for message in messages:
                    tell(message)
                ledger = None
                try:
                    if scaffold is not None:
                        scaffold.drive(task, policy, env, messages, sampling, limits, trajectory, started, artifacts)
                    ledger = TokenLedger(policy.tokenizer, messages, tools) if policy.tokenizer is not None else None
                    _loop(task, policy, env, sampling, limits, trajectory, ledger, tools, timings, started, tell)
                except EpisodeEnd as end:
                    trajectory.exit_status, trajectory.error = end.status, end.error
                clock = time.monotonic()
                messages = env.next_session()
                timings["env_s"] += time.monotonic() - clock
                if messages is None:
                    break
                sessions.append(_end_session(trajectory, ledger))
        except EpisodeEnd as end:
            trajectory.exit_status, trajectory.error = end.status, end.error
        except PolicyError as err:
            trajectory.exit_status, trajectory.error = "policy_error", str(err)
        except SandboxExpired as err:  # the sandbox's own wall-clock limit: the episode's time ran out
            trajectory.exit_status, trajectory.error = "wall_time", str(err)
        except SandboxError as err:
            trajectory.exit_status, trajectory.error = "sandbox_error", str(err)
        if on_agent_done is not None:
            on_agent_done()
        clock = time.monotonic()
        try:
            reward = env.finish()
            trajectory.reward, trajectory.reward_details = reward.value, reward.details
            trajectory.model_patch = env.outcome if kind_of(task).outcome == "patch" else ""
        except (SandboxError, TaskError, InfraError) as err:
            trajectory.error = (trajectory.error + "; " if trajectory.error else "") + f"{SCORING_FAILED}: {err}"
        timings["env_s"] += time.monotonic() - clock
    finally:
        env.close()
    if ledger is not None:
        trajectory.token_ids, trajectory.loss_mask, trajectory.logprobs = ledger.ids, ledger.mask, ledger.logprobs
        if ledger.segments:  # a context strategy rewrote the history: the records before each rewrite
            trajectory.metadata["context"]["token_segments"] = ledger.segments
    if sessions:
        _join_sessions(trajectory, sessions)
    timings["total_s"] = time.monotonic() - started
    return trajectory


def _end_session(trajectory: Trajectory, ledger: TokenLedger | None) -> dict[str, Any]:
    """Take an ended agent session's record out of the trajectory, which the next session starts afresh."""
    meta = trajectory.metadata
    if ledger is not None:
        rows = [*ledger.segments, {"token_ids": ledger.ids, "loss_mask": ledger.mask, "logprobs": ledger.logprobs}]
    else:  # a scaffold's record, or none
        rows = list((meta.get("scaffold") or {}).get("token_segments") or [])
        if trajectory.token_ids is not None:
            rows.append(
                {"token_ids": trajectory.token_ids, "loss_mask": trajectory.loss_mask, "logprobs": trajectory.logprobs}
            )
    session = {
        "messages": trajectory.messages,
        "turns": trajectory.turns,
        "exit_status": trajectory.exit_status,
        "error": trajectory.error,
        "prompt_tokens": trajectory.prompt_tokens,
        "completion_tokens": trajectory.completion_tokens,
        "turn_stats": meta.pop("turn_stats", []),
        "token_segments": rows,
    }
    meta.pop("context", None)
    meta.pop("scaffold", None)
    trajectory.turns = trajectory.prompt_tokens = trajectory.completion_tokens = 0
    trajectory.error, trajectory.token_ids, trajectory.loss_mask, trajectory.logprobs = "", None, None, None
    return session


def _join_sessions(trajectory: Trajectory, sessions: list[dict[str, Any]]) -> None:
    """One record of every session: the messages in turn, the counts summed, each earlier session's tokens a
    segment of its own (`metadata.sessions.token_segments`, trained like a context rewrite's), and where each
    session's messages start."""
    last = {"messages": trajectory.messages, "turns": trajectory.turns, "exit_status": trajectory.exit_status}
    last.update(error=trajectory.error, turn_stats=trajectory.metadata.get("turn_stats", []))
    messages, starts = [], []
    for session in [*sessions, last]:
        starts.append(len(messages))
        messages += session["messages"]
    trajectory.messages = messages
    trajectory.turns += sum(s["turns"] for s in sessions)
    trajectory.prompt_tokens += sum(s["prompt_tokens"] for s in sessions)
    trajectory.completion_tokens += sum(s["completion_tokens"] for s in sessions)
    trajectory.metadata["turn_stats"] = [stat for s in [*sessions, last] for stat in s["turn_stats"]]
    trajectory.metadata["sessions"] = {
        "sessions": [
            {"first_message": start, "turns": s["turns"], "exit_status": s["exit_status"], "error": s["error"]}
            for start, s in zip(starts, [*sessions, last])
        ],
        "token_segments": [row for s in sessions for row in s["token_segments"]],
    }


def _loop(task, policy, env, sampling, limits, trajectory, ledger, tools, timings, started, tell) -> None:
    max_turns = min(task.max_turns, limits.max_turns or task.max_turns)
    format_errors = 0
    writer = _summary_writer(policy, ledger, sampling, limits, trajectory)
    context = Context(limits.context, token_counter(policy.tokenizer), writer, limits.summarizer)
    while True:
        if trajectory.turns >= max_turns:
            raise EpisodeEnd("max_turns")
        if time.monotonic() - started > limits.episode_timeout:
            raise EpisodeEnd("wall_time")
        prompt = context.prompt(trajectory.messages, ledger, trajectory.turns + 1, trajectory.metadata)
        if ledger is not None and len(ledger.ids) + sampling.max_tokens > limits.max_context:
            raise EpisodeEnd(
                "context_exceeded",
                f"{len(ledger.ids)} tokens + {sampling.max_tokens} to generate > {limits.max_context}",
            )
        clock = time.monotonic()
        completion = _generate(policy, ledger, prompt, tools, sampling)
        policy_s = time.monotonic() - clock
        timings["policy_s"] += policy_s
        trajectory.turns += 1
        if not completion.trained:
            trajectory.untrained_turns.append(trajectory.turns)
        trajectory.prompt_tokens += completion.prompt_tokens
        trajectory.completion_tokens += completion.completion_tokens
        turn = _parse(completion, trajectory.turns, policy.tokenizer)
        trajectory.messages.append(_assistant_message(turn))
        tell(trajectory.messages[-1])
        clock = time.monotonic()
        result = env.step(turn)
        env_s = time.monotonic() - clock
        timings["env_s"] += env_s
        # per turn, for `harness view`: kept out of the messages so that chat templates never see it
        trajectory.metadata.setdefault("turn_stats", []).append(
            {
                "policy_s": round(policy_s, 4),
                "env_s": round(env_s, 4),
                "prompt_tokens": completion.prompt_tokens,
                "completion_tokens": completion.completion_tokens,
                "finish_reason": completion.finish_reason,
            }
        )  # `length`: cut at max_tokens (the trainer's filter_truncated)
        trajectory.messages += result.observations
        for message in result.observations:
            tell(message)
        if result.done:
            raise EpisodeEnd("submitted")
        if ledger is not None and result.observations:
            ledger.add_observations(result.observations)
        format_errors = format_errors + 1 if result.format_error else 0
        if format_errors >= limits.max_format_errors:
            raise EpisodeEnd("format_errors", f"{format_errors} turns in a row without a usable tool call")


def _summary_writer(policy, ledger, sampling, limits, trajectory) -> Callable:
    """The policy answers a context strategy's summary request, or the endpoint `limits.summarizer` names. With
    recorded tokens, the policy's request and its sampled answer become a token segment of their own: trained, with
    the trajectory's advantage, after exactly that prompt; an endpoint's summary is context, not trained."""

    def write(messages) -> tuple[str, int, int]:
        if not limits.summarizer and policy.scripted:
            raise PolicyError(f"{policy.name} plays fixed turns: it writes no summary")
        clock = time.monotonic()
        if limits.summarizer:
            completion = _endpoint_summary(limits.summarizer, messages, sampling)
        elif ledger is None:
            completion = policy.generate(messages, [], sampling)
        else:
            prompt = ledger.render(messages)
            if len(prompt) + sampling.max_tokens > limits.max_context:
                raise PolicyError(
                    f"its request has {len(prompt)} tokens + {sampling.max_tokens} to generate > {limits.max_context}"
                )
            completion = policy.generate_ids(prompt, sampling)
            ledger.add_segment(prompt, completion)
        trajectory.timings["policy_s"] += time.monotonic() - clock
        trajectory.prompt_tokens += completion.prompt_tokens
        trajectory.completion_tokens += completion.completion_tokens
        return completion.text, completion.prompt_tokens, completion.completion_tokens

    return write


def _endpoint_summary(summarizer: str, messages, sampling: Sampling) -> Completion:
    from .policies.endpoint import EndpointPolicy

    endpoint = EndpointPolicy(*parse_summarizer(summarizer))
    try:
        return endpoint.generate(messages, [], sampling)
    finally:
        endpoint.close()


def _generate(policy: Policy, ledger: TokenLedger | None, messages, tools, sampling: Sampling) -> Completion:
    if ledger is None:
        return policy.generate(messages, tools, sampling)
    completion = policy.generate_ids(ledger.ids, sampling)
    ledger.add_completion(completion)
    return completion


def _parse(completion: Completion, turn_number: int, tokenizer) -> ParsedTurn:
    if completion.tool_calls is not None:
        return ParsedTurn(completion.text, list(completion.tool_calls), raw=completion.text)
    return tool_call_format(tokenizer).read(completion.text, f"call_{turn_number}")


def _assistant_message(turn: ParsedTurn) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.content}
    if turn.tool_calls:
        message["tool_calls"] = [call.to_openai() for call in turn.tool_calls]
    return message
