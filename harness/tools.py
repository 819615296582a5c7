"""The tools an agent calls, with OpenAI function-calling schemas.

Names and arguments follow the convention SWE-agent and OpenHands models were trained on:
`bash` (`command`), `str_replace_editor` (`command` = view | create | str_replace | insert |
undo_edit, `path`, ...), and `submit`. Every failure becomes a message the model can read
and recover from (`ToolError`), never an exception that ends the episode. Your own tools join
with `register_tool` (or `module:NAME` of a `Tool` in a task's `tools`).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import Any, Callable

from sandboxes import Sandbox, SandboxError
from infra.plugins import Registry, RegistryError

from .errors import ToolError

OBSERVATION_LIMIT = 12_000  # characters of one observation the model sees
SNIPPET_CONTEXT = 4  # lines shown around an edit

SCHEMAS: dict[str, dict[str, Any]] = {
    "bash": {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a bash command in a persistent shell (cwd and variables persist). "
            "Commands get no stdin; long-running commands time out.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string", "description": "The bash command to run."}},
                "required": ["command"],
            },
        },
    },
    "str_replace_editor": {
        "type": "function",
        "function": {
            "name": "str_replace_editor",
            "description": "View, create and edit files. `view` shows a file with line numbers (or lists a "
            "directory); `create` writes a new file; `str_replace` replaces one exact, unique occurrence of "
            "`old_str` with `new_str`; `insert` adds `new_str` after line `insert_line`; `undo_edit` reverts "
            "the last edit of `path`.",
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert", "undo_edit"]},
                    "path": {"type": "string", "description": "Absolute path of a file or directory."},
                    "file_text": {"type": "string", "description": "Content for `create`."},
                    "old_str": {"type": "string", "description": "Exact text to replace (`str_replace`)."},
                    "new_str": {
                        "type": "string",
                        "description": "Replacement (`str_replace`) or text to insert (`insert`).",
                    },
                    "insert_line": {
                        "type": "integer",
                        "description": "Line after which to insert (`insert`); 0 = top.",
                    },
                    "view_range": {
                        "type": "array",
                        "items": {"type": "integer"},
                        "description": "[start, end] lines for `view`; end -1 = to the end.",
                    },
                },
                "required": ["command", "path"],
            },
        },
    },
    "python": {
        "type": "function",
        "function": {
            "name": "python",
            "description": "Run a Python 3 program and see what it prints.",
            "parameters": {
                "type": "object",
                "properties": {"code": {"type": "string", "description": "The program."}},
                "required": ["code"],
            },
        },
    },
    "submit": {
        "type": "function",
        "function": {
            "name": "submit",
            "description": "Finish the task. For repository tasks the current changes are submitted; "
            "for questions, pass the final answer.",
            "parameters": {
                "type": "object",
                "properties": {
                    "answer": {"type": "string", "description": "The final answer, if the task asks for one."}
                },
            },
        },
    },
}


@dataclass(frozen=True)
class Tool:
    """A tool: its OpenAI function schema and `run(toolbox, arguments) -> observation` (None for `submit`,
    which the environment handles). `run` raises ToolError for a call the model got wrong."""

    schema: dict[str, Any]
    run: Callable[["Toolbox", dict[str, Any]], str] | None = None


def _as_tool(name: str, obj: Any) -> Tool:
    if not isinstance(obj, Tool):
        raise RegistryError(f"tool {name!r} names {obj!r}, not a harness.tools.Tool")
    return obj


TOOLS: Registry[Tool] = Registry("tool", "harness.tools", convert=_as_tool)


def register_tool(
    name: str,
    description: str,
    parameters: dict[str, Any],
    run: Callable[["Toolbox", dict[str, Any]], str],
    replace: bool = False,
) -> Tool:
    """A tool the model calls by `name`; `parameters` is its JSON schema (type: object)."""
    tool = Tool(
        {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}, run
    )
    TOOLS.register(name, tool, replace=replace)
    return tool


def schemas(names: list[str], compact: bool = False) -> list[dict[str, Any]]:
    """The tools' schemas; `compact` (for tiny models, whose prompt they would dominate) keeps the
    names, types, enums and required lists, the first sentence of each tool's description and no
    parameter descriptions: the same tools, in about half the characters."""
    unknown = [n for n in names if n not in TOOLS]
    if unknown:
        raise ToolError(f"unknown tools {unknown}; known: {TOOLS.names()}")
    return [compact_schema(TOOLS.get(n).schema) if compact else TOOLS.get(n).schema for n in names]


def compact_schema(schema: dict[str, Any]) -> dict[str, Any]:
    function = schema["function"]
    parameters = dict(function.get("parameters") or {"type": "object", "properties": {}})
    parameters["properties"] = {
        name: {k: v for k, v in spec.items() if k != "description"}
        for name, spec in parameters.get("properties", {}).items()
    }
    description = function.get("description", "").split(". ")[0].rstrip(".") + "."
    return {"type": "function", "function": {**function, "description": description, "parameters": parameters}}


def task_schemas(task) -> list[dict[str, Any]]:
    """The schemas a task's prompt shows: compact where its metadata says `compact_tools`."""
    return schemas(task.tools, compact=bool(task.metadata.get("compact_tools")))


def truncate(text: str, limit: int = OBSERVATION_LIMIT) -> str:
    """Keep the head and tail of a long observation, with a marker saying what was cut."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - limit} characters truncated ...]\n{text[-half:]}"


def parse_arguments(raw: str | dict) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError as err:
        raise ToolError(f"the arguments are not valid JSON ({err.msg} at position {err.pos}): {raw[:200]!r}") from None
    if not isinstance(value, dict):
        raise ToolError(f"the arguments must be a JSON object, got {type(value).__name__}")
    return value


def _required(args: dict, name: str, kind: type = str) -> Any:
    if name not in args:
        raise ToolError(f"missing required argument `{name}`")
    if kind is int and isinstance(args[name], str) and args[name].strip().lstrip("-").isdigit():
        return int(args[name])  # formats that write every argument as text (Qwen3's XML calls)
    if not isinstance(args[name], kind):
        raise ToolError(f"argument `{name}` must be a {kind.__name__}")
    return args[name]


@dataclass
class Toolbox:
    """Runs tool calls against one sandbox; keeps the editor's undo history."""

    sandbox: Sandbox | None
    command_timeout: float = 120.0
    history: dict[str, list[str | None]] = field(default_factory=dict)  # None: the edit created the file

    def run(self, name: str, raw_arguments: str | dict) -> str:
        """The observation for one call; raises ToolError for a call the model got wrong."""
        args = parse_arguments(raw_arguments)
        tool = TOOLS.get(name) if name in TOOLS else None
        if tool is None or tool.run is None:
            raise ToolError(f"unknown tool `{name}`")
        return tool.run(self, args)

    def python(self, code: str) -> str:
        self._need_sandbox()
        self.sandbox.write_file("/tmp/harness_tool/snippet.py", code)
        return self.bash("python3 /tmp/harness_tool/snippet.py")

    def bash(self, command: str) -> str:
        self._need_sandbox()
        result = self.sandbox.exec(command, timeout=self.command_timeout)
        text = result.output
        if result.message:
            text += f"\n[{result.message}]"
        if result.exit_code != 0:
            text += f"\n[exit code {result.exit_code}]"
        return truncate(text) if text.strip() else "[no output]"

    # -- the file editor -------------------------------------------------------------------

    def edit(self, args: dict[str, Any]) -> str:
        self._need_sandbox()
        command = _required(args, "command")
        path = _required(args, "path")
        if not path.startswith("/"):
            raise ToolError(f"`path` must be absolute, e.g. /testbed/{path}")
        handlers = {
            "view": self._view,
            "create": self._create,
            "str_replace": self._str_replace,
            "insert": self._insert,
            "undo_edit": self._undo,
        }
        if command not in handlers:
            raise ToolError(f"unknown editor command `{command}`; use one of {', '.join(handlers)}")
        return handlers[command](path, args)

    def _view(self, path: str, args: dict) -> str:
        kind = self.sandbox.exec(
            f"test -d {shlex.quote(path)} && echo dir || (test -f {shlex.quote(path)} && echo file)", timeout=10
        ).output.strip()
        if kind == "dir":
            listing = self.sandbox.exec(
                f"find {shlex.quote(path)} -maxdepth 2 -not -path '*/.*' | sort | head -400", timeout=30
            ).output
            return truncate(f"Files and directories up to 2 levels deep in {path}:\n{listing}")
        if kind != "file":
            raise ToolError(f"the path {path} does not exist")
        lines = self._read(path).split("\n")
        start, end = 1, len(lines)
        if "view_range" in args:
            bounds = args["view_range"]
            if not (isinstance(bounds, list) and len(bounds) == 2 and all(isinstance(b, int) for b in bounds)):
                raise ToolError("`view_range` must be two integers [start, end]")
            start, end = bounds[0], (len(lines) if bounds[1] == -1 else bounds[1])
            if not (1 <= start <= len(lines)) or end < start or end > len(lines):
                raise ToolError(f"`view_range` {bounds} is outside the file's 1..{len(lines)} lines")
        return truncate(_numbered(lines[start - 1 : end], start))

    def _create(self, path: str, args: dict) -> str:
        text = _required(args, "file_text")
        if self.sandbox.exec(f"test -e {shlex.quote(path)}", timeout=10).exit_code == 0:
            raise ToolError(f"{path} already exists; `create` does not overwrite, use `str_replace`")
        self.sandbox.write_file(path, text)
        self.history.setdefault(path, []).append(None)
        return f"File created at {path}"

    def _str_replace(self, path: str, args: dict) -> str:
        old = _required(args, "old_str")
        new = args.get("new_str", "")
        if not isinstance(new, str):
            raise ToolError("argument `new_str` must be a string")
        text = self._read(path)
        count = text.count(old)
        if count == 0:
            raise ToolError(f"No replacement was performed: old_str did not appear verbatim in {path}.")
        if count > 1:
            lines = [i + 1 for i, line in enumerate(text.split("\n")) if old.split("\n")[0] in line]
            raise ToolError(
                f"No replacement was performed: old_str occurs {count} times in {path} (lines {lines}); make it unique."
            )
        updated = text.replace(old, new)
        self._write(path, text, updated)
        first = text[: text.index(old)].count("\n") + 1
        return f"The file {path} has been edited. " + self._snippet(updated, first, first + new.count("\n"))

    def _insert(self, path: str, args: dict) -> str:
        new = _required(args, "new_str")
        line = _required(args, "insert_line", int)
        text = self._read(path)
        lines = text.split("\n")
        if not 0 <= line <= len(lines):
            raise ToolError(f"`insert_line` {line} is outside 0..{len(lines)}")
        updated = "\n".join(lines[:line] + new.split("\n") + lines[line:])
        self._write(path, text, updated)
        return f"The file {path} has been edited. " + self._snippet(updated, line + 1, line + new.count("\n") + 1)

    def _undo(self, path: str, args: dict) -> str:
        if not self.history.get(path):
            raise ToolError(f"no edit of {path} to undo")
        previous = self.history[path].pop()
        if previous is None:
            self.sandbox.exec(f"rm -f {shlex.quote(path)}", timeout=10)
            return f"Undid the creation of {path}"
        self.sandbox.write_file(path, previous)
        return f"Last edit to {path} undone. " + self._snippet(previous, 1, 0)

    def _read(self, path: str) -> str:
        try:
            data = self.sandbox.read_file(path)
        except SandboxError as err:
            raise ToolError(str(err)) from None
        if b"\x00" in data[:8192]:
            raise ToolError(f"{path} is a binary file; the editor handles text only")
        return data.decode("utf-8", errors="replace")

    def _write(self, path: str, before: str, after: str) -> None:
        self.sandbox.write_file(path, after)
        self.history.setdefault(path, []).append(before)

    def _snippet(self, text: str, first: int, last: int) -> str:
        lines = text.split("\n")
        start = max(first - SNIPPET_CONTEXT, 1)
        end = min(max(last, first) + SNIPPET_CONTEXT, len(lines))
        return f"Here is a snippet of the result:\n{_numbered(lines[start - 1 : end], start)}\nReview the changes and make sure they are as expected."

    def _need_sandbox(self) -> None:
        if self.sandbox is None:
            raise ToolError("this task has no sandbox to run tools in")


def _numbered(lines: list[str], start: int) -> str:
    return "\n".join(f"{number:6}\t{line}" for number, line in enumerate(lines, start))


TOOLS.register("bash", Tool(SCHEMAS["bash"], lambda box, args: box.bash(_required(args, "command"))))
TOOLS.register("python", Tool(SCHEMAS["python"], lambda box, args: box.python(_required(args, "code"))))
TOOLS.register("str_replace_editor", Tool(SCHEMAS["str_replace_editor"], lambda box, args: box.edit(args)))
TOOLS.register("submit", Tool(SCHEMAS["submit"]))
