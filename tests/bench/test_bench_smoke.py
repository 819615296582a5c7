"""The benchmarks run end to end at their smallest sizes and report their ratios."""

from __future__ import annotations

import pytest

from bench import grading_bench, harness_bench


def test_grading_bench(docker_backend):
    result = grading_bench.main(["--instances", "1", "--rounds", "1"])
    for side in ("ours", "peer"):
        assert result[side]["total_s"] > result[side]["tests_s"] > 0
        assert result[side]["overhead_s"] > 0
    assert result["peer"]["overhead_without_stop_s"] > 0
    assert result["ratio"] > 0 and result["ratio_with_stop"] > 0 and result["target"] == grading_bench.TARGET


def test_harness_bench(docker_backend):
    try:
        result = harness_bench.main(["--episodes", "2", "--workers", "2", "--rounds", "1"])
    except harness_bench.PeerUnavailable as err:
        pytest.skip(f"mini-swe-agent could not be installed into {harness_bench.peer_venv()}: {err}")
    for side in ("ours", "peer"):
        assert result[side]["episodes_per_minute"] > 0 and result[side]["episode_s"] > 0
    assert result["peer"]["drained_s"] >= result["peer"]["wall_s"] > 0
    assert result["mini_swe_agent"] == harness_bench.MINI_SWE_AGENT.split("==")[1]
    assert result["ratio"] > 0 and result["target"] == harness_bench.TARGET
