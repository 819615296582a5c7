"""`harness tasks mine` on real merged fixes ($HARNESS_SHARED/swebench-real: flask, requests, pytest,
sympy), then graded: gold all, empty none; the mined images hold no history after the base
commit; the official harness (`swebench.harness.run_evaluation`) gives the same verdicts
as `harness grade` on the same images and predictions; and written as a SWE-bench task repository,
two of them read back unchanged and get `harness grade`'s verdicts from SWE-bench's own CLI."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.cli_helpers import harness
from tests.conftest import SHARED, require, same_change

# Every test waits for the module's mining of eight real fixes (minutes).
pytestmark = pytest.mark.slow

REAL = SHARED / "swebench-real"
# CI mines all eight; both graders grade gold and empty on all eight (gold 8/8, empty 0/8) and a wrong fix, two
# cheats and a real-agent-style fix on one instance per log parser (docs/mining.md). HARNESS_MINE_ONLY=<id>,<id>
# mines (and compares) a few.


QUICKEST = ("pallets__flask-5014", "pytest-dev__pytest-10051")


def records() -> list[dict]:
    every = instances_of(REAL / "instances.jsonl")
    only = [i for i in os.environ.get("HARNESS_MINE_ONLY", "").split(",") if i]
    return [r for r in every if not only or r["instance_id"] in only]


@pytest.fixture(scope="module")
def mined(tmp_path_factory, docker_backend):
    require((REAL / "instances.jsonl").exists(), f"the real merged fixes are not at {REAL}")
    folder = tmp_path_factory.mktemp("mined")
    source = folder / "records" / "instances.jsonl"
    source.parent.mkdir()
    (source.parent / "repos").symlink_to(REAL / "repos")
    source.write_text("".join(json.dumps(r) + "\n" for r in records()))
    output = folder / "instances.jsonl"
    started = time.monotonic()
    done = harness(
        "tasks", "mine", str(source), "--output", str(output), "--workers", "2", "--backend", "docker", timeout=3600
    )
    print(f"mining took {time.monotonic() - started:.0f}s\n{done.stdout}")
    assert done.returncode == 0, done.stdout + done.stderr
    return output


def instances_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.timeout(3600)  # the first test waits for the mining
def test_every_real_fix_becomes_an_instance_our_loaders_accept(mined):
    from tasks.taskset import load_tasks

    wanted = records()
    instances = {i["instance_id"]: i for i in instances_of(mined)}
    assert sorted(instances) == sorted(r["instance_id"] for r in wanted)
    for record in wanted:
        instance = instances[record["instance_id"]]
        assert instance["base_commit"] == record["base_commit"] and instance["patch"] == record["patch"]
        assert instance["FAIL_TO_PASS"] and not set(instance["FAIL_TO_PASS"]) & set(instance["PASS_TO_PASS"])
        assert all(t.split("::")[0] in record["test_patch"] for t in instance["FAIL_TO_PASS"])
        assert instance["image"].startswith("harness-mined/") and instance["log_parser"] and instance["eval_script"]
        # sympy runs its own bin/test, named as the official sympy parser names tests
        sympy = record["repo"] == "sympy/sympy"
        assert (instance["log_parser"] == "parse_log_sympy") == sympy == ("bin/test" in instance["eval_script"])
        assert sympy == all("::" not in t for t in instance["FAIL_TO_PASS"] + instance["PASS_TO_PASS"])
    assert len(load_tasks(str(mined))) == len(wanted)


def test_mined_images_hold_nothing_after_the_base_commit(mined, docker_backend):
    from sandboxes import SandboxSpec

    for instance in instances_of(mined):
        record = next(r for r in instances_of(REAL / "instances.jsonl") if r["instance_id"] == instance["instance_id"])
        with docker_backend.create(SandboxSpec(image=instance["image"], workdir="/testbed")) as sb:

            def run(command: str) -> str:
                result = sb.exec(command, timeout=120)
                assert result.exit_code == 0, (command, result.output)
                return result.output.strip()

            base = instance["base_commit"]
            assert run("git rev-parse HEAD") == base
            assert run("git log --all --format=%H").split() == [base]
            assert run("git reflog --all") == ""
            commits = run(
                "git cat-file --batch-all-objects --batch-check='%(objecttype) %(objectname)' | grep '^commit' || true"
            )
            assert commits.split() == ["commit", base]
            assert run("git status --porcelain --untracked-files=no") == ""
            # The fixed files' contents are nowhere in the object store.
            sb.write_file("/tmp/gold.patch", record["patch"])
            run("git apply /tmp/gold.patch")
            for path in {line[6:] for line in record["patch"].splitlines() if line.startswith("+++ b/")}:
                blob = run(f"git hash-object {path}")
                assert sb.exec(f"git cat-file -e {blob}", timeout=60).exit_code != 0, path
            assert sb.exec(f"git cat-file -e {record['merge_commit']}", timeout=60).exit_code != 0
        # `docker stop` (the official harness's cleanup) kills at once instead of waiting 15 s
        assert docker_backend.client.images.get(instance["image"]).attrs["Config"]["StopSignal"] == "SIGKILL"


def test_a_gold_episode_on_a_mined_task_submits_the_gold_patch(mined, docker_backend):
    """Each instance was kept because its gold episode resolved it and its empty one did not (`harness tasks
    mine` runs both); one of them again here: the submission is the gold patch, nothing of the install's."""
    from harness.episode import run_episode
    from harness.policies.scripted import GoldPolicy
    from harness.policy import Sampling
    from tasks.swe import instance_to_task

    instance = min(instances_of(mined), key=lambda i: len(i["PASS_TO_PASS"]))  # the quickest suite
    gold = run_episode(instance_to_task(instance), GoldPolicy(), Sampling(), backend=docker_backend)
    assert same_change(gold.model_patch, instance["patch"]) and gold.reward_details["verdict"] == "resolved"


def parity(instances: list[dict], output: Path, kinds: tuple[str, ...]) -> list[dict]:
    from bench.grading_parity_bench import run_parity

    subset = output / "instances.jsonl"
    subset.parent.mkdir(parents=True, exist_ok=True)
    subset.write_text("".join(json.dumps(i) + "\n" for i in instances))
    rows = run_parity(subset, output / "parity", workers=2, kinds=kinds)
    assert instances and len(rows) == len(kinds) * len(instances)
    assert [r for r in rows if r["ours"] != r["theirs"] or r["theirs_error"]] == []
    return rows


def one_per_log_parser(mined: Path) -> list[dict]:
    return list({i["log_parser"]: i for i in reversed(instances_of(mined))}.values())


@pytest.mark.proof  # CI runs gold and empty on one instance per log parser (the next test)
@pytest.mark.timeout(3600)
def test_the_official_harness_resolves_gold_and_not_empty_on_every_instance(mined, tmp_path):
    """swebench.harness.run_evaluation and `harness grade`'s grading on the same images, gold and empty on
    every mined instance (pytest's and sympy's bin/test parsers): identical verdicts, gold resolving all."""
    rows = parity(instances_of(mined), tmp_path, ("gold", "empty"))
    assert {(r["kind"], r["ours"]) for r in rows} == {("gold", True), ("empty", False)}


@pytest.mark.timeout(3600)
def test_non_fixes_and_real_agent_style_patches_get_the_official_verdicts(mined, tmp_path):
    """On one instance per log parser: gold, which both graders resolve; empty, a wrong fix and two cheats, which
    neither resolves; and the gold patch plus all that real agents leave beside a fix (a new test file, a regression
    test appended to a file of the test patch, a `tox.ini` or `setup.cfg` hunk, a binary fixture as plain `git diff`
    writes it), which the official harness resolves, and so does ours, neutralizing the test and runner files."""
    from tests.cli_helpers import rows_of

    non_fixes = ("empty", "wrong", "cheat-tests", "cheat-exit")
    rows = parity(one_per_log_parser(mined), tmp_path, ("gold", *non_fixes, "agent-style"))
    resolving = {("gold", True), ("agent-style", True)}
    assert {(r["kind"], r["ours"]) for r in rows} == {(k, False) for k in non_fixes} | resolving
    for row in rows_of(tmp_path / "parity" / "ours" / "agent-style" / "results.jsonl"):
        neutralized = {note.split(": ")[0] for note in row["neutralized"]}
        assert "test_harness_agent_repro.py" in neutralized and neutralized & {"tox.ini", "setup.cfg"}, row
        assert row["verdict"] == "resolved", row


@pytest.fixture(scope="module")
def quick_instance(mined) -> dict:
    """The mined instance quickest to grade (flask's, where it was mined)."""
    return min(instances_of(mined), key=lambda i: i["repo"] != "pallets/flask")


@pytest.fixture(scope="module")
def docker_verdicts(quick_instance, docker_backend) -> dict:
    from tasks.grading.grade import grade

    return {
        kind: grade(quick_instance, patch, docker_backend)
        for kind, patch in (("gold", quick_instance["patch"]), ("empty", ""))
    }


@pytest.mark.timeout(1800)  # podman's first use of the image copies it from the engine
@pytest.mark.parametrize("other", ["overlay", "podman"])
def test_a_mined_instance_gets_dockers_verdicts_on_other_backends(other, quick_instance, docker_verdicts, request):
    """Gold and empty on a real mined instance, graded on the overlay and podman backends: Docker's verdict
    and Docker's status for every test."""
    from tasks.grading.grade import grade

    backend = request.getfixturevalue(f"{other}_backend")
    assert {kind: report.verdict for kind, report in docker_verdicts.items()} == {
        "gold": "resolved",
        "empty": "empty_patch",
    }
    for kind, patch in (("gold", quick_instance["patch"]), ("empty", "")):
        report = grade(quick_instance, patch, backend)
        assert (report.verdict, report.tests_status) == (
            docker_verdicts[kind].verdict,
            docker_verdicts[kind].tests_status,
        ), kind


@pytest.mark.timeout(1800)
def test_a_mined_instance_runs_on_overlay_with_no_engine_once_its_image_is_stored(
    quick_instance, overlay_backend, tmp_path, monkeypatch
):
    """`harness eval --backend overlay` on a real mined instance, with `DOCKER_HOST` pointing at nothing: the image
    comes from the overlay store (put there while an engine answered); gold resolves, empty does not."""
    from tasks.grading.grade import grade
    from tests.cli_helpers import harness
    from tests.sandboxes.test_no_engine import NO_ENGINE

    grade(quick_instance, "", overlay_backend)  # with the engine: the store unpacks and remembers the image
    tasks = tmp_path / "instance.jsonl"
    tasks.write_text(json.dumps(quick_instance) + "\n")
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    rates = {}
    for checkpoint in ("gold", "empty"):
        out = tmp_path / checkpoint
        done = harness(
            "eval", "--backend", "overlay", "--checkpoint", checkpoint, "--tasks", str(tasks), "--output", str(out)
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        rates[checkpoint] = json.loads((out / "report.json").read_text())["resolve_rate"]
    assert rates == {"gold": 1.0, "empty": 0.0}


def test_two_mined_instances_as_a_task_repository_get_our_verdicts_from_the_official_cli(mined, tmp_path):
    """Two mined instances written as a SWE-bench task repository: swebench's own checks pass;
    read back, they are the instances written (their image named as the repository names it, on the same
    layers); and `swebench eval` on the compiled split gives `harness grade`'s verdict on the repository for
    gold, empty and a real-agent-style patch, with the same result for every test it runs."""
    from swebench.task.checks import check_task_repo, expected_image

    from bench.swebench_repo_parity_bench import run_repo_parity
    from tasks.taskset import load_tasks

    # flask's and pytest's quickest suites (about 10 s a run), where they were mined
    chosen = sorted(instances_of(mined), key=lambda i: i["instance_id"] not in QUICKEST)[:2]
    source = tmp_path / "instances.jsonl"
    source.write_text("".join(json.dumps(i) + "\n" for i in chosen))
    rows = run_repo_parity(source, tmp_path / "parity", ("gold", "empty", "agent-style"))
    repo = tmp_path / "parity" / "tasks"
    assert check_task_repo(repo) == []
    back = {t.id: t.metadata["instance"] for t in load_tasks(str(repo))}
    for instance in chosen:
        read = back[instance["instance_id"]]
        # swebench's loader gives every instance a hints_text (hints.md is optional)
        written = {**instance, "hints_text": instance.get("hints_text", "")}
        assert read == {**written, "image": expected_image(instance["instance_id"])}
        assert _layers(read["image"]) == _layers(instance["image"])
    assert [(r["kind"], r["ours"]) for r in rows] == [
        (kind, kind != "empty") for kind in ("gold", "empty", "agent-style") for _ in chosen
    ]
    assert [r for r in rows if r["ours"] != r["theirs"] or r["theirs_error"] or r["pulled"]] == []
    assert [r["same_tests"] for r in rows] == [r["kind"] != "empty" or None for r in rows]


def _layers(image: str) -> list[str]:
    from sandboxes.docker_backend import docker_client

    return docker_client().images.get(image).attrs["RootFS"]["Layers"]
