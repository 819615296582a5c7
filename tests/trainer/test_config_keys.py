"""Config keys do what they say: max_prompt_length drops prompts, filter_truncated reads each turn's finish_reason,
max_turns caps a task's turn limit, the logger values differ, and keys the schema does not have are refused by their dotted path."""

from __future__ import annotations

import string
import subprocess
import sys
from pathlib import Path

import pytest

from harness.episode import Limits, run_episode
from harness.policies.hf import HFPolicy
from harness.policies.scripted import ScriptedPolicy
from harness.policy import Completion, Sampling
from harness.tokens import render
from infra.plugins import load_plugins
from tasks.taskset import load_tasks
from trainer.batch import build_batch, was_truncated
from trainer.config import config_from_dict
from trainer.errors import ConfigError
from trainer.metrics import MetricsLogger, read_metrics
from trainer.recipe import drop_long_prompts

ROOT = Path(__file__).resolve().parents[2]
MINIMAL = {"data": {"train_data": ["gsm8k"]}, "trainer": {"policy": {"model": {"path": "m"}}}}


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    from harness.tiny_model import init_tiny

    return init_tiny(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def policy(tiny_model) -> HFPolicy:
    return HFPolicy(tiny_model, device="cpu")


def error_of(raw: dict) -> str:
    with pytest.raises(ConfigError) as info:
        config_from_dict(raw)
    return str(info.value)


# ----------------------------------------------------------------------------- unknown keys and types


@pytest.mark.parametrize(
    "extra, words",
    [
        (
            {"trainer": {"sft_warmup": {"data": ["a"], "epoch": 2}}},
            "unknown key trainer.sft_warmup.epoch (did you mean trainer.sft_warmup.epochs?); allowed: data, epochs,",
        ),
        (
            {"trainer": {"async": {"stalenes": 2}}},
            "unknown key trainer.async.stalenes (did you mean trainer.async.staleness?)",
        ),
        (
            {"trainer": {"policy": {"model": {"path": "m", "revision": "main"}}}},
            "unknown key trainer.policy.model.revision; allowed: path",
        ),
        (
            {"skyrl_aliases": ["x"]},
            "unknown key skyrl_aliases; allowed: data, trainer, generator, inference, logger, plugins",
        ),
        (
            {"trainer": {"sft_warmup": {"data": ["a"], "batch_size": 0}}},
            "trainer.sft_warmup.batch_size: 0 is below the minimum 1",
        ),
        (
            {"trainer": {"sft_warmup": 3}},
            "trainer.sft_warmup: expected a section with keys (data, epochs, learning_rate,",
        ),
        ({"plugins": ["a", 1]}, "plugins[1]: expected a string, got 1"),
        ({"generator": {"max_tokens": "12"}}, "generator.max_tokens: expected an integer, got '12'"),
    ],
)
def test_unknown_keys_and_bad_values_are_named_by_their_path(extra: dict, words: str):
    raw = {**MINIMAL, **{k: v for k, v in extra.items() if k != "trainer"}}
    if "trainer" in extra:
        raw["trainer"] = {**MINIMAL["trainer"], **extra["trainer"]}
    assert words in error_of(raw)


def test_conversions_that_yaml_needs_still_work():
    config = config_from_dict(
        {
            **MINIMAL,
            "trainer": {
                **MINIMAL["trainer"],
                "epochs": 3.0,
                "learning_rate": "1e-5",
                "sft_warmup": {"data": "a.parquet"},
            },
            "generator": None,
        }
    )
    assert config.trainer.epochs == 3 and isinstance(config.trainer.epochs, int)
    assert config.trainer.learning_rate == 1e-5 and config.trainer.sft_warmup.data == ["a.parquet"]
    assert config.generator.max_tokens == 1024  # an empty section is every default


# ----------------------------------------------------------------------------- data.max_prompt_length


def test_max_prompt_length_drops_the_longer_prompts(policy):
    tasks = load_tasks("arith-train")[:40] + load_tasks("arith-tool-train")[:10]
    lengths = [len(render(policy.tokenizer, t.prompt, None, True, True)) for t in tasks[:40]]
    assert max(lengths) < 200  # the tool tasks' schemas make their prompts several hundred tokens longer
    kept = drop_long_prompts(tasks, policy.tokenizer, 200)
    assert [t.id for t in kept] == [t.id for t in tasks[:40]]
    cut = sorted(lengths)[20]
    assert [t.id for t in drop_long_prompts(tasks, policy.tokenizer, cut)] == [
        t.id for t, n in zip(tasks, lengths) if n <= cut
    ]
    with pytest.raises(
        ConfigError, match="data.max_prompt_length: every one of the 50 training prompts is longer than 10"
    ):
        drop_long_prompts(tasks, policy.tokenizer, 10)


def test_harness_train_applies_max_prompt_length(tiny_model, tmp_path):
    """The run refuses to start when the key leaves no training prompt (before any Ray actor starts)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli",
            "train",
            f"trainer.policy.model.path={tiny_model}",
            f"trainer.output_dir={tmp_path / 'run'}",
            'data.train_data=["arith-train"]',
            "data.max_prompt_length=10",
            "generator.n_samples_per_prompt=2",
            "trainer.train_batch_size=2",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0
    said = " ".join((done.stdout + done.stderr).split())  # the console wraps long lines
    assert "data.max_prompt_length: every one of the 2000 training prompts is longer than 10 tokens" in said


# ----------------------------------------------------------------------------- filter_truncated


def test_filter_truncated_drops_turns_cut_at_max_tokens(policy):
    """A single-turn episode cut at max_tokens ends as `submitted`/`max_turns`, not `context_exceeded`: only the turn's
    recorded finish_reason says it was truncated."""
    task = load_tasks("arith-train")[0]
    limits = Limits(max_turns=1, max_context=1024)
    cut = run_episode(task, policy, Sampling(temperature=1.0, max_tokens=6, seed=1), limits)
    stops = list(string.ascii_letters + string.digits + string.punctuation + " \n")  # any printable token stops it
    stopped = run_episode(task, policy, Sampling(temperature=1.0, max_tokens=6, seed=1, stop=stops), limits)
    assert [turn["finish_reason"] for turn in cut.metadata["turn_stats"]] == ["length"]
    assert [turn["finish_reason"] for turn in stopped.metadata["turn_stats"]] == ["stop"]
    assert cut.exit_status != "context_exceeded" and was_truncated(cut) and not was_truncated(stopped)

    cut.reward, stopped.reward = 1.0, 0.0  # different rewards: the group is not filtered for zero variance
    kept = build_batch([[cut, stopped]], pad_id=0, filter_zero_variance=True, filter_truncated=True)
    assert kept.loss_mask[0].sum() == 0 and kept.loss_mask[1].sum() > 0 and kept.stats["dropped_truncated"] == 1.0
    unfiltered = build_batch([[cut, stopped]], pad_id=0, filter_zero_variance=True, filter_truncated=False)
    assert unfiltered.loss_mask[0].sum() == 6 and unfiltered.stats["dropped_truncated"] == 0.0


def test_running_out_of_context_still_counts_as_truncated(policy):
    task = load_tasks("arith-train")[0]
    prompt = len(render(policy.tokenizer, task.prompt, None, True, True))
    full = run_episode(task, policy, Sampling(max_tokens=6, seed=1), Limits(max_turns=1, max_context=prompt + 3))
    assert full.exit_status == "context_exceeded" and full.metadata.get("turn_stats") is None and was_truncated(full)


# ----------------------------------------------------------------------------- generator.max_turns


@pytest.mark.parametrize("cap, turns", [(3, 3), (8, 5)])
def test_max_turns_caps_the_tasks_own_turn_limit(cap: int, turns: int):
    """A guess_number task allows 5 turns: generator.max_turns lowers that limit and never raises it."""
    load_plugins(["examples.environments.guess_number"])
    task = load_tasks(str(ROOT / "examples/environments/guess_number.jsonl"))[0]
    assert task.max_turns == 5
    limits = Limits.of(config_from_dict({**MINIMAL, "generator": {"max_turns": cap}}).generator)
    always_wrong = ScriptedPolicy("always-wrong", [Completion(text="0")] * 10)
    trajectory = run_episode(task, always_wrong, Sampling(), limits)
    assert (trajectory.exit_status, trajectory.turns, trajectory.reward) == ("max_turns", turns, 0.0)


def test_episode_timeout_ends_training_episodes():
    """generator.episode_timeout is the limit `harness eval --episode-timeout` sets: past it the episode ends as
    `wall_time` (checked before each turn)."""
    load_plugins(["examples.environments.guess_number"])
    task = load_tasks(str(ROOT / "examples/environments/guess_number.jsonl"))[0]
    generator = {"max_turns": 5, "episode_timeout": 1e-6}
    limits = Limits.of(config_from_dict({**MINIMAL, "generator": generator}).generator)
    assert limits.episode_timeout == 1e-6
    always_wrong = ScriptedPolicy("always-wrong", [Completion(text="0")] * 10)
    trajectory = run_episode(task, always_wrong, Sampling(), limits)
    assert (trajectory.exit_status, trajectory.turns) == ("wall_time", 0)


def test_every_kind_of_run_sets_the_same_limits_by_the_same_names():
    """Eval's settings, training's generator section and the agent's methods each take every limit (LIMIT_KEYS) and
    the context strategy by Limits' names; eval and the agent default to Limits' own values."""
    import inspect

    from harness.agent import Agent
    from harness.episode import LIMIT_KEYS
    from harness.evaluate import EvalConfig
    from trainer.config_schema import GeneratorConfig

    names = {*LIMIT_KEYS, "context"}
    assert names <= set(EvalConfig.model_fields) and names <= set(GeneratorConfig.model_fields)
    for method in (Agent.run_task, Agent.run_on):
        parameters = inspect.signature(method).parameters
        assert names <= set(parameters), method.__name__
        for key in ("max_context", "episode_timeout", "max_format_errors"):
            assert parameters[key].default == EvalConfig.model_fields[key].default == getattr(Limits(), key), key


# ----------------------------------------------------------------------------- logger.type


@pytest.mark.parametrize("kind, tensorboard", [("jsonl", False), ("tensorboard", True)])
def test_logger_types_differ(tmp_path: Path, kind: str, tensorboard: bool):
    logger = MetricsLogger(tmp_path, kind)
    logger.log(1, {"train/loss": 0.5})
    logger.close()
    assert read_metrics(tmp_path) == [{"step": 1, "train/loss": 0.5}]
    assert bool(list(tmp_path.glob("tensorboard/events.*"))) is tensorboard
