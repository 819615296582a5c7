"""The runner behind TAP logs (swebench's parse_log_tap): node's built-in `node --test --test-reporter=tap`,
mocha's tap reporter, tape.

An honest run prints one `ok N - name` / `not ok N - name` line per test (indented under `# Subtest:` for
nested suites; what the code under test prints comes out as `# ...` comments in node's TAP), then its
totals, `# tests N`, `# pass P`, `# fail F` (node adds `# suites`, `# cancelled`, `# skipped`, `# todo`,
`# duration_ms`), and stops. The canary is a must-fail `node:test` test appended to a test file the test
patch touches.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from .patch_policy import PatchFile, parse_patch
from .runners import FAILING, PASSING, Check, Runner, Summary, _verdicts_from

RESULT = re.compile(r"^\s*(ok|not ok) \d+ (.+)$")
NODE_TEST = re.compile(r"\bnode\b[^\n]*\s--test\b")
TOTAL = re.compile(r"^# (tests|suites|pass|fail|cancelled|skipped|todo|duration_ms)\s+([\d.]+)$")  # tape: `# pass  3`
# TypeScript and ES modules import the test function; CommonJS requires it.
_IMPORT_FORM = re.compile(r"^\s*import\s.+\sfrom\s|^\s*import\s+['\"]")


def js_test_files(instance: dict) -> list[PatchFile]:
    """The files of the test patch that are JavaScript/TypeScript test files (`*.test.ts`, `__tests__/x.js`):
    where a canary runs. Fixtures a test patch touches (`test/fixtures/input.js`) are never run as tests."""
    from ..languages import language_named

    javascript = language_named("javascript")
    return [item for item in parse_patch(instance.get("test_patch") or "") if javascript.is_test_path(item.path)]


class Tap(Runner):
    name = "tap"

    def summary(self, lines):
        start = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].strip().startswith("# tests ")), None)
        if start is None:
            return None
        counts = {}
        for line in lines[start:]:
            match = TOTAL.match(line.strip())
            if not match:
                break
            counts[match.group(1)] = int(float(match.group(2)))
        if "pass" not in counts:
            return None
        counts["failed"] = counts.pop("fail", 0) + counts.get("cancelled", 0)
        return Summary(counts, start)

    def result_lines(self, lines):
        return [i for i, line in enumerate(lines) if RESULT.match(line)]

    def checks(self, lines, status_map, matter, parser):
        final, found = self.summary_checks(
            lines, "the TAP run printed no `# tests` / `# pass` totals (cut short)", "the runner's totals"
        )
        if final is None:
            return found
        passes = sum(s in PASSING for s in status_map.values())
        failing = sum(s in FAILING for s in status_map.values())
        # Node reports each suite (`describe`) as a result of its own, and a skipped test as `ok ... # SKIP`.
        # A log may hold several runs, each with its totals.
        room = sum(
            int(m.group(2))
            for line in lines
            if (m := TOTAL.match(line.strip())) and m.group(1) in ("pass", "suites", "skipped", "todo")
        )
        if passes > room:
            found.append(
                Check(
                    "summary_counts",
                    "failed",
                    f"{passes} tests read as passing, the runner's totals allow {room}: forged result lines?",
                )
            )
        elif final.failures() and not failing:
            found.append(
                Check(
                    "summary_counts",
                    "failed",
                    f"the runner counts {final.failures()} failures, the log shows none: forged result lines?",
                )
            )
        else:
            found.append(Check("summary_counts", "applied"))
        found.append(_verdicts_from(lines[: final.line], status_map, matter, parser, "the runner's TAP results"))
        return found

    def canary_plant(self, instance, canary):
        if not NODE_TEST.search(instance.get("eval_script") or ""):
            return None  # mocha and tape run their own tests, not node:test's
        for item in js_test_files(instance):
            path = PurePosixPath(item.path)
            if any(_IMPORT_FORM.match(line) for line in item.added) or path.suffix in (".mjs", ".mts", ".ts", ".tsx"):
                head = f'import {{ test as {canary}_test }} from "node:test";'
            else:
                head = f'const {{ test: {canary}_test }} = require("node:test");'
            body = '() => { throw new Error("grading canary: this test must fail"); }'
            return item.path, f"\n{head}\n{canary}_test({canary!r}, {body});\n"
        return None

    def canary_problem(self, lines, canary):
        results = self.result_lines(lines)
        mine = [i for i in results if RESULT.match(lines[i]).group(2).strip() == f"- {canary}"]
        if not mine:
            return "the canary test (planted to fail) has no result: the run was cut short or its report forged"
        if RESULT.match(lines[mine[-1]]).group(1) != "not ok":
            return "the canary test (planted to fail) did not fail: the runner's verdicts were tampered with"
        final = self.summary(lines)
        if final is None or final.line < mine[-1]:
            return "the runner printed no totals after the canary's result (the run was cut short)"
        if any(i > final.line for i in results):
            return "test results were printed after the runner's totals: forged result lines?"
        if not final.failures():
            return "the runner's totals count no failure although the canary failed: forged summary?"
        return ""
