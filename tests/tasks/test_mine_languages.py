"""`harness tasks mine` on real projects of each language, from the registries this machine reaches: a crate
of Debian's `librust-*-dev` (its sources, as the offline cargo registry holds them), a Go module of Debian's
`golang-*-dev` (as /usr/share/gocode holds it) and a package of the npm registry (its published tarball, its
tape tests' dependencies fetched as the JavaScript language fetches them). Each gets a short history: the
original, a commit that plants a bug in the subject of a test, and the fix with a test change. Mining keeps
the fix alone (the funnel says why not the others), and the instance resolves with gold and not with an
empty patch through `harness eval`. The projects need nothing beyond their language's base image, which the
quick-start sets build too."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli_helpers import eval_rows, harness
from tests.conftest import require


@dataclass(frozen=True)
class Planted:
    name: str
    language: str
    source: str  # the file the bug goes into
    good: str  # the line it changes
    bad: str
    test_file: str  # the file the fix's test change goes into
    test_anchor: str  # the test change goes after this text
    test_added: str
    fail_to_pass: tuple[str, ...]  # among the instance's FAIL_TO_PASS


def _download_deb(package: str, work: Path) -> Path:
    """The files of Debian's `package` (apt-get download, then unpacked), under `work`/root."""
    require(shutil.which("apt-get") is not None and shutil.which("dpkg-deb") is not None, "no apt-get / dpkg-deb")
    work.mkdir(parents=True)
    done = subprocess.run(["apt-get", "download", package], cwd=work, capture_output=True, text=True, timeout=300)
    require(done.returncode == 0, f"apt-get download {package} failed: {done.stderr.strip()[-500:]}")
    subprocess.run(["dpkg-deb", "-x", str(next(work.glob("*.deb"))), str(work / "root")], check=True)
    return work / "root"


def itoa(work: Path) -> Path:
    root = _download_deb("librust-itoa-dev", work)
    return next((root / "usr/share/cargo/registry").glob("itoa-*"))


def go_cmp(work: Path) -> Path:
    return _download_deb("golang-github-google-go-cmp-dev", work) / "usr/share/gocode/src/github.com/google/go-cmp"


def deep_is(work: Path) -> Path:
    """deep-is 0.1.4 as published, its devDependency (tape) locked by a package-lock.json made here."""
    require(shutil.which("npm") is not None, "npm is not installed here: it fetches the package and its dependencies")
    work.mkdir(parents=True)
    subprocess.run(["npm", "pack", "-s", "deep-is@0.1.4"], cwd=work, check=True, capture_output=True, timeout=300)
    subprocess.run(["tar", "xzf", "deep-is-0.1.4.tgz"], cwd=work, check=True)
    package = work / "package"
    subprocess.run(
        ["npm", "install", "--package-lock-only", "--ignore-scripts", "--no-audit", "--no-fund"],
        cwd=package,
        check=True,
        capture_output=True,
        timeout=300,
    )
    return package


PROJECTS = {
    "rust": (
        itoa,
        Planted(
            "itoa",
            "rust",
            "src/lib.rs",
            "*buf_ptr.offset(curr) = b'-';",
            "*buf_ptr.offset(curr) = b'+';",
            "tests/test.rs",
            'test_i16_min(i16::min_value(), "-32768")\n',
            '    test_i32_neg(-17i32, "-17")\n',
            ("test_i64_min", "test_i16_min", "test_i32_neg"),
        ),
    ),
    "go": (
        go_cmp,
        Planted(
            "go-cmp",
            "go",
            "cmp/internal/value/sort.go",
            "return x.String() < y.String()",
            "return x.String() > y.String()",
            "cmp/internal/value/sort_test.go",
            "",
            "\nfunc TestSortKeysOfStrings(t *testing.T) {\n"
            '\tgot := value.SortKeys([]reflect.Value{reflect.ValueOf("b"), reflect.ValueOf("a"), reflect.ValueOf("b")})\n'
            '\tif len(got) != 2 || got[0].String() != "a" || got[1].String() != "b" {\n'
            '\t\tt.Errorf("SortKeys(b, a, b) = %v, want [a b]", got)\n\t}\n}\n',
            ("TestSortKeys", "TestSortKeysOfStrings"),
        ),
    ),
    "javascript": (
        deep_is,
        Planted(
            "deep-is",
            "javascript",
            "index.js",
            "return (1 / zeroA) === (1 / zeroB);",
            "return zeroA === zeroB;",
            "test/neg-vs-pos-0.js",
            "t.notOk(equal(-0, +0), '-0 !== +0');\n",
            "    t.notOk(equal(+0, -0), '+0 !== -0');\n",
            ("0 values > -0 !== 0", "0 values > -0 !== +0", "0 values > +0 !== -0"),  # tape: test > assertion
        ),
    ),
}


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) >= 1, f"{path}: {old!r} not found"
    path.write_text(text.replace(old, new))


def history(source: Path, planted: Planted, repo: Path) -> None:
    """The project as its first commit, then a commit planting the bug, then the fix with a test change."""
    shutil.copytree(source, repo)
    git = ["git", "-c", "user.email=dev@example.org", "-c", "user.name=dev"]

    def commit(message: str) -> None:
        subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
        subprocess.run([*git, "commit", "-qm", message], cwd=repo, check=True)

    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    commit(f"Import {planted.name}")
    _replace(repo / planted.source, planted.good, planted.bad)
    commit("Simplify the comparison")
    _replace(repo / planted.source, planted.bad, planted.good)
    test_file = repo / planted.test_file
    if planted.test_anchor:
        _replace(test_file, planted.test_anchor, planted.test_anchor + planted.test_added)
    else:
        test_file.write_text(test_file.read_text() + planted.test_added)
    commit("Fix the comparison broken by the simplification (#7)")


@pytest.fixture(scope="module", params=sorted(PROJECTS))
def mined(request, tmp_path_factory, docker_backend):
    material, planted = PROJECTS[request.param]
    work = tmp_path_factory.mktemp(planted.name)
    repo = work / planted.name
    history(material(work / "material"), planted, repo)
    output = work / "mined.jsonl"
    done = harness("tasks", "mine", str(repo), "--output", str(output), "--workers", "1", timeout=1800)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    return planted, output, json.loads(Path(f"{output}.funnel.json").read_text())


def test_the_fix_is_kept_and_the_funnel_says_why_the_other_commits_are_not(mined):
    planted, output, funnel = mined
    assert funnel["counts"] == {
        "commits scanned": 3,
        "candidates": 1,
        "environment built": 1,
        "tests ran": 1,
        "FAIL_TO_PASS >= 1": 1,
        "validated": 1,
    }
    assert funnel["reasons"] == {"candidates": {"first commit (no parent)": 1, "no test change": 1}}
    (instance,) = [json.loads(line) for line in output.read_text().splitlines()]
    assert instance["language"] == planted.language and instance["instance_id"].endswith("-7")
    assert planted.source in instance["patch"] and planted.test_file not in instance["patch"]
    assert planted.test_file in instance["test_patch"]
    assert set(planted.fail_to_pass) <= set(instance["FAIL_TO_PASS"]), instance["FAIL_TO_PASS"]
    assert instance["PASS_TO_PASS"], "the project's other tests pass before and after the fix"


def test_gold_resolves_the_mined_task_and_an_empty_patch_does_not(mined, tmp_path):
    _, output, _ = mined
    rewards = {
        policy: [row["reward"] for row in eval_rows(str(output), policy, "docker", tmp_path / policy)]
        for policy in ("gold", "empty")
    }
    assert rewards == {"gold": [1.0], "empty": [0.0]}
