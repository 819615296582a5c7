"""`harness.eval_setup`: the start of `harness eval` and `harness generate`, usable without the CLI."""

from __future__ import annotations

import json

import pytest

from harness.eval_setup import default_output, prepare_eval
from infra.rundir import RunMismatch


def test_an_eval_run_from_python_reports_and_refuses_a_second_run_in_its_folder(tmp_path):
    run = prepare_eval("gold", "arith", tmp_path / "run", limit=3, samples=2, workers=2)
    assert run.episodes == 6 and run.config.samples == 2 and run.cluster is None
    seen = []
    report = run.run(on_result=seen.append)
    assert report["episodes"] == 6 == len(seen) and report["resolve_rate"] == 1.0
    assert json.loads((tmp_path / "run" / "config.json").read_text())["samples"] == 2
    with pytest.raises(RunMismatch, match="different run"):
        prepare_eval("empty", "arith", tmp_path / "run", limit=3)
    assert default_output("endpoint:m", "sets/x.jsonl").as_posix() == "runs/eval-endpoint_m-x"


def test_a_chosen_local_backend_is_not_reported_as_a_fallback_from_docker(tmp_path):
    heard = []
    run = prepare_eval("gold", "arith-tool", tmp_path / "run", limit=1, backend="local", note=heard.append)
    assert run.config.backend == "local" and heard == []
