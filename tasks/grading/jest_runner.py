"""The runner behind jest logs (swebench's parse_log_jest: `jest --verbose`).

An honest run prints each test file's verdict (`PASS test/a.test.js` / `FAIL ...`), one line per test
(`✓ name`, `✕ name`, `○ skipped name`), the failures' details, then its totals and stops:

    Test Suites: 1 failed, 1 passed, 2 total
    Tests:       2 failed, 1 skipped, 3 passed, 6 total

What the code under test prints is shown under `console.log` headers, indented, and can look like a result
line: the totals bound how many tests may read as passing. The canary is a must-fail test (jest's global
`test`) appended to a test file the test patch touches.
"""

from __future__ import annotations

import re

from .runners import FAILING, PASSING, Check, Runner, Summary, _verdicts_from
from .tap_runner import js_test_files

RESULT = re.compile(r"^\s*(✓|✕|○)\s(.+?)(?:\s\(\d+\s*m?s\))?$")
TOTALS = re.compile(r"^Tests:\s+(.*\d+ total)$")
JEST = re.compile(r"\bjest\b")


class Jest(Runner):
    name = "jest"

    def summary(self, lines):
        for i in range(len(lines) - 1, -1, -1):
            if match := TOTALS.match(lines[i].strip()):
                return Summary({kind: int(n) for n, kind in re.findall(r"(\d+) (\w+)", match.group(1))}, i)
        return None

    def result_lines(self, lines):
        return [i for i, line in enumerate(lines) if RESULT.match(line)]

    def checks(self, lines, status_map, matter, parser):
        final, found = self.summary_checks(
            lines, "jest printed no `Tests: ... total` line (the run was cut short)", "jest's totals"
        )
        if final is None:
            return found
        passes = sum(s in PASSING for s in status_map.values())
        # A log may hold several jest runs (one per package of a monorepo): each printed its totals.
        passed = sum(
            int(n)
            for line in lines
            if (m := TOTALS.match(line.strip()))
            for n in re.findall(r"(\d+) passed", m.group(1))
        )
        if passes > passed:
            why = f"{passes} tests read as passing, jest's totals count {passed} passed: forged result lines?"
            found.append(Check("summary_counts", "failed", why))
        elif final.failures() and not any(s in FAILING for s in status_map.values()):
            why = f"jest counts {final.failures()} failures, the log shows none: forged result lines?"
            found.append(Check("summary_counts", "failed", why))
        else:
            found.append(Check("summary_counts", "applied"))
        found.append(_verdicts_from(lines[: final.line], status_map, matter, parser, "jest's verbose results"))
        return found

    def canary_plant(self, instance, canary):
        files = js_test_files(instance) if JEST.search(instance.get("eval_script") or "") else []
        if not files:
            return None
        return files[
            0
        ].path, f'\ntest("{canary}", () => {{ throw new Error("grading canary: this test must fail"); }});\n'

    def canary_problem(self, lines, canary):
        mine = [i for i in self.result_lines(lines) if RESULT.match(lines[i]).group(2).strip() == canary]
        if not mine:
            return "the canary test (planted to fail) has no result: the run was cut short or its report forged"
        if any(RESULT.match(lines[i]).group(1) != "✕" for i in mine):
            return "the canary test (planted to fail) did not fail: the runner's verdicts were tampered with"
        final = self.summary(lines)
        if final is None or final.line < mine[-1]:
            return "jest printed no totals after the canary's result (the run was cut short)"
        if any(i > final.line for i in self.result_lines(lines)):
            return "test results were printed after jest's totals: forged result lines?"
        if not final.failures():
            return "jest's totals count no failure although the canary failed: forged summary?"
        return ""
