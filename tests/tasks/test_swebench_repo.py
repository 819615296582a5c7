"""SWE-bench 5 task repositories: swe-demo written as one and read back, checked by swebench's own checks,
compiled by its CLI and evaluated by its CLI (local images, no registry) with the same verdicts as ours."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tasks.errors import TaskSourceError
from tasks.swebench_repo import export_swebench_repo, load_repo_tasks, repo_source
from tasks.taskset import load_tasks
from tests.cli_helpers import harness, rows_of

SWEBENCH = shutil.which("swebench")
OFFLINE = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}


@pytest.fixture(scope="module")
def demo_tasks(docker_backend):
    return load_tasks("swe-demo")


@pytest.fixture(scope="module")
def exported(demo_tasks, tmp_path_factory):
    """swe-demo written as a task repository (its images tagged with the names the repository gives them)."""
    out = tmp_path_factory.mktemp("repo") / "swe-demo-tasks"
    export_swebench_repo(demo_tasks, out)
    return out


def _image_layers(image: str) -> list[str]:
    from sandboxes.docker_backend import docker_client

    return docker_client().images.get(image).attrs["RootFS"]["Layers"]


def test_round_trip_gives_the_same_instances(demo_tasks, exported, tmp_path):
    from swebench.task.checks import expected_image

    loaded = load_tasks(str(exported))
    assert [t.id for t in loaded] == [t.id for t in demo_tasks]
    for ours, back in zip(demo_tasks, loaded):
        original, read = ours.metadata["instance"], back.metadata["instance"]
        assert read == {**original, "image": expected_image(ours.id)}  # the name swebench's checks require
        assert _image_layers(read["image"]) == _image_layers(original["image"])  # on the very same layers
        assert (back.prompt, back.reward_spec, back.sandbox.workdir) == (ours.prompt, ours.reward_spec, "/testbed")
    again = tmp_path / "swe-demo-tasks"  # the same dataset name, so every file can be compared
    export_swebench_repo(loaded, again)
    for path in sorted(p for p in exported.rglob("*") if p.is_file()):
        assert (again / path.relative_to(exported)).read_bytes() == path.read_bytes(), path
    assert [t.metadata["instance"] for t in load_tasks(f"swebench-repo:{again}:test")] == [
        t.metadata["instance"] for t in loaded
    ]


def test_swebench_checks_pass_and_its_cli_compiles_the_dataset(demo_tasks, exported, tmp_path):
    from swebench.task.checks import check_task_repo

    assert check_task_repo(exported) == []
    assert SWEBENCH, "swebench's CLI is installed with the package"
    built = subprocess.run(
        [SWEBENCH, "dataset", "build", str(exported), "-o", str(tmp_path)], capture_output=True, text=True, env=OFFLINE
    )
    assert built.returncode == 0, built.stdout + built.stderr
    import pyarrow.parquet as pq

    rows = pq.read_table(tmp_path / "swe-demo-tasks" / "test.parquet").to_pylist()
    assert [r["instance_id"] for r in rows] == sorted(t.id for t in demo_tasks)
    by_id = {t.id: t.metadata["instance"] for t in demo_tasks}
    for row in rows:
        assert row["patch"] == by_id[row["instance_id"]]["patch"]
        assert list(row["FAIL_TO_PASS"]) == by_id[row["instance_id"]]["FAIL_TO_PASS"]


def _wrong_patch(task, backend) -> str:
    """What an agent that missed the bug submits: a helper added to the source file the fix touches."""
    from tasks.grading.patch_policy import parse_patch

    source = parse_patch(task.metadata["instance"]["patch"])[0].path
    with backend.create(task.sandbox) as sb:
        done = sb.exec(f"printf '\\n\\ndef _normalize(value):\\n    return value\\n' >> {source} && git diff")
    assert done.ok and "_normalize" in done.output
    return done.output.split("diff --git", 1)[1].join(["diff --git", ""]).rstrip("\n") + "\n"


@pytest.mark.slow
def test_the_official_cli_gives_our_verdicts(demo_tasks, exported, docker_backend, tmp_path):
    """`swebench eval` on the compiled repository (our images, present locally, so none is pulled) against
    `harness grade` on the repository itself: gold, empty and a wrong patch on two instances."""
    chosen = demo_tasks[:2]
    ids = [t.id for t in chosen]
    subprocess.run([SWEBENCH, "dataset", "build", str(exported), "-o", str(tmp_path / "data")], check=True, env=OFFLINE)
    dataset = tmp_path / "data" / "swe-demo-tasks"
    patches = {
        "gold": {t.id: t.metadata["instance"]["patch"] for t in chosen},
        "empty": {i: "" for i in ids},
        "wrong": {t.id: _wrong_patch(t, docker_backend) for t in chosen},
    }
    for model, by_id in patches.items():
        preds = tmp_path / f"{model}.jsonl"
        preds.write_text(
            "".join(
                json.dumps({"instance_id": i, "model_name_or_path": model, "model_patch": p}) + "\n"
                for i, p in by_id.items()
            )
        )
        official = subprocess.run(
            [
                SWEBENCH,
                "eval",
                str(dataset),
                "-p",
                str(preds),
                "--run-id",
                model,
                "-j",
                "2",
                "--report-dir",
                str(tmp_path),
            ]
            + [arg for i in ids for arg in ("-i", i)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=OFFLINE,
        )
        assert official.returncode == 0, official.stdout[-3000:] + official.stderr[-3000:]
        summary = json.loads((tmp_path / f"{model}.{model}.json").read_text())
        assert summary["error_ids"] == [] and "attempting to pull" not in official.stdout
        ours = harness(
            "grade", "--predictions", str(preds), "--tasks", str(exported), "--output", str(tmp_path / f"ours-{model}")
        )
        assert ours.returncode == 0, ours.stdout + ours.stderr
        rows = {r["instance_id"]: r for r in rows_of(tmp_path / f"ours-{model}" / "results.jsonl")}
        for instance_id in ids:
            assert rows[instance_id]["resolved"] == (instance_id in summary["resolved_ids"]), (model, instance_id)
            report = tmp_path / "logs" / "run_evaluation" / model / model / instance_id / "report.json"
            if model == "empty":  # the official harness counts an empty patch without running it
                assert instance_id in summary["empty_patch_ids"] and rows[instance_id]["verdict"] == "empty_patch"
                continue
            theirs = json.loads(report.read_text())[instance_id]["tests_status"]
            assert rows[instance_id]["tests_status"] == theirs, (model, instance_id)
        assert {r["resolved"] for r in rows.values()} == {model == "gold"}


# ----------------------------------------------------------------------------- bad input


def _two_tasks(exported: Path, tmp_path: Path) -> tuple[Path, list[str]]:
    repo = tmp_path / "repo"
    shutil.copytree(exported, repo)
    names = sorted(p.name for p in (repo / "tasks").iterdir())
    for extra in names[3:]:
        shutil.rmtree(repo / "tasks" / extra)
    return repo, names[:3]


def test_a_broken_task_is_named_with_its_file_and_the_others_load(exported, tmp_path, caplog):
    repo, (a, b, c) = _two_tasks(exported, tmp_path)
    cases = [
        (lambda: (repo / "tasks" / a / "eval.sh").unlink(), f"tasks/{a}: missing eval.sh"),
        (lambda: (repo / "tasks" / a / "tests.json").write_text("{not json"), f"tasks/{a}/tests.json: not valid JSON"),
        (
            lambda: (repo / "tasks" / a / "tests.json").write_text('{"FAIL_TO_PASS": [], "PASS_TO_PASS": []}'),
            f"tasks/{a}/tests.json: names no FAIL_TO_PASS test",
        ),
        (
            lambda: (repo / "tasks" / a / "tests.json").write_text('{"FAIL_TO_PASS": ["t"], "PASS_TO_PASS": "t"}'),
            f"tasks/{a}/tests.json: PASS_TO_PASS must be a list of test names",
        ),
        (lambda: (repo / "tasks" / a / "gold.patch").write_text("fixed it\n"), f"tasks/{a}/gold.patch: not a diff"),
        (lambda: (repo / "tasks" / a / "test.patch").write_text("fixed it\n"), f"tasks/{a}/test.patch: not a diff"),
        (lambda: (repo / "tasks" / a / "task.yaml").write_text("a: [b\n"), f"tasks/{a}/task.yaml: not valid YAML"),
        (lambda: (repo / "tasks" / a / "task.yaml").write_text("- a\n"), f"tasks/{a}/task.yaml: not a mapping"),
        (
            lambda: (repo / "tasks" / a / "task.yaml").write_text(
                (repo / "tasks" / a / "task.yaml").read_text().replace("parse_log_pytest", "parse_log_nothing")
            ),
            f"tasks/{a}/task.yaml: log_parser unknown log parser 'parse_log_nothing'",
        ),
        (lambda: (repo / "tasks" / a / "gold.patch").write_bytes(b"\xff\xfe"), f"tasks/{a}: a file cannot be read"),
    ]
    pristine = {p: p.read_bytes() for p in (repo / "tasks" / a).iterdir()}
    for damage, message in cases:
        damage()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="tasks.swebench_repo"):
            loaded = load_tasks(str(repo))
        assert [t.id for t in loaded] == [b, c]
        assert any(message in r.getMessage() for r in caplog.records), (message, caplog.text)
        for path, data in pristine.items():
            path.write_bytes(data)
    shutil.rmtree(repo / "tasks" / b), shutil.rmtree(repo / "tasks" / c)
    (repo / "tasks" / a / "tests.json").write_text("[]")
    with pytest.raises(TaskSourceError, match=f"no task of split 'test' could be read\n  tasks/{a}/tests.json"):
        load_tasks(str(repo))


def test_splits_and_sources(exported, tmp_path):
    repo, (a, b, c) = _two_tasks(exported, tmp_path)
    (repo / "sweb.yaml").write_text("datasets: [swe-demo-tasks]\nsplits: [test, dev]\n")
    meta = repo / "tasks" / b / "task.yaml"
    meta.write_text(meta.read_text().replace("split: test", "split: dev"))
    assert [t.id for t in load_tasks(str(repo))] == [a, c]
    assert [t.id for t in load_tasks(f"{repo}:dev")] == [b]
    assert [t.id for t in load_tasks(f"swebench-repo:{repo}:dev")] == [b]
    assert repo_source(str(tmp_path)) is None  # a folder without sweb.yaml is no task repository
    with pytest.raises(TaskSourceError, match="unknown split 'train'; sweb.yaml publishes test, dev"):
        load_tasks(f"{repo}:train")
    with pytest.raises(TaskSourceError, match="has no sweb.yaml"):
        load_tasks(f"swebench-repo:{tmp_path}")
    for config, message in (("splits: [test]\n", "does not name any datasets"), ("datasets: [a\n", "while parsing")):
        (repo / "sweb.yaml").write_text(config)
        with pytest.raises(TaskSourceError, match=f"not a readable task repository: .*{message}"):
            load_tasks(str(repo))


def test_an_absent_image_is_built_from_the_tasks_dockerfile(exported, tmp_path, caplog, docker_backend):
    """The exported Dockerfile rebuilds the environment from public parts (Debian, the bundled repository):
    built here with the base image stood in for, gold resolves on it; a Dockerfile that cannot be built is
    reported with the reason, and its task still loads."""
    from tasks.grading.grade import grade
    from tasks.swebench_repo import IMAGE_BUILT

    repo, (a, b, _) = _two_tasks(exported, tmp_path)
    dockerfile = (repo / "tasks" / a / "Dockerfile").read_text()
    assert "FROM debian:bookworm-slim" in dockerfile and "COPY repo.bundle" in dockerfile
    rebuilt = f"harness-test/rebuilt-{a}:{os.getpid()}"
    for task_dir, image in ((repo / "tasks" / a, rebuilt), (repo / "tasks" / b, "nowhere-harness-test/x:1")):
        meta = task_dir / "task.yaml"
        meta.write_text(meta.read_text().replace(f"image: {_image_of(meta)}", f"image: {image}"))
    (repo / "tasks" / b / "Dockerfile").write_text("FROM registry.example/private/env:3\n")
    try:
        with caplog.at_level(logging.WARNING, logger="tasks.swebench_repo"):
            loaded = {t.id: t for t in load_repo_tasks(repo)}
        assert len(loaded) == 3
        assert loaded[a].metadata[IMAGE_BUILT] == [
            "debian:bookworm-slim -> the Debian bookworm base (Python 3.11; debian:bookworm*)"
        ]
        assert f"tasks/{b}: its image nowhere-harness-test/x:1 is not present locally" in caplog.text
        assert "no stand-in for the base image 'registry.example/private/env:3'" in caplog.text
        instance = loaded[a].metadata["instance"]
        assert grade(instance, instance["patch"], docker_backend).verdict == "resolved"
    finally:
        docker_backend.client.images.remove(rebuilt, force=True)


def _image_of(meta: Path) -> str:
    import yaml

    return yaml.safe_load(meta.read_text())["image"]


def test_a_gold_patch_that_does_not_apply_fails_that_task_only(exported, tmp_path):
    repo, (a, b, c) = _two_tasks(exported, tmp_path)
    gold = repo / "tasks" / a / "gold.patch"
    from tasks.grading.patch_policy import parse_patch

    target = parse_patch(gold.read_text())[0].path
    gold.write_text(gold.read_text().replace(target, "src/not_in_the_repository.py"))  # edits a file that is not there
    done = harness("grade", "--predictions", "gold", "--tasks", str(repo), "--output", str(tmp_path / "run"))
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {r["instance_id"]: r for r in rows_of(tmp_path / "run" / "results.jsonl")}
    assert {i: r["verdict"] for i, r in rows.items()} == {a: "patch_apply_failed", b: "resolved", c: "resolved"}
    assert "src/not_in_the_repository.py" in rows[a]["apply_error"] and rows[b]["apply_error"] == "", rows[a]


def test_test_assets_are_staged_after_the_patches(exported, tmp_path, docker_backend):
    """A file the task declares in `image_assets` reaches its place in the repository from `test_assets/` before
    the tests start, as `run_evaluation` stages it."""
    from tasks.grading.grade import run_eval

    repo, (a, _, _) = _two_tasks(exported, tmp_path)
    task_dir = repo / "tasks" / a
    (task_dir / "test_assets" / "tests" / "data").mkdir(parents=True)
    (task_dir / "test_assets" / "tests" / "data" / "expected.bin").write_bytes(b"asset-bytes-7c1\n")
    with (task_dir / "task.yaml").open("a") as meta:
        meta.write("image_assets:\n  test_patch:\n  - path: tests/data/expected.bin\n")
    script = (task_dir / "eval.sh").read_text()
    start = ": '>>>>> Start Test Output'\n"
    (task_dir / "eval.sh").write_text(script.replace(start, start + "cat tests/data/expected.bin\n"))
    (task,) = [t for t in load_tasks(str(repo)) if t.id == a]
    _, log = run_eval(task.metadata["instance"], "", docker_backend)
    assert "asset-bytes-7c1" in log.split(">>>>> Start Test Output", 2)[-1]


def test_tasks_validate_reports_each_broken_task_once(exported, tmp_path):
    repo, (a, b, c) = _two_tasks(exported, tmp_path)
    assert harness("tasks", "validate", str(repo)).returncode == 0
    (repo / "tasks" / a / "eval.sh").unlink()  # swebench's checks find this
    meta = repo / "tasks" / b / "task.yaml"  # and ours this, which they do not look at
    meta.write_text(meta.read_text().replace("parse_log_pytest", "parse_log_nothing"))
    done = harness("tasks", "validate", str(repo))
    assert done.returncode == 1 and "Traceback" not in done.stdout + done.stderr
    output = " ".join(done.stdout.split())
    assert output.count(f"tasks/{a}: missing eval.sh") == 1 and f"tasks/{b}/task.yaml: log_parser unknown" in output
    assert c not in output and "2 problem(s)" in output
