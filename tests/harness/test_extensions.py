"""Registries and plugins: task kinds, rewards, tools, policies and advantage estimators added from outside."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import textwrap

import pytest

from harness.policy import Completion, Sampling
from infra.plugins import RegistryError
from tasks.task import Task
from tests.cli_helpers import harness

ARITH_ROW = {
    "data_source": "arith",
    "prompt": [{"role": "user", "content": "What is 2 + 3?"}],
    "reward_spec": {"method": "rule", "ground_truth": "5"},
}


def task(env_class: str, **changes) -> Task:
    base = Task(
        id="t",
        data_source="test",
        prompt=ARITH_ROW["prompt"],
        env_class=env_class,
        reward_spec=dict(ARITH_ROW["reward_spec"]),
    )
    return dataclasses.replace(base, **changes)


def play(task: Task, *texts: str):
    from harness.episode import run_episode
    from harness.policies.scripted import ScriptedPolicy

    return run_episode(task, ScriptedPolicy("scripted", [Completion(text=t) for t in texts]), Sampling(temperature=0.0))


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """A module of the user's own, importable by name (as a plugin or in module:Name paths)."""
    (tmp_path / "my_plugin.py").write_text(
        textwrap.dedent("""
        from harness.api import Environment, Reward, StepResult, register_reward

        class Echo(Environment):
            def step(self, turn):
                self.outcome = turn.content
                return StepResult([], done=True)

        def says_five(task, outcome, backend):
            return 1.0 if outcome.strip() == "5" else 0.0

        def constant(rewards, index, count, eps):
            return rewards * 0 + 7

        register_reward("my_plugin_says_five", says_five)
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("my_plugin", None)


def test_env_class_and_reward_method_as_module_paths(user_module):
    echo = task("my_plugin:Echo", reward_spec={"method": "my_plugin:says_five"})
    assert play(echo, "5").reward == 1.0
    assert play(echo, "6").reward == 0.0


def test_unknown_names_are_clear_errors(user_module):
    from harness.kinds import make_environment

    with pytest.raises(RegistryError, match=r"unknown task kind \(env_class\) 'nope'; registered: ") as unknown:
        make_environment(task("nope"))
    listed = re.search(r"registered: ([^.]*)\.", str(unknown.value)).group(1).split(", ")
    assert {"gsm8k", "gsm8k_tool", "repo", "swe"} <= set(listed)  # other tests may have registered more
    assert listed == sorted(listed)
    with pytest.raises(RegistryError, match="module 'my_plugin' has no 'Missing'"):
        make_environment(task("my_plugin:Missing"))
    with pytest.raises(RegistryError, match="cannot import 'no_such_module'"):
        make_environment(task("no_such_module:X"))
    assert "unknown reward function 'nothing'" in play(task("gsm8k", reward_spec={"method": "nothing"}), "5").error


def test_a_name_cannot_be_registered_twice():
    from harness.kinds import register_kind
    from harness.kinds.gsm8k import GSM8KEnvironment, GSM8KToolEnvironment, gold_text

    with pytest.raises(RegistryError, match="'gsm8k' is already registered"):
        register_kind("gsm8k", GSM8KToolEnvironment)
    register_kind(
        "gsm8k", GSM8KEnvironment, gold=gold_text, reward="rule"
    )  # the same definition again (a module imported anew) is fine


def test_entry_points_find_installed_plugins(user_module):
    """An installed distribution declares `my_echo = my_plugin:Echo` under harness.task_kinds."""
    dist = user_module / "my_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[harness.task_kinds]\nmy_echo = my_plugin:Echo\n\n[harness.rewards]\nfive = my_plugin:says_five\n"
    )
    assert play(task("my_echo", reward_spec={"method": "five"}), "5").reward == 1.0


def test_plugins_registered_tools_and_policies(user_module):
    from harness.policies.factory import make_policy
    from harness.tools import Toolbox, register_tool, schemas

    register_tool(
        "my_plugin_upper",
        "Upper-case a text.",
        {"type": "object", "properties": {"text": {"type": "string"}}},
        lambda toolbox, args: args["text"].upper(),
        replace=True,
    )
    assert schemas(["my_plugin_upper"])[0]["function"]["name"] == "my_plugin_upper"
    assert Toolbox(None).run("my_plugin_upper", '{"text": "abc"}') == "ABC"
    (user_module / "my_policies.py").write_text(
        textwrap.dedent("""
        from harness.api import Completion, Policy

        class Five(Policy):
            name = "five"
            def generate(self, messages, tools, sampling):
                return Completion(text="5")
    """)
    )
    policy = make_policy("my_policies:Five")
    assert policy.generate([], [], Sampling()).text == "5"


def test_advantage_estimators_by_path_and_registration(user_module):
    torch = pytest.importorskip("torch")
    from trainer.algorithms import group_advantages, register_advantage

    rewards = torch.tensor([1.0, 0.0, 1.0, 1.0])
    assert group_advantages(rewards, 2, method="my_plugin:constant").tolist() == [7.0] * 4

    @register_advantage("test_sign")
    def sign(rewards, index, count, eps):
        return torch.sign(rewards - 0.5)

    assert group_advantages(rewards, 2, method="test_sign").tolist() == [1.0, -1.0, 1.0, 1.0]


def test_training_config_names_plugins_and_estimators():
    from trainer.config import config_from_dict

    base = {"data": {"train_data": ["arith"]}, "trainer": {"policy": {"model": {"path": "m"}}}}
    with pytest.raises(Exception, match="'mine' is not one of grpo, dr_grpo, rloo"):
        config_from_dict({**base, "trainer": {**base["trainer"], "algorithm": {"advantage": "mine"}}})
    config = config_from_dict(
        {**base, "plugins": ["my_algos"], "trainer": {**base["trainer"], "algorithm": {"advantage": "mine"}}}
    )
    assert config.plugins == ["my_algos"] and config.trainer.algorithm.advantage == "mine"


# -- skyrl-gym environments, unchanged, through the adapter ----------------------------------------------------------


def test_skyrl_gym_gsm8k_env_runs_unchanged():
    pytest.importorskip("skyrl_gym")
    single = task("skyrl_gym.envs.gsm8k.env:GSM8kEnv")
    assert play(single, "2 + 3 = 5\n#### 5").reward == 1.0
    assert play(single, "#### 6").reward == 0.0
    multi = task("skyrl_gym.envs.gsm8k.multi_turn_env:GSM8kMultiTurnEnv", max_turns=3)
    trajectory = play(multi, "I think it is 4.", "#### 5")
    assert trajectory.turns == 2 and trajectory.exit_status == "submitted"
    assert "tentative numeric answer" in trajectory.messages[2]["content"]  # the environment's own observation
    assert trajectory.reward == pytest.approx(1.0) and [
        s["reward"] for s in trajectory.reward_details["env_steps"]
    ] == [
        0.0,
        1.0,
    ]


def test_skyrl_env_in_eval_and_generate(tmp_path):
    pytest.importorskip("skyrl_gym")
    rows = tmp_path / "skyrl.jsonl"
    rows.write_text(
        "".join(
            json.dumps({**ARITH_ROW, "env_class": "skyrl_gym.envs.gsm8k.env:GSM8kEnv", "extra_info": {"id": f"q{i}"}})
            + "\n"
            for i in range(3)
        )
    )
    done = harness("eval", "--checkpoint", "gold", "--tasks", str(rows), "--output", str(tmp_path / "gold"))
    assert done.returncode == 1 and "scripts no gold solution" in " ".join(done.stdout.split())  # a skyrl env has none
    (tmp_path / "policy.py").write_text(
        "from harness.api import Completion, Policy\n\nclass Five(Policy):\n    name = 'five'\n"
        "    def generate(self, messages, tools, sampling):\n        return Completion(text='#### 5')\n"
    )
    done = harness(
        "eval",
        "--checkpoint",
        "policy:Five",
        "--tasks",
        str(rows),
        "--output",
        str(tmp_path / "eval"),
        pythonpath=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((tmp_path / "eval" / "report.json").read_text())["mean_reward"] == 1.0
    done = harness(
        "generate",
        "--checkpoint",
        "policy:Five",
        "--tasks",
        str(rows),
        "--output",
        str(tmp_path / "data"),
        pythonpath=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "kept 3 of 3 trajectories" in " ".join(done.stdout.split())
