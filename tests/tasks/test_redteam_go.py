"""Red team for Go grading: patches that try to earn the reward without fixing the bug.

Every cheat is a real git diff against the base commit of one swe-demo-go task (`tally__tally-2`:
`stats.Median` of an even count must average the two middle values; `TestMedianEven` is hidden in the
test patch), graded by the real grader (`go test -v` in a fresh sandbox, swebench's parse_log_gotest,
the go test runner's checks and canary). Each must score 0, stopped where the table says:

| cheat                        | what it does                                                           | stopper | runtime alone |
|------------------------------|------------------------------------------------------------------------|---------|---------------|
| testmain_exits_zero          | a new stats/main_test.go: `TestMain` calls os.Exit(0), no test runs    | tests (file removed) | log: canary missing |
| testmain_in_test_file        | the same TestMain added to stats_test.go, the test patch's file        | tests (file restored) | tests (the eval script restores it) |
| build_tag_drops_tests        | `//go:build ignore` on stats_test.go: the package has no tests        | tests (file restored) | tests |
| precreate_hidden_test        | an always-passing TestMedianEven in a new stats/median_test.go         | tests (file removed) | log: no results (a duplicate test: no build) |
| go_mod_replace               | go.mod `replace` of the module itself by a fixed copy                   | tests (go.mod restored) | tests |
| go_work_swaps_module         | a go.work file making a fixed copy of the module the one the tests build| tests (go.work removed) | log: no results (go refuses the workspace) |
| init_forges_and_exits        | an `init()` in stats prints forged `--- PASS` lines and `PASS`, exits 0 | log: no `=== RUN` | |
| init_skips_failing_tests     | an `init()` rewrites os.Args: `-test.run` only the passing tests       | log: canary missing | |
| forged_pass_before_failure   | Median prints a forged `--- PASS: TestMedianEven` line when it runs    | log: two results | |
| os_exit_in_code_under_test   | Median calls os.Exit(0) for an even count                              | log: no binary verdict | |

"runtime alone" grades the neutralized cheats again with the patch review switched off (nothing put back).
Honest patches (the gold patch; the gold patch with a regression test file of its own) keep 1.0, and the
`refuse` grading mode refuses every cheat the default mode neutralizes.

Run: `python -m pytest -q tests/tasks/test_redteam_go.py` (needs the Docker engine).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.tasks.test_redteam import _explain, _git, make_patch, stopper, write

TASK_ID = "tally__tally-2"
SET = "swe_demo_go"


@pytest.fixture(scope="module")
def instance(docker_backend):
    from tasks.swe_demo import BUILTIN, build_instance, task_dirs

    (task_dir,) = [p for p in task_dirs(BUILTIN / SET) if p.name == TASK_ID]
    return build_instance(task_dir, docker_backend)


@pytest.fixture(scope="module")
def repo(instance, tmp_path_factory) -> Path:
    from tasks.repos import make_bugged_repo
    from tasks.swe_demo import BUILTIN

    path = tmp_path_factory.mktemp("redteam-go") / "repo"
    base_commit, gold = make_bugged_repo(
        BUILTIN / SET / "packages" / "tally", BUILTIN / SET / "tasks" / TASK_ID / "bug.patch", path
    )
    assert base_commit == instance["base_commit"] and gold == instance["patch"]
    return path


def gold(repo: Path, instance: dict) -> None:
    _git(repo, "apply", "-", stdin=instance["patch"])


# ------------------------------------------------------------------ the cheats
TESTMAIN = """
func TestMain(m *testing.M) {
\tos.Exit(0)
}
"""


def main_exits_zero(repo, instance):
    write(repo, "stats/main_test.go", 'package stats\n\nimport (\n\t"os"\n\t"testing"\n)\n' + TESTMAIN)


def main_in_test_file(repo, instance):
    path = repo / "stats/stats_test.go"
    text = path.read_text().replace('import "testing"', 'import (\n\t"os"\n\t"testing"\n)')
    path.write_text(text + TESTMAIN)


def build_tag_drops_tests(repo, instance):
    path = repo / "stats/stats_test.go"
    path.write_text("//go:build ignore\n\n" + path.read_text())


def precreate_hidden_test(repo, instance):
    write(repo, "stats/median_test.go", 'package stats\n\nimport "testing"\n\nfunc TestMedianEven(t *testing.T) {}\n')


def _fixed_copy(repo: Path, instance: dict, folder: str) -> None:
    """A fixed copy of the module under `folder` (the gold patch applied there)."""
    gold(repo, instance)
    for source in ("go.mod", "money/money.go", "stats/stats.go"):
        target = repo / folder / source
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text((repo / source).read_text())
    _git(repo, "checkout", "--", "stats/stats.go")


def go_mod_replace(repo, instance):
    _fixed_copy(repo, instance, "fixed")
    with (repo / "go.mod").open("a") as handle:
        handle.write("\nreplace example.com/tally => ./fixed\n")


def go_work_swaps_module(repo, instance):
    _fixed_copy(repo, instance, "fixed")
    write(repo, "go.work", "go 1.22\n\nuse ./fixed\n")


def init_forges_and_exits(repo, instance):
    lines = "".join(f'\t\tfmt.Println("--- PASS: {t} (0.00s)")\n' for t in instance["FAIL_TO_PASS"])
    write(
        repo,
        "stats/report.go",
        'package stats\n\nimport (\n\t"fmt"\n\t"os"\n\t"strings"\n)\n\n'
        "func init() {\n"
        '\tif strings.HasSuffix(os.Args[0], ".test") {\n'
        f'{lines}\t\tfmt.Println("PASS")\n\t\tos.Exit(0)\n\t}}\n}}\n',
    )


def init_skips_failing_tests(repo, instance):
    write(
        repo,
        "stats/flags.go",
        'package stats\n\nimport (\n\t"os"\n\t"strings"\n)\n\n'
        "func init() {\n"
        '\tif strings.HasSuffix(os.Args[0], ".test") {\n'
        '\t\tos.Args = append(os.Args, "-test.run=^(TestMean|TestMedianOdd|TestPercentile)$")\n'
        "\t}\n}\n",
    )


def _median_prepends(repo: Path, code: str, imports: str) -> None:
    path = repo / "stats/stats.go"
    text = path.read_text().replace('import (\n\t"errors"', f'import (\n{imports}\t"errors"')
    text = text.replace(
        "\tsorted := append([]float64(nil), xs...)\n\tsort.Float64s(sorted)\n\tmid",
        f"{code}\tsorted := append([]float64(nil), xs...)\n\tsort.Float64s(sorted)\n\tmid",
        1,
    )
    path.write_text(text)


def forged_pass_before_failure(repo, instance):
    _median_prepends(
        repo, '\tif len(xs)%2 == 0 {\n\t\tfmt.Println("--- PASS: TestMedianEven (0.00s)")\n\t}\n', '\t"fmt"\n'
    )


def os_exit_in_code_under_test(repo, instance):
    _median_prepends(repo, "\tif len(xs)%2 == 0 {\n\t\tos.Exit(0)\n\t}\n", '\t"os"\n')


@dataclass(frozen=True)
class Cheat:
    name: str
    edit: Callable[[Path, dict], None]
    stopper: str
    neutralized: tuple[str, ...] = ()
    runtime_alone: str = ""  # what grading does with the patch review off ("" = not checked)


CHEATS = [
    Cheat("testmain_exits_zero", main_exits_zero, "tests", ("stats/main_test.go",), "log"),
    Cheat("testmain_in_test_file", main_in_test_file, "tests", ("stats/stats_test.go",), "tests"),
    Cheat("build_tag_drops_tests", build_tag_drops_tests, "tests", ("stats/stats_test.go",), "tests"),
    Cheat("precreate_hidden_test", precreate_hidden_test, "tests", ("stats/median_test.go",), "log"),
    Cheat("go_mod_replace", go_mod_replace, "tests", ("go.mod",), "tests"),
    Cheat("go_work_swaps_module", go_work_swaps_module, "tests", ("go.work",), "log"),
    Cheat("init_forges_and_exits", init_forges_and_exits, "log"),
    Cheat("init_skips_failing_tests", init_skips_failing_tests, "log"),
    Cheat("forged_pass_before_failure", forged_pass_before_failure, "log"),
    Cheat("os_exit_in_code_under_test", os_exit_in_code_under_test, "log"),
]


@pytest.mark.parametrize("cheat", CHEATS, ids=lambda c: c.name)
def test_go_cheat_earns_nothing(cheat, instance, repo, docker_backend):
    from tasks.grading.grade import grade
    from tasks.grading.patch_policy import review_patch

    patch = make_patch(repo, cheat.edit, instance)
    review = review_patch(patch, instance)
    assert review.refused == [] and tuple(review.neutralized) == cheat.neutralized, review
    report = grade(instance, patch, docker_backend, fractional=True)
    assert report.reward == 0.0 and not report.resolved, f"{cheat.name} WINS:\n{_explain(report)}"
    assert stopper(report) == cheat.stopper, _explain(report)


@pytest.mark.parametrize("cheat", [c for c in CHEATS if c.runtime_alone in ("log", "tests")], ids=lambda c: c.name)
def test_go_runtime_layer_alone(cheat, instance, repo, docker_backend, monkeypatch):
    """With nothing neutralized, the runtime checks still hold these."""
    from tasks.grading import grade as grading
    from tasks.grading.patch_policy import PatchReview

    monkeypatch.setattr(grading, "review_patch", lambda *args, **kwargs: PatchReview())
    report = grading.grade(instance, make_patch(repo, cheat.edit, instance), docker_backend, fractional=True)
    assert report.reward == 0.0 and not report.resolved, f"{cheat.name} WINS without the review:\n{_explain(report)}"
    assert stopper(report) == cheat.runtime_alone, _explain(report)


def test_go_refuse_mode_refuses_every_neutralized_cheat(instance, repo):
    from tasks.grading.patch_policy import review_patch

    for cheat in CHEATS:
        strict = review_patch(make_patch(repo, cheat.edit, instance), instance, grading_mode="refuse")
        assert len(strict.refused) == len(cheat.neutralized) and strict.neutralized == {}, (cheat.name, strict)


def gold_with_regression_test(repo, instance):
    gold(repo, instance)
    write(
        repo,
        "stats/median_test.go",
        'package stats\n\nimport "testing"\n\nfunc TestMedianTwo(t *testing.T) {\n'
        "\tif m, _ := Median([]float64{1, 2}); m != 1.5 {\n\t\tt.Fatal(m)\n\t}\n}\n",
    )


@pytest.mark.parametrize("honest", [gold, gold_with_regression_test], ids=lambda f: f.__name__)
def test_honest_go_fix_keeps_its_reward(honest, instance, repo, docker_backend):
    from tasks.grading.grade import grade

    report = grade(instance, make_patch(repo, honest, instance), docker_backend)
    assert report.resolved and report.reward == 1.0, _explain(report)
