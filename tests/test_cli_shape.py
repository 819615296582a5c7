"""`cli.py` stays thin: each command parses, calls the library and prints in a short body, and an option that
several commands take is defined once, so it reads the same (help, default, range) wherever it is taken."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import typer

from cli import app

CLI = Path(__file__).resolve().parents[1] / "cli.py"
MAX_BODY_LINES = 40

# Flags that name more than one setting, each defined once: how many, and why they differ.
SEVERAL = {
    "--backend": 2,  # the sandbox backend; `tasks pull`: where images go (docker, podman or overlay: no auto)
    "--checkpoint": 3,  # eval runs gold when none is named; generate and run need one; serve: a local model only
    "--temperature": 2,  # generate samples at 1.0: several trajectories per task are alike at 0
    "--workers": 2,  # episodes at once; test suites at once (grade, tasks synth, tasks mine), heavier
    "--tasks": 4,  # the set to run; run: instead of --repo; grade: SWE-bench instances; tasks show: the set holding one
    "--limit": 2,  # the first N tasks; tasks mine: the N newest candidates of a history
    "--output": 7,  # what each command writes differs: a run directory, a dataset, a JSONL, a folder of files
    "--config": 2,  # eval's settings YAML; train's config
    "--early-stop": 2,  # synth: candidates in a row; mine: the first candidates
    "--format": 2,  # task export formats; trajectory formats
    "--python": 2,  # the base to build; the base a project's tasks run on (default: chosen for the project)
    "--port": 2,  # serve listens where clients expect it (8000); view on any free port
    "--repo": 2,  # run: your repository; synth: the project to plant bugs in
    "--seed": 2,  # synth's mutation order; the tiny model's weights
    "--timeout": 3,  # one command (exec), each line of a shell, each test run of mining
}


def _commands(command, path=()):
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            yield from _commands(sub, (*path, name))
    else:
        yield " ".join(path), command


def test_every_command_body_is_at_most_forty_lines():
    commands = [
        node
        for node in ast.parse(CLI.read_text()).body
        if isinstance(node, ast.FunctionDef)
        and any(isinstance(d, ast.Call) and getattr(d.func, "attr", "") == "command" for d in node.decorator_list)
    ]
    assert len(commands) >= 20  # every command is found
    long = {}
    for node in commands:
        body = node.body[1:] if ast.get_docstring(node) else node.body  # the statements below the docstring
        if body[-1].end_lineno - body[0].lineno + 1 > MAX_BODY_LINES:
            long[node.name] = body[-1].end_lineno - body[0].lineno + 1
    assert not long, f"command bodies over {MAX_BODY_LINES} lines (move the work into the library): {long}"


def test_an_option_several_commands_take_is_defined_once():
    variants = defaultdict(lambda: defaultdict(list))
    for path, command in _commands(typer.main.get_command(app)):
        for param in command.params:
            if param.param_type_name == "option":
                spelling = (param.help, repr(param.default), param.required, param.min, param.max, param.hidden)
                for flag in param.opts:
                    variants[flag][spelling].append(path)
    shared = {flag: spellings for flag, spellings in variants.items() if sum(map(len, spellings.values())) > 1}
    assert {"--workers", "--backend", "--max-turns", "--grading-mode", "--scaffold"} <= set(shared)
    differing = {flag: dict(spellings) for flag, spellings in shared.items() if len(spellings) != SEVERAL.get(flag, 1)}
    assert not differing, f"a shared option spelled differently across commands: {differing}"
    workers = sorted(sorted(paths) for paths in shared["--workers"].values())
    assert workers == [["eval", "generate"], ["grade", "tasks mine", "tasks synth"]]
