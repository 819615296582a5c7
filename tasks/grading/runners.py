"""What each test runner prints at the end of an honest run, and the trust checks built on it.

A log is judged by `swebench`'s parser for the instance (`log_parser`); the checks here ask
whether the runner itself vouches for what the parser read. Each runner knows its own final
summary and where a planted canary test goes:

    pytest   every parser of pytest output in swebench's PARSER_REGISTRY (any pytest version:
             "8 passed in 0.19 seconds" or "in 0.19s", ANSI colours, with or without -rA)
    django   Django's runtests.py (unittest): "Ran N tests in Xs", then OK / FAILED (failures=F, ...)
    sympy    sympy's bin/test: "tests finished: P passed, F failed, ... in X seconds"

A check that cannot apply to a log (no -rA, no exit status recorded, no runner known) is
recorded as skipped with the reason, never counted against the log.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Callable

from .patch_policy import parse_patch, test_list

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
PASSING = ("PASSED", "XFAIL")
FAILING = ("FAILED", "ERROR")
PROGRESS = re.compile(r"^\[ *\d+%\]$")


@dataclass
class Check:
    name: str
    outcome: str  # applied / skipped / failed
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.name}: {self.outcome}" + (f" ({self.detail})" if self.detail else "")


@dataclass
class Summary:
    """The runner's own final verdict: counts by kind and the line index it was printed at."""

    counts: dict[str, int]
    line: int

    def failures(self) -> int:
        return sum(self.counts.get(k, 0) for k in ("failed", "error", "errors", "exceptions"))


def region(log: str) -> list[str]:
    """The lines between SWE-bench's test-output markers, ANSI colours removed."""
    from swebench.harness.constants import END_TEST_OUTPUT, START_TEST_OUTPUT

    text = log.split(START_TEST_OUTPUT, 1)[-1].split(END_TEST_OUTPUT, 1)[0]
    return ANSI.sub("", text).splitlines()


def _counts(text: str) -> dict[str, int]:
    return {kind: int(n) for n, kind in re.findall(r"(\d+) ([a-z][a-z ]*?[a-z])(?=,|$| in )", text.strip())}


class Runner:
    """A runner without known output conventions: only the runner-independent checks apply."""

    name = "unknown"

    def summary(self, lines: list[str]) -> Summary | None:
        return None

    def result_lines(self, lines: list[str]) -> list[int]:
        return []

    def summary_checks(self, lines: list[str], missing: str, where: str) -> tuple[Summary | None, list[Check]]:
        """The runner's final summary and the checks on it: that it was printed (else `missing`, and None), and that no
        result follows it (`where` names it)."""
        final = self.summary(lines)
        if final is None:
            return None, [Check("final_summary", "failed", missing)]
        return final, [Check("final_summary", "applied", f"line {final.line}"), self.after_summary(lines, final, where)]

    def after_summary(self, lines: list[str], final: Summary, where: str) -> Check:
        """`results_after_summary`: no result line after the runner's final summary (`where` names it)."""
        after = [i for i in self.result_lines(lines) if i > final.line]
        why = f"test results were printed after {where}: forged result lines?" if after else ""
        return Check("results_after_summary", "failed" if after else "applied", why)

    def no_results(self, lines: list[str]) -> str:
        """Why the runner printed no test result at all, read from its output ("" when it does not say)."""
        return ""

    def checks(self, lines, status_map, matter, parser) -> list[Check]:
        why = "no runner-specific checks for this log parser"
        return [Check(n, "skipped", why) for n in ("final_summary", "results_after_summary", "summary_counts")]

    def canary_plant(self, instance: dict, canary: str) -> tuple[str, str] | None:
        """(test file, text to append) that adds a must-fail test, or None when none can be added."""
        return None

    def canary_problem(self, lines: list[str], canary: str) -> str:
        return "this runner has no canary"


class Pytest(Runner):
    name = "pytest"
    SUMMARY = re.compile(r"^=+ (.*?(?:\d+ [a-z]+|no tests ran).*?) in [\d.]+ ?(?:s|sec|seconds)\b.*=+$")
    RESULT = re.compile(
        r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED) \S|\S (PASSED|FAILED|ERROR|XFAIL|XPASS)(?: +\[ *\d+%\])?$"
    )
    SECTION = re.compile(r"^=+ short test summary info =+$")
    INTERRUPTED = re.compile(r"^!+ Interrupted: \d+ errors? during collection !+$")
    VERBOSE = re.compile(r"^\S+::\S.* (PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)(?: +\[ *\d+%\])?$")

    def summary(self, lines):
        for i in range(len(lines) - 1, -1, -1):
            if match := self.SUMMARY.match(lines[i].strip()):
                counts = _counts(match.group(1))
                counts["error"] = counts.pop("errors", 0) + counts.get("error", 0)
                return Summary(counts, i)
        return None

    def result_lines(self, lines):
        return [i for i, line in enumerate(lines) if self.RESULT.search(line)]

    def short_summary(self, lines, final: Summary) -> list[str] | None:
        """The lines of the last short test summary, when it ends at the final summary line."""
        start = next((i for i in range(final.line - 1, -1, -1) if self.SECTION.match(lines[i].strip())), None)
        if start is None or any(self.SUMMARY.match(l.strip()) for l in lines[start + 1 : final.line]):
            return None
        return lines[start + 1 : final.line]

    def checks(self, lines, status_map, matter, parser):
        final, found = self.summary_checks(
            lines, "pytest printed no final summary line (the run was cut short)", "pytest's final summary"
        )
        if final is None:
            return found
        section = self.short_summary(lines, final)
        if section is None:
            found.append(self.verbose_counts(lines[: final.line], final))
            found.append(Check("verdicts_from_runner", "skipped", "no short test summary (pytest without -rA)"))
            return found
        listed = {"passed": 0, "failed": 0, "error": 0}
        for line in section:
            word = line.split(" ", 1)[0]
            key = {"PASSED": "passed", "FAILED": "failed", "ERROR": "error"}.get(word)
            if key:
                listed[key] += 1
        lists_passes = listed["passed"] > 0 or not final.counts.get("passed")
        compared = ("passed", "failed", "error") if lists_passes else ("failed", "error")
        if any(listed[k] != final.counts.get(k, 0) for k in compared):
            found.append(
                Check(
                    "summary_counts",
                    "failed",
                    f"the short test summary lists {listed} but pytest's final "
                    f"line counts {final.counts}: forged result lines?",
                )
            )
        else:
            found.append(
                Check("summary_counts", "applied", "" if lists_passes else "failures only (passes not listed: no -rA)")
            )
        if not lists_passes:
            found.append(
                Check("verdicts_from_runner", "skipped", "the short test summary does not list passes (no -rA)")
            )
        else:
            found.append(_verdicts_from(section, status_map, matter, parser, "pytest's short test summary"))
        return found

    def verbose_counts(self, lines, final: Summary) -> Check:
        """Without a short summary (old pytest, no -rA), `pytest -v` lines `id PASSED` must add up."""
        verbose = [m.group(1) for l in lines if (m := self.VERBOSE.match(l.strip()))]
        if not verbose:
            return Check("summary_counts", "skipped", "neither a short test summary nor verbose result lines to count")
        passed = verbose.count("PASSED")
        if passed != final.counts.get("passed", 0):
            return Check(
                "summary_counts",
                "failed",
                f"{passed} verbose lines say PASSED but pytest's final line counts "
                f"{final.counts}: forged result lines?",
            )
        return Check("summary_counts", "applied", "verbose result lines")

    def canary_plant(self, instance, canary):
        for test in test_list(instance.get("FAIL_TO_PASS")):
            path = test.split("::", 1)[0]
            if "::" in test and path.endswith(".py"):
                return path, f'\n\ndef {canary}():\n    assert False, "grading canary: this test must fail"\n'
        return None

    def stopped_at_collection(self, lines, results) -> bool:
        """pytest stopped before running any test because a test module failed to import (a test patch
        that imports what the fix adds, run without the fix): its final line counts only errors, it says
        so just before, and no result names a test."""
        final = self.summary(lines)
        return (
            final is not None
            and final.line > 0
            and set(final.counts) <= {"error"}
            and self.INTERRUPTED.match(lines[final.line - 1].strip()) is not None
            and not any("::" in lines[i] for i in results)
        )

    def canary_problem(self, lines, canary):
        """pytest -rA lists every test in its short summary, then prints the final summary line and
        stops. A forged report cannot name the canary; a runner patched to pass tests passes it too;
        result lines printed after the runner finished come after its final summary."""
        results = self.result_lines(lines)
        mine = [i for i in results if re.search(rf"::{canary}\b", lines[i])]
        if not mine and self.stopped_at_collection(lines, results):
            return ""  # no test ran, the canary included: nothing to trust or distrust, and nothing passes
        if not mine:
            return "the canary test (planted to fail) has no result: the run was cut short or its report forged"
        if not any(word in lines[mine[-1]].split() for word in FAILING):
            return "the canary test (planted to fail) did not fail: the runner's verdicts were tampered with"
        # The runner's own final line is the first summary after the canary's result.
        final = self.summary(
            lines[: next((i + 1 for i in range(mine[-1], len(lines)) if self.SUMMARY.match(lines[i].strip())), 0)]
        )
        if final is None or final.line < mine[-1]:
            return "pytest printed no final summary after the canary's result (the run was cut short)"
        if any(i > final.line for i in results):
            return "test results were printed after pytest's final summary: forged result lines?"
        if not final.failures():
            return "pytest's final summary counts no failure although the canary failed: forged summary?"
        return ""


class Django(Runner):
    """Django's runtests.py: unittest's verbose lines `test_x (module.Class) ... ok`, then
    the failure listing (`FAIL: test_x (module.Class)`), `Ran N tests in Xs` and OK / FAILED."""

    name = "django"
    RAN = re.compile(r"^Ran (\d+) tests? in [\d.]+s$")
    VERDICT = re.compile(r"^(OK|FAILED)(?: \((.*)\))?$")
    RESULT = re.compile(r" \.\.\. +(ok|OK|FAIL|ERROR|skipped)\b|^(FAIL|ERROR): \S")

    def summary(self, lines):
        ran = next((i for i in range(len(lines) - 1, -1, -1) if self.RAN.match(lines[i].strip())), None)
        if ran is None:
            return None
        verdict = next((self.VERDICT.match(l.strip()) for l in lines[ran + 1 :] if self.VERDICT.match(l.strip())), None)
        if verdict is None:
            return None
        counts = {k.strip(): int(v) for k, v in re.findall(r"([a-z ]+)=(\d+)", verdict.group(2) or "")}
        counts["ran"] = int(self.RAN.match(lines[ran].strip()).group(1))
        counts["failed"], counts["error"] = counts.pop("failures", 0), counts.pop("errors", 0)
        return Summary(counts, ran)

    def result_lines(self, lines):
        return [i for i, line in enumerate(lines) if self.RESULT.search(line.strip())]

    def checks(self, lines, status_map, matter, parser):
        final = self.summary(lines)
        if final is None:
            return [
                Check(
                    "final_summary",
                    "failed",
                    "the runner printed no `Ran N tests` with OK / FAILED (the run was cut short)",
                )
            ]
        found = [Check("final_summary", "applied", f"line {final.line}")]
        passing_after = [
            i for i in self.result_lines(lines) if i > final.line and set(parser(lines[i]).values()) & set(PASSING)
        ]
        found.append(
            Check(
                "results_after_summary",
                "failed" if passing_after else "applied",
                "test results were printed after the runner's `Ran N tests`: forged result lines?"
                if passing_after
                else "",
            )
        )
        passes = sum(s == "PASSED" for s in status_map.values())
        failing = sum(s in FAILING for s in status_map.values())
        if passes > final.counts["ran"]:
            found.append(
                Check(
                    "summary_counts",
                    "failed",
                    f"{passes} tests read as passing but the runner ran {final.counts['ran']}: forged result lines?",
                )
            )
        elif final.failures() and not failing:
            found.append(
                Check(
                    "summary_counts",
                    "failed",
                    f"the runner counts {final.failures()} failures and errors, the log shows none: forged result lines?",
                )
            )
        else:
            found.append(Check("summary_counts", "applied"))
        found.append(
            _verdicts_from(
                lines[: final.line], status_map, matter, parser, "the runner's verbose results", last_wins=True
            )
        )
        return found

    def canary_plant(self, instance, canary):
        # The official parser names a test with a docstring by the docstring's first line: when every
        # FAIL_TO_PASS test is so named, the class of a PASS_TO_PASS test (it runs and passes too).
        for test in test_list(instance.get("FAIL_TO_PASS")) + test_list(instance.get("PASS_TO_PASS")):
            match = re.fullmatch(r"(\w+) \(([\w.]+)\)", test.strip())
            if not match:
                continue
            name, dotted = match.groups()
            parts = dotted.split(".")
            if parts[-1] == name:  # Python 3.11+ prints `test_x (module.Class.test_x)`
                parts = parts[:-1]
            if len(parts) < 2:
                continue
            module, cls = parts[:-1], parts[-1]
            path = "tests/" + "/".join(module) + ".py"
            if path not in _test_files(instance):
                continue
            # A method on the FAIL_TO_PASS test's class: runs whether the label names the module or the class.
            return path, (
                f'\n\ndef _harness_canary(self):\n    self.fail("grading canary: this test must fail")\n\n\n'
                f"if isinstance(globals().get({cls!r}), type):\n    {cls}.{canary} = _harness_canary\n"
            )
        return None

    def canary_problem(self, lines, canary):
        mine = [i for i in self.result_lines(lines) if re.search(rf"(^|\s|: ){canary} \(", lines[i].strip())]
        if not mine:
            return "the canary test (planted to fail) has no result: the run was cut short or its report forged"
        if any(lines[i].strip().endswith((" ... ok", " ... OK")) for i in mine) or not any(
            re.search(r"\.\.\. (FAIL|ERROR)$|^(FAIL|ERROR):", lines[i].strip()) for i in mine
        ):
            return "the canary test (planted to fail) did not fail: the runner's verdicts were tampered with"
        final = self.summary(lines)
        if final is None or final.line < mine[-1]:
            return "the runner printed no `Ran N tests` after the canary's result (the run was cut short)"
        if not final.failures():
            return "the runner's final verdict counts no failure although the canary failed: forged summary?"
        return ""


class Sympy(Runner):
    """sympy's bin/test --verbose: `test_x ok` / `test_x F` / `test_x E` per test, failure
    blocks titled `___ path.py:test_x ___`, then `tests finished: ... in X seconds`."""

    name = "sympy"
    # Centred in `=` to the terminal's width: a long line keeps a single `=` (or none) on a side.
    FINISHED = re.compile(r"^=* ?tests finished: (.*) in [\d.]+ seconds ?=*$")
    RESULT = re.compile(r"^test_\w* +(ok|F|E|f|X|s|T|w|K)\b")

    STARTS = re.compile(r"^=* ?tests finished: ")

    def summary(self, lines):
        for i in range(len(lines) - 1, -1, -1):
            text = lines[i].strip()
            if not self.STARTS.match(text):
                continue
            # Wider than the terminal, the line wraps: `... 1 exceptions, ` then `in 43.44 seconds `.
            match = self.FINISHED.match(text) or (
                i + 1 < len(lines) and self.FINISHED.match(f"{text} {lines[i + 1].strip()}")
            )
            if match:
                counts = _counts(match.group(1).replace(",", ", "))
                counts["error"] = counts.pop("exceptions", 0)
                return Summary(counts, i)
        return None

    def result_lines(self, lines):
        return [i for i, line in enumerate(lines) if self.RESULT.match(line.strip())]

    def checks(self, lines, status_map, matter, parser):
        final, found = self.summary_checks(
            lines, "bin/test printed no `tests finished` line (the run was cut short)", "bin/test's final line"
        )
        if final is None:
            return found
        passes = sum(s == "PASSED" for s in status_map.values())
        failing = sum(s in FAILING for s in status_map.values())
        if passes > final.counts.get("passed", 0):
            found.append(
                Check(
                    "summary_counts",
                    "failed",
                    f"{passes} tests read as passing, bin/test counts {final.counts}: forged result lines?",
                )
            )
        elif final.failures() and not failing:
            found.append(
                Check(
                    "summary_counts",
                    "failed",
                    f"bin/test counts failures {final.counts}, the log shows none: forged result lines?",
                )
            )
        else:
            found.append(Check("summary_counts", "applied"))
        found.append(
            _verdicts_from(
                lines[: final.line], status_map, matter, parser, "bin/test's verbose results", last_wins=True
            )
        )
        return found

    def canary_plant(self, instance, canary):
        files = [f for f in _test_files(instance) if PurePosixPath(f).name.startswith("test_")]
        if not files:
            return None
        return files[0], f'\n\ndef {canary}():\n    assert False, "grading canary: this test must fail"\n'

    def canary_problem(self, lines, canary):
        mine = [i for i in self.result_lines(lines) if lines[i].strip().split()[0] == canary]
        if not mine:
            return "the canary test (planted to fail) has no result: the run was cut short or its report forged"
        if lines[mine[-1]].strip().split()[1] not in ("F", "E"):
            return "the canary test (planted to fail) did not fail: the runner's verdicts were tampered with"
        final = self.summary(lines)
        if final is None or final.line < mine[-1]:
            return "bin/test printed no `tests finished` line after the canary's result (the run was cut short)"
        if not final.failures():
            return "bin/test's final line counts no failure although the canary failed: forged summary?"
        return ""


def _verdicts_from(
    lines: list[str],
    status_map: dict[str, str],
    matter: list[str],
    parser: Callable[[str], dict[str, str]],
    where: str,
    last_wins: bool = False,
) -> Check:
    """Every test that decides the verdict and reads as passing must pass in `where` too.

    Result lines printed by the code under test outside the runner's own report (before the
    run, in captured output, after it) then count for nothing. With `last_wins`, `lines` is the
    whole verbose output and the runner's own line is the last one naming the test.
    """
    if not matter:
        return Check("verdicts_from_runner", "skipped", "no FAIL_TO_PASS / PASS_TO_PASS tests to check")
    own = parser("\n".join(lines))
    # `[100%]`: pytest's progress counter, read as a test id from a wrapped line (and listed
    # in some official PASS_TO_PASS lists); no runner reports it as a test.
    doubtful = [
        t for t in matter if status_map.get(t) in PASSING and own.get(t) not in PASSING and not PROGRESS.match(t)
    ]
    if doubtful:
        return Check(
            "verdicts_from_runner",
            "failed",
            f"{doubtful[0]} reads as passing but {where} does not say so: forged result line?",
        )
    return Check(
        "verdicts_from_runner", "applied", f"{sum(t in status_map for t in matter)} tests checked against {where}"
    )


def _test_files(instance: dict) -> list[str]:
    """Test files the instance runs: those its test patch touches, else the eval script's arguments."""
    files = [f.path for f in parse_patch(instance.get("test_patch") or "") if f.path.endswith(".py")]
    if files:
        return files
    words = []
    for line in (instance.get("eval_script") or "").splitlines():
        try:
            words += shlex.split(line)
        except ValueError:
            continue
    return [w for w in words if w.endswith(".py") and "/" in w and "runtests" not in w]


_FAMILIES = {
    "pytest": (
        "parse_log_pytest",
        "parse_log_pytest_options",
        "parse_log_pytest_v2",
        "parse_log_matplotlib",
        "parse_log_seaborn",
    ),
    "django": ("parse_log_django",),
    "sympy": ("parse_log_sympy",),
}
_RUNNERS = {"pytest": Pytest(), "django": Django(), "sympy": Sympy()}


def register_runner(runner: Runner, log_parsers: tuple[str, ...]) -> Runner:
    """Make `runner` the one that vouches for logs read by `log_parsers` (keys of swebench's PARSER_REGISTRY)."""
    _FAMILIES[runner.name] = tuple(log_parsers)
    _RUNNERS[runner.name] = runner
    return runner


def runner_for(log_parser: str) -> Runner:
    """The runner whose output `log_parser` (a key of swebench's PARSER_REGISTRY) reads.

    Aliases (parse_log_flask is parse_log_pytest, ...) are followed through the registry.
    """
    from swebench.harness.log_parsers import PARSER_REGISTRY

    from ..languages import languages  # noqa: F401  (each language registers its runners on import)

    function = PARSER_REGISTRY.get(log_parser)
    for family, names in _FAMILIES.items():
        if log_parser in names or any(PARSER_REGISTRY.get(n) is function for n in names if function is not None):
            return _RUNNERS[family]
    return Runner()
