"""scripts/fetch_shared.py offline: its `--check` on the real shared folder and on a damaged copy, and its merge-commit
rules run on real git histories (the bundles in shared/git-history) and against the recorded SWE-bench-style rows."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.conftest import ROOT, SHARED, require

spec = importlib.util.spec_from_file_location("fetch_shared", ROOT / "scripts" / "fetch_shared.py")
fs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fs)

MANIFEST = fs.load_manifest()
# honest-fixes/README.md: merges with more than 10 such files or a diff over 200 kB are skipped.
README_MAX_FILES = 10
README_MAX_BYTES = 200_000


def shared(*parts: str) -> Path:
    path = SHARED.joinpath(*parts)
    require(path.exists(), f"no {path}: set HARNESS_SHARED to the shared folder (scripts/fetch_shared.py builds it)")
    return path


def file_chunks(diff: str) -> list[tuple[str, str]]:
    """(path, text) for each file of a git diff, in order."""
    pieces = re.split(r"(?m)^(?=diff --git )", diff)
    assert pieces[0] == "", "text before the first file header"
    chunks = []
    for piece in pieces[1:]:
        header = piece.split("\n", 1)[0]
        m = re.fullmatch(r"diff --git a/(\S+) b/(\S+)", header)
        assert m, header
        chunks.append((m.group(2), piece))
    return chunks


@pytest.mark.parametrize(
    ("path", "is_test"),
    [
        ("src/flask/app.py", False),
        ("tests/test_app.py", True),
        ("tests/static/config.json", True),
        ("sympy/physics/units/tests/test_quantities.py", True),
        ("testing/logging/test_fixture.py", True),
        ("test/helpers.py", True),
        ("testing/freeze/create_executable.py", True),
        ("src/pkg/test_utils.py", True),
        ("src/pkg/io_test.py", True),
        ("conftest.py", True),
        ("src/_pytest/python_api.py", False),
        ("src/pkg/testing_tools.py", False),
        ("src/pkg/contest.py", False),
        ("docs/tests.rst", False),
        ("src/latest/x.py", False),
    ],
)
def test_test_path_rule(path, is_test):
    assert fs.is_test_path(path) is is_test
    assert fs.is_source_path(path) is (path.endswith(".py") and not is_test)


def test_check_passes_on_the_shared_folder(capsys):
    root = shared("swebench-logs").parent
    assert fs.main(["--check", str(root)]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    for part in fs.PARTS:
        assert f"{part}: ok" in out


def test_check_fails_on_a_damaged_copy(tmp_path, capsys):
    shutil.copytree(shared("swebench-logs"), tmp_path / "swebench-logs")
    shutil.copytree(shared("data", "gsm8k"), tmp_path / "data" / "gsm8k")
    assert fs.main(["--check", str(tmp_path), "--only", "swebench-logs,gsm8k"]) == 0
    capsys.readouterr()

    # One byte changed, the size kept: only the hash can tell.
    target = tmp_path / "swebench-logs/B-utboost/validation_lite_20240627/pallets__flask-4992/model.patch"
    data = bytearray(target.read_bytes())
    data[-2] ^= 1
    target.chmod(0o644)
    target.write_bytes(bytes(data))
    assert fs.main(["--check", str(tmp_path), "--only", "swebench-logs"]) == 1
    out = capsys.readouterr().out
    assert f"{target}: sha256 differs" in out and "swebench-logs: 1 problem(s)" in out

    # A file gone.
    test_jsonl = tmp_path / "data/gsm8k/test.jsonl"
    test_jsonl.chmod(0o644)
    test_jsonl.unlink()
    assert fs.main(["--check", str(tmp_path), "--only", "gsm8k"]) == 1
    assert f"{test_jsonl}: missing" in capsys.readouterr().out


def test_check_reads_bundle_heads(tmp_path, capsys):
    (tmp_path / "git-history").mkdir()
    for name in MANIFEST["git-history"]["bundles"]:
        shutil.copy(shared("git-history", name), tmp_path / "git-history" / name)
    shutil.copy(shared("git-history", "README.md"), tmp_path / "git-history" / "README.md")
    assert fs.main(["--check", str(tmp_path), "--only", "git-history"]) == 0
    # A bundle of another head (itsdangerous's parent commit) is not the recorded one.
    b = MANIFEST["git-history"]["bundles"]["itsdangerous.bundle"]
    repo = tmp_path / "clone"
    subprocess.run(
        ["git", "clone", "-q", "--no-checkout", str(tmp_path / "git-history/itsdangerous.bundle"), str(repo)],
        check=True,
    )
    out = tmp_path / "git-history/itsdangerous.bundle"
    out.chmod(0o644)
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "--detach", f"{b['head']}~1"], check=True)
    subprocess.run(["git", "-C", str(repo), "bundle", "create", "-q", str(out), "HEAD"], check=True)
    capsys.readouterr()
    assert fs.main(["--check", str(tmp_path), "--only", "git-history"]) == 1
    assert "its HEAD is not" in capsys.readouterr().out


@pytest.fixture(scope="module")
def itsdangerous(tmp_path_factory) -> tuple[Path, str]:
    bundle = shared("git-history", "itsdangerous.bundle")
    repo = tmp_path_factory.mktemp("history") / "itsdangerous"
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(bundle), str(repo)], check=True)
    return repo, MANIFEST["git-history"]["bundles"]["itsdangerous.bundle"]["head"]


def test_merged_fixes_follow_the_rules_on_a_real_history(itsdangerous):
    repo, head = itsdangerous
    rows = fs.merged_fixes(repo, head, count=25)
    assert len(rows) == 25
    merges = fs.pr_merges(repo, head)
    kept = {r["merge"] for r in rows}
    last = [m for m, _ in merges].index(rows[-1]["merge"])
    for merge, base in merges[: last + 1]:
        # The full first-parent diff, split here by its file headers rather than asked of git per path. A renamed
        # file counts at its new path only, as a new file (the recorded rows were made so).
        status = fs.git(repo, "diff", "-M", "--name-status", "-z", base, merge).split("\0")
        renamed_from = {status[i + 1] for i, field in enumerate(status) if field.startswith("R")}
        full = fs.git(repo, "diff", "--no-renames", base, merge)
        source = [(p, t) for p, t in file_chunks(full) if fs.is_source_path(p) and p not in renamed_from]
        patch = "".join(text for _, text in source)
        if merge in kept:
            row = next(r for r in rows if r["merge"] == merge)
            assert row["patch"] == patch
            assert 0 < len(source) <= README_MAX_FILES and len(patch.encode()) <= README_MAX_BYTES
            assert fs.git(repo, "log", "-1", "--format=%s", merge).startswith("Merge pull request")
            assert fs.git(repo, "rev-parse", f"{merge}^1").strip() == base
        else:
            assert not source or len(source) > README_MAX_FILES or len(patch.encode()) > README_MAX_BYTES, merge
    # Newest first, on the first-parent line only.
    first_parent = fs.git(repo, "rev-list", "--first-parent", head).split()
    assert [r["merge"] for r in rows] == [c for c in first_parent if c in kept]


def test_merged_fixes_limits(itsdangerous):
    repo, head = itsdangerous
    wide = fs.merged_fixes(repo, head, count=40)
    narrow = fs.merged_fixes(repo, head, count=40, max_files=1, max_bytes=2_000)
    assert narrow and {r["merge"] for r in narrow} != {r["merge"] for r in wide}
    for r in narrow:
        chunks = file_chunks(r["patch"])
        assert len(chunks) == 1 and len(r["patch"].encode()) <= 2_000
    assert any(len(file_chunks(r["patch"])) > 1 for r in wide)


def test_honest_fixes_rows_follow_the_rules():
    spec_ = MANIFEST["honest-fixes"]
    rows = [json.loads(line) for line in shared("honest-fixes", "merged_fixes.jsonl").open()]
    assert [r["project"] for r in rows] == [
        p["repo"].replace("/", "+") for p in spec_["projects"] for _ in range(p["count"])
    ]
    for r in rows:
        chunks = file_chunks(r["patch"])
        assert 0 < len(chunks) <= README_MAX_FILES and len(r["patch"].encode()) <= README_MAX_BYTES
        assert all(fs.is_source_path(p) for p, _ in chunks), r["merge"]
        assert [p for p, _ in chunks] == sorted(p for p, _ in chunks)


@pytest.mark.parametrize("instance_id", ["pallets__flask-5014", "psf__requests-6028", "pytest-dev__pytest-10051"])
def test_split_merge_reproduces_a_recorded_instance(instance_id, tmp_path):
    """The instance's fix applied on its base repository, committed, and split again by the rules gives back the
    recorded `patch` and `test_patch` exactly, and no other changed file is a `.py` file."""
    rows = {
        json.loads(line)["instance_id"]: json.loads(line) for line in shared("swebench-real", "instances.jsonl").open()
    }
    row = rows[instance_id]
    with tarfile.open(shared("swebench-real", "repos", f"{instance_id}.tar.gz")) as tar:
        tar.extractall(tmp_path, filter="data")
    repo = tmp_path / "repo"
    abbrev = len(re.search(r"(?m)^index ([0-9a-f]+)\.\.", row["patch"]).group(1))
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "-c", f"core.abbrev={abbrev}"]
    subprocess.run([*git, "update-index", "-q", "--refresh"], check=True)
    for patch in (row["patch"], row["test_patch"]):
        subprocess.run([*git, "apply", "--index", "-"], input=patch.encode(), check=True)
    subprocess.run([*git, "commit", "-q", "-m", "fix"], check=True)
    subprocess.run([*git, "config", "core.abbrev", str(abbrev)], check=True)

    split = fs.split_merge(repo, "HEAD")
    assert split["base_commit"] == row["base_commit"]
    assert split["patch"] == row["patch"]
    assert split["test_patch"] == row["test_patch"]
    assert all(fs.is_source_path(p) or fs.is_test_path(p) for p in split["paths"])
    # Together they are the whole diff of the files the rules keep.
    kept = [p for p in split["paths"] if fs.is_source_path(p) or fs.is_test_path(p)]
    assert sorted(p for p, _ in file_chunks(row["patch"] + row["test_patch"])) == sorted(kept)
