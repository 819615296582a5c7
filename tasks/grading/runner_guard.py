"""The test runner is the image's: what an eval script's install steps may not change.

Official SWE-bench eval scripts reinstall the package (`python -m pip install -e .`) before the tests, and
a reinstall runs the patch's `setup.py`, its build backend and its install hooks as root in the sandbox: they
can register a pytest plugin, drop a `.pth` file or a `sitecustomize`, or rewrite pytest itself. When an eval
script runs anything but environment and git lines before its tests (`install_split`), grading runs it in two
parts, with the interpreter's installation fingerprinted (`runner_probe`, by the test interpreter in
isolated mode) before the first part and again, every other process killed, before the second, which runs the
tests. Both fingerprints come straight back to the grader, never through the log. `changes` compares them: the
package's own editable-install artefacts are expected (its metadata, a `.pth` of paths, setuptools' editable
finder rendered from the image's own template, scripts rewritten with the same content); anything else that
changed voids the log, with the files named.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

PROBE = Path(__file__).with_name("runner_probe.py")
PROBE_IN_SANDBOX = "/tmp/harness_eval/runner_probe.py"
# Lines that set the environment up: run again before the tests, and before each probe.
_ENVIRONMENT = re.compile(
    r"^(?:#.*|\s*"
    r"|set [-+][\w -]*"
    r"|cd [^;&|$`<>]+"
    r"|(?:source|\.) /[^;&|$`<>]+"
    r"|conda activate [\w.-]+"
    r"|export \w+=[^;&|`<>()]*)$"  # variables expand, no command runs
)
# Lines that cannot run the patch's code: git (its hooks and filters are git metadata, which no patch
# may touch), removing files, no-op markers, heredocs into a file or into `git apply`.
_HARMLESS = re.compile(
    r"^(?:git (?:checkout|apply|status|show|diff|config|reset|clean|add|stash)\b[^;&|$`]*"
    r"|rm -rf? [^;&|$`<>]+"
    r"|: .*"
    r"|cat >>? [^;&|$`<>]+ <<-?'?\w+'?)$"
)
_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?\s*$")
_FINDER_LINE = re.compile(r"^import (__editable___\w+_finder); \1\.install\(\)$")
_PLACEHOLDER = re.compile(r"\{(\w+)(?:![rs])?\}")


@dataclass
class Split:
    """An eval script cut before its tests: `install` runs first, `tests` after the runner is checked."""

    environment: list[str]  # the lines that set the environment up, in order
    install: str
    tests: str


def install_split(script: str) -> Split | None:
    """The eval script in two parts, or None when it runs nothing but environment and git lines before
    the test-output marker (then no patch code runs before the tests: nothing to check)."""
    from swebench.harness.constants import START_TEST_OUTPUT

    lines = script.split("\n")
    start = next((i for i, line in enumerate(lines) if START_TEST_OUTPUT in line), None)
    if start is None:
        return None
    environment, installs, heredoc = [], False, None
    for line in lines[:start]:
        if heredoc is not None:
            heredoc = None if line == heredoc else heredoc
            continue
        if _ENVIRONMENT.match(line):
            environment.append(line)
        elif not _HARMLESS.match(line):
            installs = True
        if match := _HEREDOC.search(line):
            heredoc = match.group(1)
    if not installs:
        return None
    tests = ["#!/bin/bash", *[line for line in environment if not line.startswith("#")], *lines[start:]]
    return Split(environment, "\n".join(lines[:start]) + "\n", "\n".join(tests))


def probe(sb, split: Split, workdir: str, out: str, keep: list[str] | None = None) -> dict:
    """The fingerprint of the test interpreter's installation (`runner_probe`), read back from the sandbox;
    with `keep` (the processes of the first probe), every process started since is killed first."""
    sb.write_file(PROBE_IN_SANDBOX, PROBE.read_text())
    sourced = [line.split()[1] for line in split.environment if line.startswith(("source ", ". "))]
    roots = " ".join(
        shlex.quote(str(PurePosixPath(p).parent.parent)) for p in sourced if len(PurePosixPath(p).parts) > 3
    )
    setup = "; ".join(line for line in split.environment if not line.startswith(("#", "set ")))
    command = (
        f"( {setup + '; ' if setup else ''}"
        f'py=$(command -v python || command -v python3); "$py" -I -S -B {PROBE_IN_SANDBOX} '
        f"{'--kill ' + ','.join(keep) + ' ' if keep else ''}{out} {shlex.quote(workdir)} {roots} )"
    )
    result = sb.exec(command, timeout=300)
    if not result.ok:
        raise ProbeFailed(f"the runner probe failed (exit {result.exit_code}): {result.output[-1000:]}")
    return json.loads(sb.read_file(out))


class ProbeFailed(Exception):
    pass


def changes(before: dict, after: dict) -> tuple[list[str], list[str]]:
    """(what changed that the runner may load, bytecode caches to remove) between two fingerprints."""
    problems: list[str] = []
    stale: list[str] = []
    if before["executable"] != after["executable"]:
        problems.append(f"the test interpreter is now {after['executable']} (was {before['executable']})")
    for entry, where in sorted(after["plugins"].items()):
        if entry not in before["plugins"]:
            problems.append(f"{where}: new entry point {entry} (a plugin the test runner loads)")
    for path in sorted(set(after["shadows"]) - set(before["shadows"])):
        problems.append(f"{path}: new module named like the test runner or a start-up hook, on the path")
    templates = [_finder_pattern(t) for t in before["templates"]]
    old, new = before["files"], after["files"]
    for path in sorted(set(old) | set(new)):
        if old.get(path) == new.get(path) or before["hashes"].get(path, "") == after["hashes"].get(path):
            continue  # untouched, or rewritten with the same content
        if path.endswith((".pyc", ".pyo")):
            if path in new:
                stale.append(path)  # a cache: removed, the interpreter compiles the source again
            continue
        why = _unexpected(path, path in old, path in new, after, templates)
        if why:
            problems.append(f"{path}: {why}")
    return problems, stale


def _unexpected(path: str, existed: bool, exists: bool, after: dict, templates: list[re.Pattern]) -> str:
    """Why a changed file is not the package's own install artefact ("" when it is)."""
    parts = PurePosixPath(path).parts
    name = parts[-1]
    if any(part.endswith((".dist-info", ".egg-info")) for part in parts[:-1]) or name.endswith(".egg-link"):
        return ""  # metadata (its pytest11 entry points are compared on their own)
    if not exists:
        return "" if name.endswith(".pth") or name.startswith("__editable__") else "removed"
    text = after["texts"].get(path)
    if name.endswith(".pth"):
        code = [line.strip() for line in (text or "").splitlines() if line.startswith(("import ", "import\t"))]
        bad = [line for line in code if not _FINDER_LINE.match(line)]
        return f"a .pth file that runs code at interpreter start-up: {bad[0][:120]}" if bad or text is None else ""
    if name.startswith("__editable__") and name.endswith("_finder.py"):
        if text is not None and any(t.fullmatch(text) for t in templates):
            return ""
        return "an editable-install finder that is not setuptools' own template (it runs at interpreter start-up)"
    return "changed" if existed else "added"


def _finder_pattern(template: str) -> re.Pattern:
    """setuptools' finder template as a pattern: each `{placeholder}` one line of anything."""
    pieces = _PLACEHOLDER.split(template)
    literal = [p.replace("{{", "{").replace("}}", "}") for p in pieces[::2]]
    return re.compile("[^\n]*".join(re.escape(p) for p in literal), re.DOTALL)
