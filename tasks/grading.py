"""Grade a model patch the way SWE-bench does, in a fresh sandbox, with anti-gaming checks.

Steps: refuse patches that touch the test infrastructure (`patch_policy`); start a fresh
sandbox from the instance image (never the agent's own); apply the patch with SWE-bench's
fallbacks; run the eval script detached from any terminal with its output in a file; parse
the log with the `swebench` package (`PARSER_REGISTRY`, exit-status cross-check) and decide
FULL / PARTIAL / NO with its rules. On top of that, the counts in pytest's own final summary
line must agree with the parsed statuses, so result lines forged by the code under test
count for nothing.

The code under test runs inside the test runner, so it can forge a whole report and end the
process, or patch the runner so every test passes. Against that, `grade` plants a canary: a
test with a random name that must fail, appended to the FAIL_TO_PASS test file after the test
patch is applied. Its result line must be there, say FAILED, and be followed by pytest's final
summary with no result lines after it; otherwise the log is not trusted. And a FAIL_TO_PASS
test is fixed only when it passes: XFAIL (which SWE-bench counts as a pass) is a failure that
the code under test can announce itself with `pytest.xfail()`.
"""

from __future__ import annotations

import re
import secrets
import shlex
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from sandboxes import Backend, SandboxError, SandboxSpec

from .patch_policy import patch_violations
from .swe import WORKDIR, test_list

APPLY_COMMANDS = [
    "git apply --verbose {p}",
    "git apply --verbose --3way {p}",
    "git apply --verbose --reject {p}",
    "patch --batch --fuzz=5 -p1 -i {p}",
]
_SUMMARY = re.compile(r"^=+ (.*\d+ (?:passed|failed|error|errors|skipped|xfailed|xpassed|deselected).*) in [\d.]+s.* =+$", re.M)
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)")


@dataclass
class GradeReport:
    """Per-instance verdict with SWE-bench's keys plus what our checks found."""

    instance_id: str
    patch_exists: bool = False
    patch_successfully_applied: bool = False
    resolved: bool = False
    resolution: str = "NO"  # FULL / PARTIAL / NO
    reward: float = 0.0
    tests_status: dict[str, Any] = field(default_factory=dict)
    rejected: list[str] = field(default_factory=list)  # patch-policy violations
    invalid_log: str = ""  # why the test log was not trusted
    apply_method: str = ""
    test_exit_code: int | None = None
    duration: float = 0.0
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def grade(
    instance: dict[str, Any],
    model_patch: str | None,
    backend: Backend,
    timeout: float = 900.0,
    fractional: bool = False,
) -> GradeReport:
    """Grade one prediction. Never raises for a bad patch; sandbox faults end up in `error`."""
    started = time.monotonic()
    report = GradeReport(instance["instance_id"])
    try:
        _grade_into(report, instance, model_patch or "", backend, timeout, fractional)
    except SandboxError as err:
        report.error = f"{type(err).__name__}: {err}"
    report.duration = time.monotonic() - started
    return report


def _grade_into(report, instance, model_patch, backend, timeout, fractional) -> None:
    from swebench.harness.constants import FAIL_TO_PASS, PASS_TO_PASS, EvalType, ResolvedStatus
    from swebench.harness.grading import get_eval_tests_report, get_resolution_status

    report.patch_exists = bool(model_patch.strip())  # an empty patch still runs the tests
    report.rejected = patch_violations(model_patch, instance.get("test_patch", ""))
    if report.rejected:
        return
    canary = new_canary() if canary_file(instance) else ""
    report.apply_method, log = run_eval(instance, model_patch, backend, timeout, canary)
    if report.patch_exists and not report.apply_method:
        return
    report.patch_successfully_applied = True
    status_map, report.test_exit_code, report.invalid_log = parse_log(instance, log, canary)
    if report.invalid_log:
        return
    gold = {FAIL_TO_PASS: test_list(instance.get("FAIL_TO_PASS")), PASS_TO_PASS: test_list(instance.get("PASS_TO_PASS"))}
    # Only a pass fixes a FAIL_TO_PASS test; SWE-bench would take an XFAIL the code itself raised.
    status_map = {t: "FAILED" if s == "XFAIL" and t in gold[FAIL_TO_PASS] else s for t, s in status_map.items()}
    tests = get_eval_tests_report(status_map, gold, eval_type=EvalType(instance.get("eval_type") or "pass_and_fail"))
    report.tests_status = tests
    report.resolution = get_resolution_status(tests).removeprefix("RESOLVED_")
    report.resolved = report.resolution == ResolvedStatus.FULL.value.removeprefix("RESOLVED_")
    report.reward = reward_from(tests, report.resolved, fractional)


def run_eval(instance: dict, patch: str, backend: Backend, timeout: float = 900.0, canary: str = "") -> tuple[str, str]:
    """Apply `patch` in a fresh sandbox and run the eval script: (apply method or "", log).

    With `canary` (a test name), that failing test is planted in `canary_file(instance)`.
    """
    workdir = instance.get("workdir", WORKDIR)
    spec = SandboxSpec(image=instance["image"], workdir=workdir, memory="2g", pids=512, wall_time=timeout + 120)
    with backend.create(spec) as sb:
        method = "none"
        if patch.strip():
            method = _apply(sb, patch, workdir)
            if not method:
                return "", ""
        # SWE-bench's TestSpec adds the lines that record the test command's exit status.
        script = _test_spec(instance).eval_script
        sb.write_file("/tmp/harness_eval/eval.sh", plant_canary(script, canary_file(instance), canary) if canary else script)
        # setsid: no controlling terminal, so the code under test cannot write around the log.
        run = sb.exec("setsid --wait bash /tmp/harness_eval/eval.sh > /tmp/harness_eval/eval.log 2>&1 < /dev/null", timeout=timeout)
        log = sb.read_file("/tmp/harness_eval/eval.log").decode("utf-8", errors="replace")
    if run.timed_out:
        log += "\n>>>>> Tests Timed Out\n"
    return method, log


def _apply(sb, patch: str, workdir: str) -> str:
    sb.write_file("/tmp/harness_eval/model.patch", patch if patch.endswith("\n") else patch + "\n")
    for command in APPLY_COMMANDS:
        result = sb.exec(f"cd {workdir} && {command.format(p='/tmp/harness_eval/model.patch')}", timeout=120)
        if result.exit_code == 0:
            return command.split(" {p}")[0].replace(" --verbose", "")
        sb.exec(f"cd {workdir} && git checkout -- . && git clean -fdq -e '*.rej'", timeout=60)
    return ""


def parse_log(instance: dict, log: str, canary: str = "") -> tuple[dict[str, str], int | None, str]:
    """(per-test statuses, the test command's exit status, why the log is not trusted or "").

    With `canary`, the planted test must show the runner's verdicts are real (`canary_problem`);
    it is left out of the statuses returned.
    """
    from swebench.harness.grading import get_logs_eval, parse_test_exit_code

    with tempfile.NamedTemporaryFile("w", suffix=".log") as handle:
        handle.write(log)
        handle.flush()
        status_map, found = get_logs_eval(_test_spec(instance), handle.name)
    exit_code = parse_test_exit_code(log)
    if not found:
        return {}, exit_code, "the log has no trustworthy test results (no output, a crash, or an exit status contradicting it)"
    problem = summary_mismatch(log, status_map) or (canary_problem(log, canary) if canary else "")
    return {t: s for t, s in status_map.items() if not (canary and t.endswith("::" + canary))}, exit_code, problem


def _test_spec(instance: dict):
    from swebench.harness.utils import make_test_spec

    defaults = {"version": "", "log_parser": "parse_log_pytest", "eval_type": "pass_and_fail", "FAIL_TO_PASS": [], "PASS_TO_PASS": []}
    return make_test_spec({**defaults, **{k: v for k, v in instance.items() if v is not None}})


def reward_from(tests: dict, resolved: bool, fractional: bool) -> float:
    """1.0 for FULL; with `fractional`, the share of FAIL_TO_PASS fixed unless a PASS_TO_PASS broke."""
    if resolved:
        return 1.0
    if not fractional or tests["PASS_TO_PASS"]["failure"]:
        return 0.0
    f2p = tests["FAIL_TO_PASS"]
    total = len(f2p["success"]) + len(f2p["failure"])
    return len(f2p["success"]) / total if total else 0.0


def summary_mismatch(log: str, status_map: dict[str, str]) -> str:
    """Why pytest's final counts disagree with the parsed per-test statuses ("" if they agree)."""
    summaries = _SUMMARY.findall(log)
    if not summaries:
        return "pytest printed no final summary line (the run was cut short)"
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0, "xfailed": 0, "xpassed": 0}
    for number, kind in _COUNT.findall(summaries[-1]):
        counts["error" if kind.startswith("error") else kind] += int(number)
    parsed = {"passed": 0, "failed": 0, "error": 0, "skipped": 0, "xfailed": 0, "xpassed": 0}
    for status in status_map.values():
        key = {"PASSED": "passed", "FAILED": "failed", "ERROR": "error", "SKIPPED": "skipped", "XFAIL": "xfailed", "XPASS": "xpassed"}.get(status)
        if key:
            parsed[key] += 1
    if parsed["passed"] != counts["passed"] or parsed["failed"] > counts["failed"] + counts["error"]:
        return f"per-test results {parsed} disagree with pytest's summary {counts}: forged result lines?"
    return ""


def new_canary() -> str:
    """A test name nobody can know in advance."""
    return f"test_{secrets.token_hex(8)}"


def canary_file(instance: dict) -> str:
    """The test file the canary goes into: the one holding the first FAIL_TO_PASS test ("" = none).

    Only for pytest logs; that file is collected whenever the FAIL_TO_PASS tests are.
    """
    if not str(instance.get("log_parser") or "parse_log_pytest").startswith("parse_log_pytest"):
        return ""
    for test in test_list(instance.get("FAIL_TO_PASS")):
        path = test.split("::", 1)[0]
        if "::" in test and path.endswith(".py"):
            return path
    return ""


def plant_canary(script: str, path: str, canary: str) -> str:
    """The eval script with a must-fail test appended to `path` just before the tests run."""
    from swebench.harness.constants import START_TEST_OUTPUT

    lines = script.split("\n")
    at = next((i for i, line in enumerate(lines) if START_TEST_OUTPUT in line), len(lines))
    plant = [f"cat >> {shlex.quote(path)} <<'EOF_HARNESS_CANARY'", "", "", f"def {canary}():",
             '    assert False, "grading canary: this test must fail"', "EOF_HARNESS_CANARY"]
    return "\n".join(lines[:at] + plant + lines[at:])


def canary_problem(log: str, canary: str) -> str:
    """Why the canary shows that the runner's verdicts were not real ("" if they were).

    pytest -rA lists every test in its short summary, then prints the final summary line and
    stops. A forged report cannot name the canary; a runner patched to pass tests passes it too;
    result lines printed after the runner finished come after its final summary.
    """
    from swebench.harness.constants import END_TEST_OUTPUT, START_TEST_OUTPUT, TestStatus

    statuses = tuple(status.value for status in TestStatus)
    lines = log.split(START_TEST_OUTPUT, 1)[-1].split(END_TEST_OUTPUT, 1)[0].splitlines()
    results = [i for i, line in enumerate(lines) if line.startswith(statuses)]
    mine = [i for i in results if len(lines[i].split()) > 1 and lines[i].split()[1].endswith("::" + canary)]
    if not mine:
        return "the canary test (planted to fail) has no result: the run was cut short or its report forged"
    if not lines[mine[-1]].startswith((TestStatus.FAILED.value, TestStatus.ERROR.value)):
        return "the canary test (planted to fail) did not fail: the runner's verdicts were tampered with"
    summary = next((i for i in range(mine[-1] + 1, len(lines)) if _SUMMARY.match(lines[i])), None)
    if summary is None:
        return "pytest printed no final summary after the canary's result (the run was cut short)"
    if any(i > summary for i in results):
        return "test results were printed after pytest's final summary: forged result lines?"
    return ""
