"""Tool calls written as text by in-process models, in each model family's own format.

A **tool-call format** says how a family writes calls in its replies and how its chat template
wants earlier calls given back:

- `hermes` (Hermes, Qwen2.5, Qwen3 and this project's tiny models): `<tool_call>` JSON blocks,

      <tool_call>
      {"name": "bash", "arguments": {"command": "ls"}}
      </tool_call>

- `llama3_json` (Llama 3.1 / 3.2): the whole reply is one JSON object
  `{"name": "bash", "parameters": {"command": "ls"}}` (optionally after `<|python_tag|>`); tool
  results go back in the `ipython` role, which the template writes for `tool` messages;
- `mistral` (Mistral's `[TOOL_CALLS]`): `[TOOL_CALLS][{"name": ..., "arguments": {...}, "id": ...}]`,
  call ids of 9 letters and digits;
- `qwen3_xml` (Qwen3-Coder, Qwen3.5 and later): XML inside `<tool_call>`,

      <tool_call>
      <function=bash>
      <parameter=command>
      ls
      </parameter>
      </function>
      </tool_call>

  A parameter's value is its text; one written as a JSON object or list is that value.
- `deepseek_v3` (DeepSeek-V3, R1): the calls after the reply's text, each a ```json block,

      <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>bash
      ```json
      {"command": "ls"}
      ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>

- `harmony` (gpt-oss): a reply is harmony messages, each on a channel: `analysis` (the reasoning),
  `final` (the answer), or `commentary` addressed to a function (a call, ended by `<|call|>`):

      <|channel|>analysis<|message|>I list the folder.<|end|><|start|>assistant to=functions.bash<|channel|>commentary json<|message|>{"command": "ls"}<|call|>

  A call turn's content is its analysis (the template gives it back as such until a final answer
  follows); a final turn's content is its `final` message.

The format of a checkpoint is read off its chat template (`tool_call_format`); your own
joins with `register_tool_call_format`. A malformed call does not raise: it comes back as an
error the loop turns into an observation, so the model can correct itself.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from infra.plugins import Registry

from .tool_prompt import takes_tools


_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.S)


@dataclass
class ToolCall:
    """One call the model asked for (OpenAI shape: id, function name, JSON arguments)."""

    id: str
    name: str
    arguments: str  # the raw JSON text, as the model wrote it
    timeout: float | None = None  # a scripted call's own seconds in place of the per-command limit (a model's: None)

    def to_openai(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass
class ParsedTurn:
    content: str  # the text outside the tool-call blocks
    tool_calls: list[ToolCall] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    raw: str = ""  # the whole reply as generated (what a skyrl-gym environment's `step` receives)
    syntax: str = ""  # how a call is written in the format that parsed the reply ("" = the API's native calls)


@dataclass
class PartialTurn:
    """A reply still being generated, as far as it reads: its content and the calls begun, each a call's name and its
    arguments' text so far (prefixes of what the whole reply's parse gives)."""

    content: str
    calls: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class ToolCallFormat:
    """How one family writes tool calls: `parse(text, call_prefix) -> ParsedTurn`; `matches(template)`
    says whether a chat template's source uses this format; `arguments_as_object`: the template wants
    earlier calls' arguments as a mapping (it serialises them itself), not as OpenAI's JSON text;
    `render(name, arguments) -> str`: one call written as the family writes it; `syntax`: the shape of
    a call, shown to a model whose reply had none."""

    name: str
    parse: Callable[[str, str], ParsedTurn]
    matches: Callable[[str], bool]
    arguments_as_object: bool = False
    json_tool_results: bool = False  # a tool result that is JSON text is given as its value (Mistral's)
    render: Callable[[str, dict[str, Any]], str] | None = None
    syntax: str = ""
    # The special token that ends a reply with a call where that is not the template's end of turn
    # (harmony's <|call|>; its final answers end with <|return|>).
    call_end: str | None = None
    # Where a call may begin in a reply still being generated (the text's length where none can yet): a
    # streamed reply's content stops there. None: anywhere, so nothing is streamed before the reply ends.
    call_start: Callable[[str], int] | None = None
    # For a format whose content is not the start of the reply (harmony's channels): how a reply still being
    # generated reads so far, so that its content and its calls stream as they are written.
    partial: Callable[[str], PartialTurn] | None = None

    def streamable(self, text: str) -> int:
        """How much of a reply still being generated is content whatever comes next: up to where a call may
        begin, less trailing whitespace (a parsed reply's content is stripped before its calls)."""
        end = self.call_start(text) if self.call_start else 0
        return len(text[:end].rstrip())

    def read(self, text: str, call_prefix: str) -> ParsedTurn:
        """`parse`, with the turn told which syntax it was read in (for the feedback on a reply without a call)."""
        turn = self.parse(text, call_prefix)
        turn.syntax = turn.syntax or self.syntax
        return turn

    def prepare(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The conversation as this family's template expects it (OpenAI messages in, same meaning out)."""
        if self.arguments_as_object:
            messages = [object_arguments(m) if m.get("tool_calls") else m for m in messages]
        if self.json_tool_results:
            messages = [
                {**m, "content": _json_or_text(m["content"])} if m.get("role") == "tool" else m for m in messages
            ]
        return messages


def _json_or_text(content: Any) -> Any:
    try:
        return json.loads(content) if isinstance(content, str) else content
    except json.JSONDecodeError:
        return content


def object_arguments(message: dict[str, Any]) -> dict[str, Any]:
    """An assistant message whose tool calls' JSON-text arguments are given as objects (those that parse)."""
    calls = []
    for call in message["tool_calls"]:
        function = dict(call.get("function") or {})
        if isinstance(function.get("arguments"), str):
            try:
                value = json.loads(function["arguments"] or "{}")
            except json.JSONDecodeError:
                value = None
            if isinstance(value, dict):
                function["arguments"] = value
        calls.append({**call, "function": function})
    return {**message, "tool_calls": calls}


def _call(name: Any, arguments: Any, call_id: str, errors: list[str], calls: list[ToolCall]) -> None:
    if not isinstance(name, str):
        errors.append("a tool call must name its function with a string `name`")
        return
    if isinstance(arguments, str):  # some models emit the arguments as a JSON string
        raw = arguments
    elif isinstance(arguments, dict):
        raw = json.dumps(arguments, ensure_ascii=False)
    else:
        errors.append(f"the arguments of the call to `{name}` must be a JSON object")
        return
    calls.append(ToolCall(id=call_id, name=name, arguments=raw))


def _json(text: str, errors: list[str]) -> tuple[bool, Any]:
    """`text` as JSON: (True, its value), or (False, None) with the error noted."""
    try:
        return True, json.loads(text)
    except json.JSONDecodeError as err:
        errors.append(f"the tool call is not valid JSON ({err.msg} at position {err.pos}): {text[:200]!r}")
        return False, None


def parse_tool_calls(text: str, call_prefix: str = "call") -> ParsedTurn:
    """The `hermes` format: `<tool_call>` JSON blocks anywhere in the reply."""
    content = _BLOCK.sub("", text).strip()
    turn = ParsedTurn(content, raw=text)
    for index, match in enumerate(_BLOCK.finditer(text)):
        body = match.group(1).strip()
        if not match.group(0).endswith("</tool_call>"):
            turn.errors.append("a <tool_call> block is not closed with </tool_call>")
            continue
        parsed, value = _json(body, turn.errors)
        if not parsed:
            continue
        if not isinstance(value, dict) or not isinstance(value.get("name"), str):
            turn.errors.append('a tool call must be a JSON object {"name": ..., "arguments": {...}}')
            continue
        _call(value["name"], value.get("arguments", {}), f"{call_prefix}_{index}", turn.errors, turn.tool_calls)
    return turn


def _json_values(text: str) -> tuple[list[Any], str | None]:
    """JSON values one after another (separated by whitespace or `;`); the error where one is not JSON."""
    decoder, values, position = json.JSONDecoder(), [], 0
    while True:
        while position < len(text) and (text[position].isspace() or text[position] == ";"):
            position += 1
        if position == len(text):
            return values, None
        try:
            value, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError as err:
            return values, f"the tool call is not valid JSON ({err.msg} at position {err.pos}): {text[:200]!r}"
        values.append(value)


PYTHON_TAG = "<|python_tag|>"


def parse_llama3_json(text: str, call_prefix: str = "call") -> ParsedTurn:
    """The `llama3_json` format: a reply that starts with `{` (or `<|python_tag|>`) is the call(s) itself."""
    body = text.strip().removeprefix(PYTHON_TAG).strip()
    if not body.startswith("{"):
        return ParsedTurn(text.strip(), raw=text)
    turn = ParsedTurn("", raw=text)
    values, error = _json_values(body)
    if error:
        turn.errors.append(error)
    for index, value in enumerate(values):
        if not isinstance(value, dict):
            turn.errors.append('a tool call must be a JSON object {"name": ..., "parameters": {...}}')
            continue
        arguments = value.get("parameters", value.get("arguments", {}))
        _call(value.get("name"), arguments, f"{call_prefix}_{index}", turn.errors, turn.tool_calls)
    return turn


_MISTRAL_ID = re.compile(r"^[A-Za-z0-9]{9}$")


def mistral_call_id(call_prefix: str, index: int) -> str:
    """A call id in Mistral's shape (9 letters and digits), fixed by the prefix and position."""
    return hashlib.sha1(f"{call_prefix}_{index}".encode()).hexdigest()[:9]


def parse_mistral(text: str, call_prefix: str = "call") -> ParsedTurn:
    """The `mistral` format: text, then `[TOOL_CALLS]` and a JSON list of calls (each may carry its `id`)."""
    content, marker, body = text.partition("[TOOL_CALLS]")
    turn = ParsedTurn(content.strip(), raw=text)
    if not marker:
        return turn
    values, error = _json_values(body.strip())
    if error:
        turn.errors.append(error)
    calls = [v for value in values for v in (value if isinstance(value, list) else [value])]
    if not calls and not error:
        turn.errors.append("[TOOL_CALLS] is followed by no call")
    for index, value in enumerate(calls):
        if not isinstance(value, dict):
            turn.errors.append('a tool call must be a JSON object {"name": ..., "arguments": {...}}')
            continue
        given = value.get("id")
        call_id = given if isinstance(given, str) and _MISTRAL_ID.match(given) else mistral_call_id(call_prefix, index)
        _call(value.get("name"), value.get("arguments", {}), call_id, turn.errors, turn.tool_calls)
    return turn


_XML_CALL = re.compile(r"<tool_call>\s*<function=([^>\n]+)>(.*?)</function>\s*</tool_call>", re.S)
_XML_PARAMETER = re.compile(r"<parameter=([^>\n]+)>\n?(.*?)\n?</parameter>", re.S)


def parse_qwen3_xml(text: str, call_prefix: str = "call") -> ParsedTurn:
    """The `qwen3_xml` format: `<tool_call><function=NAME><parameter=KEY>VALUE</parameter>...</function></tool_call>`."""
    content, marker, rest = text.partition("<tool_call>")
    turn = ParsedTurn(content.strip(), raw=text)
    blocks = [marker + block for block in rest.split(marker)] if marker else []
    for index, block in enumerate(blocks):
        match = _XML_CALL.match(block)
        if not match:
            turn.errors.append(
                "a tool call must be <tool_call><function=NAME><parameter=KEY>VALUE</parameter>...</function>"
                f"</tool_call>: {block[:200]!r}"
            )
            continue
        arguments = {key.strip(): _parameter_value(value) for key, value in _XML_PARAMETER.findall(match.group(2))}
        _call(match.group(1).strip(), arguments, f"{call_prefix}_{index}", turn.errors, turn.tool_calls)
    return turn


def _parameter_value(text: str) -> Any:
    if text.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            pass
    return text


def render_qwen3_xml(name: str, arguments: dict[str, Any]) -> str:
    parameters = "".join(
        f"<parameter={key}>\n{_parameter_text(value)}\n</parameter>\n" for key, value in arguments.items()
    )
    return f"<tool_call>\n<function={name}>\n{parameters}</function>\n</tool_call>"


def _parameter_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list)) else str(value)


def render_hermes(name: str, arguments: dict[str, Any]) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False) + "\n</tool_call>"


def render_llama3_json(name: str, arguments: dict[str, Any]) -> str:
    return json.dumps({"name": name, "parameters": arguments}, ensure_ascii=False)


def render_mistral(name: str, arguments: dict[str, Any]) -> str:
    return "[TOOL_CALLS]" + json.dumps([{"name": name, "arguments": arguments}], ensure_ascii=False)


def marker_start(*markers: str) -> Callable[[str], int]:
    """`call_start` of a format whose calls open with one of `markers`: the first marker, or an ending
    that could grow into one."""

    def start(text: str) -> int:
        found = [i for i in (text.find(m) for m in markers) if i >= 0]
        partial = [len(text) - n for m in markers for n in range(1, len(m)) if text.endswith(m[:n])]
        return min(found + partial, default=len(text))

    return start


def leading_call_start(text: str) -> int:
    """`call_start` of `llama3_json`: a reply that is a call starts with it, so one that begins otherwise
    is all content, and one that may still become a call is held from its start."""
    body = text.lstrip()
    could_be_call = body.startswith(("{", PYTHON_TAG)) or PYTHON_TAG.startswith(body)
    return 0 if could_be_call else len(text)


DEEPSEEK_CALLS_BEGIN, DEEPSEEK_CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
_DEEPSEEK_CALL = re.compile(r"<｜tool▁call▁begin｜>(.*?)<｜tool▁sep｜>(.*?)<｜tool▁call▁end｜>", re.S)
_DEEPSEEK_BODY = re.compile(r"([^\n]+)\n```json\n(.*)\n```", re.S)


def parse_deepseek_v3(text: str, call_prefix: str = "call") -> ParsedTurn:
    """The `deepseek_v3` format: text, then `<｜tool▁calls▁begin｜>` and the calls, each
    `<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGUMENTS\n```<｜tool▁call▁end｜>`."""
    content, marker, body = text.partition(DEEPSEEK_CALLS_BEGIN)
    turn = ParsedTurn(content.strip(), raw=text)
    if not marker:
        return turn
    body, closed, _ = body.partition(DEEPSEEK_CALLS_END)
    if not closed:  # cut short: none of its calls is run
        turn.errors.append(f"{DEEPSEEK_CALLS_BEGIN} is not closed with {DEEPSEEK_CALLS_END}: {body[:200]!r}")
        return turn
    calls = list(_DEEPSEEK_CALL.finditer(body))
    if _DEEPSEEK_CALL.sub("", body).strip():
        turn.errors.append(f"{DEEPSEEK_CALLS_BEGIN} holds text that is not a call: {body[:200]!r}")
    if not calls:
        turn.errors.append(f"{DEEPSEEK_CALLS_BEGIN} is followed by no call")
    for index, call in enumerate(calls):
        match = _DEEPSEEK_BODY.fullmatch(call.group(2))
        if call.group(1) != "function" or not match:
            turn.errors.append(
                "a tool call must be <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\n{...}\\n```"
                f"<｜tool▁call▁end｜>: {call.group(0)[:200]!r}"
            )
            continue
        parsed, arguments = _json(match.group(2), turn.errors)
        if not parsed:
            continue
        _call(match.group(1).strip(), arguments, f"{call_prefix}_{index}", turn.errors, turn.tool_calls)
    return turn


def render_deepseek_v3(name: str, arguments: dict[str, Any]) -> str:
    return (
        f"{DEEPSEEK_CALLS_BEGIN}<｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n"
        f"{json.dumps(arguments, ensure_ascii=False)}\n```<｜tool▁call▁end｜>{DEEPSEEK_CALLS_END}"
    )


HARMONY_CALL = "<|call|>"
_HARMONY_MESSAGE = re.compile(r"(.*?)<\|message\|>(.*?)(?:<\|end\|>|<\|call\|>|<\|return\|>|$)", re.S)
_HARMONY_RECIPIENT = re.compile(r"\bto=(\S+?)(?=<\||\s|$)")
_HARMONY_CHANNEL = re.compile(r"<\|channel\|>(\w+)")


def parse_harmony(text: str, call_prefix: str = "call") -> ParsedTurn:
    """The `harmony` format: the messages of a reply (after `<|start|>assistant`), split at `<|start|>assistant`; a
    `commentary` message to `functions.NAME` is a call with JSON arguments. Text without harmony markup is content."""
    if "<|message|>" not in text and "<|channel|>" not in text and "to=" not in text:
        return ParsedTurn(text.strip(), raw=text)
    turn = ParsedTurn("", raw=text)
    analysis, final = [], []
    for index, segment in enumerate(text.split("<|start|>assistant")):
        if not segment.strip():
            continue
        match = _HARMONY_MESSAGE.fullmatch(segment)
        channel = _HARMONY_CHANNEL.search(match.group(1)) if match else None
        if not match or not channel:
            turn.errors.append(
                "a harmony message must be <|channel|>CHANNEL<|message|>TEXT (a call: <|start|>assistant "
                f"to=functions.NAME<|channel|>commentary json<|message|>{{...}}<|call|>): {segment[:200]!r}"
            )
            continue
        header, body = match.groups()
        recipient = _HARMONY_RECIPIENT.search(header)
        if recipient:
            name = recipient.group(1)
            if not name.startswith("functions."):
                turn.errors.append(f"a call must go to functions.NAME, not {name!r}")
                continue
            parsed, arguments = _json(body, turn.errors)
            if not parsed:
                continue
            _call(
                name.removeprefix("functions."),
                arguments,
                f"{call_prefix}_{len(turn.tool_calls)}",
                turn.errors,
                turn.tool_calls,
            )
        elif channel.group(1) == "analysis":
            analysis.append(body)
        else:  # final, or commentary for the user
            final.append(body)
    turn.content = "\n".join(analysis if turn.tool_calls else final).strip()
    return turn


def harmony_partial(text: str) -> PartialTurn:
    """A harmony reply so far: the text of its final (and user-facing commentary) messages, held back once a call
    begins (a call turn's content is its analysis, given when the reply is whole), and the calls begun."""
    final, calls = [], []
    for segment in text.split("<|start|>assistant"):
        header, marker, body = segment.partition("<|message|>")
        channel = _HARMONY_CHANNEL.search(header)
        if not marker or not channel:
            continue
        body = re.split(r"<\|(?:end|call|return)\|>", body)[0]
        recipient = _HARMONY_RECIPIENT.search(header)
        if recipient and recipient.group(1).startswith("functions."):
            calls.append((recipient.group(1).removeprefix("functions."), body))
        elif not recipient and channel.group(1) != "analysis":
            final.append(body)
    return PartialTurn("" if calls else "\n".join(final).strip(), calls)


def render_harmony(name: str, arguments: dict[str, Any]) -> str:
    """A call as the template writes it after the generation prompt `<|start|>assistant`."""
    return f" to=functions.{name}<|channel|>commentary json<|message|>{json.dumps(arguments, ensure_ascii=False)}{HARMONY_CALL}"


TOOL_CALL_FORMATS: Registry[ToolCallFormat] = Registry("tool-call format", "harness.tool_call_formats")


def register_tool_call_format(tool_format: ToolCallFormat, replace: bool = False) -> ToolCallFormat:
    TOOL_CALL_FORMATS.register(tool_format.name, tool_format, replace=replace)
    return tool_format


# Qwen3-Coder and Qwen3.5+ templates also wrap calls in <tool_call>, but as <function=NAME><parameter=...> XML: not hermes.
HERMES = register_tool_call_format(
    ToolCallFormat(
        "hermes",
        parse_tool_calls,
        lambda source: "<tool_call>" in source and "<function=" not in source,
        render=render_hermes,
        syntax='<tool_call>{"name": ..., "arguments": {...}}</tool_call>',
        call_start=marker_start("<tool_call>"),
    )
)
register_tool_call_format(
    ToolCallFormat(
        "llama3_json",
        parse_llama3_json,
        lambda source: "ipython" in source and '"parameters"' in source,
        arguments_as_object=True,
        render=render_llama3_json,
        syntax='{"name": ..., "parameters": {...}}',
        call_start=leading_call_start,
    )
)
register_tool_call_format(
    ToolCallFormat(
        "mistral",
        parse_mistral,
        lambda source: "[TOOL_CALLS]" in source,
        arguments_as_object=True,
        json_tool_results=True,
        render=render_mistral,
        syntax='[TOOL_CALLS][{"name": ..., "arguments": {...}}]',
        call_start=marker_start("[TOOL_CALLS]"),
    )
)
register_tool_call_format(
    ToolCallFormat(
        "qwen3_xml",
        parse_qwen3_xml,
        lambda source: "<function=" in source and "<parameter=" in source,
        arguments_as_object=True,
        render=render_qwen3_xml,
        syntax="<tool_call><function=NAME><parameter=KEY>VALUE</parameter></function></tool_call>",
        call_start=marker_start("<tool_call>"),
    )
)

register_tool_call_format(
    ToolCallFormat(
        "deepseek_v3",
        parse_deepseek_v3,
        lambda source: DEEPSEEK_CALLS_BEGIN in source and "<｜tool▁sep｜>" in source,
        render=render_deepseek_v3,
        syntax=render_deepseek_v3("NAME", {"KEY": "VALUE"}),
        call_start=marker_start(DEEPSEEK_CALLS_BEGIN),
    )
)

register_tool_call_format(
    ToolCallFormat(
        "harmony",
        parse_harmony,
        lambda source: "<|channel|>commentary" in source and HARMONY_CALL in source,
        arguments_as_object=True,
        render=render_harmony,
        syntax="<|start|>assistant" + render_harmony("NAME", {"KEY": "VALUE"}),
        call_end=HARMONY_CALL,
        partial=harmony_partial,
    )
)


def format_for_template(source: str | None) -> ToolCallFormat | None:
    """The registered format a chat template's source uses (None for none); a format of yours that
    claims a built-in family's templates replaces it under its name (`replace=True`)."""
    for name in TOOL_CALL_FORMATS.names():
        tool_format = TOOL_CALL_FORMATS.get(name)
        if source and tool_format.matches(source):
            return tool_format
    return None


def tool_call_format(tokenizer) -> ToolCallFormat:
    """The format of a tokenizer's chat template; `hermes` where the template shows none or does not render
    `tools` (the harness's own tool prompt asks for `<tool_call>` blocks then)."""
    if tokenizer is None or not takes_tools(tokenizer):  # prompted with the harness's own hermes tool prompt
        return HERMES
    source = getattr(tokenizer, "chat_template", None)
    return format_for_template(source if isinstance(source, str) else None) or HERMES
