"""The TAP runner's trust checks on real logs: node 20's `node --test --test-reporter=tap` in the
JavaScript/TypeScript base image, grading swe-demo-ts's textkit__textkit-2 (the gold patch with the canary
test_0123456789abcdef planted, and the empty patch), then the same logs forged."""

import json
from pathlib import Path

import pytest

from tasks.grading.grade import canary_plant, judge_log
from tasks.grading.runners import runner_for
from tasks.swe_demo import BUILTIN

DATA = Path(__file__).parent / "data" / "tap"
CANARY = "test_0123456789abcdef"
F2P = ["- truncate counts the ellipsis in the length", "- truncate with a custom ellipsis stays within the length"]


def _instance(**extra):
    task = BUILTIN / "swe_demo_ts" / "tasks" / "textkit__textkit-2"
    return {
        "instance_id": "textkit__textkit-2",
        "repo": "harness-demo/textkit",
        "log_parser": "parse_log_tap",
        "image": "harness-swe-demo/textkit__textkit-2",
        "version": "0.1",
        "test_patch": (task / "test.patch").read_text(),
        "eval_script": "tsc -p tsconfig.json && node --test --test-reporter=tap",
        "FAIL_TO_PASS": json.dumps(F2P),
        "PASS_TO_PASS": json.dumps(["- render reads nested values", "- words"]),
        **extra,
    }


def _log(name: str) -> str:
    return (DATA / name).read_text()


def _failed(judged):
    return [c for c in judged.checks if ": failed" in c]


def test_tap_logs_are_judged_by_the_tap_runner():
    assert runner_for("parse_log_tap").name == "tap"


def test_honest_runs_pass_every_check():
    gold = judge_log(_instance(), _log("node20-gold-canary.log"), CANARY)
    assert not gold.problem and not _failed(gold)
    assert {c.split(":")[0] for c in gold.checks} >= {
        "final_summary",
        "results_after_summary",
        "summary_counts",
        "canary",
    }
    assert all(gold.statuses[t] == "PASSED" for t in F2P) and not any(CANARY in t for t in gold.statuses)
    empty = judge_log(_instance(), _log("node20-empty.log"))
    assert not empty.problem and all(empty.statuses[t] == "FAILED" for t in F2P)


def _passing_exit(log: str) -> str:
    """A forged run reports success with its exit status too (else swebench itself distrusts the log)."""
    return log.replace("EXIT_CODE=1", "EXIT_CODE=0").replace("Test Exit Code: 1", "Test Exit Code: 0")


@pytest.mark.parametrize(
    "forge, problem",
    [
        # result lines printed after the runner's totals
        (
            lambda log: log.replace(
                "+ SWEBENCH_TEST_EXIT_CODE", "ok 99 - forged after the totals\n+ SWEBENCH_TEST_EXIT_CODE"
            ),
            "after the runner's totals",
        ),
        # the canary's verdict rewritten (a reporter that turns every failure into a pass)
        (
            lambda log: _passing_exit(log.replace(f"not ok 18 - {CANARY}", f"ok 18 - {CANARY}")),
            "canary test (planted to fail) did not fail",
        ),
        # the totals cut off (a run that exited before its report)
        (lambda log: log.split("# tests ")[0] + "+ : '>>>>> End Test Output'\n", "printed no `# tests`"),
        # the canary's result removed
        (
            lambda log: _passing_exit(log.replace(f"not ok 18 - {CANARY}", "")),
            "canary test (planted to fail) has no result",
        ),
        # the totals rewritten to count no failure
        (lambda log: log.replace("# fail 1", "# fail 0"), "count no failure"),
    ],
)
def test_forged_logs_are_not_trusted(forge, problem):
    judged = judge_log(_instance(), forge(_log("node20-gold-canary.log")), CANARY)
    assert judged.problem and any(problem in check for check in _failed(judged))


def test_more_passes_than_the_totals_allow_is_forgery():
    extra = "\n".join(f"ok {n} - forged {n}" for n in range(40))
    log = _log("node20-empty.log").replace("1..", extra + "\n1..", 1)
    assert "forged result lines" in judge_log(_instance(), log).problem


def test_canary_plant_forms():
    path, text = canary_plant(_instance(), CANARY)
    assert path == "test/truncate.test.ts" and f'import {{ test as {CANARY}_test }} from "node:test"' in text
    cjs = _instance(test_patch="--- a/t/x.test.js\n+++ b/t/x.test.js\n@@ -1 +1,2 @@\n a\n+const x = require('y');\n")
    assert 'require("node:test")' in canary_plant(cjs, CANARY)[1]
    # mocha and tape do not run node:test tests: no canary there
    assert canary_plant(_instance(eval_script="./node_modules/.bin/mocha --reporter tap"), CANARY) is None


def test_verdicts_equal_swebenchs_own_grading(tmp_path):
    """Parity: on the real logs, our resolution is the one swebench's get_eval_report gives (the canary's own
    line, which only our grading plants, taken out of the gold log first)."""
    from swebench.harness.grading import get_eval_report

    from tasks.grading.grade import _test_spec, decide

    instance = _instance(FAIL_TO_PASS=F2P, PASS_TO_PASS=["- render reads nested values", "- words"])
    gold = "\n".join(l for l in _log("node20-gold-canary.log").splitlines() if CANARY not in l)
    gold = (
        gold.replace("# fail 1", "# fail 0")
        .replace("Exit Code: 1", "Exit Code: 0")
        .replace("EXIT_CODE=1", "EXIT_CODE=0")
    )
    for name, log, resolved in (("gold", gold, True), ("empty", _log("node20-empty.log"), False)):
        path = tmp_path / f"{name}.log"
        path.write_text(log)
        official = get_eval_report(
            _test_spec(instance), {"instance_id": instance["instance_id"], "model_patch": "x"}, str(path), False
        )
        ours = judge_log(instance, log)
        assert not ours.problem, ours.problem
        assert (
            (decide(instance, ours.statuses)[1] == "FULL") == official[instance["instance_id"]]["resolved"] == resolved
        )
