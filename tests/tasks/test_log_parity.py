"""Log-level parity with the official SWE-bench harness, on real evaluation artifacts.

`$HARNESS_SHARED/swebench-logs/` holds what `swebench.harness.run_evaluation` wrote for real
evaluations (report.json, test_output.txt, eval.sh; see its INDEX.md). For each one that the
installed `swebench` still reproduces (its own `get_logs_eval`, `get_eval_tests_report` and
`get_resolution_status` give the official report), our judgement of the same log (the parser
plus every runner trust check, then our verdict rules) must give the same `resolved` and the
same FAIL_TO_PASS / PASS_TO_PASS success and failure lists, and must trust the log.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import SHARED, require

LOGS = SHARED / "swebench-logs"
KINDS = ("FAIL_TO_PASS", "PASS_TO_PASS")


def evaluations() -> list[Path]:
    return sorted(p.parent for p in LOGS.glob("**/report.json")) if LOGS.is_dir() else []


def load(folder: Path) -> tuple[dict, dict, str]:
    """(the instance as grading needs it, the official report, the log)."""
    meta = json.loads((folder / "meta.json").read_text())
    report = next(iter(json.loads((folder / "report.json").read_text()).values()))
    status = report["tests_status"]
    instance = {
        "instance_id": meta["instance_id"],
        "repo": meta["repo"],
        "version": "",
        "image": "offline",
        "eval_script": (folder / "eval.sh").read_text() if (folder / "eval.sh").exists() else "",
        "log_parser": meta["log_parser"],
        "eval_type": "pass_and_fail",
        **{k: status[k]["success"] + status[k]["failure"] for k in KINDS},
    }
    return instance, report, (folder / "test_output.txt").read_text(errors="replace")


def official(instance: dict, folder: Path) -> tuple[bool, dict] | None:
    """What today's swebench makes of the log: (resolved, tests report), or None if it finds no results."""
    from swebench.harness.grading import get_eval_tests_report, get_logs_eval, get_resolution_status

    from tasks.grading.grade import _test_spec

    status_map, found = get_logs_eval(_test_spec(instance), str(folder / "test_output.txt"))
    if not found:
        return None
    tests = get_eval_tests_report(status_map, {k: instance[k] for k in KINDS})
    return get_resolution_status(tests) == "RESOLVED_FULL", tests


def lists(tests: dict) -> dict:
    return {k: {s: sorted(tests[k][s]) for s in ("success", "failure")} for k in KINDS}


def reproduced(folder: Path) -> bool:
    instance, report, _ = load(folder)
    mine = official(instance, folder)
    return mine is not None and mine[0] == report["resolved"] and lists(mine[1]) == lists(report["tests_status"])


@pytest.fixture(scope="module")
def reproducible() -> list[Path]:
    require(LOGS.is_dir(), f"no real SWE-bench evaluation logs at {LOGS} (set HARNESS_SHARED)")
    return [f for f in evaluations() if reproduced(f)]


def test_todays_swebench_reproduces_enough_official_reports(reproducible):
    """Guards the parity below against passing on nothing: 20 of the 36 logs reproduce today."""
    assert len(reproducible) >= 20, [str(f) for f in reproducible]
    runners = {json.loads((f / "meta.json").read_text())["log_parser"] for f in reproducible}
    assert {"parse_log_django", "parse_log_sympy", "parse_log_pytest", "parse_log_astropy"} <= runners


@pytest.mark.parametrize("folder", evaluations(), ids=lambda f: str(f.relative_to(LOGS)) if LOGS else str(f))
def test_our_judgement_matches_the_official_report(folder, reproducible):
    from tasks.grading.grade import decide, judge_log

    if folder not in reproducible:
        pytest.skip("today's swebench does not reproduce this official report (older harness log)")
    instance, report, log = load(folder)
    judged = judge_log(instance, log)
    assert judged.problem == "", f"an honest official log was not trusted: {judged.problem}\n{judged.checks}"
    assert not any(c.split(":")[1].strip().startswith("failed") for c in judged.checks), judged.checks
    tests, resolution = decide(instance, judged.statuses)
    assert (resolution == "FULL") == report["resolved"]
    assert lists(tests) == lists(report["tests_status"])
