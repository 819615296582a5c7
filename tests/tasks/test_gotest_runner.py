"""The go test runner's checks, on logs of real `go test -v ./...` runs (Go 1.24, the Go base image) kept in
tests/tasks/data/gotest/: an honest run with a failing subtest, the same with the canary planted, an
`init()` that prints forged results and exits 0 before the tests run, and a passing module."""

from pathlib import Path

import pytest

from tasks.grading.gotest import GoTest, go_canary
from tasks.grading.runners import runner_for
from tasks.languages.go import GO

LOGS = Path(__file__).parent / "data" / "gotest"
CANARY = "test_0123abcd"  # planted as Test_test_0123abcd in canary_failed.log


def lines(name: str) -> list[str]:
    return (LOGS / name).read_text().splitlines()


def parsed(name: str) -> dict[str, str]:
    from swebench.harness.log_parsers.go import parse_log_gotest

    return parse_log_gotest((LOGS / name).read_text(), None)


def outcomes(name: str, matter: list[str] | None = None) -> dict[str, str]:
    checks = GoTest().checks(lines(name), parsed(name), matter or [], None)
    return {c.name: c.outcome for c in checks}


def test_go_logs_are_vouched_for_by_the_go_test_runner():
    assert runner_for(GO.log_parser).name == "gotest"


@pytest.mark.parametrize("name", ["subtest_failure.log", "canary_failed.log", "all_passed.log"])
def test_honest_runs_pass_every_check(name):
    assert set(outcomes(name).values()) == {"applied"}, outcomes(name)


def test_subtests_and_package_lines_are_read():
    statuses = parsed("subtest_failure.log")
    assert statuses["TestPercentile/between"] == "FAILED" and statuses["TestPercentile/min"] == "PASSED"
    final = GoTest().summary(lines("subtest_failure.log"))
    assert final.counts == {"ok": 1, "failed": 1, "no test files": 0}


def test_a_binary_that_exits_before_its_tests_is_caught():
    found = outcomes("init_exits_forged.log")
    assert found["summary_counts"] == "failed" and found["final_summary"] == "applied"
    assert "has no result" in GoTest().canary_problem(lines("init_exits_forged.log"), CANARY)


def test_result_lines_after_the_last_package_line_are_forged():
    log = lines("all_passed.log") + ["--- PASS: TestExtra (0.00s)"]
    checks = {c.name: c for c in GoTest().checks(log, {}, [], None)}
    assert checks["results_after_summary"].outcome == "failed"


def test_a_failure_in_a_package_go_calls_ok_is_forged():
    log = lines("all_passed.log")
    at = next(i for i, line in enumerate(log) if line.startswith("--- PASS"))
    log[at] = log[at].replace("--- PASS", "--- FAIL")
    assert {c.name: c.outcome for c in GoTest().checks(log, {}, [], None)}["summary_counts"] == "failed"


def test_the_canary_must_fail_in_a_failing_package():
    runner = GoTest()
    good = lines("canary_failed.log")
    assert runner.canary_problem(good, CANARY) == ""
    passed = [line.replace(f"--- FAIL: {go_canary(CANARY)}", f"--- PASS: {go_canary(CANARY)}") for line in good]
    assert "did not fail" in runner.canary_problem(passed, CANARY)
    forged_ok = [line.replace("FAIL\texample.com/tally/stats", "ok  \texample.com/tally/stats") for line in good]
    assert "calls the canary's package ok" in runner.canary_problem(forged_ok, CANARY)
    assert "has no result" in runner.canary_problem(good, "test_ffffffff")


def test_the_canary_goes_into_a_test_file_of_the_test_patch():
    patch = (
        "diff --git a/stats/stats_test.go b/stats/stats_test.go\n--- a/stats/stats_test.go\n+++ b/stats/stats_test.go\n"
    )
    path, text = GoTest().canary_plant({"test_patch": patch}, CANARY)
    assert path == "stats/stats_test.go" and f"func {go_canary(CANARY)}(t *testing.T)" in text
    assert GoTest().canary_plant({"test_patch": ""}, CANARY) is None


def test_the_canary_goes_into_a_test_file_that_uses_the_testing_package():
    """A new example_test.go of Example functions imports no testing package: a canary there would not compile
    (gorilla/mux's GetVarNames fix adds one beside its TestGetVarNames)."""
    example = (
        "diff --git a/example_route_vars_test.go b/example_route_vars_test.go\nnew file mode 100644\n"
        "--- /dev/null\n+++ b/example_route_vars_test.go\n@@ -0,0 +1,3 @@\n+package mux_test\n+\n"
        '+import "fmt"\n'
    )
    tests = (
        "diff --git a/mux_test.go b/mux_test.go\n--- a/mux_test.go\n+++ b/mux_test.go\n@@ -1,1 +1,2 @@\n"
        " package mux\n+func TestGetVarNames(t *testing.T) {}\n"
    )
    assert GoTest().canary_plant({"test_patch": example + tests}, CANARY)[0] == "mux_test.go"
    assert GoTest().canary_plant({"test_patch": example}, CANARY)[0] == "example_route_vars_test.go"


def test_the_canary_goes_where_the_go_test_command_runs():
    from tasks.languages.go import GO
    from tasks.swe import make_eval_script

    patch = "".join(
        f"diff --git a/{p} b/{p}\n--- a/{p}\n+++ b/{p}\n" for p in ("docs/x_test.go", "pkg/stats/stats_test.go")
    )

    def plant(command: str):
        script = make_eval_script("abc", "", command)
        return GoTest().canary_plant({"test_patch": patch, "eval_script": script}, CANARY)

    assert plant(GO.test_command())[0] == "docs/x_test.go"
    assert plant("go test -v ./pkg/...")[0] == "pkg/stats/stats_test.go"
    assert plant(GO.test_command(None, ["pkg/stats/stats_test.go"]))[0] == "pkg/stats/stats_test.go"
    assert plant("go test -v ./cmd/...") is None
    assert plant("go test -v -run '^TestMedian$' ./...") is None
