"""The trainer benchmark runs end to end at its smallest sizes and reports its ratios."""

from __future__ import annotations

import os

import pytest

try:
    import trl  # noqa: F401
except ImportError as missing:
    if os.environ.get("CI"):
        raise
    pytest.skip(f"the trainer benchmark's peer is TRL ({missing}); pip install trl", allow_module_level=True)

from bench import trainer_bench

SMALLEST = [
    "--steps",
    "1",
    "--warmup",
    "1",
    "--prompts",
    "2",
    "--group",
    "2",
    "--prompt-length",
    "8",
    "--completion-length",
    "8",
    "--hidden",
    "32",
    "--layers",
    "1",
    "--rounds",
    "1",
]


def check_comparison(comparison: dict) -> None:
    for side in ("ours", "trl"):
        figures = comparison[side]
        assert figures["tokens_per_s"] > 0 and figures["tokens_per_cpu_s"] > 0
        assert figures["step_s"] > 0 and figures["tokens_per_step"] > 0
        assert figures["peak_rss_mb"] >= figures["setup_rss_mb"] > 0
        assert figures["threads"] == 1
    for ratio in ("ratio_tokens_per_s", "ratio_tokens_per_cpu_s", "ratio_peak_rss", "ratio_step_rss"):
        assert comparison[ratio] >= 0


def test_learner_step_bench():
    """The headline comparison alone (two worker processes): well under a minute."""
    result = trainer_bench.main([*SMALLEST, "--full-steps", "0"])
    check_comparison(result["learner"])
    assert result["full"] is None
    assert result["ratio_tokens_per_s"] == result["learner"]["ratio_tokens_per_s"] > 0
    assert result["ratio_peak_rss"] == result["learner"]["ratio_peak_rss"] > 0
    assert result["first_loss_gap"] < 1e-5, "both sides should compute the same loss on the same batch and weights"
    assert result["target"] == {"tokens_per_s": trainer_bench.TARGET_SPEED, "peak_rss": trainer_bench.TARGET_MEMORY}


@pytest.mark.slow
def test_full_step_bench():
    """Generation + update on both sides as well (four worker processes)."""
    result = trainer_bench.main([*SMALLEST, "--full-steps", "1"])
    check_comparison(result["learner"])
    check_comparison(result["full"])
