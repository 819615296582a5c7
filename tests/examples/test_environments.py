"""The worked example environments (examples/environments/), through the real CLI and the real episode loop.

Each is loaded as a plugin, evaluated with the gold and empty policies, generated from, and checked against
the ways an agent could try to earn its reward without doing the task.
"""

from __future__ import annotations

import json
import sys

import pyarrow.parquet as pq
import pytest

from tests.cli_helpers import ROOT, harness

EXAMPLES = ROOT / "examples" / "environments"
SAMPLING = None


@pytest.fixture(scope="module")
def plugins():
    from infra.plugins import load_plugins

    sys.path.insert(0, str(ROOT))
    load_plugins(
        ["examples.environments.cli_program", "examples.environments.sql_query", "examples.environments.guess_number"]
    )


def run(task, *turns, backend=None):
    from harness.episode import run_episode
    from harness.policies.scripted import ScriptedPolicy
    from harness.policy import Sampling

    return run_episode(task, ScriptedPolicy("scripted", list(turns)), Sampling(temperature=0.0), backend=backend)


def tasks_of(name: str) -> dict:
    from tasks.taskset import load_tasks

    return {task.id: task for task in load_tasks(str(EXAMPLES / f"{name}.jsonl"))}


@pytest.mark.parametrize("name", ["cli_program", "sql_query"])
def test_gold_solves_every_task_and_empty_none(name, docker_backend, tmp_path):
    for checkpoint, limit, expected in (("gold", 6, 1.0), ("empty", 2, 0.0)):
        done = harness(
            "--plugin",
            f"examples.environments.{name}",
            "eval",
            "--checkpoint",
            checkpoint,
            "--limit",
            str(limit),
            "--tasks",
            str(EXAMPLES / f"{name}.jsonl"),
            "--output",
            str(tmp_path / checkpoint),
            "--backend",
            "docker",
        )
        assert done.returncode == 0, done.stdout + done.stderr
        report = json.loads((tmp_path / checkpoint / "report.json").read_text())
        assert report["episodes"] == limit and report["mean_reward"] == expected, report


def test_generate_writes_a_dataset_from_a_plugin_environment(docker_backend, tmp_path):
    done = harness(
        "--plugin",
        "examples.environments.sql_query",
        "generate",
        "--checkpoint",
        "gold",
        "--tasks",
        str(EXAMPLES / "sql_query.jsonl"),
        "--limit",
        "2",
        "--output",
        str(tmp_path / "data"),
        "--backend",
        "docker",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = pq.read_table(tmp_path / "data" / "trajectories.parquet").to_pylist()
    assert len(rows) == 2 and all(row["reward"] == 1.0 for row in rows)


def test_without_the_plugin_the_kind_is_unknown(tmp_path):
    done = harness(
        "eval", "--checkpoint", "gold", "--tasks", str(EXAMPLES / "guess_number.jsonl"), "--output", str(tmp_path / "x")
    )
    said = " ".join(done.stdout.split())
    assert done.returncode == 1 and "unknown task kind (env_class) 'guess_number'" in said and "--plugin" in said
    done = harness("--plugin", "examples.environments.nonexistent", "tasks", "ls")
    assert done.returncode == 1 and "plugin 'examples.environments.nonexistent' cannot be imported" in " ".join(
        done.stdout.split()
    )


# -- the terminal task: graded by a hidden script in a fresh sandbox -------------------------------------------------


def test_a_program_that_fakes_the_example_gets_nothing(plugins, docker_backend):
    from harness.policy import tool_turn

    task = tasks_of("cli_program")["cli_program-greet"]
    fake = tool_turn(
        "str_replace_editor", command="create", path="/work/bin/greet", file_text='#!/bin/sh\necho "Hello, Ada!"\n'
    )
    trajectory = run(
        task,
        fake,
        tool_turn("bash", command="chmod +x /work/bin/greet && /work/bin/greet Ada"),
        tool_turn("submit"),
        backend=docker_backend,
    )
    assert any(
        m["role"] == "tool" and m["content"].strip() == "Hello, Ada!" for m in trajectory.messages
    )  # the prompt's example passes
    assert trajectory.reward == 0.0 and trajectory.reward_details["exit_code"] != 0


def test_a_check_script_planted_in_the_agents_sandbox_is_never_run(plugins, docker_backend):
    from harness.policy import tool_turn

    task = tasks_of("cli_program")["cli_program-add"]
    plant = "printf 'exit 0\\n' > /tmp/hidden_check.sh && printf '#!/bin/sh\\necho 5\\n' > /work/bin/add && chmod +x /work/bin/add"
    trajectory = run(task, tool_turn("bash", command=plant), tool_turn("submit"), backend=docker_backend)
    assert trajectory.exit_status == "submitted" and trajectory.reward == 0.0


def test_no_program_means_no_reward(plugins, docker_backend):
    from harness.policy import tool_turn

    trajectory = run(tasks_of("cli_program")["cli_program-shout"], tool_turn("submit"), backend=docker_backend)
    assert trajectory.reward == 0.0 and "no program at /work/bin/shout" in trajectory.reward_details["reason"]


# -- the SQL task: result sets on the visible and a hidden database --------------------------------------------------


def test_printing_the_expected_rows_is_not_an_answer(plugins, docker_backend):
    from harness.policy import tool_turn

    task = tasks_of("sql_query")["sql_query-0"]  # how many customers live in Oslo
    looked = run(
        task,
        tool_turn("sql", query="SELECT COUNT(*) FROM customers WHERE city = 'Oslo'"),
        tool_turn("submit", answer="SELECT 1"),
        backend=docker_backend,
    )
    count = looked.messages[2]["content"].strip()
    assert count.isdigit()
    literal = run(task, tool_turn("submit", answer=f"SELECT {count}"), backend=docker_backend)
    assert literal.reward == 0.0
    assert literal.reward_details["visible"]["match"] and not literal.reward_details["hidden"]["match"]
    rephrased = run(
        task,
        tool_turn("submit", answer="select count(id) from customers where city in ('Oslo')"),
        backend=docker_backend,
    )
    assert rephrased.reward == 1.0  # any query with the same result sets earns it


def test_every_question_has_different_answers_on_the_hidden_database(plugins, docker_backend):
    """Else printing the visible rows would pass: the hidden database must tell them apart."""
    from examples.environments.sql_query import BUILD, HIDDEN_SEED_OFFSET, run_queries
    from sandboxes import SandboxSpec

    tasks = tasks_of("sql_query").values()
    with docker_backend.create(SandboxSpec(image="harness-base:latest")) as sandbox:
        sandbox.write_file("/tmp/build_db.py", BUILD)
        for task in tasks:
            seed = task.metadata["seed"]
            sandbox.exec(
                f"python3 /tmp/build_db.py /tmp/v{seed}.db {seed} && python3 /tmp/build_db.py /tmp/h{seed}.db {seed + HIDDEN_SEED_OFFSET}"
            )
            query = task.reward_spec["ground_truth"]
            (visible,), (hidden,) = (
                run_queries(sandbox, f"/tmp/v{seed}.db", [query]),
                run_queries(sandbox, f"/tmp/h{seed}.db", [query]),
            )
            assert isinstance(visible, list) and visible and visible != hidden, task.id


def test_the_database_cannot_be_changed_and_errors_are_observations(plugins, docker_backend):
    from harness.policy import tool_turn

    task = tasks_of("sql_query")["sql_query-5"]
    trajectory = run(
        task,
        tool_turn("sql", query="DELETE FROM orders"),
        tool_turn("sql", query="SELEC nonsense"),
        tool_turn("submit", answer="DELETE FROM orders"),
        backend=docker_backend,
    )
    assert "readonly" in trajectory.messages[2]["content"] and "syntax error" in trajectory.messages[4]["content"]
    assert trajectory.reward == 0.0


# -- the 30-line environment of the docs ---------------------------------------------------------------------------


def test_the_docs_include_the_30_line_environment_file():
    source = (EXAMPLES / "guess_number.py").read_text()
    assert len(source.splitlines()) <= 35
    # Included at build time (pymdownx.snippets; tests/test_docs.py builds it), never a copy that could drift.
    assert '--8<-- "examples/environments/guess_number.py"' in (ROOT / "docs" / "environments.md").read_text()


def test_guess_number_is_multi_turn(plugins):
    from harness.policy import Completion

    task = next(iter(tasks_of("guess_number").values()))
    secret = int(task.reward_spec["ground_truth"])
    trajectory = run(
        task,
        Completion(text="0"),
        Completion(text="many"),
        Completion(text=str(secret + 1)),
        Completion(text=str(secret)),
    )
    hints = [m["content"] for m in trajectory.messages if m["role"] == "user"][1:]
    assert hints == [
        "No, the number is higher. Guess again.",
        "Reply with a number.",
        "No, the number is lower. Guess again.",
    ]
    assert trajectory.turns == 4 and trajectory.reward == 1.0


# -- training: every kind at once, in Ray workers that import the plugins themselves --------------------------------


def test_grpo_trains_on_the_example_and_skyrl_environments(docker_backend, tmp_path):
    """One task of each example kind and one skyrl-gym row in one batch: the Ray rollout workers must import the
    plugins named in the YAML to run them, and a step must complete (tiny model, CPU)."""
    pytest.importorskip("skyrl_gym")
    from harness.tiny_model import init_tiny

    model = init_tiny(tmp_path / "tiny")
    rows = [
        json.loads((EXAMPLES / f"{name}.jsonl").read_text().splitlines()[0])
        for name in ("cli_program", "sql_query", "guess_number")
    ]
    rows.append(
        {
            "data_source": "arith",
            "env_class": "skyrl_gym.envs.gsm8k.env:GSM8kEnv",
            "extra_info": {"id": "skyrl-0"},
            "prompt": [{"role": "user", "content": "What is 2 + 3?"}],
            "reward_spec": {"method": "rule", "ground_truth": "5"},
        }
    )
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("".join(json.dumps(row) + "\n" for row in rows))
    done = harness(
        "train",
        "--config",
        str(EXAMPLES / "cli_program-grpo-tiny-cpu.yaml"),
        f"trainer.policy.model.path={model}",
        f"trainer.output_dir={tmp_path / 'run'}",
        f'data.train_data=["{mixed}"]',
        "data.val_data=[]",
        "plugins=[examples.environments.cli_program, examples.environments.sql_query, examples.environments.guess_number]",
        "trainer.train_batch_size=4",
        "trainer.max_steps=1",
        "generator.max_turns=2",
        "generator.max_tokens=16",
        "generator.sandbox_backend=docker",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert metrics[-1]["step"] == 1 and "train/loss" in metrics[-1] and metrics[-1]["train/turns_mean"] >= 1


@pytest.mark.parametrize("name", ["cli_program", "sql_query"])
def test_the_committed_task_files_are_what_the_modules_write(name, plugins):
    import importlib

    module = importlib.import_module(f"examples.environments.{name}")
    lines = (EXAMPLES / f"{name}.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == module.rows()  # regenerate: python -m examples.environments.NAME
