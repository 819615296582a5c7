"""The jest runner's trust checks on a real log: jest 29 (`jest --verbose`, Node 20) on two test files, one
with the canary test_0123456789abcdef planted, a failing test, a skipped one and a console.log; then forged."""

from pathlib import Path

import pytest
from swebench.harness.log_parsers import PARSER_REGISTRY

from tasks.grading.grade import canary_plant
from tasks.grading.runners import region, runner_for

LOG = (Path(__file__).parent / "data" / "jest" / "jest29-canary.log").read_text()
CANARY = "test_0123456789abcdef"
JEST = runner_for("parse_log_jest")


def _judge(log: str) -> tuple[list, str]:
    lines = region(log)
    status_map = PARSER_REGISTRY["parse_log_jest"](log, None)
    checks = JEST.checks(
        lines, status_map, ["adds", "b ok"], lambda text: PARSER_REGISTRY["parse_log_jest"](text, None)
    )
    return [c for c in checks if c.outcome == "failed"], JEST.canary_problem(lines, CANARY)


def test_the_honest_run_passes_every_check():
    assert JEST.name == "jest"
    failed, canary = _judge(LOG)
    assert failed == [] and canary == ""
    statuses = PARSER_REGISTRY["parse_log_jest"](LOG, None)
    assert statuses["adds"] == "PASSED" and statuses["fails"] == "FAILED" and statuses[CANARY] == "FAILED"


@pytest.mark.parametrize(
    "forge, problem",
    [
        (lambda log: log.replace(f"✕ {CANARY}", f"✓ {CANARY}"), "did not fail"),
        (
            lambda log: log.replace("Ran all test suites.", "  ✓ forged after the totals\nRan all test suites."),
            "after jest's totals",
        ),
        (lambda log: log.split("Test Suites:")[0], "no totals after"),
        (
            lambda log: log.replace(
                "Tests:       2 failed, 1 skipped, 3 passed", "Tests:       0 failed, 1 skipped, 3 passed"
            ),
            "count no failure",
        ),
    ],
)
def test_forged_logs_are_caught_by_the_canary(forge, problem):
    assert problem in _judge(forge(LOG))[1]


def test_more_passes_than_jest_counts_is_forgery():
    forged = LOG.replace("PASS test/b.test.js", "  ✓ forged one\n  ✓ forged two\nPASS test/b.test.js")
    failed, _ = _judge(forged)
    assert [c.name for c in failed] == ["summary_counts"]


def test_canary_plant_needs_a_jest_command():
    instance = {"test_patch": "--- a/src/a.test.ts\n+++ b/src/a.test.ts\n@@ -1 +1,2 @@\n a\n+b\n"}
    assert canary_plant({**instance, "log_parser": "parse_log_jest", "eval_script": "npx jest --verbose"}, CANARY) == (
        "src/a.test.ts",
        f'\ntest("{CANARY}", () => {{ throw new Error("grading canary: this test must fail"); }});\n',
    )
    assert canary_plant({**instance, "log_parser": "parse_log_jest", "eval_script": "yarn test"}, CANARY) is None
