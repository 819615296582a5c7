"""An agent on the user's own repository: `harness run` and `Agent.from_checkpoint(...).run_task(...)`
on a real local git repository, in real sandboxes, judged by a real pytest run in a fresh sandbox."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.agent import Agent
from harness.errors import HarnessError, PolicyError
from tasks.repos import git
from tests.cli_helpers import harness
from tests.harness.test_local_and_served_model import served  # noqa: F401  (the fixture: `harness serve` of the tiny model)
from tests.tasks.harbor_init import assert_atif_valid

BUGGY = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
TESTS = "from calc import add, mul\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"
TEST_COMMAND = "python3 -m pytest -q -p no:cacheprovider tests/test_calc.py"
REQUEST = "Fix this bug: add(2, 3) returns -1 instead of 5."


@pytest.fixture
def user_repo(tmp_path: Path) -> Path:
    """A user's repository: one commit, an ignored build folder, and an untracked note."""
    repo = tmp_path / "calcproject"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text(BUGGY)
    (repo / "tests" / "test_calc.py").write_text(TESTS)
    (repo / ".gitignore").write_text("build/\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "calc")
    (repo / "build").mkdir()
    (repo / "build" / "huge.bin").write_bytes(b"\0" * 1000)
    (repo / "NOTES.md").write_text("untracked, but not ignored\n")
    return repo


@pytest.fixture
def fixing_replay(tmp_path: Path) -> Path:
    """A saved trajectory whose turns look around, fix the bug with the editor, run the tests and submit."""

    def call(name: str, **arguments) -> dict:
        return {
            "role": "assistant",
            "content": f"Next: {name}.",
            "tool_calls": [
                {"id": f"c_{name}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
            ],
        }

    messages = [
        {"role": "user", "content": "..."},
        call("bash", command="ls -a && cat calc.py && ls build 2>&1 | head -1"),
        call(
            "str_replace_editor",
            command="str_replace",
            path="/testbed/calc.py",
            old_str="return a - b",
            new_str="return a + b",
        ),
        call("bash", command=TEST_COMMAND),
        call(
            "bash",
            command="mkdir -p pkg/__pycache__ && touch pkg/__pycache__/x.pyc stray.pyc && python3 -m pytest -q tests >/dev/null; "
            "ls -a tests",
        ),
        call("submit"),
    ]
    path = tmp_path / "fix.json"
    path.write_text(json.dumps({"task_id": "anything", "messages": messages}))
    return path


def test_api_fixes_the_repo_and_tests_judge_it(user_repo: Path, fixing_replay: Path, backend):
    seen: list[dict] = []
    with Agent.from_checkpoint(f"replay:{fixing_replay}") as agent:
        result = agent.run_task(
            prompt=REQUEST,
            repo=user_repo,
            max_turns=30,
            backend=backend.name,
            test=TEST_COMMAND,
            on_message=seen.append,
        )
    assert result.exit_status == "submitted" and result.success is True and result.success_rate == 1.0
    assert "-    return a - b\n+    return a + b" in result.patch
    assert "NOTES.md" not in result.patch and "build" not in result.patch
    assert result.patch.count("diff --git") == 1  # caches (.pytest_cache, __pycache__, *.pyc) are never part of it
    listing = result.trajectory.messages[2]["content"]
    assert (
        "NOTES.md" in listing and ".git" in listing and "huge.bin" not in listing
    )  # copied: tracked + untracked, not ignored
    assert "2 passed" in result.trajectory.messages[6]["content"]  # the agent ran the tests in its sandbox
    assert "2 passed" in result.test_output  # and the verdict came from a fresh one
    assert [m["role"] for m in seen] == [m["role"] for m in result.trajectory.messages]  # streamed as they happened
    assert (user_repo / "calc.py").read_text() == BUGGY  # the user's files were never touched

    commit = result.apply_to_branch("agent/fix-add")
    assert git(user_repo, "show", "agent/fix-add:calc.py") == BUGGY.replace("a - b", "a + b")
    assert git(user_repo, "rev-parse", "agent/fix-add").strip() == commit
    assert git(user_repo, "branch", "--show-current").strip() == "main" and (user_repo / "calc.py").read_text() == BUGGY
    assert "worktree" not in git(user_repo, "worktree", "list")  # the temporary work tree is gone
    assert len(git(user_repo, "worktree", "list").splitlines()) == 1


def test_the_submission_is_exactly_the_change_the_agent_made(user_repo: Path, docker_backend, tmp_path):
    from harness.episode import run_episode
    from harness.policies.scripted import ScriptedPolicy
    from harness.policy import Sampling, tool_turn
    from tasks.user_repo import repo_task

    (user_repo / "calc.py").write_text(BUGGY.replace("a - b", "a + b"))
    fix = git(user_repo, "diff")
    git(user_repo, "checkout", "--", "calc.py")
    task = repo_task(user_repo, REQUEST, tmp_path / "staging", test_command=TEST_COMMAND)
    policy = ScriptedPolicy(
        "fix",
        [
            tool_turn("str_replace_editor", command="create", path="/tmp/fix.patch", file_text=fix),
            tool_turn("bash", command="cd /testbed && git apply /tmp/fix.patch && python3 -m pytest -q tests"),
            tool_turn("submit"),
        ],
    )
    trajectory = run_episode(task, policy, Sampling(), backend=docker_backend)
    assert trajectory.model_patch == fix and trajectory.reward == 1.0


def test_api_without_a_fix_fails_and_without_a_test_is_not_judged(user_repo: Path, docker_backend):
    with Agent.from_checkpoint("empty") as agent:
        failed = agent.run_task(prompt=REQUEST, repo=user_repo, backend="docker", test=TEST_COMMAND)
        unjudged = agent.run_task(prompt=REQUEST, repo=user_repo, backend="docker")
    assert failed.exit_status == "submitted" and failed.patch == "" and failed.success is False
    assert "1 failed, 1 passed" in failed.test_output
    assert unjudged.success is None and unjudged.success_rate is None
    assert unjudged.trajectory.reward_details["judged"] is False
    with pytest.raises(Exception, match="no patch to commit"):
        failed.apply_to_branch("agent/nothing")


def test_api_with_the_openhands_runtime(user_repo: Path, fixing_replay: Path, docker_backend):
    # SkyRL's walkthrough: run_task(..., runtime="openhands"); the replayed turns are OpenHands' own tool calls
    with Agent.from_checkpoint(f"replay:{fixing_replay}") as agent:
        result = agent.run_task(prompt=REQUEST, repo=user_repo, runtime="openhands", max_turns=30, test=TEST_COMMAND)
    assert result.exit_status == "submitted" and result.success is True, result.trajectory.error
    assert "-    return a - b\n+    return a + b" in result.patch and "2 passed" in result.test_output
    assert result.trajectory.metadata["scaffold"]["name"] == "openhands"
    called = [c["function"]["name"] for m in result.trajectory.messages for c in m.get("tool_calls") or []]
    assert called == ["terminal", "file_editor", "terminal", "terminal", "finish"]
    edited = next(m for m in result.trajectory.messages if m["role"] == "tool" and "has been edited" in m["content"])
    assert (
        "/testbed/calc.py" in edited["content"] and "return a + b" in edited["content"]
    )  # OpenHands' editor, on the sandbox's file
    assert "2 passed" in [m for m in result.trajectory.messages if m["role"] == "tool"][2]["content"]
    assert (user_repo / "calc.py").read_text() == BUGGY


def test_api_with_a_checkpoint_folder(user_repo: Path, tiny_model: Path, docker_backend, one_torch_thread):
    with Agent.from_checkpoint(tiny_model, max_tokens=24, seed=0) as agent:
        result = agent.run_task(prompt=REQUEST, repo=user_repo, max_turns=2, backend="docker", test=TEST_COMMAND)
    assert result.trajectory.turns >= 1 and result.exit_status in (
        "max_turns",
        "format_errors",
        "submitted",
        "context_exceeded",
    )
    assert result.success is (result.patch != "" and "2 passed" in result.test_output)  # a random model rarely fixes it
    assert result.trajectory.token_ids and result.trajectory.policy


def test_bad_requests_are_clear_errors(user_repo: Path, tmp_path: Path):
    agent = Agent.from_checkpoint("empty")
    with pytest.raises(HarnessError, match="sandbox backend 'kubernetes' is not built"):
        agent.run_task(prompt=REQUEST, repo=user_repo, backend="kubernetes")
    with pytest.raises(HarnessError, match="sandbox backend 'kubernetes' is not built"):
        agent.run_task(prompt=REQUEST, repo=user_repo, runtime="kubernetes")  # SkyRL's spelling of the same
    with pytest.raises(HarnessError, match="runtime 'openhands' is the openhands scaffold"):
        agent.run_task(prompt=REQUEST, repo=user_repo, runtime="openhands", scaffold="mini-swe-agent")
    with (
        pytest.warns(FutureWarning, match="wall_time=.* is deprecated"),
        pytest.raises(HarnessError, match="max_turns"),
    ):
        agent.run_task(prompt=REQUEST, repo=user_repo, max_turns=0, wall_time=60)  # the former name of episode_timeout
    with pytest.raises(Exception, match="is not a folder"):
        agent.run_task(prompt=REQUEST, repo=tmp_path / "missing", backend="docker")
    with pytest.raises(Exception, match="the request is empty"):
        agent.run_task(prompt="  ", repo=user_repo, backend="docker")
    with pytest.raises(PolicyError, match="no reference solution"):
        Agent.from_checkpoint("gold").policy.for_task(_task(user_repo, tmp_path))


def _task(repo: Path, tmp_path: Path):
    from tasks.user_repo import repo_task

    return repo_task(repo, REQUEST, tmp_path / "staging")


def test_cli_run_streams_writes_the_patch_and_a_branch(
    user_repo: Path, fixing_replay: Path, tmp_path: Path, docker_backend
):
    patch = tmp_path / "fix.diff"
    result = harness(
        "run",
        REQUEST,
        "--checkpoint",
        f"replay:{fixing_replay}",
        "--repo",
        str(user_repo),
        "--max-turns",
        "30",
        "--test",
        TEST_COMMAND,
        "--patch-out",
        str(patch),
        "--branch",
        "agent/cli-fix",
        "--output",
        str(tmp_path / "run"),
        "--context",
        "window:1",
        "--trajectory-format",
        "atif",
        timeout=600,
    )
    said = " ".join(result.stdout.split())
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "── assistant" in result.stdout and "→ str_replace_editor" in said and "── tool (bash)" in said
    assert "exit status: submitted; 1 file(s) changed; tests pass" in said
    assert "+    return a + b" in patch.read_text()
    assert (tmp_path / "run" / "model.patch").read_text() == patch.read_text()
    saved = json.loads((tmp_path / "run" / "trajectory.json").read_text())
    assert saved["exit_status"] == "submitted" and saved["reward"] == 1.0
    assert git(user_repo, "show", "agent/cli-fix:calc.py").count("a + b") == 1
    assert saved["metadata"]["context"]["strategy"] == "window:1"  # the later prompts dropped the middle turns
    atif = tmp_path / "run" / "atif" / "trajectory.json"  # the same episode as ATIF, Harbor's format
    assert_atif_valid([atif])
    assert json.loads(atif.read_text())["extra"]["harness"]["model_patch"] == saved["model_patch"]

    failing = harness(
        "run",
        REQUEST,
        "--checkpoint",
        "empty",
        "--repo",
        str(user_repo),
        "--test",
        TEST_COMMAND,
        "--output",
        str(tmp_path / "run2"),
        timeout=600,
    )
    assert failing.returncode == 1 and "no changes; tests fail" in " ".join(failing.stdout.split())


def test_cli_run_with_an_endpoint(user_repo: Path, served: str, tmp_path: Path, docker_backend):
    result = harness(
        "run",
        REQUEST,
        "--checkpoint",
        "endpoint:tiny",
        "--base-url",
        served,
        "--repo",
        str(user_repo),
        "--max-turns",
        "2",
        "--max-tokens",
        "16",
        "--output",
        str(tmp_path / "run"),
        timeout=600,
    )
    said = " ".join(result.stdout.split())
    assert result.returncode == 0, result.stdout[-3000:]
    assert "── assistant" in result.stdout and "not judged (no --test)" in said
    saved = json.loads((tmp_path / "run" / "trajectory.json").read_text())
    assert saved["policy"] == "endpoint:tiny" or "tiny" in saved["policy"]
    assert saved["turns"] >= 1 and saved["exit_status"] in ("max_turns", "format_errors", "submitted")


@pytest.mark.parametrize("command", ["run", "generate"])
def test_a_context_that_is_not_a_strategy_is_refused_before_any_episode(command, user_repo: Path, tmp_path: Path):
    where = ["--repo", str(user_repo)] if command == "run" else ["--output", str(tmp_path / "data")]
    args = [REQUEST] if command == "run" else []
    result = harness(command, *args, "--checkpoint", "empty", *where, "--context", "summarise:300")
    assert result.returncode != 0
    assert "context 'summarise:300': no such strategy" in " ".join((result.stdout + result.stderr).split())
