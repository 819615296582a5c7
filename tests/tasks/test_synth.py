"""Synthetic tasks (`tasks.synth`): mutations one by one, then the pipeline on a real project.

The unit tests need nothing but Python. The end-to-end tests build a small pure-Python
package as a git repository, synthesize a few tasks with real containers, and grade them:
the gold patch must resolve every instance and the empty patch none.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from tasks.synth import SynthError, synthesize
from tasks.swe import TEST_COMMAND
from tasks.synth.project_image import declared_test_dependencies, detect_test_commands
from tasks.synth.mutations import (
    KINDS,
    compiles,
    file_mutations,
    find_mutations,
    order,
    unified_patch,
)
from tasks.synth.statement import failures, write_statement
from tasks.synth.testlog import error_kind

# ----------------------------------------------------------------------------- mutations

SAMPLE = textwrap.dedent('''\
    """A module with one of everything."""
    import math  # comments and   odd   spacing stay as they are

    class ParseError(ValueError):
        pass


    def clamp(value, low, high):
        """Clamp value into [low, high]."""
        if value < low and low <= high:   # the lower bound
            return low
        elif value > high or value == high:
            return high
        else:
            return value


    def total(items):
        result = 0
        for i in range(1, len(items)):
            result += items[i] * 2
        return result - items[0]


    def first_word(text):
        if not text:
            raise ParseError("empty")
        words = text.split(" ")
        return words[0] if words else None


    def scaled(x, factor=1.5):
        return math.pow(x, factor) / 2.0 if x is not None else 0
''').encode()

EXPECTED = {  # kind -> one edit it must produce (old text -> new text around the site)
    "flip_comparison": ("value < low", "value <= low"),
    "flip_boolean": ("value < low and low <= high", "value < low or low <= high"),
    "flip_arithmetic": ("result - items[0]", "result + items[0]"),
    "flip_augmented_assignment": ("result += items", "result -= items"),
    "off_by_one": ("range(1, len(items))", "range(1, len(items) - 1)"),
    "remove_statement": ('words = text.split(" ")', "pass"),
    "remove_else": ("        return high\n    else:\n        return value\n", "        return high\n"),
    "swap_arguments": ("math.pow(x, factor)", "math.pow(factor, x)"),
    "change_constant": ("result = 0", "result = 1"),
    "negate_condition": ("if not text:", "if text:"),
    "wrong_exception": ('raise ParseError("empty")', 'raise Exception("empty")'),
    "early_return": (
        '"""Clamp value into [low, high]."""\n    if',
        '"""Clamp value into [low, high]."""\n    return None\n    if',
    ),
}


def _mutants(kind: str):
    return [m for m in file_mutations(SAMPLE, "pkg/mod.py") if m.kind == kind]


def test_there_are_at_least_ten_kinds_and_each_is_covered_here():
    assert len(KINDS) >= 10
    assert set(EXPECTED) == set(KINDS)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_makes_the_expected_edit_and_nothing_else(kind):
    mutants = _mutants(kind)
    assert mutants, f"no {kind} mutation found"
    old, new = EXPECTED[kind]
    results = [m.apply(SAMPLE).decode() for m in mutants]
    assert any(SAMPLE.decode().replace(old, new, 1) == r for r in results), [m.description for m in mutants]
    for mutant, result in zip(mutants, results):
        data = result.encode()
        assert data != SAMPLE
        assert data[: mutant.start] == SAMPLE[: mutant.start]  # byte-identical before the node
        assert data[len(data) - (len(SAMPLE) - mutant.end) :] == SAMPLE[mutant.end :]  # and after it
        assert compiles(data, "mod.py"), mutant.description
        assert ast.dump(ast.parse(data)) != ast.dump(ast.parse(SAMPLE)), mutant.description
        assert mutant.function in {"clamp", "total", "first_word", "scaled"}


def test_the_comment_and_spacing_of_untouched_lines_survive():
    for mutant in file_mutations(SAMPLE, "pkg/mod.py"):
        text = mutant.apply(SAMPLE).decode()
        assert "import math  # comments and   odd   spacing stay as they are" in text


def test_operator_flips_touch_only_the_operator():
    mutant = next(m for m in _mutants("flip_comparison") if m.description == "`<` -> `<=`")
    assert (mutant.end - mutant.start, mutant.text) == (1, "<=")


def test_order_is_deterministic_with_a_seed_and_alternates_kinds():
    mutants = file_mutations(SAMPLE, "pkg/mod.py")
    first, again, other = order(mutants, 7), order(mutants, 7), order(mutants, 8)
    assert [m.id for m in first] == [m.id for m in again]
    assert [m.id for m in first] != [m.id for m in other]
    assert sorted(m.id for m in first) == sorted(m.id for m in mutants)
    assert len({m.kind for m in first[: len(KINDS)]}) == len(KINDS)  # one of each kind first
    assert [m.id for m in file_mutations(SAMPLE, "pkg/mod.py")] == [m.id for m in mutants]


def test_no_duplicate_edits_and_uncompilable_ones_are_detected():
    mutants = file_mutations(SAMPLE, "pkg/mod.py")
    assert len({m.apply(SAMPLE) for m in mutants}) == len(mutants)
    async_gen = b"async def agen():\n    yield 1\n"
    early = next(m for m in file_mutations(async_gen, "a.py") if m.kind == "early_return")
    assert not compiles(early.apply(async_gen), "a.py")  # `return None` in an async generator


def test_test_files_and_fstrings_are_not_mutated(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "pkg" / "core.py").write_text("def f(x):\n    return f'{x + 1}'\n")
    (tmp_path / "pkg" / "test_core.py").write_text("def test_f():\n    assert 1 + 1 == 2\n")
    (tmp_path / "tests" / "helpers.py").write_text("def g(x):\n    return x + 1\n")
    mutants = find_mutations(tmp_path)
    assert {m.path for m in mutants} == {"pkg/core.py"}
    assert {m.kind for m in mutants} == {"remove_statement", "early_return"}  # nothing inside the f-string


def test_unified_patch_applies_with_git(tmp_path):
    (tmp_path / "pkg").mkdir()
    source = b"def f(x):\n    return x < 1"  # no newline at the end of the file
    (tmp_path / "pkg" / "m.py").write_bytes(source)
    mutant = next(m for m in file_mutations(source, "pkg/m.py") if m.kind == "flip_comparison")
    patch = unified_patch("pkg/m.py", source, mutant.apply(source))
    done = subprocess.run(["git", "apply", "-"], input=patch, text=True, cwd=tmp_path, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "pkg" / "m.py").read_bytes() == mutant.apply(source)


def test_the_bugged_repository_is_made_from_paths_relative_to_the_working_directory(tmp_path, monkeypatch):
    """`harness tasks synth --output NAME.jsonl` gives relative paths; git applies the patch inside the new repo."""
    from tasks.repos import make_bugged_repo

    (tmp_path / "pkg").mkdir()
    source = b"def f(x):\n    return x < 1\n"
    (tmp_path / "pkg" / "m.py").write_bytes(source)
    mutant = next(m for m in file_mutations(source, "m.py") if m.kind == "flip_comparison")
    (tmp_path / "bug.patch").write_text(unified_patch("m.py", source, mutant.apply(source)))
    monkeypatch.chdir(tmp_path)
    base_commit, gold = make_bugged_repo(Path("pkg"), Path("bug.patch"), Path("work/repo"))
    assert len(base_commit) == 40 and gold.startswith("diff --git a/m.py b/m.py")
    assert (tmp_path / "work" / "repo" / "m.py").read_bytes() == mutant.apply(source)  # the bug, committed


# ----------------------------------------------------------------------------- statements

LOG = textwrap.dedent("""\
    =================================== FAILURES ===================================
    _________________________________ test_clamp __________________________________
    tests/test_mod.py:5: in test_clamp
        assert clamp(5, 0, 3) == 3
    pkg/mod.py:12: in clamp
        return value
    E   assert 5 == 3
    E    +  where 5 = clamp(5, 0, 3)
    ______________________________ TestWords.test_one ______________________________
    tests/test_mod.py:20: in test_one
        first_word("")
    E   Exception: empty
    =========================== short test summary info ============================
    PASSED tests/test_mod.py::test_total
    FAILED tests/test_mod.py::test_clamp - assert 5 == 3
    FAILED tests/test_mod.py::TestWords::test_one - Exception: empty
    ========================= 2 failed, 1 passed in 0.05s ==========================
""")


def test_statement_names_the_failing_tests_but_not_the_file_or_the_fix():
    found = failures(
        LOG, ["tests/test_mod.py::test_clamp", "tests/test_mod.py::TestWords::test_one"], hide="pkg/mod.py"
    )
    assert found[0]["message"] == "assert 5 == 3"
    assert found[0]["details"] == ["assert clamp(5, 0, 3) == 3", "assert 5 == 3", "+  where 5 = clamp(5, 0, 3)"]
    assert found[1]["details"] == ['first_word("")', "Exception: empty"]
    text = write_statement({"project": "mod", "seed": 3, "failures": found})
    assert "tests/test_mod.py::test_clamp" in text and "Exception: empty" in text
    assert "pkg/mod.py" not in text and "return value" not in text
    assert write_statement({"project": "mod", "seed": 3, "failures": found}) == text


def test_error_kind():
    assert error_kind("assert 5 == 3") == "AssertionError"
    assert error_kind("KeyError: 'x'") == "KeyError"
    assert error_kind("Failed: DID NOT RAISE <class 'ValueError'>") == "Failed"


# ----------------------------------------------------------------------------- environment


def test_test_requirements_and_command_detection(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        textwrap.dedent("""\
        [project]
        name = "x"
        [project.optional-dependencies]
        test = ["pytest-cov"]
        docs = ["sphinx"]
        [dependency-groups]
        testing = ["freezegun", {include-group = "base"}]
        base = ["attrs"]
        lint = ["ruff"]
    """)
    )
    (tmp_path / "requirements-test.txt").write_text("hypothesis\n")
    assert declared_test_dependencies(tmp_path) == (["test"], ["freezegun", "attrs"], ["requirements-test.txt"])
    with pytest.raises(SynthError, match="no tests"):
        detect_test_commands(tmp_path)
    # As in trio's sdist: tests/ holds helpers only, the tests are inside the package; pytest discovers them.
    (tmp_path / "tests" / "cython").mkdir(parents=True)
    (tmp_path / "tests" / "check_aliases.py").write_text("")
    (tmp_path / "src" / "x" / "_tests").mkdir(parents=True)
    (tmp_path / "src" / "x" / "_tests" / "test_core.py").write_text("def test_x():\n    pass\n")
    assert detect_test_commands(tmp_path)[0] == TEST_COMMAND
    (tmp_path / "tests" / "test_x.py").write_text("def test_x():\n    pass\n")
    first, fallback = detect_test_commands(tmp_path)
    assert first.endswith(" tests") and fallback == first + " -o addopts=''"


def test_dev_groups_of_poetry_pdm_and_hatch_serve_where_none_names_tests(tmp_path):
    from tasks.synth.project_image import distribution_name, install_command

    (tmp_path / "pyproject.toml").write_text(
        textwrap.dedent("""\
        [tool.poetry]
        name = "poetic"
        [tool.poetry.dev-dependencies]
        python = "^3.8"
        pytest = "^7.1"
        sphinx = "*"
        [tool.poetry.group.lint.dependencies]
        ruff = "0.1.0"
        [tool.pdm.dev-dependencies]
        dev = ["freezegun>=1", "-e file:///${PROJECT_ROOT}/sub"]
        [tool.hatch.envs.default]
        dependencies = ["coverage[toml]", "mkdocs"]
    """)
    )
    _, requirements, _ = declared_test_dependencies(tmp_path)
    assert requirements == ["pytest>=7.1", "freezegun>=1", "coverage[toml]"]  # docs and lint tools left out
    assert distribution_name(tmp_path) == "poetic"
    (tmp_path / "pyproject.toml").write_text(
        '[tool.poetry]\nname = "p"\n[tool.poetry.group.test.dependencies]\n'
        'pytest-mock = {version = "~3.6", extras = ["x"]}\nfoo = "1.2"\n'
        '[build-system]\nrequires = ["poetry-core"]\n'
    )
    assert declared_test_dependencies(tmp_path)[1] == ["pytest-mock[x]>=3.6", "foo==1.2"]
    assert " -e . " in install_command(tmp_path, "", editable=True)
    regular = install_command(tmp_path, "", editable=False)
    assert " -e " not in regular and regular.endswith("python3 /tmp/source_on_path.py 'p' /testbed")


def test_test_commands_pin_the_hash_seed_and_turn_random_order_off():
    from tasks.synth.validate import pin_test_ids

    assert pin_test_ids("python3 -m pytest -rA tests") == "PYTHONHASHSEED=0 python3 -m pytest -rA tests -p no:randomly"
    assert pin_test_ids("PYTHONHASHSEED=3 python3 -m unittest") == "PYTHONHASHSEED=3 python3 -m unittest"
    assert pin_test_ids(pin_test_ids("pytest")) == pin_test_ids("pytest")


def _verdict(status: str, reason: str = "", detail: str = "") -> dict:
    return {"id": f"m{reason}{status}", "kind": "k", "status": status, "reason": reason, "detail": detail}


def test_early_stop_names_the_one_systemic_reason():
    from tasks.synth.pipeline import systemic_failure

    missing = _verdict("rejected", "tests did not run", "40 baseline tests missing, e.g. tests/t.py::test_x[3-a]")
    uncompiled = _verdict("rejected", "does not compile")
    stop = systemic_failure([uncompiled] + [missing] * 5, 5)
    assert "first 5 candidates" in stop and '"tests did not run"' in stop and "PYTHONHASHSEED" in stop
    assert "tests/t.py::test_x[3-a]" in stop  # the last rejection's detail
    assert systemic_failure([missing] * 4, 5) == ""  # not enough judged yet
    assert systemic_failure([missing] * 4 + [_verdict("rejected", "no test fails")], 5) == ""  # two reasons
    assert systemic_failure([_verdict("rejected", "no test fails")] * 9, 5) == ""  # about the bugs, not systemic
    assert systemic_failure([_verdict("kept")] + [missing] * 9, 5) == ""  # one kept: the pipeline works
    assert systemic_failure([missing] * 9, 0) == ""  # switched off
    assert "time limit" in systemic_failure([_verdict("rejected", "timeout")] * 3, 3, timeout=30)
    assert "not deterministic" in systemic_failure([_verdict("flaky", "the second run failed other tests")] * 3, 3)


# ----------------------------------------------------------------------------- end to end

PACKAGE = {
    "pyproject.toml": """\
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "minicalc"
        version = "0.1.0"

        [tool.setuptools]
        packages = ["minicalc"]
    """,
    "minicalc/__init__.py": """\
        from .core import clamp, mean, running_total, words, Stack
    """,
    "minicalc/core.py": """\
        def clamp(value, low, high):
            if value < low:
                return low
            if value > high:
                return high
            return value


        def mean(values):
            if not values:
                raise ValueError("mean of nothing")
            return sum(values) / len(values)


        def running_total(values):
            out, acc = [], 0
            for v in values:
                acc += v
                out.append(acc)
            return out


        def words(text, limit=None):
            parts = [w for w in text.split() if w]
            return parts[:limit] if limit is not None else parts


        class Stack:
            def __init__(self):
                self.items = []

            def push(self, item):
                self.items.append(item)
                return len(self.items)

            def pop(self):
                if not self.items:
                    raise IndexError("pop from empty stack")
                return self.items.pop()
    """,
    "tests/test_core.py": """\
        import socket

        import pytest

        from minicalc import Stack, clamp, mean, running_total, words


        def test_clamp_inside():
            assert clamp(2, 0, 5) == 2

        def test_clamp_low():
            assert clamp(-1, 0, 5) == 0

        def test_clamp_high():
            assert clamp(9, 0, 5) == 5

        def test_clamp_edges():
            assert clamp(0, 0, 5) == 0 and clamp(5, 0, 5) == 5

        def test_mean():
            assert mean([1, 2, 3, 6]) == 3

        def test_mean_empty():
            with pytest.raises(ValueError):
                mean([])

        def test_running_total():
            assert running_total([1, 2, 3]) == [1, 3, 6]

        def test_words():
            assert words("a  b c") == ["a", "b", "c"]

        def test_words_limit():
            assert words("a b c", limit=2) == ["a", "b"]

        def test_stack_push_counts():
            s = Stack()
            assert s.push(1) == 1 and s.push(2) == 2

        def test_stack_pop_order():
            s = Stack()
            s.push(1)
            s.push(2)
            assert s.pop() == 2 and s.pop() == 1

        def test_stack_pop_empty():
            with pytest.raises(IndexError):
                Stack().pop()

        def test_needs_the_network():
            socket.create_connection(("192.0.2.1", 80), timeout=2)


        # Ids that follow set order, which follows the hash seed (as isodate's do): without a
        # pinned seed each run names them differently (720 orders) and the baseline excludes them.
        @pytest.mark.parametrize("pair", list(enumerate({"alpha", "beta", "gamma", "delta", "eta", "iota"})),
                                 ids=lambda pair: f"{pair[0]}-{pair[1]}")
        def test_hash_ordered_ids(pair):
            assert pair[1].isalpha()
    """,
    # A module needing an optional dependency the environment lacks (pyparsing's railroad
    # diagrams): pytest stops the whole session on it unless it is left out.
    "tests/test_diagrams.py": """\
        import railroad_not_installed


        def test_diagram():
            assert railroad_not_installed
    """,
}


def make_package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"]):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    return root


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory, docker_backend):
    root = make_package(tmp_path_factory.mktemp("repos") / "minicalc", PACKAGE)
    output = tmp_path_factory.mktemp("out") / "minicalc.jsonl"
    events = []
    summary = synthesize(
        str(root),
        output,
        max_tasks=4,
        max_candidates=14,
        seed=1,
        workers=2,
        backend=docker_backend,
        on_event=events.append,
    )
    return root, output, summary, events


def test_synthesized_instances_are_valid_swe_bench_records(synthesized):
    from tasks.taskset import load_tasks, validate_records

    _, output, summary, events = synthesized
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert 1 <= len(records) == summary.kept <= 4
    assert validate_records(records) == []
    assert [t.id for t in load_tasks(str(output))] == [r["instance_id"] for r in records]
    for record in records:
        assert record["instance_id"].startswith("minicalc__minicalc-synth-")
        assert record["test_patch"] == "" and record["FAIL_TO_PASS"]
        assert not set(record["FAIL_TO_PASS"]) & set(record["PASS_TO_PASS"])
        assert "minicalc/core.py" not in record["problem_statement"]
        assert record["FAIL_TO_PASS"][0] in record["problem_statement"]
    # The hash-ordered ids are the same in every run: PYTHONHASHSEED is pinned in the test command.
    assert summary.baseline_excluded == {"tests/test_core.py::test_needs_the_network": "FAILED/FAILED"}
    assert summary.baseline_passing == 18 and summary.test_command.startswith("PYTHONHASHSEED=0 ")
    assert summary.test_command.endswith(" --ignore=tests/test_diagrams.py")
    assert all("PYTHONHASHSEED=0 " in r["eval_script"] and "-p no:randomly" in r["eval_script"] for r in records)
    assert summary.decided <= 14 and summary.kept + summary.flaky + sum(summary.rejected.values()) == summary.decided
    written = json.loads(Path(f"{output}.summary.json").read_text())
    assert written["kept"] == summary.kept and set(written["by_kind"]) <= set(KINDS)
    assert {e.stage for e in events} >= {"source", "image", "baseline", "mutations", "candidate", "done"}


def test_gold_resolves_each_instance_and_the_empty_patch_does_not(synthesized, docker_backend):
    from tasks.grading.grade import grade

    _, output, _, _ = synthesized
    for record in (json.loads(line) for line in output.read_text().splitlines()):
        gold = grade(record, record["patch"], docker_backend)
        assert gold.resolved, (record["instance_id"], gold.to_dict())
        empty = grade(record, "", docker_backend)
        assert not empty.resolved and empty.tests_status["FAIL_TO_PASS"]["failure"]


def test_a_gold_episode_submits_the_gold_patch_and_nothing_the_install_wrote(synthesized, docker_backend):
    """The editable install leaves a `minicalc.egg-info/` in the work tree, which the project does not ignore:
    it is the state the task starts from, never part of a submission."""
    from harness.episode import run_episode
    from harness.episode_check import episode_check
    from harness.policies.scripted import GoldPolicy
    from harness.policy import Sampling
    from tasks.swe import instance_to_task

    _, output, _, _ = synthesized
    record = json.loads(output.read_text().splitlines()[0])
    gold = run_episode(instance_to_task(record), GoldPolicy(), Sampling(), backend=docker_backend)
    assert gold.model_patch == record["patch"] and gold.reward_details["verdict"] == "resolved"
    assert episode_check(record, docker_backend) == ""


# An sdist as setuptools makes it: PKG-INFO and an `.egg-info` folder whose SOURCES.txt the install rewrites
# (it lists the files of the sdist's build; the install in the image lists those it finds).
SDIST = {
    **{name: text for name, text in PACKAGE.items() if name != "tests/test_diagrams.py"},
    "PKG-INFO": "Metadata-Version: 2.1\nName: minicalc\nVersion: 0.1.0\n",
    "minicalc.egg-info/PKG-INFO": "Metadata-Version: 2.1\nName: minicalc\nVersion: 0.1.0\n",
    "minicalc.egg-info/SOURCES.txt": "pyproject.toml\nminicalc/__init__.py\n",
    "minicalc.egg-info/dependency_links.txt": "\n",
    "minicalc.egg-info/top_level.txt": "minicalc\n",
}


@pytest.mark.slow
def test_a_task_from_an_sdist_with_egg_info_resolves_with_gold_through_eval_and_not_with_empty(
    tmp_path, docker_backend
):
    """`harness tasks synth` keeps a task only when its gold episode resolves it; `harness eval` then agrees."""
    from sandboxes import SandboxSpec
    from tests.cli_helpers import harness

    root = tmp_path / "minicalc-0.1.0"
    for name, text in SDIST.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    output = tmp_path / "sdist.jsonl"
    done = harness(
        "tasks", "synth", "--repo", str(root), "--output", str(output), "--max-tasks", "1", "--max-candidates", "8",
        "--seed", "1", "--backend", "docker",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (record,) = [json.loads(line) for line in output.read_text().splitlines()]
    with docker_backend.create(SandboxSpec(image=record["image"], workdir="/testbed")) as sandbox:
        changed = sandbox.exec("git status --porcelain --untracked-files=no").output.split()[1::2]
    assert "minicalc.egg-info/SOURCES.txt" in changed  # the install rewrote tracked files
    for checkpoint, verdict in (("gold", "resolved"), ("empty", "empty_patch")):
        run = tmp_path / checkpoint
        done = harness("eval", "--checkpoint", checkpoint, "--tasks", str(output), "--output", str(run))
        assert done.returncode == 0, done.stdout + done.stderr
        (row,) = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
        assert row["verdict"] == verdict and row["resolved"] == (checkpoint == "gold"), row
        if checkpoint == "gold":
            assert row["model_patch"] == record["patch"]
        assert f"verdicts: {verdict} 1" in (run / "report.md").read_text()


def test_the_instance_repository_has_one_commit_with_the_bug(synthesized, docker_backend):
    from sandboxes import SandboxSpec

    _, output, _, _ = synthesized
    record = json.loads(output.read_text().splitlines()[0])
    with docker_backend.create(SandboxSpec(image=record["image"], workdir="/testbed")) as sandbox:
        history = sandbox.exec("git log --format=%H").output.split()
        status = sandbox.exec("git status --porcelain --untracked-files=no").output.strip()
    assert history == [record["base_commit"]] and status == ""


def test_a_resumed_run_redoes_nothing(synthesized, docker_backend):
    root, output, summary, _ = synthesized
    before = output.read_text()
    events = []
    again = synthesize(
        str(root),
        output,
        max_tasks=4,
        max_candidates=14,
        seed=1,
        workers=2,
        backend=docker_backend,
        on_event=events.append,
    )
    assert not [e for e in events if e.stage == "candidate"]
    assert not [e for e in events if e.stage == "baseline" and "twice" in e.message and "running" in e.message]
    assert (again.kept, again.decided) == (summary.kept, summary.decided)
    assert sorted(output.read_text().splitlines()) == sorted(before.splitlines())


def test_a_killed_run_resumes_from_its_work_log(synthesized, docker_backend, tmp_path):
    root, output, summary, _ = synthesized
    copy = tmp_path / output.name
    shutil.copytree(output.with_suffix(".work"), copy.with_suffix(".work"))
    worklog = copy.with_suffix(".work") / "worklog.jsonl"
    lines = worklog.read_text().splitlines(keepends=True)
    worklog.write_text("".join(lines[:-1]) + lines[-1][:25])  # the last verdict cut short
    events = []
    again = synthesize(
        str(root),
        copy,
        max_tasks=4,
        max_candidates=14,
        seed=1,
        workers=2,
        backend=docker_backend,
        on_event=events.append,
    )
    assert len([e for e in events if e.stage == "candidate"]) <= 2  # only the lost verdict is redone
    assert again.decided >= summary.decided - 1 and again.kept >= 1


def test_a_project_without_tests_is_a_clear_error(tmp_path, docker_backend):
    root = make_package(tmp_path / "notests", {k: v for k, v in PACKAGE.items() if not k.startswith("tests/")})
    with pytest.raises(SynthError, match="no tests"):
        synthesize(str(root), tmp_path / "out.jsonl", max_tasks=1, backend=docker_backend)


def test_a_project_whose_tests_do_not_run_is_a_clear_error(tmp_path, docker_backend):
    files = dict(PACKAGE)
    files["tests/test_core.py"] = "import not_installed_anywhere\n\ndef test_x():\n    assert True\n"
    root = make_package(tmp_path / "broken", files)
    with pytest.raises(SynthError, match="tests do not run"):
        synthesize(str(root), tmp_path / "out.jsonl", max_tasks=1, backend=docker_backend)


def test_a_run_that_rejects_everything_for_one_reason_stops_early(tmp_path, docker_backend):
    """A suite that drops a test whenever the code changes: every candidate loses a baseline test.

    The package is minicalc's (its environment image is reused); the test command deselects
    test_words whenever minicalc/core.py is not the original.
    """
    import hashlib

    root = make_package(tmp_path / "minicalc", PACKAGE)
    digest = hashlib.sha256((root / "minicalc" / "core.py").read_bytes()).hexdigest()
    command = (
        f"{TEST_COMMAND} tests $(echo '{digest}  minicalc/core.py' | sha256sum -c --quiet >/dev/null 2>&1 "
        "|| echo --deselect tests/test_core.py::test_words)"
    )
    events = []
    with pytest.raises(
        SynthError, match=r'first 3 candidates were all rejected with "tests did not run".*test_core\.py::test_words'
    ):
        synthesize(
            str(root),
            tmp_path / "out.jsonl",
            max_tasks=2,
            max_candidates=12,
            workers=1,
            early_stop=3,
            test_command=command,
            backend=docker_backend,
            on_event=events.append,
        )
    judged = [e for e in events if e.stage == "candidate" and "does not compile" not in e.message]
    assert len(judged) == 2 and all("tests did not run" in e.message for e in judged)  # the third verdict ends the run
