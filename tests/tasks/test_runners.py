"""Runner-aware trust checks (`tasks.grading.runners`) on logs of real runners.

The Django and sympy logs are produced here by the real runners (unittest's verbose runner,
which Django's runtests.py prints through; sympy's own test runner, the one bin/test calls)
on a small test module, with the canary planted exactly as grading plants it. Forgeries are
made by editing those real logs the way code under test could.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CANARY = "test_0123456789abcdef"
START, END = "+ : '>>>>> Start Test Output'", "+ : '>>>>> End Test Output'"


def judge(log_parser: str, body: str, f2p: list[str], p2p: list[str], canary: str = "", **extra):
    from tasks.grading.grade import judge_log

    instance = {
        "instance_id": "x__y-1",
        "repo": "x/y",
        "version": "",
        "image": "i",
        "eval_script": "",
        "log_parser": log_parser,
        "eval_type": "pass_and_fail",
        "FAIL_TO_PASS": f2p,
        "PASS_TO_PASS": p2p,
        **extra,
    }
    return judge_log(instance, f"{START}\n{body}\n{END}\n", canary=canary)


def planted_module(tmp_path: Path, log_parser: str, source: str, f2p: str, test_patch_path: str) -> tuple[Path, str]:
    """The test module with the canary appended as grading's eval script appends it."""
    from tasks.grading.grade import canary_plant

    test_patch = f"diff --git a/{test_patch_path} b/{test_patch_path}\n--- a/{test_patch_path}\n+++ b/{test_patch_path}\n@@ -1 +1 @@\n-x\n+y\n"
    path, text = canary_plant({"log_parser": log_parser, "FAIL_TO_PASS": [f2p], "test_patch": test_patch}, CANARY)
    assert path == test_patch_path
    module = tmp_path / Path(path).name
    module.write_text(textwrap.dedent(source) + text)
    return module, test_patch


# ------------------------------------------------------------------ Django (unittest)
UNITTEST_MODULE = """
    import unittest


    class ValidatorTests(unittest.TestCase):
        def test_ascii(self):
            self.assertTrue(True)

        def test_unicode(self):
            self.assertEqual(1, 1)
"""


def unittest_log(tmp_path: Path, canary: bool) -> str:
    if canary:
        module, _ = planted_module(
            tmp_path,
            "parse_log_django",
            UNITTEST_MODULE,
            "test_ascii (auth_tests.test_validators.ValidatorTests)",
            "tests/auth_tests/test_validators.py",
        )
    else:
        module = tmp_path / "test_validators.py"
        module.write_text(textwrap.dedent(UNITTEST_MODULE))
    run = subprocess.run(
        [sys.executable, "-m", "unittest", "-v", module.stem], cwd=tmp_path, capture_output=True, text=True
    )
    return run.stderr  # unittest reports on stderr, as runtests.py does


def ids(log: str) -> list[str]:
    """The unittest ids as this Python prints them (`test_x (module.Class.test_x)` on 3.11+)."""
    return [line.split(" ... ")[0] for line in log.splitlines() if " ... " in line]


def test_django_honest_log_is_trusted_with_every_check_applied(tmp_path):
    log = unittest_log(tmp_path, canary=False)
    judged = judge("parse_log_django", log, ids(log)[:1], ids(log)[1:])
    assert judged.problem == "", judged.checks
    assert [c.split(":")[0] for c in judged.checks if ": applied" in c] == [
        "final_summary",
        "results_after_summary",
        "summary_counts",
        "verdicts_from_runner",
    ]
    assert set(judged.statuses.values()) == {"PASSED"}


def test_django_canary_is_a_unittest_method_that_fails(tmp_path):
    from tasks.grading.runners import Django, region

    log = unittest_log(tmp_path, canary=True)
    assert f"{CANARY} (" in log and "FAILED (failures=1)" in log, log
    lines = region(f"{START}\n{log}\n{END}")
    assert Django().canary_problem(lines, CANARY) == ""
    forged = log.replace("FAIL", "ok").replace("FAILED (failures=1)", "OK")
    assert "did not fail" in Django().canary_problem(region(f"{START}\n{forged}\n{END}"), CANARY)
    cut = log.split("Ran ")[0]
    assert "no `Ran N tests`" in Django().canary_problem(region(f"{START}\n{cut}\n{END}"), CANARY)


def test_django_canary_goes_to_a_pass_to_pass_class_when_fail_to_pass_tests_are_named_by_docstrings(tmp_path):
    """`test_x (m.C.test_x)\nChecks x. ... ok` is read as `Checks x.`: no class to plant the canary on."""
    from tasks.grading.grade import canary_plant
    from tasks.grading.runners import Django, region

    source = UNITTEST_MODULE.replace("def test_ascii(self):", 'def test_ascii(self):\n            """Checks ascii."""')
    f2p, p2p = "Checks ascii.", "test_unicode (test_validators.ValidatorTests.test_unicode)"
    test_patch = "diff --git a/tests/test_validators.py b/tests/test_validators.py\n--- a/tests/test_validators.py\n+++ b/tests/test_validators.py\n"
    instance = {"log_parser": "parse_log_django", "FAIL_TO_PASS": [f2p], "PASS_TO_PASS": [], "test_patch": test_patch}
    assert canary_plant(instance, CANARY) is None
    path, text = canary_plant({**instance, "PASS_TO_PASS": [p2p]}, CANARY)
    assert path == "tests/test_validators.py"
    (tmp_path / "test_validators.py").write_text(textwrap.dedent(source) + text)
    log = subprocess.run(
        [sys.executable, "-m", "unittest", "-v", "test_validators"], cwd=tmp_path, capture_output=True, text=True
    ).stderr
    assert "Checks ascii. ... ok" in log and f"FAIL: {CANARY} (" in log, log
    assert Django().canary_problem(region(f"{START}\n{log}\n{END}"), CANARY) == ""
    judged = judge("parse_log_django", log, [f2p], [p2p])
    assert judged.problem == "" and judged.statuses[f2p] == "PASSED", judged.checks


@pytest.mark.parametrize(
    "forge, why",
    [
        (lambda log, t: log.split("\nRan ")[0], "no `Ran N tests`"),
        (lambda log, t: log + f"\n{t} ... ok\n", "after the runner's `Ran N tests`"),
        (lambda log, t: log.replace("\nOK", "\nFAILED (failures=2)"), "the log shows none"),
    ],
    ids=["cut_short", "result_after_ran", "failures_hidden"],
)
def test_django_forgeries_are_caught(tmp_path, forge, why):
    log = unittest_log(tmp_path, canary=False)
    judged = judge("parse_log_django", forge(log, ids(log)[0]), ids(log)[:1], ids(log)[1:])
    assert why in judged.problem, judged.checks


# ------------------------------------------------------------------ sympy (bin/test)
SYMPY_MODULE = """
    def test_basic():
        assert 1 + 1 == 2


    def test_subs():
        assert "a".upper() == "A"


    def test_last():
        pass  # printed as `test_last ok   [OK]`, which swebench's sympy parser does not read
"""


def sympy_log(tmp_path: Path, canary: bool) -> str:
    if canary:
        module, _ = planted_module(
            tmp_path, "parse_log_sympy", SYMPY_MODULE, "test_basic", "sympy/core/tests/test_basic.py"
        )
    else:
        module = tmp_path / "test_basic.py"
        module.write_text(textwrap.dedent(SYMPY_MODULE))
    # What bin/test does for a file argument: sympy's runner and reporter on the matched file.
    code = (
        "from sympy.testing.runtests import PyTestReporter, SymPyTests\n"
        "t = SymPyTests(PyTestReporter(verbose=True, colors=False))\n"
        f"t._testfiles.append({str(module)!r})\nt.test(sort=True)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    return run.stdout


def test_sympy_honest_log_is_trusted_with_every_check_applied(tmp_path):
    pytest.importorskip("sympy")
    log = sympy_log(tmp_path, canary=False)
    judged = judge("parse_log_sympy", log, ["test_basic"], ["test_subs"])
    assert judged.problem == "", (judged.checks, log)
    assert all(
        ": applied" in c
        for c in judged.checks
        if c.split(":")[0] in ("final_summary", "summary_counts", "verdicts_from_runner")
    )
    assert judged.statuses == {"test_basic": "PASSED", "test_subs": "PASSED"}


def test_sympy_canary_is_a_test_function_that_fails(tmp_path):
    pytest.importorskip("sympy")
    from tasks.grading.runners import Sympy, region

    log = sympy_log(tmp_path, canary=True)
    assert f"{CANARY} F" in log, log
    assert Sympy().canary_problem(region(f"{START}\n{log}\n{END}"), CANARY) == ""
    forged = log.replace(f"{CANARY} F", f"{CANARY} ok")
    assert "did not fail" in Sympy().canary_problem(region(f"{START}\n{forged}\n{END}"), CANARY)


def test_sympy_final_line_too_wide_for_its_padding_or_the_terminal_is_read():
    from tasks.grading.runners import Sympy

    # bin/test's last line in a mined sympy instance (80 columns: one `=` left of the padding).
    line = " tests finished: 31 passed, 1 expected to fail, 1 exceptions, in 26.29 seconds ="
    final = Sympy().summary(["test_issue_24062 E", line])
    assert final is not None and final.line == 1 and final.counts["passed"] == 31 and final.counts["error"] == 1
    # One category more (a failure) and it wraps onto a second line.
    wrapped = Sympy().summary(
        [
            "test_issue_24062 E",
            " tests finished: 31 passed, 1 failed, 1 expected to fail, 1 exceptions, ",
            "in 43.44 seconds ",
            "DO *NOT* COMMIT!",
        ]
    )
    assert wrapped is not None and wrapped.line == 1 and wrapped.counts["failed"] == 1 and wrapped.failures()
    assert (
        Sympy().summary([" tests finished: 31 passed, 1 failed, 1 expected to fail, 1 exceptions, "]) is None
    )  # cut short


@pytest.mark.parametrize(
    "forge, why",
    [
        (lambda log: log.split("tests finished")[0], "no `tests finished`"),
        (lambda log: log + "\ntest_basic ok\n", "after bin/test's final line"),
        (lambda log: "test_extra ok\ntest_more ok\n" + log, "forged result lines"),
    ],
    ids=["cut_short", "result_after_finished", "more_passes_than_counted"],
)
def test_sympy_forgeries_are_caught(tmp_path, forge, why):
    pytest.importorskip("sympy")
    judged = judge("parse_log_sympy", forge(sympy_log(tmp_path, canary=False)), ["test_basic"], ["test_subs"])
    assert why in judged.problem, judged.checks


# ------------------------------------------------------------------ pytest of every era
OLD_PYTEST = """\
astropy/t.py::test_a PASSED
astropy/t.py::test_b SKIPPED
=============== 1 passed, 1 skipped, 1 warnings in 0.19 seconds ================"""
COLOURED = (
    "\x1b[1m=== short test summary info ===\x1b[0m\nPASSED t.py::test_a\nFAILED t.py::test_b - assert 0\n"
    "\x1b[31m=== \x1b[31m\x1b[1m1 failed\x1b[0m, \x1b[32m1 passed\x1b[0m\x1b[31m in 0.09s\x1b[0m\x1b[31m ===\x1b[0m"
)


@pytest.mark.parametrize(
    "parser, body, f2p, p2p",
    [
        ("parse_log_astropy", OLD_PYTEST, ["astropy/t.py::test_a"], []),
        ("parse_log_sphinx", COLOURED, ["t.py::test_b"], ["t.py::test_a"]),
    ],
    ids=["pytest3_seconds_verbose", "ansi_coloured"],
)
def test_pytest_logs_of_other_eras_are_trusted(parser, body, f2p, p2p):
    judged = judge(parser, body, f2p, p2p)
    assert judged.problem == "", judged.checks
    assert "final_summary: applied" in " ".join(judged.checks)


def test_pytest_pass_printed_outside_the_runners_summary_is_not_trusted():
    """A FAIL_TO_PASS test the run never reports, 'passed' by a line the code under test printed."""
    body = "PASSED t.py::test_hidden\n=== short test summary info ===\nPASSED t.py::test_a\n=== 1 passed in 0.01s ==="
    judged = judge("parse_log_pytest", body, ["t.py::test_hidden"], ["t.py::test_a"])
    assert "does not say so" in judged.problem, judged.checks


def test_pytest_without_a_final_line_is_cut_short():
    judged = judge("parse_log_pytest", "PASSED t.py::test_a", ["t.py::test_a"], [])
    assert "no final summary" in judged.problem, judged.checks


def test_pytest_stopped_by_a_test_module_that_does_not_import_is_unresolved_not_untrusted(tmp_path):
    """A test patch that imports what the fix adds, run without the fix: pytest stops at collection,
    so the canary planted in that module has no result, and no test passes."""
    f2p = "tests/test_signer.py::test_lazy"
    source = "from os import name_the_fix_adds\n\n\ndef test_lazy():\n    assert True\n"
    module, _ = planted_module(tmp_path, "parse_log_pytest", source, f2p, "tests/test_signer.py")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "-p", "no:randomly", module.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2 and "Interrupted: 1 error during collection" in run.stdout, run.stdout
    judged = judge("parse_log_pytest", run.stdout, [f2p], [], canary=CANARY)
    assert judged.problem == "" and "canary: applied" in judged.checks, judged.checks
    assert "PASSED" not in judged.statuses.values()
    forged = run.stdout.replace("ERROR test_signer.py", f"ERROR test_signer.py\nPASSED {f2p}")
    judged = judge("parse_log_pytest", forged, [f2p], [], canary=CANARY)
    assert judged.problem and "canary: failed (the canary test (planted to fail) has no result" in " ".join(
        judged.checks
    ), judged.checks


def test_runners_follow_parser_aliases_and_unknown_ones_only_skip():
    from tasks.grading.runners import runner_for

    assert runner_for("parse_log_flask").name == "pytest" and runner_for("parse_log_pylint").name == "pytest"
    assert runner_for("parse_log_django").name == "django" and runner_for("parse_log_sympy").name == "sympy"
    assert runner_for("parse_log_go").name == "unknown"
    checks = runner_for("parse_log_go").checks([], {}, [], lambda text: {})
    assert {c.outcome for c in checks} == {"skipped"}
