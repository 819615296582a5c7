"""`tasks.mining.mine` without Docker: diff splitting, pull requests found in a real git history, candidates
scanned from a history and the yield funnel, the
base-only repository, the flaky-test rule, each repository's runner, the order of dependency sets
tried, and the environment's choice of requirement files."""

from __future__ import annotations

import io
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from tasks.mining.mine import MineError, classify, dependency_attempts, make_instance, records_from_git, split_diff
from tasks.grading.patch_policy import is_test_path
from tasks.repos import base_only_git
from tasks.repos import git
from tasks.synth.project_image import declared_test_dependencies
from tests.conftest import require


def test_test_files_follow_swebench_rules():
    assert all(
        map(
            is_test_path,
            [
                "tests/test_x.py",
                "testing/logging/test_fixture.py",
                "pkg/tests/helpers.py",
                "src/test_util.py",
                "a/b_test.py",
                "conftest.py",
            ],
        )
    )
    assert not any(map(is_test_path, ["src/flask/blueprints.py", "docs/testing.rst", "requests/models.py"]))
    # Django's test framework is library code its fixes change; a top-level test/ folder holds tests
    assert not any(map(is_test_path, ["django/test/testcases.py", "django/test/utils.py"]))
    assert all(map(is_test_path, ["test/test_x.py", "test/helpers.py", "tests/forms_tests/models.py", "a/x_tests.py"]))


def test_split_diff_keeps_source_and_tests_and_drops_docs():
    diff = (
        "diff --git a/src/m.py b/src/m.py\n--- a/src/m.py\n+++ b/src/m.py\n@@ -1 +1 @@\n-a\n+b\n"
        "diff --git a/CHANGES.rst b/CHANGES.rst\n--- a/CHANGES.rst\n+++ b/CHANGES.rst\n@@ -1 +1 @@\n-x\n+y\n"
        "diff --git a/tests/test_m.py b/tests/test_m.py\n--- a/tests/test_m.py\n+++ b/tests/test_m.py\n@@ -1 +1 @@\n-c\n+d\n"
    )
    patch, tests = split_diff(diff)
    assert "src/m.py" in patch and "tests/" not in patch and "CHANGES" not in patch
    assert "tests/test_m.py" in tests and "src/m.py" not in tests and "CHANGES" not in tests


def test_sympy_runs_its_own_runner_read_by_the_official_parser_and_others_pytest():
    from swebench.harness.log_parsers import PARSER_REGISTRY

    test_patch = (
        "diff --git a/sympy/core/tests/test_basic.py b/sympy/core/tests/test_basic.py\n"
        "--- a/sympy/core/tests/test_basic.py\n+++ b/sympy/core/tests/test_basic.py\n@@ -1 +1,2 @@\n a\n+b\n"
    )
    record = {
        "instance_id": "sympy__sympy-1",
        "repo": "sympy/sympy",
        "base_commit": "abc",
        "patch": "",
        "test_patch": test_patch,
    }
    sympy = make_instance(record, "img")
    assert sympy["log_parser"] == "parse_log_sympy" and sympy["log_parser"] in PARSER_REGISTRY
    assert "python3 bin/test -C --verbose sympy/core/tests/test_basic.py" in sympy["eval_script"]
    other = make_instance({**record, "repo": "pallets/flask"}, "img")
    assert (
        other["log_parser"] == "parse_log_pytest"
        and "pytest -rA" in other["eval_script"]
        and "bin/test" not in other["eval_script"]
    )


def test_django_runs_runtests_on_test_modules_as_swebench_names_them():
    test_patch = (
        "diff --git a/tests/auth_tests/test_forms.py b/tests/auth_tests/test_forms.py\n"
        "--- a/tests/auth_tests/test_forms.py\n+++ b/tests/auth_tests/test_forms.py\n@@ -1 +1,2 @@\n a\n+b\n"
        "diff --git a/tests/mail/custombackend.py b/tests/mail/custombackend.py\n"
        "--- a/tests/mail/custombackend.py\n+++ b/tests/mail/custombackend.py\n@@ -1 +1,2 @@\n a\n+b\n"
    )
    record = {
        "instance_id": "django__django-1",
        "repo": "django/django",
        "base_commit": "abc",
        "patch": "",
        "test_patch": test_patch,
    }
    django = make_instance(record, "img")
    assert django["log_parser"] == "parse_log_django"
    assert (
        "python3 ./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 auth_tests.test_forms mail.custombackend"
        in django["eval_script"].splitlines()
    )


def test_dependencies_as_of_the_pull_request_are_tried_before_the_newest():
    assert dependency_attempts({"created_at": "2022-07-08T07:46:10+02:00"}) == ["2022-07-08T07:46:10+02:00", None]
    assert dependency_attempts({}) == [None]


def test_flaky_tests_are_left_out_and_only_fixed_tests_fail_to_pass():
    before = [
        {"t::fixed": "FAILED", "t::kept": "PASSED", "t::flaky": "PASSED", "t::broken": "FAILED"},
        {"t::fixed": "FAILED", "t::kept": "PASSED", "t::flaky": "FAILED", "t::broken": "FAILED"},
    ]
    after = [
        {"t::fixed": "PASSED", "t::kept": "PASSED", "t::flaky": "PASSED", "t::broken": "FAILED", "t::new": "PASSED"},
        {"t::fixed": "PASSED", "t::kept": "PASSED", "t::flaky": "PASSED", "t::broken": "FAILED", "t::new": "PASSED"},
    ]
    f2p, p2p, flaky = classify(before, after)
    assert f2p == ["t::fixed", "t::new"] and p2p == ["t::kept"] and flaky == ["t::flaky"]


@pytest.fixture
def project(tmp_path):
    """A repository where pull request #7 (a fix plus its test) was merged with a merge commit."""
    repo = tmp_path / "proj"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "remote", "add", "origin", "https://github.com/acme/proj.git")
    (repo / "proj.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_proj.py").write_text("from proj import add\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "start")
    git(repo, "checkout", "-q", "-b", "fix")
    (repo / "proj.py").write_text("def add(a, b):\n    return a + b\n")
    (repo / "tests" / "test_proj.py").write_text(
        "from proj import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
    )
    (repo / "NEWS").write_text("fixed add\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Fix add: it subtracted")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "fix", "-m", "Merge pull request #7 from someone/fix")
    (repo / "later.py").write_text("LATER = 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a later commit")
    return repo


def test_a_pull_request_by_number_or_merge_commit(project):
    [by_number] = records_from_git(str(project), ["7"])
    merge = git(project, "rev-parse", "HEAD~1").strip()
    [by_commit] = records_from_git(str(project), [merge])
    assert by_number["instance_id"] == by_commit["instance_id"] == "acme__proj-7"
    assert by_number["repo"] == "acme/proj" and by_number["merge_commit"] == merge
    assert by_number["base_commit"] == git(project, "rev-parse", "HEAD~1^1").strip()
    assert "a + b" in by_number["patch"] and "test_add" in by_number["test_patch"] and "NEWS" not in by_number["patch"]
    assert "Fix add: it subtracted" in by_number["problem_statement"]
    with pytest.raises(MineError, match="no merge of pull request #8"):
        records_from_git(str(project), ["8"])


def test_the_base_only_repository_holds_nothing_after_the_base(project, tmp_path):
    base = git(project, "rev-parse", "HEAD~1^1").strip()
    dot_git = base_only_git(project, base, tmp_path / "copy")
    copy = dot_git.parent
    assert git(copy, "log", "--all", "--format=%H").split() == [base]
    assert git(copy, "rev-parse", "HEAD").strip() == base
    assert git(copy, "reflog", "--all").strip() == ""
    objects = git(copy, "cat-file", "--batch-all-objects", "--batch-check=%(objecttype) %(objectname)").splitlines()
    assert [o.split()[1] for o in objects if o.startswith("commit")] == [base]
    fixed_blob = subprocess.run(
        ["git", "hash-object", "--stdin"],
        input="def add(a, b):\n    return a + b\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert fixed_blob in git(project, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
    assert fixed_blob not in "\n".join(objects)


def test_minimum_version_requirement_files_are_another_environment(tmp_path):
    (tmp_path / "requirements").mkdir()
    for name in ("tests.txt", "tests-pallets-min.txt", "docs.txt", "tests-minimal.txt"):
        (tmp_path / "requirements" / name).write_text("pytest\n")
    assert declared_test_dependencies(tmp_path)[2] == ["requirements/tests.txt"]


def test_a_dev_requirements_file_serves_when_no_test_file_exists(tmp_path):
    (tmp_path / "requirements-dev.txt").write_text("pytest\n")
    (tmp_path / "requirements-docs.txt").write_text("sphinx\n")
    assert declared_test_dependencies(tmp_path)[2] == ["requirements-dev.txt"]


def test_a_wheel_built_from_an_sdist_serves_the_next_wheelhouse(tmp_path, monkeypatch):
    from tasks.synth.wheels import _keep_built_wheels, _release, _reuse_built_wheel

    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    assert _release("zope.interface-5.4.0.zip") == _release("zope_interface-5.4.0-cp311-cp311-linux_x86_64.whl")
    first, second = tmp_path / "first", tmp_path / "second"
    for folder in (first, second):
        folder.mkdir()
        (folder / "cffi-1.15.0.tar.gz").write_text("sdist")
        (folder / "blinker-1.4.tar.gz").write_text("sdist")
    assert not _reuse_built_wheel(first / "cffi-1.15.0.tar.gz", first, "3.11")
    (first / "cffi-1.15.0-cp311-cp311-linux_x86_64.whl").write_text("built")  # what `pip wheel` made
    _keep_built_wheels([first / "cffi-1.15.0.tar.gz", first / "blinker-1.4.tar.gz"], first, "3.11")
    assert not _reuse_built_wheel(second / "cffi-1.15.0.tar.gz", second, "3.9")  # built for another Python
    assert _reuse_built_wheel(second / "cffi-1.15.0.tar.gz", second, "3.11")
    assert (second / "cffi-1.15.0-cp311-cp311-linux_x86_64.whl").read_text() == "built"
    assert not _reuse_built_wheel(second / "blinker-1.4.tar.gz", second, "3.11")  # no wheel was built for it


def test_a_kept_wheel_serves_only_an_sdist_with_the_same_bytes(tmp_path, monkeypatch):
    """A re-uploaded or locally built sdist has the name of the one a wheel was kept for, not its bytes."""
    from tasks.synth.wheels import _keep_built_wheels, _reuse_built_wheel

    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    first, same, other = tmp_path / "first", tmp_path / "same", tmp_path / "other"
    for folder, text in ((first, "sdist"), (same, "sdist"), (other, "rebuilt sdist")):
        folder.mkdir()
        (folder / "cffi-1.15.0.tar.gz").write_text(text)
    (first / "cffi-1.15.0-cp311-cp311-linux_x86_64.whl").write_text("built")
    _keep_built_wheels([first / "cffi-1.15.0.tar.gz"], first, "3.11")
    assert not _reuse_built_wheel(other / "cffi-1.15.0.tar.gz", other, "3.11")
    assert not list(other.glob("*.whl"))
    assert _reuse_built_wheel(same / "cffi-1.15.0.tar.gz", same, "3.11")
    assert (same / "cffi-1.15.0-cp311-cp311-linux_x86_64.whl").read_text() == "built"


def _sdist(path: Path, files: dict[str, str]) -> Path:
    """An sdist at `path` (.tar.gz or .zip) holding `files` (name -> text) under its top folder."""
    top = path.name.removesuffix(".tar.gz").removesuffix(".zip")
    if path.suffix == ".zip":
        with zipfile.ZipFile(path, "w") as archive:
            for name, text in files.items():
                archive.writestr(f"{top}/{name}", text)
    else:
        with tarfile.open(path, "w:gz") as archive:
            for name, text in files.items():
                data = text.encode()
                member = tarfile.TarInfo(f"{top}/{name}")
                member.size = len(data)
                archive.addfile(member, io.BytesIO(data))
    return path


def test_an_sdist_that_compiles_code_is_told_by_its_archive(tmp_path):
    from tasks.synth.wheels import _compiles_code

    setup = {"setup.py": "from setuptools import setup\nsetup()\n", "PKG-INFO": "Name: x\n"}
    assert not _compiles_code(_sdist(tmp_path / "pure-1.0.tar.gz", {**setup, "pure/__init__.py": ""}))
    assert _compiles_code(_sdist(tmp_path / "cext-1.0.tar.gz", {**setup, "src/_speedups.c": "int x;\n"}))
    assert _compiles_code(_sdist(tmp_path / "cython-1.0.tar.gz", {**setup, "cython/_fast.pyx": "def f(): pass\n"}))
    assert _compiles_code(_sdist(tmp_path / "zipped-1.0.zip", {**setup, "zipped/ext.cpp": "int x;\n"}))
    assert not _compiles_code(_sdist(tmp_path / "zipped_pure-1.0.zip", {**setup, "zipped_pure/__init__.py": ""}))
    parser = {**setup, "parser/__init__.py": "", "tests/c_files/example.c": "int x;\n"}  # test data, not a build
    assert not _compiles_code(_sdist(tmp_path / "parser-1.0.tar.gz", parser))
    rust = '[build-system]\nrequires = ["maturin>=1,<2"]\nbuild-backend = "maturin"\n'
    assert _compiles_code(_sdist(tmp_path / "rusty-1.0.tar.gz", {"pyproject.toml": rust}))
    flit = '[build-system]\nrequires = ["flit_core>=3.2"]\nbuild-backend = "flit_core.buildapi"\n'
    assert not _compiles_code(_sdist(tmp_path / "flat-1.0.tar.gz", {"pyproject.toml": flit, "flat.py": ""}))
    # sources made at build time: no C file in the archive, the extension declared
    cffi = {"setup.py": 'setup(cffi_modules=["build_ffi.py:ffi"])\n', "build_ffi.py": "", "PKG-INFO": "Name: x\n"}
    assert _compiles_code(_sdist(tmp_path / "ffi-1.0.tar.gz", cffi))
    cython = {"setup.py": 'setup(ext_modules=cythonize("pkg/*.py"))\n', "pkg/fast.py": "", "PKG-INFO": "Name: x\n"}
    assert _compiles_code(_sdist(tmp_path / "compiled-1.0.zip", cython))
    declared = '[tool.setuptools]\next-modules = [{name = "m._ext", sources = ["gen/ext.c"]}]\n'
    assert _compiles_code(_sdist(tmp_path / "declared-1.0.tar.gz", {"pyproject.toml": declared}))
    nested = {**setup, "docs/setup.py": "ext_modules = []\n", "nested/__init__.py": ""}  # not the top folder's
    assert not _compiles_code(_sdist(tmp_path / "nested-1.0.tar.gz", nested))


def test_the_cheat_edits_the_file_of_a_test_named_by_its_function_alone():
    from bench.grading_parity_bench import failing_test_file

    test_patch = "".join(
        f"diff --git a/{p} b/{p}\n--- a/{p}\n+++ b/{p}\n@@ -1 +1,3 @@\n x\n+def {name}():\n+    pass\n"
        for p, name in (("sympy/a/tests/test_a.py", "test_other"), ("sympy/b/tests/test_b.py", "test_issue_1"))
    )
    assert failing_test_file({"FAIL_TO_PASS": ["test_issue_1"], "test_patch": test_patch}) == "sympy/b/tests/test_b.py"
    assert (
        failing_test_file({"FAIL_TO_PASS": ["tests/test_x.py::test_y"], "test_patch": test_patch}) == "tests/test_x.py"
    )


# ----------------------------------------------------------------------------- candidates from history

GIT_HISTORY = next(
    (
        p
        for p in (Path(__file__).resolve().parents[3] / "shared" / "git-history", Path("/work/shared/git-history"))
        if p.is_dir()
    ),
    None,
)


def test_history_candidates_change_code_and_tests(project):
    from tasks.mining.history import candidates

    found, funnel = candidates(str(project), None, None)
    assert [r["instance_id"] for r in found] == ["acme__proj-7"]  # the merge, not the branch's own commit
    assert found[0]["base_commit"] == git(project, "rev-parse", "HEAD~1^1").strip()
    assert funnel.counts["commits scanned"] == 3 and funnel.counts["candidates"] == 1
    assert funnel.reasons["candidates"] == {"first commit (no parent)": 1, "no test change": 1}


def test_a_history_without_candidates_is_a_clear_error(tmp_path):
    from tasks.mining.history import candidates

    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "m.py").write_text("X = 1\n")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "only")
    with pytest.raises(MineError, match=r"no candidate .*1 commits scanned.*first commit \(no parent\)"):
        candidates(str(tmp_path), None, None)


def test_a_real_bundle_is_scanned_newest_first_up_to_the_limit():
    from tasks.mining.history import candidates

    require(GIT_HISTORY is not None, "../shared/git-history is missing")
    found, funnel = candidates(str(GIT_HISTORY / "itsdangerous.bundle"), "2024-01-01", 2)
    assert [r["instance_id"] for r in found] == ["local__itsdangerous-405", "local__itsdangerous-378"]
    assert all(r["patch"] and r["test_patch"] and r["created_at"] >= "2024" for r in found)
    counts = funnel.reasons["candidates"]
    assert counts["beyond --limit"] == 1 and funnel.counts["commits scanned"] == sum(counts.values()) + 2


def test_the_funnel_counts_each_stage_and_stops_on_one_systemic_reason():
    from tasks.mining.history import Funnel
    from tasks.mining.mine import Mined, systemic_stop

    broken = [
        Mined(f"r-{i}", reason=f"environment (as of 2024-0{i}-01): installing x failed: pip said {i}") for i in range(3)
    ]
    assert 'no further than "candidates", each for "environment: installing x failed"' in systemic_stop(broken, 3)
    assert systemic_stop(broken, 4) == "" and systemic_stop(broken, 0) == ""
    ran = Mined(
        "r-3", reason="no test fails without the fix and passes with it (newest dependencies)", reached="tests ran"
    )
    assert systemic_stop([*broken[:2], ran], 3) == ""
    funnel = Funnel()
    for mined in [*broken, ran, Mined("r-4", instance={"x": 1}, reached="validated")]:
        funnel.add(mined)
    assert [funnel.counts[s] for s in ("environment built", "tests ran", "FAIL_TO_PASS >= 1", "validated")] == [
        2,
        2,
        1,
        1,
    ]
    assert funnel.reasons["environment built"] == {"environment: installing x failed": 3}
    assert funnel.reasons["FAIL_TO_PASS >= 1"] == {"no test fails without the fix and passes with it": 1}


def test_requirement_files_are_read_without_the_project_itself_and_setup_py_tests_require_counts(tmp_path):
    from tasks.synth.project_image import requirement_file_lines

    (tmp_path / "requirements").mkdir()
    (tmp_path / "test-requirements.txt").write_text(
        "-r requirements/base.txt\n# a comment\nproj @ file:.\n-e .\npytest==8.1 \\\n    --hash=sha256:abc\n"
        "hypothesis>=6 ; python_version > '3'  # why\n-c constraints.txt\n"
    )
    (tmp_path / "requirements" / "base.txt").write_text("attrs\n-r ../test-requirements.txt\n")
    assert requirement_file_lines(tmp_path, "test-requirements.txt") == [
        "attrs",
        "pytest==8.1",
        "hypothesis>=6 ; python_version > '3'",
    ]
    (tmp_path / "setup.py").write_text(
        "from setuptools import setup\ntests = ['pytest>=3', 'strict_rfc3339']\n"
        "setup(name='x', tests_require=tests, extras_require={'testing': ['mock']})\n"
    )
    extras, requirements, _ = declared_test_dependencies(tmp_path)
    assert extras == ["testing"] and requirements == ["pytest>=3", "strict_rfc3339"]


def test_a_requirement_file_pin_wins_over_setup_py_tests_require(tmp_path):
    """As in requests: tests_require pins pytest-httpbin 0.0.7, requirements-dev.txt 1.0.0; both at once resolve nothing."""
    from tasks.synth.project_image import _test_requirements

    (tmp_path / "requirements-dev.txt").write_text("pytest>=2.8.0,<=6.2.5\npytest_httpbin==1.0.0\n")
    (tmp_path / "setup.py").write_text(
        "from setuptools import setup\n"
        "setup(name='x', tests_require=['pytest-httpbin==0.0.7', 'pytest-mock', 'PySocks>=1.5.6'])\n"
    )
    _, requirements, files = declared_test_dependencies(tmp_path)
    assert _test_requirements(tmp_path, requirements, files) == [
        "pytest_httpbin==1.0.0",
        "pytest-mock",
        "PySocks>=1.5.6",
        "pytest>=2.8.0,<=6.2.5",
    ]


def test_a_lock_file_s_exact_pins_can_be_loosened_to_names(tmp_path):
    """As in trio: test-requirements.txt is a pip-compile lock (certifi==2026.10.23, ...); where a pinned release
    cannot be had, the environment is built again with the pins loosened, and only the exact ones change."""
    from tasks.synth.project_image import _test_requirements, pinned_test_requirements

    (tmp_path / "test-requirements.txt").write_text(
        "certifi==2026.10.23\n"
        'attrs==23.1.0 ; python_version >= "3.9"\n'
        "pytest>=7,<9\n"
        "cffi>=1.14,==1.17.1\n"
        "trio @ file:.\n"
    )
    _, requirements, files = declared_test_dependencies(tmp_path)
    assert files == ["test-requirements.txt"]
    assert _test_requirements(tmp_path, requirements, files, loose=True) == [
        "certifi",
        'attrs; python_version >= "3.9"',
        "pytest>=7,<9",
        "cffi>=1.14",
    ]
    assert pinned_test_requirements(tmp_path) == [
        "certifi==2026.10.23",
        'attrs==23.1.0 ; python_version >= "3.9"',
        "cffi>=1.14,==1.17.1",
    ]
    (tmp_path / "test-requirements.txt").write_text("pytest>=7\n")
    assert pinned_test_requirements(tmp_path) == []
