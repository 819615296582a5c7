"""Can a checkpoint's chat template be used for exact multi-turn RL? (`harness model check-template`)

A scripted tool conversation (a system prompt, a question, a tool call, its result, a follow-up
question, another call and result, a final `submit`; with reasoning where the template knows
`<think>`) goes through the template check by check: the tools are rendered; each reply's tool
call, rendered in the family's own format, parses back to the same call; the generation prompt
continues the conversation; an episode recorded the way the harness records them (prompt once,
then each reply's tokens and each observation's rendering appended) gives the training batch
exactly; and whether rendering the whole history again would give other tokens (Qwen3 drops
earlier reasoning, Mistral moves the tools and the system prompt to the last question), which is
where re-tokenizing trainers drift from what the engine generated.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from harness.errors import HarnessError
from harness.parsing import TOOL_CALL_FORMATS, ToolCallFormat, format_for_template
from harness.policy import Completion
from harness.tokens import TemplateError, TokenLedger, checked_render, turn_end
from harness.tool_prompt import takes_tools
from harness.tools import schemas
from harness.trajectory import Trajectory

from .batch import build_batch

PASS, FAIL, WARN = "pass", "fail", "warn"


@dataclass
class Check:
    name: str
    status: str  # pass | fail | warn
    detail: str


@dataclass
class TemplateReport:
    checkpoint: str
    tool_format: str | None
    checks: list[Check] = field(default_factory=list)

    @property
    def usable(self) -> bool:
        """Usable for exact multi-turn RL: no check failed (a warning is a fact to know, not a defect)."""
        return bool(self.checks) and all(check.status != FAIL for check in self.checks)

    @property
    def reason(self) -> str:
        return "; ".join(f"{c.name}: {c.detail}" for c in self.checks if c.status == FAIL)

    def add(self, name: str, ok: bool | None, detail: str) -> bool:
        self.checks.append(Check(name, PASS if ok else (WARN if ok is None else FAIL), detail))
        return bool(ok)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "usable": self.usable, "reason": self.reason}


def _call(call_id: str, name: str, reasoning: str, **arguments: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": reasoning,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        ],
    }


def conversation(reasoning: bool) -> list[dict[str, Any]]:
    """The scripted episode: one call per reply (Llama 3.1 takes no more), ids of 9 letters and digits (Mistral's)."""

    def think(text: str) -> str:
        return f"<think>\n{text}\n</think>\n\n" if reasoning else ""

    return [
        {"role": "system", "content": "You are a careful assistant. Use the tools."},
        {"role": "user", "content": "How many files are in /tmp?"},
        _call("call00001", "bash", think("I list the folder first."), command="ls /tmp | wc -l"),
        {"role": "tool", "tool_call_id": "call00001", "name": "bash", "content": "3"},
        {"role": "user", "content": "Count the hidden files too."},
        _call("call00002", "bash", think("ls -A shows hidden files."), command="ls -A /tmp | wc -l"),
        {"role": "tool", "tool_call_id": "call00002", "name": "bash", "content": "5"},
        _call("call00003", "submit", "", answer="5"),
    ]


REPLIES = (2, 5, 7)  # the assistant messages of `conversation`
TOOLS = ("bash", "submit")


def check_template(tokenizer, checkpoint: str = "") -> TemplateReport:
    """Run every check on `tokenizer` (with its chat_template); see the module's description."""
    source = tokenizer.chat_template if isinstance(getattr(tokenizer, "chat_template", None), str) else None
    tool_format = format_for_template(source)
    report = TemplateReport(checkpoint, tool_format.name if tool_format else None)
    if source is None:
        report.add(
            "chat template", False, "the tokenizer has no chat template (tokenizer_config.json or chat_template.jinja)"
        )
        return report
    try:
        end = turn_end(tokenizer)
    except TemplateError as err:
        report.add("end of turn", False, str(err))
        return report
    report.add("end of turn", True, f"a reply ends with {end!r}")
    messages, tools = conversation(_reasons(tokenizer, source)), schemas(list(TOOLS))
    if not _tools_rendered(report, tokenizer, messages[:2], tools):
        return report
    if not report.add(
        "tool-call format",
        tool_format is not None and takes_tools(tokenizer),
        f"{tool_format.name}"
        if tool_format and takes_tools(tokenizer)
        else f"the template writes {tool_format.name} calls but does not render `tools`: the harness would describe "
        "them in its own prompt and ask for hermes calls, which the family does not write"
        if tool_format
        else "the template writes tool calls in none of the registered "
        f"formats ({', '.join(TOOL_CALL_FORMATS.names())}): register one with harness.parsing.register_tool_call_format",
    ):
        return report
    replies = _replies(report, tokenizer, messages, tools, tool_format, end)
    if replies is None:
        return report
    ledger = _episode(report, tokenizer, messages, tools, replies)
    if ledger is None:
        return report
    _batch(report, ledger, tokenizer)
    _history(report, tokenizer, messages, tools, ledger)
    _content_none(report, tokenizer, messages, tools)
    return report


def _reasons(tokenizer, source: str) -> bool:
    """Whether the scripted replies carry reasoning: the template knows `<think>` and its generation prompt leaves the
    block open (Qwen3.5's no-thinking template closes an empty one there: its replies have none)."""
    if "<think>" not in source:
        return False
    question = [{"role": "user", "content": "Hello"}]
    try:
        prompt = checked_render(tokenizer, question, None, True, False)[
            len(checked_render(tokenizer, question, None, False, False)) :
        ]
    except TemplateError:
        return True  # the checks that follow report the error
    return "</think>" not in prompt


def _tools_rendered(report: TemplateReport, tokenizer, prompt, tools) -> bool:
    try:
        with_tools = checked_render(tokenizer, prompt, tools, True, False)
        without = checked_render(tokenizer, prompt, None, True, False)
    except TemplateError as err:
        return report.add("tools rendered", False, str(err))
    names = [t["function"]["name"] for t in tools] + [
        p for t in tools for p in t["function"]["parameters"]["properties"]
    ]
    missing = [name for name in names if name not in with_tools]
    if with_tools == without or missing:
        return report.add(
            "tools rendered",
            False,
            "the template ignores the tools it is given"
            if with_tools == without
            else f"the rendered prompt lacks {missing}",
        )
    return report.add("tools rendered", True, f"{len(tools)} schemas, {len(with_tools) - len(without)} characters")


def _replies(report, tokenizer, messages, tools, tool_format: ToolCallFormat, end: str) -> list[tuple[str, str]] | None:
    """Each scripted reply as the template writes it after the generation prompt, parsed back; with the special
    token that ends it."""
    replies, prompts = [], set()
    for index in REPLIES:
        try:
            before = checked_render(tokenizer, messages[:index], tools, True, False)
            plain = checked_render(tokenizer, messages[:index], tools, False, False)
            after = checked_render(tokenizer, messages[: index + 1], tools, False, False)
        except TemplateError as err:
            report.add("tool calls round trip", False, str(err))
            return None
        if not before.startswith(plain):
            report.add(
                "generation prompt",
                False,
                f"rendering with the generation prompt changes what precedes it (turn {index})",
            )
            return None
        prompts.add(before[len(plain) :])
        region = after[len(before) :]
        ends = [e for e in (end, tool_format.call_end) if e and e in region]  # harmony ends a call with <|call|>
        if not after.startswith(before) or not ends:
            report.add(
                "generation prompt",
                False,
                f"the reply at turn {index} does not follow the generation prompt "
                f"{before[len(plain) :]!r} (the template renders the reply's header differently)",
            )
            return None
        stop = min(ends, key=region.index)
        reply = region[: region.index(stop)]
        turn = tool_format.parse(reply, "check")
        call = messages[index]["tool_calls"][0]["function"]
        got = [(c.name, json.loads(c.arguments)) for c in turn.tool_calls]
        if turn.errors or got != [(call["name"], json.loads(call["arguments"]))]:
            report.add(
                "tool calls round trip",
                False,
                f"the reply {reply!r} parses as {got} {turn.errors or ''}, not {call['name']}({call['arguments']})",
            )
            return None
        replies.append((reply, stop))
    report.add(
        "tool calls round trip",
        True,
        f"{len(replies)} calls written as {tool_format.name} and parsed back; e.g. {replies[-1][0]!r}",
    )
    report.add(
        "generation prompt",
        True,
        " / ".join(repr(p) for p in sorted(prompts))
        + (" (none: a reply follows the last message)" if prompts == {""} else ""),
    )
    return replies


def _episode(report, tokenizer, messages, tools, replies: list[tuple[str, str]]) -> TokenLedger | None:
    """The episode recorded as the harness records one: each reply's tokens as a model would generate them."""
    try:
        ledger = TokenLedger(tokenizer, messages[: REPLIES[0]], tools)
        for number, (index, (reply, stop)) in enumerate(zip(REPLIES, replies)):
            ids = tokenizer.encode(reply, add_special_tokens=False) + [tokenizer.convert_tokens_to_ids(stop)]
            ledger.add_completion(Completion(reply, token_ids=ids, logprobs=[-1.0 - n / 10 for n in range(len(ids))]))
            if number + 1 < len(REPLIES):
                ledger.add_observations(messages[index + 1 : REPLIES[number + 1]])
    except TemplateError as err:
        report.add("tool results", False, str(err))
        return None
    report.add(
        "tool results",
        True,
        "rendered after a reply (roles " + ", ".join(sorted({m["role"] for m in messages[3:5]})) + ")",
    )
    return ledger


def _batch(report, ledger: TokenLedger, tokenizer) -> None:
    trajectory = Trajectory("check", token_ids=ledger.ids, loss_mask=ledger.mask, logprobs=ledger.logprobs, reward=1.0)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else ledger.end_id
    batch = build_batch([[trajectory]], pad, filter_zero_variance=False)
    same = (
        batch.input_ids[0].tolist() == ledger.ids
        and batch.loss_mask[0].tolist() == [float(m) for m in ledger.mask]
        and torch.equal(batch.old_logprobs[0], torch.tensor(ledger.logprobs, dtype=batch.old_logprobs.dtype))
    )
    report.add(
        "episode tokens = training batch",
        same,
        f"{len(ledger.ids)} tokens, {sum(ledger.mask)} of them the replies' (loss mask 1, with their logprobs)"
        if same
        else "the batch row differs from the recorded episode",
    )


def _history(report, tokenizer, messages, tools, ledger: TokenLedger) -> None:
    """Re-rendering the finished conversation: the same tokens, or where a re-tokenizing trainer would drift."""
    again = list(checked_render(tokenizer, messages, tools, False, True))
    at = next((i for i, (a, b) in enumerate(zip(ledger.ids, again)) if a != b), min(len(ledger.ids), len(again)))
    rest = tokenizer.decode(again[at:]).strip()
    if at == len(ledger.ids) and not rest:
        report.add("history re-rendered", True, "rendering the whole conversation again gives the episode's tokens")
        return
    window = slice(max(at - 8, 0), at + 12)
    report.add(
        "history re-rendered",
        None,
        f"rendering the whole conversation again changes earlier turns from token {at} of "
        f"{len(ledger.ids)}: the episode has {tokenizer.decode(ledger.ids[window])!r}, the re-rendering "
        f"{tokenizer.decode(again[window])!r}; re-tokenizing would train on other tokens than the engine's "
        "(the harness trains on the recorded ones)",
    )


def _content_none(report, tokenizer, messages, tools) -> None:
    """OpenAI clients send a tool-calling reply with content None; some templates cannot add None to text."""
    reply = {**messages[REPLIES[0]], "content": None}
    try:
        checked_render(tokenizer, [*messages[: REPLIES[0]], reply], tools, False, False)
    except TemplateError as err:
        report.add(
            "content None",
            None,
            f"{err} (the harness's own episodes send '' instead; `harness serve` answers such "
            "a request with an error 400)",
        )
        return
    report.add("content None", True, "a tool-calling reply with content None renders")


def check_checkpoint(path: str) -> TemplateReport:
    """check_template on a checkpoint folder's tokenizer."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except Exception as err:  # noqa: BLE001 - any failure means there is no usable tokenizer there
        raise HarnessError(f"cannot load a tokenizer from {path}: {err}") from err
    return check_template(tokenizer, path)
