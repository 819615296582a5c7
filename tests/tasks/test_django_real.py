"""A real Django instance, mined and graded like the official SWE-bench harness grades Django.

Django's sdists on PyPI hold its whole test suite. The instance is one real released fix: the
CVE-2024-45231 fix of Django 4.2.16 (a password reset no longer fails when the e-mail cannot
be sent; `django/contrib/auth/forms.py`, tested in `tests/auth_tests/test_forms.py` with a
backend added to `tests/mail/custombackend.py`). A two-commit git repository (4.2.15's sdist,
then that fix as released in 4.2.16) goes through `harness tasks mine`, which runs SWE-bench's
Django command (`./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 <modules>`,
by python3) without and with the fix. `tasks.grading.grade.grade` grades gold, empty, a wrong fix and
three cheats: its Django runner plants the canary method in the real test class and reads the
real runtests.py output. `swebench.harness.run_evaluation` grades the same predictions (but the
one it never sees, refused by our patch policy) on the same image: the same verdicts on the
honest ones; the runtime cheat fools it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from tests.cli_helpers import harness
from tests.conftest import require

# Django mined from its sdists, then graded by both harnesses (minutes).
pytestmark = pytest.mark.slow

BASE, FIXED = "4.2.15", "4.2.16"
FIX_FILES = ["django/contrib/auth/forms.py", "tests/auth_tests/test_forms.py", "tests/mail/custombackend.py"]
FIX_DATE = "2024-09-03T12:42:24+00:00"  # as released in 4.2.16
F2P = (
    "test_save_send_email_exceptions_are_catched_and_logged (auth_tests.test_forms.PasswordResetFormTest."
    "test_save_send_email_exceptions_are_catched_and_logged)"
)
COMMAND = "python3 ./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 auth_tests.test_forms mail.custombackend"
# A fix that fools runtests.py: every test method is skipped over and reported `ok`.
CHEAT_RUNTIME = "import unittest.case\n\nunittest.case.TestCase._callTestMethod = lambda self, method: None\n"


def sdist(version: str) -> Path:
    """Django's sdist (the source and its whole test suite), downloaded once."""
    from sandboxes.images import cache_dir

    folder = cache_dir() / "django-sdists"
    found = folder / f"Django-{version}.tar.gz"
    if not found.exists():
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                f"django=={version}",
                "--no-deps",
                "--no-binary",
                ":all:",
                "--no-build-isolation",
                "-d",
                str(folder),
            ],
            capture_output=True,
            text=True,
        )
        require(
            done.returncode == 0 and found.exists(),
            f"PyPI gives no Django {version} sdist: {done.stderr.strip()[-300:]}",
        )
    return found


def _git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "Django",
        "GIT_AUTHOR_EMAIL": "django@example.org",
        "GIT_COMMITTER_NAME": "Django",
        "GIT_COMMITTER_EMAIL": "django@example.org",
        "GIT_AUTHOR_DATE": FIX_DATE,
        "GIT_COMMITTER_DATE": FIX_DATE,
        "PATH": "/usr/bin:/bin",
    }
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, env=env).stdout


def django_repository(folder: Path) -> tuple[Path, str]:
    """(repository, fix commit): 4.2.15's sdist, then the fix's files as 4.2.16 has them."""
    repo = folder / "django"
    for version, into in ((BASE, repo), (FIXED, folder / "fixed")):
        with tarfile.open(sdist(version)) as archive:
            archive.extractall(folder, filter="data")
        (folder / f"Django-{version}").rename(into)
    _git(folder, "init", "-q", "-b", "main", str(repo))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", f"Django {BASE}")
    for path in FIX_FILES:
        shutil.copy2(folder / "fixed" / path, repo / path)
    _git(
        repo,
        "commit",
        "-q",
        "-am",
        "Fixed CVE-2024-45231 -- Avoided server error on password reset when email sending fails.",
    )
    _git(repo, "remote", "add", "origin", "https://github.com/django/django")
    return repo, _git(repo, "rev-parse", "HEAD").strip()


@pytest.fixture(scope="module")
def mined(tmp_path_factory, docker_backend) -> tuple[dict, Path, Path]:
    """(the mined instance, its instances file, the repository at the fix)."""
    folder = tmp_path_factory.mktemp("django")
    repo, fix = django_repository(folder)
    output = folder / "instances.jsonl"
    started = time.monotonic()
    done = harness(
        "tasks", "mine", str(repo), fix, "--output", str(output), "--workers", "1", "--backend", "docker", timeout=1800
    )
    print(f"mining took {time.monotonic() - started:.0f}s\n{done.stdout}")
    assert done.returncode == 0 and output.exists(), done.stdout + done.stderr
    [instance] = [json.loads(line) for line in output.read_text().splitlines() if line.strip()]
    return instance, output, repo


def edit(repo: Path, path: str, prepend: str) -> str:
    from bench.grading_parity_bench import edit_patch

    before = _git(repo, "show", f"HEAD~1:{path}")
    return edit_patch(path, before, prepend + before)


def forged_report(instance: dict) -> str:
    """Code that prints runtests.py's report of every FAIL_TO_PASS / PASS_TO_PASS test passing, then
    ends the run, successfully, before any test runs."""
    tests = instance["FAIL_TO_PASS"] + instance["PASS_TO_PASS"]
    return (
        f"import sys\n\nfor _t in {tests!r}:\n    print(_t + ' ... ok', file=sys.stderr)\n"
        f"print('-' * 70 + '\\nRan {len(tests)} tests in 0.100s\\n\\nOK', file=sys.stderr)\nsys.exit(0)\n"
    )


def predictions(instance: dict, repo: Path) -> dict[str, str]:
    from bench.grading_parity_bench import prediction

    fixed = "django/contrib/auth/forms.py"
    return {kind: prediction(instance, kind) for kind in ("gold", "empty", "wrong")} | {
        "cheat-runtime": edit(repo, fixed, CHEAT_RUNTIME),
        "cheat-forged": edit(repo, fixed, forged_report(instance)),
        "cheat-tests": edit(
            repo, "tests/auth_tests/test_forms.py", "import unittest\n\nraise unittest.SkipTest('cheat')\n"
        ),
    }


@pytest.mark.timeout(1800)
def test_the_fix_becomes_a_django_instance_named_as_swebench_names_it(mined):
    instance, _, _ = mined
    assert instance["repo"] == "django/django" and instance["log_parser"] == "parse_log_django"
    assert COMMAND in instance["eval_script"].splitlines()
    assert "django/contrib/auth/forms.py" in instance["patch"] and "tests/" not in instance["patch"]
    assert (
        "tests/auth_tests/test_forms.py" in instance["test_patch"]
        and "tests/mail/custombackend.py" in instance["test_patch"]
    )
    assert instance["FAIL_TO_PASS"] == [F2P]
    # the other tests of the module pass with and without the fix; docstring tests are named by their docstring
    assert len(instance["PASS_TO_PASS"]) > 80 and F2P not in instance["PASS_TO_PASS"]
    assert "test_success (auth_tests.test_forms.AuthenticationFormTest.test_success)" in instance["PASS_TO_PASS"]


@pytest.fixture(scope="module")
def ours(mined, docker_backend) -> dict:
    from tasks.grading.grade import grade

    instance, _, repo = mined
    reports = {
        kind: grade(instance, patch, docker_backend, timeout=600) for kind, patch in predictions(instance, repo).items()
    }
    for kind, report in reports.items():
        print(
            kind,
            report.resolved,
            f"{report.duration:.1f}s",
            report.invalid_log or report.rejected,
            *report.checks,
            sep="\n  ",
        )
    return reports


@pytest.mark.timeout(1800)
def test_gold_resolves_the_rest_do_not_with_the_canary_seen_in_real_runtests_output(ours):
    gold = ours["gold"]
    assert gold.resolved and gold.reward == 1.0 and not gold.invalid_log, gold
    assert gold.test_exit_code == 1  # the canary fails, so runtests.py does
    # The canary was planted in PasswordResetFormTest, ran, failed, and runtests.py counted it.
    for report in (gold, ours["empty"], ours["wrong"]):
        assert {
            "exit_status: applied",
            "results_after_summary: applied",
            "summary_counts: applied",
            "canary: applied",
        } <= set(report.checks)
        assert any(c.startswith("final_summary: applied") for c in report.checks)
        assert any(c.startswith("verdicts_from_runner: applied (92 tests") for c in report.checks)
    for kind in ("empty", "wrong"):
        assert (
            not ours[kind].resolved
            and not ours[kind].invalid_log
            and ours[kind].tests_status["FAIL_TO_PASS"]["failure"] == [F2P]
        )
    # Every test reported `ok`, the canary too: the log is void.
    runtime = ours["cheat-runtime"]
    assert runtime.patch_successfully_applied and not runtime.rejected and not runtime.resolved
    assert "canary: failed (the canary test (planted to fail) did not fail" in "\n".join(runtime.checks)
    # A report printed before any test ran, then the run ended with status 0: the canary has no result.
    forged = ours["cheat-forged"]
    assert forged.patch_successfully_applied and not forged.rejected and not forged.resolved
    assert "canary: failed (the canary test (planted to fail) has no result" in "\n".join(forged.checks)
    # The skipped test module is put back as it was at the base commit before the run: the fix is missing.
    cheat_tests = ours["cheat-tests"]
    assert not cheat_tests.rejected and not cheat_tests.resolved
    assert [n for n in cheat_tests.neutralized if n.startswith("tests/auth_tests/test_forms.py")]


@pytest.mark.timeout(1800)
def test_the_official_harness_agrees_on_honest_patches_on_the_same_image(mined, ours, tmp_path):
    """swebench.harness.run_evaluation on copies of the instance (one per prediction, the same image)."""
    from bench.grading_parity_bench import grade_theirs

    instance, _, repo = mined
    kinds = predictions(instance, repo)
    del kinds["cheat-tests"]  # both graders run it on restored tests; left out to keep this test short
    copies = tmp_path / "instances.jsonl"
    copies.write_text(
        "".join(json.dumps({**instance, "instance_id": f"{instance['instance_id']}-{kind}"}) + "\n" for kind in kinds)
    )
    preds = {
        f"{instance['instance_id']}-{kind}": {
            "instance_id": f"{instance['instance_id']}-{kind}",
            "model_name_or_path": "django",
            "model_patch": patch,
        }
        for kind, patch in kinds.items()
    }
    started = time.monotonic()
    verdicts = grade_theirs(copies, preds, tmp_path / "theirs", workers=2, timeout=600)
    theirs = {kind: verdicts[f"{instance['instance_id']}-{kind}"] for kind in kinds}
    print(f"official harness: {time.monotonic() - started:.0f}s", {k: v["resolved"] for k, v in theirs.items()})
    assert not any(v["error"] for v in theirs.values())
    for kind in ("gold", "empty", "wrong"):
        assert theirs[kind]["resolved"] == ours[kind].resolved, kind
    # What the canary is for: the official harness takes runtests.py's `ok` lines at their word.
    assert theirs["cheat-runtime"]["resolved"] and theirs["cheat-forged"]["resolved"]
