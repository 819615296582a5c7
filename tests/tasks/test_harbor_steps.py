"""Multi-step Harbor tasks (`[[steps]]`), made by Harbor's own `harbor tasks init --steps 2` and filled in: run in one
sandbox step by step, each step a fresh agent session with its own verifier, `min_reward` ending the trial, the
trial's reward the steps' per-key mean; the oracle and nothing given the verdicts the real `harbor run` gives."""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bench.harbor_bench import harbor_run, on_built_images
from tasks.taskset import load_tasks
from tests.cli_helpers import rows_of, harness
from tests.tasks.harbor_init import assert_atif_valid, init_task

# step-1 writes hello (reward.txt); step-2 gets files and a setup.sh in its workdir/, appends world, and its
# reward.json has a second key, `setup`, that step-1's lacks (Harbor's mean counts it 0 there)
STEP_1 = (
    "Write the line `hello` to /app/hello.txt.\n",
    "#!/bin/bash\necho hello > /app/hello.txt\n",
    '[ "$(cat /app/hello.txt)" = hello ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n',
)
STEP_2 = (
    "Append the line `world` to /app/hello.txt.\n",
    "#!/bin/bash\necho world >> /app/hello.txt\n",
    'ok=0; [ "$(cat /app/hello.txt)" = "$(printf "hello\\nworld")" ] && ok=1\n'
    'setup=0; [ -f /app/ready ] && [ "$(cat /app/given.txt)" = given ] && [ ! -e /tests/step-1-only ] && setup=1\n'
    'echo "{\\"reward\\": $ok, \\"setup\\": $setup}" > /logs/verifier/reward.json\n',
)


def two_steps(root: Path, name: str, *options: str, min_reward: bool = False, final: bool = False) -> Path:
    task = init_task(root, name, "--steps", "2", "--no-pytest", *options)
    for step, (instruction, solve, check) in (("step-1", STEP_1), ("step-2", STEP_2)):
        folder = task / "steps" / step
        (folder / "instruction.md").write_text(instruction)
        (folder / "solution" / "solve.sh").write_text(solve)
        with (folder / "tests" / "test.sh").open("a") as script:
            script.write(check)
    (task / "steps" / "step-1" / "tests" / "step-1-only").write_text("cleared before step-2\n")
    workdir = task / "steps" / "step-2" / "workdir"
    workdir.mkdir()
    (workdir / "given.txt").write_text("given\n")
    (workdir / "setup.sh").write_text("touch /app/ready\n")
    toml = (task / "task.toml").read_text()
    if min_reward:  # step-1 below 1 ends the trial
        toml = re.sub(r'(?m)^name = "step-1"$', 'name = "step-1"\nmin_reward = 1.0', toml)
    if final:  # the trial's reward is the last step's
        toml = 'multi_step_reward_strategy = "final"\n' + toml
    # a separate verifier sees what the agent left only where the task names it as an artifact
    toml = re.sub(r"(?m)^artifacts = \[\]", 'artifacts = ["/app"]', toml, count=1)
    (task / "task.toml").write_text(toml)
    return task


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, docker_backend) -> Path:
    root = tmp_path_factory.mktemp("harbor-steps")
    two_steps(root, "gated", "--verifier-mode", "shared", min_reward=True)
    two_steps(root, "ungated", "--verifier-mode", "shared")
    two_steps(root, "separate", final=True)  # Harbor's default: each step's verifier in its own tests/Dockerfile
    return root


# (policy: task: (reward, rewards, steps run))
EXPECTED = {
    "gold": {
        "gated": (1.0, {"reward": 1.0, "setup": 0.5}, 2),
        "ungated": (1.0, {"reward": 1.0, "setup": 0.5}, 2),
        "separate": (1.0, {"reward": 1.0, "setup": 1.0}, 2),
    },
    "empty": {
        "gated": (0.0, {"reward": 0.0}, 1),
        "ungated": (0.0, {"reward": 0.0, "setup": 0.5}, 2),
        "separate": (0.0, {"reward": 0.0, "setup": 1.0}, 2),
    },
}


def test_steps_run_in_turn_with_harbor_rewards(dataset, tmp_path):
    tasks = {task.id: task for task in load_tasks(f"harbor:{dataset}")}
    assert [step["name"] for step in tasks["gated"].metadata["steps"]] == ["step-1", "step-2"]
    assert tasks["gated"].metadata["steps"][0]["min_reward"] == {"reward": 1.0}
    assert tasks["gated"].prompt[0]["content"] == STEP_1[0]
    verifiers = [step["verifier_sandbox"]["image"] for step in tasks["separate"].metadata["steps"]]
    assert [image.split(":")[0] for image in verifiers] == [
        f"harness-harbor/separate-step-{i}-verifier" for i in (1, 2)
    ]
    for policy, expected in EXPECTED.items():
        out = tmp_path / policy
        done = harness(
            "eval", "--checkpoint", policy, "--tasks", f"harbor:{dataset}", "--output", str(out), "--workers", "2",
            "--trajectory-format", "atif",
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        rows = {row["task_id"]: row for row in rows_of(out / "results.jsonl")}
        for task, (reward, rewards, steps) in expected.items():
            assert (rows[task]["reward"], rows[task]["error"]) == (reward, ""), (policy, rows[task])
            saved = json.loads(next((out / "trajectories").glob(f"{task}__0.json")).read_text())
            details = saved["reward_details"]
            assert (details["rewards"], len(details["steps"])) == (rewards, steps), (policy, task, details)
            sessions = saved["metadata"]["sessions"]["sessions"] if steps > 1 else []
            assert len(sessions) == (steps if steps > 1 else 0)
            # each session starts afresh on its step's instruction
            instructions = [saved["messages"][s["first_message"]]["content"] for s in sessions]
            assert instructions == [STEP_1[0], STEP_2[0]][: len(sessions)]
        gated = (
            [{"step": "step-1", "reward": 1.0}, {"step": "step-2", "reward": 1.0}]
            if policy == "gold"
            else [{"step": "step-1", "reward": 0.0, "stopped": "reward=0.0 below min_reward 1.0"}]
        )
        assert rows["gated"]["steps"] == gated
        assert json.loads((out / "report.json").read_text())["per_task"]["gated"]["steps"] == {"0": gated}
        assert_atif_valid(sorted((out / "atif").glob("*.json")))


@pytest.mark.slow  # two Harbor jobs: about 80 s
def test_harbor_run_gives_the_same_verdicts(dataset, tmp_path):
    copies = on_built_images(load_tasks(f"harbor:{dataset}"), tmp_path / "copies")
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda agent: harbor_run(copies, agent, tmp_path / "jobs", workers=2), ("oracle", "nop")))
    for agent, policy in (("oracle", "gold"), ("nop", "empty")):
        for task, (_, rewards, steps) in EXPECTED[policy].items():
            (result,) = (tmp_path / "jobs" / agent).glob(f"{task}__*/result.json")
            trial = json.loads(result.read_text())
            assert trial["verifier_result"]["rewards"] == rewards, (agent, task, trial["verifier_result"])
            assert [s["step_name"] for s in trial["step_results"]] == ["step-1", "step-2"][:steps]


def test_a_scaffold_gets_a_fresh_session_per_step(dataset, tmp_path):
    done = harness(
        "eval", "--checkpoint", "gold", "--tasks", f"harbor:{dataset / 'gated'}", "--scaffold", "mini-swe-agent",
        "--output", str(tmp_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (row,) = rows_of(tmp_path / "results.jsonl")
    assert (row["reward"], row["error"]) == (1.0, ""), row
    assert [step["step"] for step in row["steps"]] == ["step-1", "step-2"]
    saved = json.loads((tmp_path / "trajectories" / "gated__0.json").read_text())
    sessions = saved["metadata"]["sessions"]["sessions"]
    assert [s["exit_status"] for s in sessions] == ["submitted", "submitted"]
    # each session is the scaffold's own conversation from its start: its system prompt, then the step's instruction
    for session in sessions:
        first = saved["messages"][session["first_message"] : session["first_message"] + 2]
        assert first[0]["role"] == "system" and first[1]["role"] == "user"
    assert STEP_2[0].strip() in saved["messages"][sessions[1]["first_message"] + 1]["content"]


def test_every_session_is_trained_on_exactly_what_was_sampled(dataset, docker_backend, tmp_path, one_torch_thread):
    from harness.episode import Limits, run_episode
    from harness.policies.hf import HFPolicy
    from harness.policy import Sampling
    from harness.tiny_model import init_tiny
    from tests.token_exactness import Recording
    from trainer.batch import token_rows

    policy = Recording(HFPolicy(init_tiny(tmp_path / "tiny")))
    (task,) = load_tasks(f"harbor:{dataset / 'ungated'}")
    limits = Limits(max_turns=2, max_format_errors=10)
    trajectory = run_episode(task, policy, Sampling(max_tokens=6), limits, backend=docker_backend)
    # a random model calls no tool: each step's session ends at max_turns, then the step's verifier pays 0
    assert [s["turns"] for s in trajectory.metadata["sessions"]["sessions"]] == [2, 2] and trajectory.turns == 4
    assert [s["step"] for s in trajectory.reward_details["steps"]] == ["step-1", "step-2"]
    rows = token_rows(trajectory)
    assert len(rows) == 2 and len(policy.calls) == 4
    for prompt, generated, logprobs in policy.calls:  # each reply trained once, right after its exact prompt
        sampled = prompt + generated
        trained = [
            r
            for r in rows
            if r[0][: len(sampled)] == sampled and r[1][len(prompt) : len(sampled)] == [1] * len(generated)
        ]
        assert len(trained) == 1 and trained[0][2][len(prompt) : len(sampled)] == logprobs
    assert sum(sum(mask) for _, mask, _ in rows) == sum(len(generated) for _, generated, _ in policy.calls)
    # the second session's prompt holds its own step's instruction, not the first session's conversation
    second = policy.tokenizer.decode(rows[1][0])
    assert STEP_2[0].strip() in second and STEP_1[0].strip() not in second
