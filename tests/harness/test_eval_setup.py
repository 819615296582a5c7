"""`harness.eval_setup`: the start of `harness eval` and `harness generate`, usable without the CLI."""

from __future__ import annotations

import json

import pytest

from harness.eval_setup import prepare_eval
from harness.errors import HarnessError
from harness.evaluate import EvalConfig, default_output, load_eval_config
from infra.rundir import RunMismatch


def test_an_eval_run_from_python_reports_and_refuses_a_second_run_in_its_folder(tmp_path):
    run = prepare_eval(
        EvalConfig(checkpoint="gold", tasks="arith", output=str(tmp_path / "run"), limit=3, samples=2, workers=2)
    )
    assert run.episodes == 6 and run.config.samples == 2 and run.cluster is None
    seen = []
    report = run.run(on_result=seen.append)
    assert report["episodes"] == 6 == len(seen) and report["resolve_rate"] == 1.0
    assert json.loads((tmp_path / "run" / "config.json").read_text())["samples"] == 2
    with pytest.raises(RunMismatch, match="different run"):
        prepare_eval(EvalConfig(checkpoint="empty", tasks="arith", output=str(tmp_path / "run"), limit=3))
    assert default_output("endpoint:m", "sets/x.jsonl").as_posix() == "runs/eval-endpoint_m-x"


def test_a_chosen_local_backend_is_not_reported_as_a_fallback_from_docker(tmp_path):
    heard = []
    run = prepare_eval(
        EvalConfig(checkpoint="gold", tasks="arith-tool", output=str(tmp_path / "run"), limit=1, backend="local"),
        note=heard.append,
    )
    assert run.config.backend == "local" and heard == []


def test_settings_are_checked_where_the_config_is_built(tmp_path):
    import pydantic

    from tests.cli_helpers import harness

    config = EvalConfig(checkpoint="gold", tasks="arith", base_url="http://127.0.0.1:9/v1", episode_timeout=None)
    assert config.output == "runs/eval-gold-arith" and config.episode_timeout == 1800.0
    assert config.base_url is None  # only an endpoint:MODEL checkpoint keeps one
    with pytest.raises(pydantic.ValidationError, match="episode_timeout"):
        EvalConfig(checkpoint="gold", tasks="arith", episode_timeout=-1)
    settings = tmp_path / "eval.yaml"
    settings.write_text("episode_timeout: -5\n")
    done = harness(
        "eval", "--checkpoint", "gold", "--tasks", "arith", "--config", str(settings), "--output", str(tmp_path / "run")
    )
    assert done.returncode == 1 and "invalid setting: episode_timeout" in done.stdout, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr and not (tmp_path / "run").exists()


def test_the_config_is_read_whole_and_flags_given_win(tmp_path):
    """`--config` is the run's settings, read whole as `harness train --config` is (the limits by the names training's
    generator section uses); a flag given overrides its key, a flag left at its default does not."""
    from tests.cli_helpers import harness

    settings = tmp_path / "eval.yaml"
    settings.write_text(
        "checkpoint: gold\ntasks: arith-tool\nlimit: 1\nbackend: local\nworkers: 2\nmax_turns: 1\nmax_format_errors: 1\n"
    )
    for flags, status in (((), "max_turns"), (("--max-turns", "5"), "submitted")):
        out = tmp_path / status
        done = harness("eval", "--config", str(settings), *flags, "--output", str(out))
        assert done.returncode == 0, done.stdout + done.stderr
        (row,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
        assert row["exit_status"] == status and row["resolved"] is (status == "submitted")
        config = json.loads((out / "config.json").read_text())
        assert (config["max_format_errors"], config["workers"], config["tasks"]) == (1, 2, "arith-tool")


def test_eval_config_layers_and_refusals(tmp_path):
    """The command's defaults, under the YAML, under the flags given; endpoint flags join the YAML's `endpoint:`."""
    settings = tmp_path / "eval.yaml"
    settings.write_text("tasks: arith\nsamples: 3\nendpoint: {retries: 5, read_timeout: 7}\n")
    defaults = {"checkpoint": "gold", "tasks": "swe-demo", "samples": 1, "workers": 4}
    config = load_eval_config(settings, {"workers": 9, "read_timeout": 3.0}, defaults)
    assert (config.checkpoint, config.tasks, config.samples, config.workers) == ("gold", "arith", 3, 9)
    assert (config.endpoint.retries, config.endpoint.read_timeout) == (5, 3.0)
    settings.write_text("task: arith\n")
    with pytest.raises(HarnessError, match="unknown key.s. task; known: .*tasks"):
        load_eval_config(settings, {}, defaults)
    settings.write_text("endpoint: {retry: 1}\n")
    with pytest.raises(HarnessError, match="unknown endpoint setting.s. retry"):
        load_eval_config(settings, {}, defaults)
