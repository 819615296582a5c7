"""The swe-demo-go quick-start set through `harness eval`: the gold patches resolve every task, empty patches
none, on the Docker engine and without it (overlay)."""

from __future__ import annotations

import json

import pytest

from tests.cli_helpers import eval_rows


@pytest.mark.parametrize("backend_name", ["docker", "overlay"])
def test_swe_demo_go_gold_resolves_all_and_empty_none(backend_name, tmp_path, request):
    request.getfixturevalue(f"{backend_name}_backend")
    rewards = {}
    for policy in ("gold", "empty"):
        rows = eval_rows("swe-demo-go", policy, backend_name, tmp_path / policy, "--workers", "3")
        assert not any(row["error"] for row in rows), rows
        rewards[policy] = sorted(row["reward"] for row in rows)
    assert rewards == {"gold": [1.0] * 6, "empty": [0.0] * 6}
    report = json.loads((tmp_path / "gold" / "report.json").read_text())
    assert report["resolve_rate"] == 1.0


def test_swe_demo_go_test_lists_are_go_test_names(docker_backend):
    from tasks.swe_demo import BUILTIN, load_swe_demo

    instances = {i["instance_id"]: i for i in load_swe_demo(docker_backend, content=BUILTIN / "swe_demo_go")}
    assert len(instances) == 6 and {i["language"] for i in instances.values()} == {"go"}
    assert instances["tally__tally-3"]["FAIL_TO_PASS"] == ["TestPercentile", "TestPercentile/between"]
    assert "TestPercentile/min" in instances["tally__tally-3"]["PASS_TO_PASS"]
    assert instances["tally__tally-2"]["FAIL_TO_PASS"] == ["TestMedianEven"]
