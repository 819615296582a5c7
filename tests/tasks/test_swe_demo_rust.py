"""The quick-start set swe-demo-rust: `harness eval` resolves every task with the gold patch and none with
the empty one, on the Docker engine and on the overlay backend (Debian's cargo in the Rust base image)."""

from __future__ import annotations

import json

import pytest

from tests.cli_helpers import eval_rows

TASKS = {
    "ringstat__ringstat-1",
    "ringstat__ringstat-2",
    "slugkit__slugkit-1",
    "slugkit__slugkit-2",
    "slugkit__slugkit-3",
}


def evaluate(checkpoint: str, backend: str, output) -> tuple[dict, list[dict]]:
    rows = eval_rows("swe-demo-rust", checkpoint, backend, output, "--workers", "2")
    return json.loads((output / "report.json").read_text()), rows


@pytest.mark.parametrize("backend", ["docker", "overlay"])
def test_gold_resolves_every_task_and_empty_none(backend, request, tmp_path):
    request.getfixturevalue(f"{backend}_backend")  # the backend is there (else skipped, or failed in CI)
    gold, rows = evaluate("gold", backend, tmp_path / "gold")
    assert {row["task_id"] for row in rows} == TASKS
    assert gold["resolve_rate"] == 1.0 and all(row["resolved"] for row in rows)
    empty, rows = evaluate("empty", backend, tmp_path / "empty")
    assert empty["resolve_rate"] == 0.0 and not any(row["reward"] for row in rows)


def test_every_task_has_tests_that_fail_before_the_fix_and_tests_that_keep_passing(docker_backend):
    from tasks.languages import language_named
    from tasks.swe_demo import BUILTIN, load_swe_demo

    instances = load_swe_demo(docker_backend, content=BUILTIN / "swe_demo_rust")
    assert {i["instance_id"] for i in instances} == TASKS
    for instance in instances:
        assert instance["language"] == "rust" and instance["log_parser"] == "parse_log_cargo"
        assert instance["FAIL_TO_PASS"] and instance["PASS_TO_PASS"], instance["instance_id"]
        assert language_named("rust").test_command() in instance["eval_script"]
