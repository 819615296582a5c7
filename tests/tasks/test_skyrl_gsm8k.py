"""`harness data gsm8k` writes the rows SkyRL's gsm8k_dataset.py writes, and reward mode `skyrl`
is SkyRL's string rule.

The reference is SkyRL's own code, used two ways:

- always: `data/skyrl_gsm8k/expected_rows.json`, what SkyRL's examples/train/gsm8k/gsm8k_dataset.py
  wrote when run once (commit a9564572e of NovaSky-AI/SkyRL, through `skyrl_gsm8k_runner.py`) on
  `data/skyrl_gsm8k/source/` (the first GSM8K rows plus edge cases: thousands commas, a negative,
  a decimal, two `####` marks), and the rewards SkyRL's skyrl-gym `compute_score` gave then;
- when `HARNESS_SKYRL_REPO` names a SkyRL checkout (or its bare git directory): SkyRL's script and
  reward function themselves, run here on the same rows (no hub: only `load_dataset` is served locally).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tasks.gsm8k import gsm8k_reward, prepare_gsm8k, with_reward_mode
from tasks.errors import TaskError
from tasks.taskset import load_tasks

HERE = Path(__file__).parent
FIXTURE = HERE / "data" / "skyrl_gsm8k"
SCRIPT = "examples/train/gsm8k/gsm8k_dataset.py"
REWARD = "skyrl-gym/skyrl_gym/envs/gsm8k/utils.py"

# (response, ground truth) -> SkyRL's compute_score(response, ground_truth), as skyrl-gym returned it.
REWARD_CASES = [
    ("so #### 18", "18", 1.0),
    ("so #### 18.0", "18", 0.0),  # a string rule: 18.0 is not '18' (our default mode says right)
    ("#### 1,234", "1234", 1.0),  # commas go
    ("#### $18", "18", 0.0),  # `$` is not in the number pattern, so nothing is extracted
    ("#### -5", "-5", 1.0),
    ("#### 5 then #### 6", "6", 0.0),  # the first mark counts
    ("#### 5 then #### 6", "5", 1.0),
    ("the answer is 18", "18", 0.0),  # no mark, no answer
    ("####18", "18", 0.0),  # the space after #### is required
    ("#### 3.50", "3.5", 0.0),
    ("#### 18.", "18", 0.0),  # the trailing dot stays in
]


def skyrl_file(relative: str, tmp_path: Path) -> Path | None:
    """`relative` from the SkyRL checkout (or bare git directory) named by HARNESS_SKYRL_REPO; None without one."""
    root = os.environ.get("HARNESS_SKYRL_REPO")
    if not root:
        return None
    if (Path(root) / relative).is_file():
        return Path(root) / relative
    shown = subprocess.run(["git", f"--git-dir={root}", "show", f"HEAD:{relative}"], capture_output=True, text=True)
    if shown.returncode != 0:
        pytest.fail(f"HARNESS_SKYRL_REPO={root} holds no {relative}: {shown.stderr.strip()}")
    path = tmp_path / Path(relative).name
    path.write_text(shown.stdout)
    return path


def ours(tmp_path: Path) -> dict[str, list[dict]]:
    paths = prepare_gsm8k(tmp_path / "ours", source=FIXTURE / "source")
    tables = {name: pq.read_table(path) for name, path in paths.items()}
    return {
        name: {"schema": t.schema.remove_metadata().to_string(), "rows": t.to_pylist()} for name, t in tables.items()
    }


def test_rows_equal_skyrl_scripts_recorded_output(tmp_path: Path):
    expected = json.loads((FIXTURE / "expected_rows.json").read_text())
    got = ours(tmp_path)
    assert set(got) == {"train", "validation"}
    for name in got:
        assert got[name]["schema"] == expected[name]["schema"]
        assert got[name]["rows"] == expected[name]["rows"]
    assert len(expected["train"]["rows"]) == 6 and len(expected["validation"]["rows"]) == 5


def test_rows_equal_skyrl_scripts_output_when_run_here(tmp_path: Path):
    script = skyrl_file(SCRIPT, tmp_path)
    if script is None:
        pytest.skip("set HARNESS_SKYRL_REPO to a SkyRL checkout to run its gsm8k_dataset.py itself")
    out = tmp_path / "skyrl"
    run = subprocess.run(
        [sys.executable, str(HERE / "skyrl_gsm8k_runner.py"), str(script), str(FIXTURE / "source"), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_DATASETS_CACHE": str(tmp_path / "hf")},
    )
    assert run.returncode == 0, run.stderr[-2000:]
    got = ours(tmp_path)
    for name in ("train", "validation"):
        theirs = pq.read_table(out / f"{name}.parquet")
        assert got[name]["schema"] == theirs.schema.remove_metadata().to_string()
        assert got[name]["rows"] == theirs.to_pylist()


def test_rows_load_as_tasks(tmp_path: Path):
    paths = prepare_gsm8k(tmp_path / "ours", source=FIXTURE / "source")
    tasks = load_tasks(str(paths["validation"]))
    assert [t.id for t in tasks] == ["0", "1", "2", "3", "4"]  # named by extra_info.index
    assert (
        tasks[0]
        .prompt[0]["content"]
        .endswith("farmers' market? Let's think step by step and output the final answer after \"####\".")
    )
    assert tasks[0].reward_spec == {"method": "rule", "ground_truth": "18"}


@pytest.mark.parametrize("response, truth, score", REWARD_CASES)
def test_skyrl_reward_mode_is_skyrls_rule(response: str, truth: str, score: float):
    assert gsm8k_reward(response, truth, mode="skyrl").value == score


def test_skyrl_reward_mode_against_skyrl_gym_when_available(tmp_path: Path):
    path = skyrl_file(REWARD, tmp_path)
    if path is None:
        pytest.skip("set HARNESS_SKYRL_REPO to a SkyRL checkout to compare with skyrl-gym's compute_score itself")
    spec = importlib.util.spec_from_file_location("skyrl_gsm8k_utils", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for response, truth, score in REWARD_CASES:
        assert module.compute_score(response, truth) == score, (response, truth)
        for format_score in (0.0, 0.1):
            theirs = module.compute_score(response, truth, format_score=format_score)
            assert gsm8k_reward(response, truth, mode="skyrl", format_score=format_score).value == theirs


def test_numeric_default_differs_where_the_issue_says():
    assert gsm8k_reward("#### 18.0", "18").value == 1.0
    assert gsm8k_reward("#### 18.0", "18", mode="skyrl").value == 0.0


def test_reward_mode_applies_to_rule_tasks_only(tmp_path: Path):
    paths = prepare_gsm8k(tmp_path / "ours", source=FIXTURE / "source")
    tasks = with_reward_mode(load_tasks(str(paths["train"])), "skyrl")
    assert {t.reward_spec["mode"] for t in tasks} == {"skyrl"}
    with pytest.raises(TaskError, match="unknown GSM8K reward mode 'exact'"):
        with_reward_mode(tasks, "exact")
