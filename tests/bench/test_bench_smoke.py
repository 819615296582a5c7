"""The benchmarks run end to end at their smallest sizes and report their ratios."""

from __future__ import annotations

import pytest

from bench import grading_bench, harness_bench, reuse_bench


def test_grading_bench(docker_backend):
    result = grading_bench.main(["--instances", "1", "--rounds", "1"])
    for side in ("ours", "peer"):
        assert result[side]["total_s"] > result[side]["tests_s"] > 0
        assert result[side]["overhead_s"] > 0
    assert result["peer"]["overhead_without_stop_s"] > 0
    assert result["ahead"]["total_s"] > result["ahead"]["tests_s"] > 0
    assert result["ratio"] > 0 and result["ratio_with_stop"] > 0 and result["ratio_prestarted"] > 0
    assert result["target"] == grading_bench.TARGET


def test_harness_bench(docker_backend, overlay_backend):
    try:
        result = harness_bench.main(
            [
                "--policy",
                "replay",
                "--episodes",
                "2",
                "--workers",
                "2",
                "--rounds",
                "1",
                "--prestart",
                "1",
                "--overlay",
                "--starts",
                "2",
            ]
        )
    except harness_bench.PeerUnavailable as err:
        pytest.skip(f"mini-swe-agent could not be installed into {harness_bench.peer_venv()}: {err}")
    assert 21 <= result["commands_per_episode"] <= 41  # 20-40 commands, then submit
    for side in ("ours", "ours_cold", "overlay", "peer"):
        assert result[side]["episodes_per_minute"] > 0 and result[side]["episode_s"] > 0
    assert result["ratio_overlay"] > 0 and set(result["start_s"]) == {"docker", "overlay"}
    assert result["peer"]["drained_s"] >= result["peer"]["wall_s"] > 0
    assert result["mini_swe_agent"] == harness_bench.MINI_SWE_AGENT.requirement.split("==")[1]
    assert result["ratio"] > 0 and result["ratio_cold"] > 0 and result["target"] == harness_bench.TARGET
    assert result["floor"]["episodes_per_minute"] > 0 and result["ratio_ceiling"] > 0


def test_agent_trajectories_have_20_to_40_commands_and_end_with_the_fix():
    instance = {
        "instance_id": "x__y-1",
        "workdir": "/testbed",
        "base_commit": "abc",
        "patch": "diff --git a/pkg/mod.py b/pkg/mod.py\n--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -1 +1 @@\n-def old_name():\n+def new_name():\n",
    }
    commands = harness_bench.agent_commands(instance)
    assert 20 <= len(commands) <= 40 and commands == harness_bench.agent_commands(instance)  # the same every run
    assert commands[-5].startswith("cat > /tmp/gold.patch") and "git apply /tmp/gold.patch" in commands[-4]
    assert any("cat -n /testbed/pkg/mod.py" in c for c in commands) or any("pkg/mod.py" in c for c in commands[4:-5])


def test_swerex_bench(docker_backend):
    from bench import swerex_bench

    try:
        result = swerex_bench.main(["--starts", "1", "--round-trips", "5", "--rounds", "1"])
    except swerex_bench.PeerUnavailable as err:
        pytest.skip(f"SWE-ReX could not be installed into {swerex_bench.venv()}: {err}")
    assert result["swe_rex"] == swerex_bench.SWE_REX.split("==")[1]
    for side in ("ours", "swerex"):
        assert result[side]["start_s"] > 0 and result[side]["stop_s"] > 0 and result[side]["round_trip_s"] > 0


def test_reuse_bench(docker_backend):
    result = reuse_bench.main(["--rounds", "1"])
    assert result["tasks"] >= 2 and result["per_instance"]["images_built"] == result["tasks"]
    assert result["shared"]["images_built"] == 0 and len(result["environment_images"]) == 1
    assert result["start_s"]["prebuilt"] > 0 and result["start_s"]["shared"] > result["inject_s"] > 0


def test_context_replay_bench_on_real_episodes():
    from bench import context_replay_bench
    from tests.conftest import require
    from tests.harness.conftest import FAMILIES
    from sandboxes.images import cache_dir

    require((cache_dir() / "tokenizers" / FAMILIES[0] / "tokenizer.json").is_file(), "run scripts/fetch_tokenizers.sh")
    result = context_replay_bench.main(
        ["--limits", "16384", "--strategies", "keep-all,mask-observations:2000,window:4"]
    )
    assert result["episodes"] >= 30
    runs = result["strategies"]
    # real episodes outgrow 16k tokens whole; each strategy saves some of them and costs fewer prompt tokens
    assert runs["keep-all"]["ended_at"][16384] > runs["mask-observations:2000"]["ended_at"][16384]
    assert runs["mask-observations:2000"]["ended_at"][16384] > runs["window:4"]["ended_at"][16384]
    assert (
        runs["keep-all"]["prompt_tokens"]
        > runs["mask-observations:2000"]["prompt_tokens"]
        > runs["window:4"]["prompt_tokens"]
    )


def test_soak_bench_leaves_nothing_behind(overlay_backend):
    from bench import soak_bench

    result = soak_bench.main(["--episodes", "1", "--workers", "4"])  # one gold episode per swe-demo task
    assert result["episodes"] >= 1 and result["verdicts"] == {"resolved": result["episodes"]}
    assert result["per_minute"] > 0
    assert {key: items for key, items in result["left_behind"].items() if items} == {}
