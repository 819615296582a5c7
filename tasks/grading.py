"""Grade a model patch the way SWE-bench does, in a fresh sandbox, with anti-gaming checks.

Steps: refuse patches that touch the test infrastructure (`patch_policy`); start a fresh
sandbox from the instance image (never the agent's own); apply the patch with SWE-bench's
fallbacks; run the eval script detached from any terminal with its output in a file; parse
the log with the `swebench` package (`PARSER_REGISTRY`, exit-status cross-check) and decide
FULL / PARTIAL / NO with its rules. On top of that, the counts in pytest's own final summary
line must agree with the parsed statuses, so result lines forged by the code under test
count for nothing.
"""

from __future__ import annotations

import re
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
    report.apply_method, log = run_eval(instance, model_patch, backend, timeout)
    if report.patch_exists and not report.apply_method:
        return
    report.patch_successfully_applied = True
    status_map, report.test_exit_code, report.invalid_log = parse_log(instance, log)
    if report.invalid_log:
        return
    gold = {FAIL_TO_PASS: test_list(instance.get("FAIL_TO_PASS")), PASS_TO_PASS: test_list(instance.get("PASS_TO_PASS"))}
    tests = get_eval_tests_report(status_map, gold, eval_type=EvalType(instance.get("eval_type") or "pass_and_fail"))
    report.tests_status = tests
    report.resolution = get_resolution_status(tests).removeprefix("RESOLVED_")
    report.resolved = report.resolution == ResolvedStatus.FULL.value.removeprefix("RESOLVED_")
    report.reward = reward_from(tests, report.resolved, fractional)


def run_eval(instance: dict, patch: str, backend: Backend, timeout: float = 900.0) -> tuple[str, str]:
    """Apply `patch` in a fresh sandbox and run the eval script: (apply method or "", log)."""
    workdir = instance.get("workdir", WORKDIR)
    spec = SandboxSpec(image=instance["image"], workdir=workdir, memory="2g", pids=512, wall_time=timeout + 120)
    with backend.create(spec) as sb:
        method = "none"
        if patch.strip():
            method = _apply(sb, patch, workdir)
            if not method:
                return "", ""
        # SWE-bench's TestSpec adds the lines that record the test command's exit status.
        sb.write_file("/tmp/harness_eval/eval.sh", _test_spec(instance).eval_script)
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


def parse_log(instance: dict, log: str) -> tuple[dict[str, str], int | None, str]:
    """(per-test statuses, the test command's exit status, why the log is not trusted or "")."""
    from swebench.harness.grading import get_logs_eval, parse_test_exit_code

    with tempfile.NamedTemporaryFile("w", suffix=".log") as handle:
        handle.write(log)
        handle.flush()
        status_map, found = get_logs_eval(_test_spec(instance), handle.name)
    exit_code = parse_test_exit_code(log)
    if not found:
        return {}, exit_code, "the log has no trustworthy test results (no output, a crash, or an exit status contradicting it)"
    return status_map, exit_code, summary_mismatch(log, status_map)


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
