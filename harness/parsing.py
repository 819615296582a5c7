"""Tool calls written as text by local models: the Hermes / Qwen `<tool_call>` format.

    <tool_call>
    {"name": "bash", "arguments": {"command": "ls"}}
    </tool_call>

A malformed block does not raise: it comes back as an error the loop turns into an
observation, so the model can correct itself.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from .policy import ToolCall

_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.S)


@dataclass
class ParsedTurn:
    content: str  # the text outside the tool-call blocks
    tool_calls: list[ToolCall] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    raw: str = ""  # the whole reply as generated (what a skyrl-gym environment's `step` receives)


def parse_tool_calls(text: str, call_prefix: str = "call") -> ParsedTurn:
    content = _BLOCK.sub("", text).strip()
    turn = ParsedTurn(content, raw=text)
    for index, match in enumerate(_BLOCK.finditer(text)):
        body = match.group(1).strip()
        if not match.group(0).endswith("</tool_call>"):
            turn.errors.append("a <tool_call> block is not closed with </tool_call>")
            continue
        try:
            value = json.loads(body)
        except json.JSONDecodeError as err:
            turn.errors.append(f"the tool call is not valid JSON ({err.msg} at position {err.pos}): {body[:200]!r}")
            continue
        if not isinstance(value, dict) or not isinstance(value.get("name"), str):
            turn.errors.append('a tool call must be a JSON object {"name": ..., "arguments": {...}}')
            continue
        arguments = value.get("arguments", {})
        if isinstance(arguments, str):  # some models emit the arguments as a JSON string
            raw = arguments
        else:
            raw = json.dumps(arguments, ensure_ascii=False)
        turn.tool_calls.append(ToolCall(id=f"{call_prefix}_{index}", name=value["name"], arguments=raw))
    return turn
