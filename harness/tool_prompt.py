"""The harness's own tool prompt, for chat templates that take no tools (SmolLM2's ChatML, many base models).

Such a template ignores `tools=` and often raises on an assistant turn whose content is None. The
conversation is rewritten into plain turns it can render: the tool schemas and the calling
convention in the system turn, the assistant's calls as `<tool_call>` JSON blocks in its text, tool
results as `<tool_response>` blocks in user turns: the Hermes format the harness parses back.
"""

from __future__ import annotations

import json
from typing import Any

DEFAULT_SYSTEM = "You are a helpful assistant."


def takes_tools(tokenizer) -> bool:
    """Whether the tokenizer's chat template renders `tools` itself."""
    template = getattr(tokenizer, "chat_template", None) or ""
    if isinstance(template, dict):
        template = template.get("tool_use") or template.get("default") or ""
    return "tools" in template


def tool_prompt(tools: list[dict[str, Any]]) -> str:
    signatures = "\n".join(json.dumps(tool) for tool in tools)
    return (
        "# Tools\n\nYou can call functions to help with the request. Their signatures are inside <tools></tools>:\n"
        f"<tools>\n{signatures}\n</tools>\n\nTo call a function, answer with its name and a JSON object of arguments "
        'inside <tool_call></tool_call> tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    )


def plain_turns(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """`messages` (OpenAI chat format) as turns of plain text for a template without tool support."""
    turns = [_plain(message) for message in messages]
    if tools:
        if turns and turns[0]["role"] == "system":
            turns[0] = {"role": "system", "content": f"{turns[0]['content']}\n\n{tool_prompt(tools)}"}
        else:
            turns.insert(0, {"role": "system", "content": f"{DEFAULT_SYSTEM}\n\n{tool_prompt(tools)}"})
    return turns


def _plain(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content") or ""
    if message["role"] == "tool":
        return {"role": "user", "content": f"<tool_response>\n{content}\n</tool_response>"}
    if message["role"] == "assistant" and message.get("tool_calls"):
        calls = []
        for call in message["tool_calls"]:
            function = call.get("function") or call
            arguments = function.get("arguments") or {}
            arguments = arguments if isinstance(arguments, str) else json.dumps(arguments)
            calls.append(
                f'<tool_call>\n{{"name": {json.dumps(function["name"])}, "arguments": {arguments}}}\n</tool_call>'
            )
        return {"role": "assistant", "content": "\n".join(filter(None, [content, *calls]))}
    return {"role": message["role"], "content": content}
