"""Search across the messages and tool calls of loaded runs (plain text, case-insensitive, or a regex)."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Iterator

from .runs import Run, ViewerError

CONTEXT = 60


@dataclass
class Hit:
    run: int  # position among the loaded runs
    run_name: str
    step: int | None
    index: int
    task_id: str
    message: int
    where: str  # "assistant", "tool", "tool call bash", ...
    before: str
    match: str
    after: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def compile_query(query: str, regex: bool) -> re.Pattern:
    if not query:
        raise ViewerError("the search needs a query")
    try:
        return re.compile(query if regex else re.escape(query), 0 if regex else re.IGNORECASE)
    except re.error as err:
        raise ViewerError(f"not a valid regular expression: {query!r} ({err})") from None


def texts(trajectory: dict[str, Any]) -> Iterator[tuple[int, str, str]]:
    """(message index, where, text) of each message's content and each tool call's arguments."""
    for number, message in enumerate(trajectory.get("messages") or []):
        content = message.get("content")
        if isinstance(content, list):  # content parts
            content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
        if content:
            yield number, str(message.get("role", "")), str(content)
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            arguments = function.get("arguments", "")
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, ensure_ascii=False)
            yield number, f"tool call {function.get('name', '')}", arguments


def search(runs: Iterable[tuple[int, Run]], pattern: re.Pattern, limit: int = 200) -> tuple[list[Hit], int]:
    """Up to `limit` hits (one per matching text) and the number of trajectories scanned."""
    hits: list[Hit] = []
    scanned = 0
    for position, run in runs:
        for step, index, trajectory in run.all_trajectories():
            scanned += 1
            for number, where, text in texts(trajectory):
                match = pattern.search(text)
                if match is None:
                    continue
                start, end = match.span()
                hits.append(
                    Hit(
                        position,
                        run.name,
                        step,
                        index,
                        str(trajectory.get("task_id", "")),
                        number,
                        where,
                        text[max(start - CONTEXT, 0) : start],
                        text[start:end][:500],
                        text[end : end + CONTEXT],
                    )
                )
                if len(hits) >= limit:
                    return hits, scanned
    return hits, scanned
