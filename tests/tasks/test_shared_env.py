"""One environment image per repository (tasks/shared_env.py), with real git, Docker and pytest."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness.evaluate import EvalConfig, evaluate
from harness.policies.scripted import GoldPolicy
from sandboxes import SandboxError, SandboxSpec
from sandboxes.images import build_base_image
from tasks.errors import TaskError
from tasks.grading.grade import grade, run_setup
from tasks.shared_env import repo_archive, share
from tasks.swe import instance_to_task
from tasks.swe_demo import build_instance, task_dirs
from tests.conftest import same_change


def _git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "PATH": "/usr/bin:/bin",
    }
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def spanlite(docker_backend):
    """Two swe-demo instances of one package: per-instance and shared forms."""
    dirs = [d for d in task_dirs() if d.name.startswith("spanlite")][:2]
    return [(build_instance(d, docker_backend), build_instance(d, docker_backend, shared=True)) for d in dirs]


def test_instances_of_one_repository_share_one_image(spanlite):
    (own_a, shared_a), (own_b, shared_b) = spanlite
    assert shared_a["image"] == shared_b["image"] == build_base_image()
    assert own_a["image"] != own_b["image"] and own_a["image"].startswith(
        "harness-swe-demo/"
    )  # the per-instance path stays
    assert "repo_archive" not in own_a and shared_a["repo_archive"] != shared_b["repo_archive"]
    assert {k: v for k, v in shared_a.items() if k != "repo_archive"} == {**own_a, "image": shared_a["image"]}


def test_the_repository_put_in_holds_nothing_after_the_base_commit(tmp_path, docker_backend):
    source = tmp_path / "src"
    source.mkdir()
    _git(source, "init", "-q", "-b", "main")
    (source / "mod.py").write_text("def f():\n    return 1  # bug\n")
    (source / ".gitignore").write_text("*.egg-info/\n")
    _git(source, "add", "-A")
    _git(source, "commit", "-qm", "base")
    base = _git(source, "rev-parse", "HEAD").strip()
    (source / "mod.py").write_text("def f():\n    return 2  # the fix\n")
    _git(source, "commit", "-qam", "the fix")
    _git(source, "tag", "v-fix")
    fix = _git(source, "rev-parse", "HEAD").strip()
    fixed_blob = _git(source, "rev-parse", "HEAD:mod.py").strip()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
        archive = repo_archive(source, base, "local/src")
    instance = share({"instance_id": "t-1", "base_commit": base, "workdir": "/testbed"}, build_base_image(), archive)
    with docker_backend.create(SandboxSpec(image=instance["image"], workdir="/testbed")) as sb:
        # The environment's tree: a later commit's (the fix, a new test) and the install's build artifact.
        sb.exec(
            "mkdir -p /testbed/tests /testbed/src.egg-info && cd /testbed && echo 'return 2  # the fix' > mod.py && "
            "echo 'def test_new(): pass' > tests/test_new.py && echo stale > left_over.txt && echo x > src.egg-info/PKG-INFO"
        )
        run_setup(sb, instance)
        assert sb.exec("cd /testbed && git log --all --format=%H").output.split() == [base]
        assert sb.exec("cd /testbed && git reflog --all | wc -l").output.strip() == "0"
        assert not sb.exec(f"cd /testbed && git cat-file -e {fix}").ok
        assert not sb.exec(f"cd /testbed && git cat-file -e {fixed_blob}").ok
        assert sb.exec("cd /testbed && git for-each-ref --format='%(refname)'").output.split() == ["refs/heads/main"]
        assert (
            sb.exec("cd /testbed && git status --porcelain").output.strip() == ""
        )  # clean: the later commit's files gone
        assert sb.exec("cd /testbed && ls -A").output.split() == [".git", ".gitignore", "mod.py", "src.egg-info"]
        assert "# bug" in sb.read_file("/testbed/mod.py").decode()


def test_a_wrong_or_missing_archive_is_a_clear_error(spanlite, docker_backend, tmp_path):
    (_, shared_a), (_, shared_b) = spanlite
    with docker_backend.create(SandboxSpec(image=shared_a["image"], workdir="/testbed")) as sb:
        with pytest.raises(SandboxError, match="not clean at the base commit"):
            run_setup(sb, {**shared_a, "repo_archive": shared_b["repo_archive"]})
        with pytest.raises(TaskError, match="archive .* is missing"):
            run_setup(sb, {**shared_a, "repo_archive": str(tmp_path / "gone.tar")})


def test_gold_resolves_and_empty_does_not_through_the_shared_image(spanlite, docker_backend, tmp_path):
    (_, shared), _ = spanlite
    assert grade(shared, "", docker_backend).resolution == "NO"
    # The episode (the gold policy's turns in the shared image) and its grading, through the eval driver.
    config = EvalConfig(tasks="swe-demo-shared", checkpoint="gold", output=str(tmp_path), workers=1)
    report = evaluate([instance_to_task(shared)], GoldPolicy(), config, docker_backend)
    assert report["resolve_rate"] == 1.0, json.dumps(report)[:2000]
    # the repository put in at start (and the environment's build artifacts) are not the submission's
    (row,) = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert same_change(row["model_patch"], shared["patch"]) and row["verdict"] == "resolved"


def _merge(repo: Path, number: int, files: dict[str, str], message: str) -> None:
    _git(repo, "checkout", "-q", "-b", f"pr{number}")
    for name, text in files.items():
        (repo / name).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", message)
    _git(repo, "checkout", "-q", "main")
    _git(repo, "merge", "-q", "--no-ff", f"pr{number}", "-m", f"Merge pull request #{number} from someone/pr{number}")


def test_mining_two_fixes_of_one_repository_builds_one_environment(tmp_path, docker_backend):
    from harness.episode import run_episode
    from harness.episode_check import episode_check
    from harness.policy import Sampling
    from tasks.mining.mine import mine, records_from_git

    repo = tmp_path / "calc"
    (repo / "tests").mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "remote", "add", "origin", "https://github.com/acme/calc.git")
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a + b\n")
    (repo / "tests" / "test_calc.py").write_text("from calc import add, mul\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "start")
    _merge(
        repo,
        1,
        {
            "calc.py": "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a + b\n",
            "tests/test_calc.py": "from calc import add, mul\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
        },
        "Fix add",
    )
    _merge(
        repo,
        2,
        {
            "calc.py": "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n",
            "tests/test_calc.py": "from calc import add, mul\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
            "def test_mul():\n    assert mul(2, 3) == 6\n",
        },
        "Fix mul",
    )
    records = records_from_git(str(repo), ["1", "2"])
    checked = []  # each instance is kept only once its gold episode resolved it and its empty one did not

    def check(instance: dict) -> str:
        checked.append(instance["instance_id"])
        return episode_check(instance, docker_backend)

    results = mine(
        records,
        tmp_path / "mined.jsonl",
        docker_backend,
        workers=1,
        on_step=lambda text: None,
        share_env=True,
        check=check,
    )
    first, second = (next(m for m in results if m.instance_id == f"acme__calc-{n}") for n in (1, 2))
    assert first.instance and second.instance, (first.reason, second.reason)
    assert second.dependencies == "the repository's shared environment"
    assert first.instance["image"] == second.instance["image"] and first.instance["image"].startswith(
        "harness-synth/calc-env:"
    )
    assert second.instance["FAIL_TO_PASS"] == ["tests/test_calc.py::test_mul"]
    assert second.instance["PASS_TO_PASS"] == ["tests/test_calc.py::test_add"]
    assert sorted(checked) == ["acme__calc-1", "acme__calc-2"]
    gold = run_episode(instance_to_task(second.instance), GoldPolicy(), Sampling(), backend=docker_backend)
    assert same_change(gold.model_patch, records[1]["patch"]) and gold.reward_details["verdict"] == "resolved"
