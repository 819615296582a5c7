"""The demonstrations of examples/swe/miscopy_recovery.py, played through the real episode loop on
swe-tiny-unique in bubblewrap sandboxes: a recovering episode's first edit is refused by the real
editor, the next one fixes the code, and the grader resolves it; the others are plain gold. Fine-tuning
on a recovery trains on the recovery, not on the miscopy before it."""

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
    assert episode.untrained_turns == [1]
    assert run_episode(recovering, recovery.LearnsTheMiscopyToo(), greedy, backend=local_backend).untrained_turns == []
    episode = run_episode(plain, policy, greedy, backend=local_backend)
    assert (episode.exit_status, episode.reward, episode.turns) == ("submitted", 1.0, 2), episode.reward_details
    assert episode.untrained_turns == []


def test_fine_tuning_on_a_recovery_leaves_the_miscopy_out_of_the_loss(recovery, local_backend, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from transformers import AutoTokenizer

    from harness.generate import SCHEMA, trajectory_row
    from harness.tiny_model import init_tiny
    from trainer.sft import examples_from_parquet

    policy = recovery.RecoversFromAMiscopy()
    task = next(t for t in load_tasks("swe-tiny-unique-sft") if len(policy.for_task(t).turns) == 3)
    edit = task.metadata["instance"]["gold_edits"][0]
    rows = [
        trajectory_row(run_episode(task, p, Sampling(temperature=0.0), backend=local_backend))
        for p in (policy, recovery.LearnsTheMiscopyToo())
    ]
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), tmp_path / "demonstrations.parquet")
    tokenizer = AutoTokenizer.from_pretrained(init_tiny(tmp_path / "tiny"))
    (masked_ids, masked), (ids, mask) = examples_from_parquet(tmp_path / "demonstrations.parquet", tokenizer)

    def taught(ids, mask):
        return tokenizer.decode([t for t, m in zip(ids, mask) if m])

    wrong = recovery.miscopied(edit["old_str"])
    assert masked_ids == ids and wrong in tokenizer.decode(ids)  # the miscopy stays in the context
    assert wrong not in taught(masked_ids, masked) and edit["old_str"] in taught(masked_ids, masked)
    assert wrong in taught(ids, mask) and sum(mask) > sum(masked)
