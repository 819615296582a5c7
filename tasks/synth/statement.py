"""Problem statements: an issue-style report written from the failing tests alone.

What a user would see: which tests fail, the line of the test that failed and the error
pytest printed (for a TAP runner, what the failed assertion expected and got). Never the file that holds the bug, never the fix. `failures` gathers that from
the test log; `write_statement` turns it into a report (a policy may do it instead).
"""

from __future__ import annotations

import random
import re
import textwrap

from .testlog import block_of, error_kind, error_line, failure_blocks, short_messages

MAX_SHOWN = 3
MAX_LINES = 8
_ENTRY = re.compile(r"^(\S+?):\d+: in \S+")
TITLES = ["`{test}` fails: {message}", "Wrong result in {project}: `{test}` fails", "{project}: {kind} in `{test}`"]
INTROS = [
    (
        "Running the test suite of {project} on the current code gives {count}. The tests check documented "
        "behaviour, so the library seems to be at fault, not the tests."
    ),
    "I'm seeing {count} in {project}'s own suite on a clean checkout; nothing else was changed.",
    "{project} misbehaves: its suite has {count}, and the assertions look right to me.",
]
OUTROS = [
    "Expected: these tests pass. Could someone take a look?",
    "The behaviour the tests describe is what the library should do; please fix the code so they pass again.",
    "I'd expect the suite to pass here.",
]


def failures(log: str, tests: list[str], hide: str) -> list[dict]:
    """For each test: the error it ended with and what its traceback shows of the test itself.

    Lines that mention `hide` (the path of the file with the bug) are left out.
    """
    blocks, messages = failure_blocks(log), short_messages(log)
    found = []
    for test in tests:
        block = block_of(blocks, test)
        lines = _test_lines(block, test.partition("::")[0]) or _tap_lines(log, test)
        details = [line for i, line in enumerate(lines) if hide not in line and line not in lines[:i]]
        message = error_line(block, messages.get(test, ""))
        found.append({"test": test, "message": "" if hide in message else message, "details": details[:MAX_LINES]})
    return found


def _test_lines(block: list[str], test_file: str) -> list[str]:
    """The code lines of traceback entries in the test file, and the error lines (`E ...`)."""
    kept, in_test = [], False
    for line in block:
        if match := _ENTRY.match(line):
            in_test = match.group(1) == test_file
        elif line.startswith("E "):
            kept.append(line[1:].strip())
        elif in_test and line.strip():
            kept.append(line.strip())
    return kept


_TAP_FAILURE = re.compile(r"^not ok \d+ (.+)$")
_TAP_KEY = re.compile(r"^(\w+):")
_TAP_SHOWN = {"operator", "expected", "actual", "message", "error"}


def _tap_lines(log: str, test: str) -> list[str]:
    """A TAP failure's diagnostics (the YAML block under `not ok N test`): what was expected and what came,
    without the stack (`at:`, `stack:`), which names the file with the bug."""
    lines = log.splitlines()
    for i, line in enumerate(lines):
        if (match := _TAP_FAILURE.match(line.strip())) and match.group(1) == test:
            kept, shown = [], False
            for entry in lines[i + 1 :]:
                if not entry.startswith((" ", "\t")) or entry.strip() == "...":
                    break
                if key := _TAP_KEY.match(entry.strip()):
                    shown = key.group(1) in _TAP_SHOWN
                if shown and entry.strip():
                    kept.append(entry.rstrip())
            return textwrap.dedent("\n".join(kept)).splitlines()
    return []


def write_statement(info: dict) -> str:
    """The default writer: a short report built from `info["failures"]`, varied by `info["seed"]`."""
    rng = random.Random(info.get("seed", 0))
    shown = info["failures"][:MAX_SHOWN]
    first = shown[0]
    count = len(info["failures"])
    values = {
        "project": info["project"],
        "test": first["test"].rsplit("::", 1)[-1],
        "message": (first["message"] or "it fails")[:100],
        "kind": error_kind(first["message"]) or "a failure",
        "count": f"{count} failing tests" if count > 1 else "a failing test",
    }
    parts = [rng.choice(TITLES).format(**values), rng.choice(INTROS).format(**values)]
    for failure in shown:
        body = failure["details"] or ([failure["message"]] if failure["message"] else [])
        parts.append(f"`{failure['test']}`" + (":\n\n" + "\n".join("    " + line for line in body) if body else ""))
    rest = [f["test"] for f in info["failures"][MAX_SHOWN:]]
    if rest:
        more = ", ".join(f"`{t}`" for t in rest[:10]) + (" and others" if len(rest) > 10 else "")
        parts.append(f"These fail as well: {more}.")
    parts.append(rng.choice(OUTROS))
    return "\n\n".join(parts) + "\n"
