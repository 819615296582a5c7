"""The demonstrations of examples/swe/miscopy_recovery.py, played through the real episode loop on
swe-tiny-unique in bubblewrap sandboxes: a recovering episode's first edit is refused by the real
editor, the next one fixes the code, and the grader resolves it; the others are plain gold."""

from __future__ import annotations

import importlib

import pytest

from harness.episode import run_episode
from harness.policy import Sampling
from tasks.taskset import load_tasks
from tests.cli_helpers import ROOT


@pytest.fixture
def recovery(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "swe"))
    return importlib.import_module("miscopy_recovery")


def test_the_miscopy_changes_the_first_number_only(recovery):
    assert recovery.miscopied("return text[1:667]") == "return text[2:667]"
    assert recovery.miscopied("if n > 19:") == "if n > 10:"
    assert recovery.miscopied("return a + b") is None


def test_a_third_recover_and_every_one_resolves(recovery, local_backend):
    tasks = load_tasks("swe-tiny-unique-sft")[:300]
    policy = recovery.RecoversFromAMiscopy()
    lengths = [len(policy.for_task(task).turns) for task in tasks]
    assert set(lengths) == {2, 3}
    assert 0.25 < lengths.count(3) / len(tasks) < 0.42, lengths.count(3)

    recovering = tasks[lengths.index(3)]
    plain = tasks[lengths.index(2)]
    greedy = Sampling(temperature=0.0, max_tokens=64)
    episode = run_episode(recovering, policy, greedy, backend=local_backend)
    assert (episode.exit_status, episode.reward, episode.turns) == ("submitted", 1.0, 3), episode.reward_details
    refused, fixed = [m["content"] for m in episode.messages if m["role"] == "tool"][:2]
    assert "did not appear verbatim" in refused and "did not appear" not in fixed
    episode = run_episode(plain, policy, greedy, backend=local_backend)
    assert (episode.exit_status, episode.reward, episode.turns) == ("submitted", 1.0, 2), episode.reward_details
