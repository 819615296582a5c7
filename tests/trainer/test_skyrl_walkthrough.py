"""The SkyRL walkthrough as a tested example: examples/skyrl-walkthrough/walkthrough-cpu.sh runs its five
steps (tiny model, data, the YAML as written, GRPO training, evaluation and an agent run on a repository)
end to end on the CPU, through the real `harness` command."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import SHARED, require
from tests.trainer.test_skyrl_config import WALKTHROUGH_YAML

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "skyrl-walkthrough"


def gsm8k_subset(tmp_path: Path, train: int = 8, test: int = 4) -> Path:
    source = SHARED / "data" / "gsm8k"
    require((source / "train.jsonl").is_file(), f"no GSM8K copy at {source} (set HARNESS_SHARED)")
    subset = tmp_path / "gsm8k-source"
    subset.mkdir()
    for split, rows in (("train", train), ("test", test)):
        lines = (source / f"{split}.jsonl").read_text().splitlines()[:rows]
        (subset / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    return subset


def test_the_example_yaml_is_the_walkthroughs():
    assert yaml.safe_load((EXAMPLE / "gsm8k-grpo.yaml").read_text()) == yaml.safe_load(WALKTHROUGH_YAML)


@pytest.mark.slow
def test_all_five_steps_run_on_cpu(tmp_path: Path, docker_backend):
    work, data = tmp_path / "work", tmp_path / "data"
    env = {
        **os.environ,
        "HARNESS": "python3 -m cli",
        "GSM8K_SOURCE": str(gsm8k_subset(tmp_path)),
        "DATA_DIR": str(data),
        "STEPS": "2",
        "RUNTIME": "docker",
    }
    started = time.monotonic()
    run = subprocess.run(
        ["bash", str(EXAMPLE / "walkthrough-cpu.sh"), str(work)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    elapsed = time.monotonic() - started
    print(f"walkthrough: {elapsed:.0f} s")
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    out = run.stdout

    # 2. data
    assert (
        pq.read_table(data / "train.parquet").num_rows == 8 and pq.read_table(data / "validation.parquet").num_rows == 4
    )
    # 4. training from the YAML as written, SkyRL's keys noted in the resolved config
    resolved = (work / "run" / "config.yaml").read_text()
    assert "#   trainer.placement.colocate_all -> trainer.placement.colocate (True)" in resolved
    config = yaml.safe_load(resolved)
    assert config["trainer"]["epochs"] == 5 and config["trainer"]["strategy"] == "fsdp2"
    assert config["trainer"]["algorithm"]["advantage"] == "grpo" and config["trainer"]["max_steps"] == 2
    metrics = [json.loads(line) for line in (work / "run" / "metrics.jsonl").read_text().splitlines()]
    assert 1 in [m["step"] for m in metrics] and 2 in [m["step"] for m in metrics]
    # policy_mini_batch_size=1 of train_batch_size=2: two optimizer steps per GRPO step
    assert config["trainer"]["mini_batch_size"] == 1
    assert [m["train/optimizer_steps"] for m in metrics if "train/optimizer_steps" in m] == [2.0, 2.0]
    checkpoint = work / "run" / "checkpoints" / "global_step_2"
    assert (checkpoint / "config.json").is_file()
    # 5a. evaluation of the checkpoint
    report = json.loads((work / "eval" / "report.json").read_text())
    assert json.dumps(report).count("global_step_2") >= 1
    assert "episodes: 4 over 4 tasks" in (work / "eval" / "report.md").read_text()
    # 5b. the checkpoint as an agent on a repository, judged by its tests
    assert "success_rate: 0.0" in out or "success_rate: 1.0" in out
    assert "exit_status: " in out and "[user] " in out and "[assistant] " in out
    assert (work / "agent.patch").is_file()
    assert (work / "repo-x" / "calc.py").read_text().count("a - b") == 1  # the repository itself was not touched
