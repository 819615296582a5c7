"""Reading what pytest printed about failures (`-rA --tb=short`): per test, its traceback lines
and the error it ended with."""

from __future__ import annotations

import re

_SECTION = re.compile(r"^=+ (.+?) =+$")
_BLOCK = re.compile(r"^_{3,} (.+?) _{3,}$")
_SHORT_SUMMARY = re.compile(r"^(?:FAILED|ERROR) (\S+)(?: - (.*))?$", re.MULTILINE)


def failure_blocks(log: str) -> dict[str, list[str]]:
    """Lines of each block in pytest's FAILURES and ERRORS sections, by test id.

    A block is titled with the test's name without its file (`TestCase.test_x[param]`); the
    first traceback line names the file, which together make the id grading uses.
    """
    titled: dict[str, list[str]] = {}
    section, current = "", None
    for line in log.splitlines():
        if match := _SECTION.match(line):
            section, current = match.group(1), None
        elif section in ("FAILURES", "ERRORS") and (match := _BLOCK.match(line)):
            title = match.group(1).removeprefix("ERROR at setup of ").removeprefix("ERROR at teardown of ")
            current = titled.setdefault(title, [])
        elif current is not None and line.startswith("----"):
            current = None  # captured output follows
        elif current is not None:
            current.append(line)
    return titled


def block_of(blocks: dict[str, list[str]], test: str) -> list[str]:
    """The failure block of `test` (`path::Class::name[param]`), or []."""
    return blocks.get(test.partition("::")[2].replace("::", "."), [])


def error_line(block: list[str], fallback: str = "") -> str:
    """The first error line (`E ...`) of a block: the exception pytest reported."""
    return next((line[1:].strip() for line in block if line.startswith("E ")), fallback)


def short_messages(log: str) -> dict[str, str]:
    """test -> the message of pytest's short summary line (cut to the terminal's width)."""
    return {test: (message or "").strip() for test, message in _SHORT_SUMMARY.findall(log)}


def error_kind(message: str) -> str:
    """The exception type an error line starts with (`AssertionError` for `assert ...`)."""
    if message.startswith("assert"):
        return "AssertionError"
    head = message.split(":", 1)[0].strip()
    return head if re.fullmatch(r"[\w.]+", head) else ""
