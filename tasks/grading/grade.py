"""Grade a model patch the way SWE-bench does, in a fresh sandbox, with anti-gaming checks.

Steps: give bad input its own verdict (empty, not a diff, too large); review the patch
(`patch_policy`: refuse what can never be part of a fix; in the refuse mode also any test or
runner-configuration edit); start a fresh sandbox from the instance image (never the agent's
own) after the instance's setup, the state the episode started from (`tasks.worktree`); apply the
patch with SWE-bench's fallbacks; neutralize what it did to test files, runner configuration and
symlinks, putting them back as they were in that state (the base commit as the environment set it
up; even with an empty test patch, as synthesized tasks have), recorded in `GradeReport.neutralized`; run the eval
script detached from any terminal with its output in a file; parse the log with the `swebench` package (`PARSER_REGISTRY`, exit-status cross-check) and decide
FULL / PARTIAL / NO with its rules. On top of that, the runner that wrote the log (pytest,
Django's runtests.py, sympy's bin/test: `runners`) must vouch for it: its own final summary is
there, nothing claims a result after it, its counts agree with the parsed results, and every
FAIL_TO_PASS / PASS_TO_PASS test read as passing passes in the runner's own report, so result
lines forged by the code under test count for nothing. Checks that cannot apply to a log are
listed as skipped in `GradeReport.checks`, never held against it.

The code under test runs inside the test runner, so it can forge a whole report and end the
process, or patch the runner so every test passes. Against that, `grade` plants a canary: a
test with a random name that must fail (a test function for pytest and sympy, a unittest
method for Django), appended to a test file of the instance after the test patch is applied.
Its result must be there, say it failed, and be followed by the runner's final summary
counting a failure; otherwise the log is not trusted. And a FAIL_TO_PASS
test is fixed only when it passes: XFAIL (which SWE-bench counts as a pass) is a failure that
the code under test can announce itself with `pytest.xfail()`.
"""

from __future__ import annotations

import dataclasses
import secrets
import shlex
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sandboxes import Backend, SandboxError, SandboxSpec

from ..errors import TaskError
from .patch_policy import as_grading_mode, parse_patch, review_patch, test_list
from .runner_guard import ProbeFailed, Split, changes, install_split, probe
from .runners import Check, region, runner_for
from ..shared_env import inject_repo, is_shared
from ..swe import WORKDIR
from ..worktree import start_state

APPLY_COMMANDS = [
    "git apply --verbose {p}",
    "git apply --verbose --3way {p}",
    "git apply --verbose --reject {p}",
    "patch --batch --forward --fuzz=5 -p1 -i {p}",  # --forward, as SWE-bench's: a hunk that looks applied fails, never reverts
]
MAX_PATCH_BYTES = 20 * 2**20  # larger than any fix; graded as `too_large` without a sandbox
# Why a prediction scored what it did, one word each (SWE-bench's report keys tell the rest).
VERDICTS = (
    "resolved",
    "unresolved",
    "empty_patch",
    "not_a_diff",
    "too_large",
    "refused",
    "patch_apply_failed",
    "untrusted_log",
    "error",
)


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
    verdict: str = ""  # one of VERDICTS
    grading_mode: str = "default"  # default (test and runner-config edits neutralized) or refuse (scored 0)
    rejected: list[str] = field(default_factory=list)  # patch-policy refusals, "path: why"
    neutralized: list[str] = field(default_factory=list)  # files put back before the run, "path: why"
    invalid_log: str = ""  # why the test log was not trusted
    checks: list[str] = field(default_factory=list)  # the log's trust checks: applied / skipped (why) / failed
    apply_method: str = ""
    apply_error: str = ""  # why the patch did not apply: what `git apply` said (the file it could not patch)
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
    grading_mode: str = "default",
) -> GradeReport:
    """Grade one prediction in `grading_mode` (default or refuse). Never raises for a bad patch;
    sandbox faults end up in `error`."""
    started = time.monotonic()
    report = GradeReport(instance["instance_id"], grading_mode=as_grading_mode(grading_mode))
    try:
        _grade_into(report, instance, model_patch or "", backend, timeout, fractional)
    except SandboxError as err:
        report.error = f"{type(err).__name__}: {err}"
    report.duration = time.monotonic() - started
    report.verdict = report.verdict or verdict_of(report)
    return report


def with_grading_mode(tasks: list, grading_mode: str | None) -> list:
    """`tasks` with their SWE-bench grading in `grading_mode` (default or refuse); None = as they are."""
    if grading_mode is None:
        return tasks
    try:
        mode = as_grading_mode(grading_mode)
    except ValueError as err:
        raise TaskError(str(err)) from None
    if tasks and not any(
        "instance" in task.metadata for task in tasks
    ):  # an empty set (no held-out data) has nothing to grade
        raise TaskError(f"grading mode {mode!r} applies to SWE-bench tasks, and this task set has none")
    return [
        dataclasses.replace(task, reward_spec={**task.reward_spec, "grading_mode": mode})
        if "instance" in task.metadata
        else task
        for task in tasks
    ]


def verdict_of(report: GradeReport) -> str:
    """The verdict a finished grading earned (bad input is decided before and kept)."""
    if report.error:
        return "error"
    if report.rejected:
        return "refused"
    if report.patch_exists and not report.patch_successfully_applied:
        return "patch_apply_failed"
    if report.invalid_log:
        return "untrusted_log"
    if not report.patch_exists:
        return "empty_patch"
    return "resolved" if report.resolved else "unresolved"


def bad_input(model_patch: str) -> str:
    """The verdict of a patch that cannot be graded as a diff ("" when it can): `too_large`, or
    `not_a_diff` (text in which no file diff can be read: it would apply nothing we reviewed)."""
    if len(model_patch.encode("utf-8", errors="replace")) > MAX_PATCH_BYTES:
        return "too_large"
    if model_patch.strip() and not parse_patch(model_patch):
        return "not_a_diff"
    return ""


def _grade_into(report, instance, model_patch, backend, timeout, fractional) -> None:
    report.patch_exists = bool(
        model_patch.strip()
    )  # an empty patch still runs the tests, as SWE-bench's empty baseline does
    report.verdict = bad_input(model_patch)
    if report.verdict:
        return
    review = review_patch(model_patch, instance, report.grading_mode)
    report.rejected, report.neutralized = review.refused, review.notes()
    if report.rejected:
        return
    canary = new_canary() if canary_plant(instance, "test_x") else ""
    report.apply_method, log, runner = run_checked_eval(instance, model_patch, backend, timeout, canary)
    if report.patch_exists and not report.apply_method:
        report.apply_error = log
        return
    report.patch_successfully_applied = True
    judged = judge_log(instance, log, canary)
    status_map, report.test_exit_code, report.invalid_log, report.checks = (
        judged.statuses,
        judged.exit_code,
        judged.problem,
        judged.checks,
    )
    if runner is not None:
        report.checks.append(str(runner))
        report.invalid_log = runner.detail if runner.outcome == "failed" else report.invalid_log
    if report.invalid_log:
        return
    report.tests_status, report.resolution = decide(instance, status_map)
    report.resolved = report.resolution == "FULL"
    report.reward = reward_from(report.tests_status, report.resolved, fractional)


def decide(instance: dict, status_map: dict[str, str]) -> tuple[dict, str]:
    """SWE-bench's tests report and resolution (FULL / PARTIAL / NO) for trusted statuses."""
    from swebench.harness.constants import FAIL_TO_PASS, PASS_TO_PASS, EvalType
    from swebench.harness.grading import get_eval_tests_report, get_resolution_status

    gold = {
        FAIL_TO_PASS: test_list(instance.get("FAIL_TO_PASS")),
        PASS_TO_PASS: test_list(instance.get("PASS_TO_PASS")),
    }
    # Only a pass fixes a FAIL_TO_PASS test; SWE-bench would take an XFAIL the code itself raised.
    status_map = {t: "FAILED" if s == "XFAIL" and t in gold[FAIL_TO_PASS] else s for t, s in status_map.items()}
    tests = get_eval_tests_report(status_map, gold, eval_type=EvalType(instance.get("eval_type") or "pass_and_fail"))
    return tests, get_resolution_status(tests).removeprefix("RESOLVED_")


def grading_spec(instance: dict, timeout: float = 900.0) -> SandboxSpec:
    """The sandbox one grading of `instance` runs in (an eval driver pre-starts it)."""
    return SandboxSpec(
        image=instance["image"],
        workdir=instance.get("workdir", WORKDIR),
        memory="2g",
        pids=512,
        wall_time=timeout + 120,
    )


def run_eval(instance: dict, patch: str, backend: Backend, timeout: float = 900.0, canary: str = "") -> tuple[str, str]:
    """Apply `patch` in a fresh sandbox and run the eval script: (apply method, log), or ("", why it did not apply).

    With `canary` (a test name), that failing test is planted where `canary_plant` says.
    """
    method, log, _ = run_checked_eval(instance, patch, backend, timeout, canary)
    return method, log


def run_checked_eval(
    instance: dict, patch: str, backend: Backend, timeout: float = 900.0, canary: str = ""
) -> tuple[str, str, Check | None]:
    """`run_eval`, plus the `runner_unchanged` check where the eval script installs before its tests
    (`runner_guard`: the tests then run only if the install steps left the test runner as the image had it)."""
    workdir = instance.get("workdir", WORKDIR)
    # A start that hangs (a stalled image fetch or mount) is given up within the grading's time: an error, not a hang.
    with backend.create_within(grading_spec(instance, timeout), timeout) as sb:
        run_setup(sb, instance)
        method = "none"
        if patch.strip():
            # What neutralized files go back to: the state the task starts from, after the setup.
            start = (
                start_state(sb, workdir, instance.get("base_commit") or "HEAD") if _neutralized(patch, instance) else ""
            )
            method, failed = _apply(sb, patch, workdir)
            if not method:
                return "", failed, None
            neutralize(sb, instance, patch, start)
        script = stage_test_assets(sb, instance, eval_script(instance, canary))
        split = install_split(script)
        if split is None:
            log, timed_out = _run_script(sb, script, timeout)
            runner = None
        else:
            log, timed_out, runner = _run_guarded(sb, split, workdir, timeout)
    if timed_out:
        log += "\n>>>>> Tests Timed Out\n"
    return method, log, runner


def _run_script(sb, script: str, timeout: float, append: bool = False) -> tuple[str, bool]:
    """Run an eval script detached from any terminal, its output in the log file: (the log so far, timed out)."""
    sb.write_file("/tmp/harness_eval/eval.sh", script)
    # setsid: no controlling terminal, so the code under test cannot write around the log.
    run = sb.exec(
        f"setsid --wait bash /tmp/harness_eval/eval.sh {'>>' if append else '>'} /tmp/harness_eval/eval.log 2>&1 < /dev/null",
        timeout=timeout,
    )
    return sb.read_file("/tmp/harness_eval/eval.log").decode("utf-8", errors="replace"), run.timed_out


def _run_guarded(sb, split: Split, workdir: str, timeout: float) -> tuple[str, bool, Check]:
    """The install part, the runner checked against its fingerprint from before it, then the tests."""
    try:
        before = probe(sb, split, workdir, "/tmp/harness_eval/runner-before.json")
    except ProbeFailed as err:
        raise SandboxError(f"cannot fingerprint the test runner before the install steps: {err}") from None
    log, timed_out = _run_script(sb, split.install, timeout)
    if timed_out:
        return log, True, Check("runner_unchanged", "skipped", "the install steps timed out")
    try:
        after = probe(sb, split, workdir, "/tmp/harness_eval/runner-after.json", keep=before["processes"])
    except ProbeFailed as err:
        return (
            log,
            False,
            Check("runner_unchanged", "failed", f"the test runner could not be checked after the install steps: {err}"),
        )
    problems, stale = changes(before, after)
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        why = "the eval script's install steps changed what the test runner loads: " + "; ".join(problems[:3]) + more
        return log, False, Check("runner_unchanged", "failed", why)
    if stale:
        sb.write_file("/tmp/harness_eval/stale-caches", "\n".join(stale) + "\n")
        sb.exec("xargs -d '\\n' rm -f -- < /tmp/harness_eval/stale-caches", timeout=120)
    log, timed_out = _run_script(sb, split.tests, timeout, append=True)
    detail = f"{len(after['files'])} files of {after['executable']}'s installation as before the install steps, but the package's own"
    return log, timed_out, Check("runner_unchanged", "applied", detail)


def eval_script(instance: dict, canary: str = "") -> str:
    """The script that runs the instance's tests: its eval script with the lines SWE-bench's TestSpec adds to
    record the test command's exit status, and with `canary` (a test name) planted where `canary_plant` says."""
    script = _test_spec(instance).eval_script
    plant = canary_plant(instance, canary) if canary else None
    return plant_canary(script, plant) if plant else script


def stage_test_assets(sb, instance: dict, script: str) -> str:
    """`script` with the instance's declared binary assets put in place after the patches, as `run_evaluation`
    stages a task repository's `test_assets/`: each file under /image_assets, copied to its path in the
    repository just before the test output starts. Assets missing from the folder are left out, as there."""
    folder = instance.get("test_assets_dir")
    if not folder:
        return script
    from swebench.harness.run_evaluation import _inject_asset_restore
    from swebench.harness.utils import _parse_image_assets

    declared = _parse_image_assets(instance.get("image_assets"))
    restore = []
    for key in ("test_patch", "patch"):
        for path in [entry.get("path") for entry in declared.get(key) or []]:
            local = Path(folder) / path if path else None
            if local is None or not local.is_file():
                continue
            flat = path.replace("/", "__")
            sb.write_file(f"/image_assets/{flat}", local.read_bytes())
            restore.append(f"mkdir -p $(dirname {path}) && cp /image_assets/{flat} {path}")
    return _inject_asset_restore(script, restore)


def run_setup(sb, instance: dict, timeout: float = 300.0) -> None:
    """Put the instance's repository into `sb` if it runs from a shared environment image
    (`tasks.shared_env`), then run its `setup_script` (if any: it builds the repository in a shared image)."""
    if is_shared(instance):
        inject_repo(sb, instance, timeout)
    script = instance.get("setup_script")
    if not script:
        return
    sb.write_file("/tmp/harness_setup.sh", script)
    result = sb.exec(
        "bash /tmp/harness_setup.sh; status=$?; rm -f /tmp/harness_setup.sh; (exit $status)", timeout=timeout
    )
    if not result.ok:
        raise SandboxError(
            f"{instance.get('instance_id', '?')}: the instance's setup script failed "
            f"(exit {result.exit_code}): {result.output[-2000:]}"
        )


def _neutralized(patch: str, instance: dict) -> list[str]:
    return list(review_patch(patch, instance).neutralized)


def neutralize(sb, instance: dict, patch: str, start: str = "") -> list[str]:
    """Put the files `review_patch` neutralizes back as they were when the task started (`start`, a
    commit or tree from `tasks.worktree.start_state`; the base commit where not given), deleting those
    the patch added, symlinks first, even when the instance has no test patch to do it: the tests and
    runner settings that judge the patch are the task's own, as its environment set them up. Returns the paths."""
    paths = _neutralized(patch, instance)
    if paths:
        workdir = instance.get("workdir", WORKDIR)
        base = shlex.quote(start or instance.get("base_commit") or "HEAD")
        steps = " ; ".join(
            f"rm -rf -- {shlex.quote(p)} ; git checkout -q {base} -- {shlex.quote(p)} 2>/dev/null" for p in paths
        )
        sb.exec(f"cd {shlex.quote(workdir)} && {{ {steps} ; true ; }}", timeout=120)
    return paths


def _apply(sb, patch: str, workdir: str) -> tuple[str, str]:
    """(the command that applied `patch`, ""), or ("", what the first of them said where none did)."""
    sb.write_file("/tmp/harness_eval/model.patch", patch if patch.endswith("\n") else patch + "\n")
    failures = []
    for command in APPLY_COMMANDS:
        result = sb.exec(f"cd {workdir} && {command.format(p='/tmp/harness_eval/model.patch')}", timeout=120)
        if result.exit_code == 0:
            return command.split(" {p}")[0].replace(" --verbose", ""), ""
        failures.append(result.output.strip()[-1000:])
        sb.exec(f"cd {workdir} && git checkout -- . && git clean -fdq -e '*.rej'", timeout=60)
    return "", failures[0]


def parse_log(instance: dict, log: str, canary: str = "") -> tuple[dict[str, str], int | None, str]:
    """(per-test statuses, the test command's exit status, why the log is not trusted or "")."""
    judged = judge_log(instance, log, canary)
    return judged.statuses, judged.exit_code, judged.problem


@dataclass
class LogJudgement:
    statuses: dict[str, str]
    exit_code: int | None
    problem: str  # why the log is not trusted ("" when it is)
    checks: list[str]  # every trust check, applied / skipped (with why) / failed


def judge_log(instance: dict, log: str, canary: str = "") -> LogJudgement:
    """Parse the log with swebench's parser for the instance, then ask its runner to vouch for it.

    With `canary`, the planted test must show that the runner's verdicts are real; it is left
    out of the statuses returned.
    """
    from swebench.harness.grading import get_logs_eval, parse_test_exit_code
    from swebench.harness.log_parsers import PARSER_REGISTRY

    spec = _test_spec(instance)
    with tempfile.NamedTemporaryFile("w", suffix=".log") as handle:
        handle.write(log)
        handle.flush()
        status_map, found = get_logs_eval(spec, handle.name)
    exit_code = parse_test_exit_code(log)
    checks = [
        Check(
            "exit_status",
            "applied" if exit_code is not None else "skipped",
            "" if exit_code is not None else "the log records no exit status (older harness)",
        )
    ]
    runner = runner_for(spec.log_parser)
    lines = region(log)
    if not found:
        why = runner.no_results(lines) or (
            "the log has no trustworthy test results (no output, a crash, or an exit status contradicting it)"
        )
        checks.append(Check("parsed_results", "failed", why))
        return LogJudgement({}, exit_code, why, [str(c) for c in checks])
    matter = test_list(instance.get("FAIL_TO_PASS")) + test_list(instance.get("PASS_TO_PASS"))
    parser = PARSER_REGISTRY[spec.log_parser]
    checks += runner.checks(lines, status_map, matter, lambda text: parser(text, spec))
    if canary:
        problem = runner.canary_problem(lines, canary)
        checks.append(Check("canary", "failed" if problem else "applied", problem))
    elif runner.canary_plant(instance, "test_x") is None:
        checks.append(Check("canary", "skipped", f"no test can be planted for this instance ({runner.name} runner)"))
    else:
        checks.append(Check("canary", "skipped", "none planted (log judged offline)"))
    problem = next((c.detail for c in checks if c.outcome == "failed"), "")
    statuses = {t: s for t, s in status_map.items() if not (canary and canary in t)}
    return LogJudgement(statuses, exit_code, problem, [str(c) for c in checks])


def _test_spec(instance: dict):
    from swebench.harness.utils import make_test_spec

    defaults = {
        "version": "",
        "log_parser": "parse_log_pytest",
        "eval_type": "pass_and_fail",
        "FAIL_TO_PASS": [],
        "PASS_TO_PASS": [],
    }
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


def new_canary() -> str:
    """A test name nobody can know in advance."""
    return f"test_{secrets.token_hex(8)}"


def canary_plant(instance: dict, canary: str) -> tuple[str, str] | None:
    """(test file, text appended to it) for a must-fail test the instance's runner will run, or None."""
    return runner_for(str(instance.get("log_parser") or "parse_log_pytest")).canary_plant(instance, canary)


def plant_canary(script: str, plant: tuple[str, str]) -> str:
    """The eval script with the canary appended to its test file just before the tests run."""
    from swebench.harness.constants import START_TEST_OUTPUT

    path, text = plant
    lines = script.split("\n")
    at = next((i for i, line in enumerate(lines) if START_TEST_OUTPUT in line), len(lines))
    heredoc = [f"cat >> {shlex.quote(path)} <<'EOF_HARNESS_CANARY'", *text.split("\n"), "EOF_HARNESS_CANARY"]
    return "\n".join(lines[:at] + heredoc + lines[at:])
