"""Running the suite in fresh sandboxes: the baseline, and the verdict on one candidate bug.

Every run goes through `tasks.grading.grade.run_eval` (a fresh sandbox from the project image,
the patch applied, the SWE-bench-shaped eval script run detached with its output in a file)
and `parse_log`, so the test names and statuses are exactly those grading will see.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from sandboxes import Backend

from ..grading.grade import parse_log, run_eval
from ..swe import WORKDIR, make_eval_script
from .errors import SynthError
from .testlog import block_of, error_kind, error_line, failure_blocks, short_messages

PASSED = "PASSED"
_COLLECTION_ERROR = re.compile(r"^_+ ERROR collecting (\S+) _+$", re.M)
# Why a run goes wrong whatever the candidate: when every candidate is rejected for one of
# these, the project or the environment is at fault, not the bugs (see `pipeline`'s early stop).
SYSTEMIC = {
    "tests did not run": "baseline tests are missing from the runs: a collection error under every bug, or test ids "
    "that change from run to run (built from hash or set order, or a plugin that randomizes; "
    "every run has PYTHONHASHSEED=0 and pytest-randomly off)",
    "unusable log": "the test log is not trusted",
    "timeout": "the test runs take longer than the time limit (raise --test-timeout)",
    "flaky": "the second run of each candidate fails other tests than the first: the suite is not deterministic",
}


def pin_test_ids(command: str) -> str:
    """`command` with the sources of test-id drift fixed: the hash seed (parametrized ids built
    from sets or hashes change with it) and, for pytest, the pytest-randomly plugin (reorders
    and reseeds; `-p no:randomly` is harmless where it is not installed)."""
    if "PYTHONHASHSEED=" not in command:
        command = f"PYTHONHASHSEED=0 {command}"
    if "pytest" in command and "no:randomly" not in command:
        command += " -p no:randomly"
    return command


@dataclass
class SuiteRun:
    statuses: dict[str, str]
    log: str
    duration: float
    timed_out: bool = False
    problem: str = ""  # why the log is not usable ("" when it is)


@dataclass
class Baseline:
    test_command: str
    passing: list[str]  # passed in both runs
    excluded: dict[str, str]  # test -> statuses of the two runs, for those that did not pass twice
    duration: float  # the slower of the two runs
    log_parser: str = "parse_log_pytest"  # the swebench parser of the command's output

    def to_dict(self) -> dict:
        return {
            "test_command": self.test_command,
            "passing": self.passing,
            "excluded": self.excluded,
            "duration": self.duration,
            "log_parser": self.log_parser,
        }


@dataclass
class Outcome:
    """What one candidate did: `status` kept / rejected / flaky, and for kept ones the tests."""

    status: str
    reason: str = ""
    fail_to_pass: list[str] = field(default_factory=list)
    pass_to_pass: list[str] = field(default_factory=list)
    signature: list[tuple[str, str, str]] = field(default_factory=list)  # (test, status, error kind)
    log: str = ""  # the first run's log, for the problem statement
    detail: str = ""  # for a rejection: what exactly went wrong (missing tests, the log's problem)


def probe_instance(image: str, test_command: str, log_parser: str = "parse_log_pytest") -> dict:
    """A throw-away instance that makes `run_eval` run `test_command` in `image`."""
    return {
        "instance_id": "synth-probe",
        "repo": "synth/probe",
        "version": "",
        "image": image,
        "base_commit": "",
        "eval_script": make_eval_script("", "", test_command),
        "log_parser": log_parser,
        "eval_type": "pass_and_fail",
        "FAIL_TO_PASS": [],
        "PASS_TO_PASS": [],
        "workdir": WORKDIR,
    }


def run_tests(
    image: str, test_command: str, patch: str, backend: Backend, timeout: float, log_parser: str = "parse_log_pytest"
) -> SuiteRun:
    from swebench.harness.constants import TESTS_TIMEOUT

    instance = probe_instance(image, test_command, log_parser)
    started = time.monotonic()
    method, log = run_eval(instance, patch, backend, timeout)
    duration = time.monotonic() - started
    if patch and not method:
        return SuiteRun({}, log, duration, problem="the patch does not apply")
    if TESTS_TIMEOUT in log:
        return SuiteRun({}, log, duration, timed_out=True)
    statuses, _, problem = parse_log(instance, log)
    return SuiteRun(statuses, log, duration, problem=problem or ("" if statuses else "no test results"))


def without_uncollectable(command: str, log: str) -> str | None:
    """`command` leaving out the test modules pytest could not import in `log` (a module that
    needs an optional dependency the environment lacks, such as pyparsing's railroad diagrams,
    stops the whole session); None when there are none."""
    broken = sorted(set(_COLLECTION_ERROR.findall(log)))
    if "pytest" not in command or not broken:
        return None
    return command + "".join(f" --ignore={path}" for path in broken)


def run_baseline(
    image: str, commands: tuple[str, ...], backend: Backend, timeout: float, log_parser: str = "parse_log_pytest"
) -> Baseline:
    """Run the clean suite twice per command until one gives passing tests; keep tests that pass twice.
    A command whose runs stop on modules that cannot be imported is tried again without them."""
    failures, commands = [], list(commands)
    for command in commands:
        runs = [run_tests(image, command, "", backend, timeout, log_parser) for _ in range(2)]
        bad = next((run for run in runs if run.timed_out or run.problem), None)
        if bad is None and any(s == PASSED for s in runs[0].statuses.values()):
            tests = sorted(set(runs[0].statuses) | set(runs[1].statuses))
            passing = [t for t in tests if all(run.statuses.get(t) == PASSED for run in runs) and _whole_name(t)]
            excluded = {t: "/".join(run.statuses.get(t, "MISSING") for run in runs) for t in tests if t not in passing}
            if passing:
                return Baseline(command, passing, excluded, max(run.duration for run in runs), log_parser)
        retry = without_uncollectable(command, runs[0].log)
        if retry and retry not in commands:
            commands.insert(commands.index(command) + 1, retry)
        why = "timed out" if bad and bad.timed_out else (bad.problem if bad else "no test passes")
        failures.append(f"`{command}`: {why}\n{_tail(runs[0].log)}")
    raise SynthError(
        "the project's tests do not run in the project image:\n"
        + "\n\n".join(failures)
        + "\nPass a working --test-command, or check that the test dependencies are declared."
    )


def judge(image: str, baseline: Baseline, patch: str, backend: Backend, timeout: float) -> Outcome:
    """Keep a bug when baseline tests fail under it, the same ones twice, and all others pass."""
    first = run_tests(image, baseline.test_command, patch, backend, timeout, baseline.log_parser)
    rejected = _unusable(first, baseline)
    if rejected:
        return Outcome("rejected", rejected, detail=_detail(first, baseline))
    failing = [t for t in baseline.passing if first.statuses[t] != PASSED]
    if not failing:
        return Outcome("rejected", "no test fails")
    second = run_tests(image, baseline.test_command, patch, backend, timeout, baseline.log_parser)
    if _unusable(second, baseline) or [t for t in baseline.passing if second.statuses[t] != PASSED] != failing:
        return Outcome("flaky", "the second run failed other tests")
    blocks, messages = failure_blocks(first.log), short_messages(first.log)
    signature = [
        (t, first.statuses[t], error_kind(error_line(block_of(blocks, t), messages.get(t, "")))) for t in failing
    ]
    passing = [t for t in baseline.passing if t not in failing]
    return Outcome("kept", fail_to_pass=failing, pass_to_pass=passing, signature=signature, log=first.log)


def _whole_name(test: str) -> bool:
    """False for ids the log parser cut at a space (`test_x[a b]` comes out as `test_x[a`)."""
    return "[" not in test or test.endswith("]")


def _unusable(run: SuiteRun, baseline: Baseline) -> str:
    if run.timed_out:
        return "timeout"
    if run.problem:
        return "unusable log"
    if any(t not in run.statuses for t in baseline.passing):
        return "tests did not run"  # a collection error or a crash took baseline tests with it
    return ""


def _detail(run: SuiteRun, baseline: Baseline) -> str:
    missing = [t for t in baseline.passing if t not in run.statuses]
    if run.problem:
        return run.problem
    if missing:
        return f"{len(missing)} baseline tests missing, e.g. {', '.join(missing[:3])}"
    return ""


def _tail(log: str, lines: int = 25) -> str:
    return "\n".join(log.strip().splitlines()[-lines:])
