"""OpenHands on a harness episode, run with the Python that has `openhands-sdk` and `openhands-tools`.

The SDK's `Agent` and `Conversation` as they are, with OpenHands' own `terminal` and `file_editor`
tools (their names, schemas and descriptions, as the model sees them) and its built-in `finish`.
Only where the tools act is replaced, a workspace adapter over the episode's sandbox:

- `terminal` runs each command in the sandbox's persistent shell (`harness_shell.run`);
- `file_editor` is OpenHands' own `FileEditor` working on a mirror: before each call the path it
  names is copied out of the sandbox (a file's bytes, or a directory's two levels of names) into a
  scratch root, the editor runs there, and a file it changed is written back.

Its model calls go to the intercepting endpoint (litellm's OpenAI provider, native tool calls).
Calling `finish` submits the episode. OpenHands' own event log is kept in HARNESS_OUTPUT_DIR.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download of litellm's price list
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")

import base64  # noqa: E402
import shlex  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

from pydantic import SecretStr  # noqa: E402
from openhands.sdk import LLM, Agent, Conversation, Tool  # noqa: E402
from openhands.sdk.event import ActionEvent  # noqa: E402
from openhands.sdk.tool import ToolExecutor, register_tool  # noqa: E402
from openhands.tools.file_editor import FileEditorTool  # noqa: E402
from openhands.tools.file_editor.definition import FileEditorAction, FileEditorObservation  # noqa: E402
from openhands.tools.file_editor.editor import FileEditor  # noqa: E402
from openhands.tools.file_editor.exceptions import ToolError  # noqa: E402
from openhands.tools.terminal import TerminalAction, TerminalObservation, TerminalTool  # noqa: E402
from openhands.tools.terminal.metadata import CmdOutputMetadata  # noqa: E402

import harness_shell  # noqa: E402

CHANGES = ("create", "str_replace", "insert", "undo_edit")
MAX_MIRRORED = 10 << 20  # bytes: a larger file is mirrored as a sparse file of its size (the editor refuses it)


class SandboxTerminal(ToolExecutor):
    """OpenHands' terminal action, run in the episode's persistent sandbox shell."""

    def __call__(self, action: TerminalAction, conversation=None) -> TerminalObservation:
        if action.is_input or action.reset:
            return TerminalObservation.from_text(
                text="This terminal runs each command to its end: there is no running process to send input to, "
                "and it cannot be reset.",
                command=action.command,
                is_error=True,
            )
        try:
            result = harness_shell.run(action.command, timeout=action.timeout or None)
        except harness_shell.ShellError as err:
            return TerminalObservation.from_text(text=str(err), command=action.command, is_error=True)
        code = -1 if result["timed_out"] else result["exit_code"]
        suffix = "\n[The command timed out and was stopped.]" if result["timed_out"] else ""
        return TerminalObservation.from_text(
            text=result["output"],
            command=action.command,
            exit_code=code,
            timeout=result["timed_out"],
            metadata=CmdOutputMetadata(exit_code=code, suffix=suffix),
        )


PULL = r"""p={path}
if [ -d "$p" ]; then echo D; cd "$p" && find . -mindepth 1 -maxdepth 2 -printf '%y %P\n'
elif [ -f "$p" ]; then echo F; stat -c %s "$p"; [ "$(stat -c %s "$p")" -le {limit} ] && base64 -w0 "$p"; echo
else echo N; [ -d "$(dirname "$p")" ] && echo P; fi"""


class SandboxFileEditor(ToolExecutor):
    """OpenHands' FileEditor on a mirror of the sandbox path each call names (see the module's docstring)."""

    def __init__(self, root: Path, workdir: str):
        self.root = root
        self.editor = FileEditor(workspace_root=str(self.local(workdir)))

    def local(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def __call__(self, action: FileEditorAction, conversation=None) -> FileEditorObservation:
        path = action.path
        try:
            if os.path.isabs(path):
                self.pull(path)
                path = str(self.local(path))
            observation = self.editor(
                command=action.command,
                path=path,
                file_text=action.file_text,
                view_range=action.view_range,
                old_str=action.old_str,
                new_str=action.new_str,
                insert_line=action.insert_line,
            )
            if action.command in CHANGES and not observation.is_error:
                self.push(action.path)
        except ToolError as err:
            observation = FileEditorObservation.from_text(text=err.message, command=action.command, is_error=True)
        except harness_shell.ShellError as err:
            observation = FileEditorObservation.from_text(text=str(err), command=action.command, is_error=True)
        return self.unmirrored(observation)

    def pull(self, path: str) -> None:
        """Make the mirror hold `path` as the sandbox has it now (and nothing else)."""
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True)
        lines = harness_shell.run(PULL.format(path=shlex.quote(path), limit=MAX_MIRRORED))["output"].split("\n")
        target = self.local(path)
        if lines[0] == "D":
            target.mkdir(parents=True, exist_ok=True)
            for line in lines[1:]:
                kind, _, name = line.partition(" ")
                if name:
                    entry = target / name
                    entry.mkdir(parents=True, exist_ok=True) if kind == "d" else (
                        entry.parent.mkdir(parents=True, exist_ok=True),
                        entry.touch(),
                    )
        elif lines[0] == "F":
            target.parent.mkdir(parents=True, exist_ok=True)
            size = int(lines[1])
            if size > MAX_MIRRORED:
                with open(target, "wb") as handle:
                    handle.truncate(size)
            else:
                target.write_bytes(base64.b64decode(lines[2]))
        elif lines[0] == "N" and lines[1:2] == ["P"]:
            target.parent.mkdir(parents=True, exist_ok=True)

    def push(self, path: str) -> None:
        data = base64.b64encode(self.local(path).read_bytes()).decode()
        done = harness_shell.run(f"base64 -d > {shlex.quote(path)} <<'HARNESS_EOF'\n{data}\nHARNESS_EOF")
        if done["exit_code"] != 0:
            raise harness_shell.ShellError(f"writing {path} in the sandbox failed: {done['output'][-500:]}")

    def unmirrored(self, observation: FileEditorObservation) -> FileEditorObservation:
        """The observation with the mirror's root taken out of every path it names."""

        def fix(text):
            return text.replace(str(self.root), "") if isinstance(text, str) else text

        return FileEditorObservation.from_text(
            text=fix(observation.text),
            command=observation.command,
            is_error=observation.is_error,
            path=fix(observation.path),
            prev_exist=observation.prev_exist,
            old_content=observation.old_content,
            new_content=observation.new_content,
        )


class SandboxTerminalTool(TerminalTool):
    name = "terminal"

    @classmethod
    def create(cls, conv_state, **params):
        return TerminalTool.create(conv_state, executor=SandboxTerminal())


class SandboxFileEditorTool(FileEditorTool):
    name = "file_editor"

    @classmethod
    def create(cls, conv_state, root: str = "", workdir: str = "/", **params):
        local = conv_state.workspace.working_dir
        return [
            tool.model_copy(
                update={
                    "description": tool.description.replace(local, workdir),
                    "executor": SandboxFileEditor(Path(root), workdir),
                }
            )
            for tool in FileEditorTool.create(conv_state)
        ]


def finished(conversation) -> bool:
    """Whether the agent ended by calling `finish` (not by running out of steps or stopping to ask)."""
    actions = [event for event in conversation.state.events if isinstance(event, ActionEvent)]
    return bool(actions) and actions[-1].tool_name == "finish"


def main() -> None:
    task = harness_shell.task()
    output = Path(os.environ["HARNESS_OUTPUT_DIR"])
    scratch = Path(tempfile.mkdtemp(prefix="openhands-"))
    tempfile.tempdir = str(scratch)  # the editor's undo history and the SDK's temporary files
    root, workspace = (
        scratch / "mirror",
        scratch / "workspace",
    )  # the workspace is local and empty: the tools act in the sandbox
    workspace.mkdir()
    register_tool("SandboxTerminal", SandboxTerminalTool)
    register_tool("SandboxFileEditor", SandboxFileEditorTool)
    llm = LLM(
        model=f"openai/{os.environ['HARNESS_MODEL']}",
        base_url=os.environ["OPENAI_BASE_URL"],
        api_key=SecretStr(os.environ["OPENAI_API_KEY"]),
        num_retries=0,
        native_tool_calling=True,
        usage_id="harness",
    )
    agent = Agent(
        llm=llm,
        tools=[
            Tool(name="SandboxTerminal"),
            Tool(name="SandboxFileEditor", params={"root": str(root), "workdir": task["workdir"]}),
        ],
    )
    conversation = Conversation(
        agent=agent,
        workspace=str(workspace),
        persistence_dir=str(output / "openhands"),
        max_iteration_per_run=int(task["max_turns"]),
        visualizer=None,
        delete_on_close=False,
    )
    conversation.send_message(f"{task['statement']}\n\nThe repository is at {task['workdir']}.")
    conversation.run()
    if finished(conversation):
        harness_shell.submit()
    print(f"openhands: {conversation.state.execution_status.value}, finished: {finished(conversation)}")


if __name__ == "__main__":
    main()
