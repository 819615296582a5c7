"""Tool-call parsing and the tools themselves, against a real sandbox."""

from __future__ import annotations

import json
import time

import pytest

from harness.errors import ToolError
from harness.environments import ToolEnvironment, no_tool_call
from harness.parsing import (
    ToolCall,
    TOOL_CALL_FORMATS,
    format_for_template,
    mistral_call_id,
    parse_llama3_json,
    parse_mistral,
    parse_qwen3_xml,
    parse_tool_calls,
)
from harness.tools import Toolbox, schemas, truncate
from sandboxes import SandboxSpec
from sandboxes.images import BASE_IMAGE
from tasks.task import Task


def test_parses_hermes_tool_calls_and_reports_malformed_ones():
    text = (
        'Let me look.\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls -la"}}\n</tool_call>\n'
        '<tool_call>{"name": "bash", "arguments": {"command": </tool_call>\n'
        '<tool_call>[1, 2]</tool_call><tool_call>{"name": "submit"}'
    )
    turn = parse_tool_calls(text)
    assert turn.content == "Let me look."
    assert [(c.name, json.loads(c.arguments)) for c in turn.tool_calls] == [("bash", {"command": "ls -la"})]
    assert len(turn.errors) == 3
    assert "not valid JSON" in turn.errors[0] and "JSON object" in turn.errors[1] and "not closed" in turn.errors[2]


def test_plain_text_has_no_calls():
    turn = parse_tool_calls("I think the answer is 42.")
    assert turn.tool_calls == [] and turn.errors == [] and turn.content == "I think the answer is 42."


def test_parses_llama3_json_calls_and_reports_malformed_ones():
    turn = parse_llama3_json(
        '<|python_tag|>{"name": "bash", "parameters": {"command": "ls"}}; {"name": "submit", "parameters": {}}'
    )
    assert [(c.name, json.loads(c.arguments)) for c in turn.tool_calls] == [("bash", {"command": "ls"}), ("submit", {})]
    assert turn.content == "" and turn.errors == []
    assert parse_llama3_json("The answer is {probably} 4.").tool_calls == []  # text first: not a call
    bad = parse_llama3_json('{"name": "bash", "parameters": {"command": ')
    assert bad.tool_calls == [] and "not valid JSON" in bad.errors[0]
    assert "must be a JSON object" in parse_llama3_json('{"name": "bash", "parameters": [1]}').errors[0]
    assert "string `name`" in parse_llama3_json('{"parameters": {}}').errors[0]


def test_parses_mistral_calls_with_and_without_ids():
    turn = parse_mistral(
        'Let me see.[TOOL_CALLS][{"name": "bash", "arguments": {"command": "ls"}, "id": "a1b2c3d4e"}, '
        '{"name": "submit", "arguments": {"answer": "4"}}]',
        "call_3",
    )
    assert turn.content == "Let me see." and turn.errors == []
    assert [(c.id, c.name, json.loads(c.arguments)) for c in turn.tool_calls] == [
        ("a1b2c3d4e", "bash", {"command": "ls"}),
        (mistral_call_id("call_3", 1), "submit", {"answer": "4"}),
    ]
    assert len(turn.tool_calls[1].id) == 9 and turn.tool_calls[1].id.isalnum()
    assert parse_mistral("Just text.").tool_calls == [] and parse_mistral("Just text.").errors == []
    assert "not valid JSON" in parse_mistral('[TOOL_CALLS][{"name": "bash", "arg').errors[0]
    assert "no call" in parse_mistral("[TOOL_CALLS]").errors[0]


def test_the_format_is_read_off_the_chat_template():
    assert format_for_template("... <tool_call> ...").name == "hermes"
    assert format_for_template('... ipython ... "parameters": ...').name == "llama3_json"
    assert format_for_template("... [TOOL_CALLS] ...").name == "mistral"
    assert format_for_template("{{ messages[0].content }}") is None
    assert (
        format_for_template("'<tool_call>\\n<function=' + tool_call.name + '>\\n' ... '<parameter='").name
        == "qwen3_xml"
    )


def test_parses_qwen3_xml_calls_and_reports_malformed_ones():
    text = (
        "I list it first.\n\n<tool_call>\n<function=bash>\n<parameter=command>\nls -A /tmp\n| wc -l\n</parameter>\n"
        "</function>\n</tool_call>\n<tool_call>\n<function=str_replace_editor>\n<parameter=view_range>\n[1, 5]\n</parameter>\n"
        "<parameter=insert_line>\n3\n</parameter>\n</function>\n</tool_call>"
    )
    turn = parse_qwen3_xml(text, "call_2")
    assert turn.content == "I list it first." and turn.errors == []
    assert [(c.id, c.name, json.loads(c.arguments)) for c in turn.tool_calls] == [
        ("call_2_0", "bash", {"command": "ls -A /tmp\n| wc -l"}),  # multi-line text, as written
        ("call_2_1", "str_replace_editor", {"view_range": [1, 5], "insert_line": "3"}),
    ]  # JSON lists decoded; the rest is text
    assert parse_qwen3_xml("The answer is 4.").tool_calls == [] and parse_qwen3_xml("The answer is 4.").errors == []
    unclosed = parse_qwen3_xml("<tool_call>\n<function=bash>\n<parameter=command>\nls\n</parameter>\n")
    assert unclosed.tool_calls == [] and "<function=NAME>" in unclosed.errors[0]


@pytest.mark.parametrize("name", ["hermes", "llama3_json", "mistral", "qwen3_xml"])
def test_each_format_parses_back_what_it_renders_and_tells_its_syntax(name):
    tool_format = TOOL_CALL_FORMATS.get(name)
    arguments = {"command": "echo 'a b' \"c\"", "view_range": [1, -1]}
    turn = tool_format.read(tool_format.render("bash", arguments), "call_0")
    assert [(c.name, json.loads(c.arguments)) for c in turn.tool_calls] == [("bash", arguments)] and turn.errors == []
    feedback = no_tool_call(["bash", "submit"], tool_format.read("No call here.", "call_1").syntax)
    assert feedback.startswith(
        "No tool call was found in your reply. Call exactly one of the tools (bash, submit) using "
    )
    assert tool_format.syntax in feedback and tool_format.syntax.split("...")[0][:10] in tool_format.render("x", {})


def test_schemas_follow_the_openai_function_format():
    for schema in schemas(["bash", "str_replace_editor", "submit"]):
        assert schema["type"] == "function" and schema["function"]["parameters"]["type"] == "object"
    with pytest.raises(ToolError):
        schemas(["nope"])


def test_compact_schemas_keep_the_tools_in_fewer_characters():
    full, compact = (
        schemas(["bash", "str_replace_editor", "submit"]),
        schemas(["bash", "str_replace_editor", "submit"], compact=True),
    )
    for long, short in zip(full, compact):
        lf, sf = long["function"], short["function"]
        assert sf["name"] == lf["name"] and sf["parameters"].get("required") == lf["parameters"].get("required")
        assert set(sf["parameters"]["properties"]) == set(lf["parameters"]["properties"])
        assert not any("description" in p for p in sf["parameters"]["properties"].values())
        assert lf["description"].startswith(sf["description"][:-1])
    assert compact[1]["function"]["parameters"]["properties"]["command"]["enum"][2] == "str_replace"
    assert len(json.dumps(compact)) < 0.6 * len(json.dumps(full))
    assert schemas(["bash"])[0]["function"]["description"].count(".") > 1  # the registry's schema is untouched


def test_truncate_keeps_head_and_tail():
    text = "a" * 10_000 + "b" * 10_000
    cut = truncate(text, 1000)
    assert cut.startswith("a" * 500) and cut.endswith("b" * 500) and "19000 characters truncated" in cut


@pytest.fixture
def toolbox(docker_backend):
    with docker_backend.create(SandboxSpec(image=BASE_IMAGE)) as sb:
        sb.exec("mkdir -p /workspace && cd /workspace && printf 'one\\ntwo\\nthree\\ntwo\\n' > f.txt")
        yield Toolbox(sb, command_timeout=5)


def test_editor_view_create_replace_insert_undo(toolbox):
    run = toolbox.run
    assert "     1\tone" in run("str_replace_editor", {"command": "view", "path": "/workspace/f.txt"})
    assert run(
        "str_replace_editor", {"command": "view", "path": "/workspace/f.txt", "view_range": [2, 3]}
    ).splitlines() == ["     2\ttwo", "     3\tthree"]
    assert "f.txt" in run("str_replace_editor", {"command": "view", "path": "/workspace"})
    with pytest.raises(ToolError, match="occurs 2 times"):
        run(
            "str_replace_editor",
            {"command": "str_replace", "path": "/workspace/f.txt", "old_str": "two", "new_str": "2"},
        )
    with pytest.raises(ToolError, match="did not appear verbatim"):
        run(
            "str_replace_editor",
            {"command": "str_replace", "path": "/workspace/f.txt", "old_str": "four", "new_str": "4"},
        )
    out = run(
        "str_replace_editor",
        {"command": "str_replace", "path": "/workspace/f.txt", "old_str": "three", "new_str": "THREE"},
    )
    assert "THREE" in out and "has been edited" in out
    run(
        "str_replace_editor", {"command": "insert", "path": "/workspace/f.txt", "insert_line": "0", "new_str": "zero"}
    )  # as XML calls write it
    assert toolbox.sandbox.read_file("/workspace/f.txt") == b"zero\none\ntwo\nTHREE\ntwo\n"
    run("str_replace_editor", {"command": "undo_edit", "path": "/workspace/f.txt"})
    run("str_replace_editor", {"command": "undo_edit", "path": "/workspace/f.txt"})
    assert toolbox.sandbox.read_file("/workspace/f.txt") == b"one\ntwo\nthree\ntwo\n"
    with pytest.raises(ToolError, match="already exists"):
        run("str_replace_editor", {"command": "create", "path": "/workspace/f.txt", "file_text": "x"})
    assert "created" in run(
        "str_replace_editor", {"command": "create", "path": "/workspace/new/g.py", "file_text": "print(1)\n"}
    )
    assert run("bash", {"command": "python3 /workspace/new/g.py"}) == "1\n"


def test_tool_errors_are_clear(toolbox):
    with pytest.raises(ToolError, match="not valid JSON"):
        toolbox.run("bash", '{"command": ')
    with pytest.raises(ToolError, match="missing required argument `command`"):
        toolbox.run("bash", "{}")
    with pytest.raises(ToolError, match="does not exist"):
        toolbox.run("str_replace_editor", {"command": "view", "path": "/nope"})
    with pytest.raises(ToolError, match="must be absolute"):
        toolbox.run("str_replace_editor", {"command": "view", "path": "relative.txt"})
    with pytest.raises(ToolError, match="unknown editor command"):
        toolbox.run("str_replace_editor", {"command": "delete", "path": "/workspace/f.txt"})


def test_hanging_command_times_out_and_the_shell_survives(toolbox):
    out = toolbox.run("bash", {"command": "export KEEP=1; sleep 60"})
    assert "timed out" in out and "exit code 124" in out
    assert toolbox.run("bash", {"command": "echo $KEEP"}) == "1\n"


def test_a_scripted_calls_own_time_is_bounded_by_the_episodes_time_left():
    env = ToolEnvironment(Task("t", "test", [], "tool", {}), command_timeout=2)
    model, oracle = ToolCall("1", "bash", "{}"), ToolCall("2", "bash", "{}", timeout=600)
    assert (env.call_timeout(model), env.call_timeout(oracle)) == (2, 600)  # no episode deadline
    env.deadline = time.monotonic() + 30
    assert env.call_timeout(model) == 2 and 29 < env.call_timeout(oracle) <= 30
    env.deadline = time.monotonic() - 5  # past: the next turn's check ends the episode
    assert env.call_timeout(oracle) == 1.0


def test_huge_and_binary_observations_are_truncated(toolbox):
    out = toolbox.run("bash", {"command": "seq 1 200000; head -c 3000 /dev/urandom"})
    assert "characters truncated" in out and len(out) < 13_000
