"""Without vLLM installed (the main environment), asking for it fails with the install line, not a traceback."""

from __future__ import annotations

import importlib.util

import pytest

from harness.errors import PolicyError
from harness.policies.factory import make_policy
from tests.cli_helpers import harness

pytestmark = pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")


def test_vllm_engine_without_vllm_says_how_to_install(tiny_model):
    with pytest.raises(PolicyError, match=r"vLLM is not installed.*\[vllm\].*setup_vllm_cpu.sh"):
        make_policy(str(tiny_model), engine="vllm")


def test_eval_with_engine_vllm_fails_clearly(tiny_model, tmp_path):
    done = harness(
        "eval",
        "--checkpoint",
        str(tiny_model),
        "--engine",
        "vllm",
        "--tasks",
        "arith",
        "--limit",
        "1",
        "--output",
        str(tmp_path),
    )
    assert (
        done.returncode == 1 and "vLLM is not installed" in done.stdout and "Traceback" not in done.stdout + done.stderr
    )


def test_unknown_engine_is_refused(tiny_model):
    with pytest.raises(PolicyError, match="--engine 'sglang' is not one of auto, transformers, vllm"):
        make_policy(str(tiny_model), engine="sglang")


def test_the_trainers_engines_and_eval_pick_the_policy_in_one_place(tiny_model):
    from harness.policies.factory import checkpoint_policy
    from harness.policies.hf import HFPolicy

    policy = checkpoint_policy(tiny_model, "transformers", device="cpu")
    assert isinstance(policy, HFPolicy) and policy.device.type == "cpu"
    with pytest.raises(PolicyError, match="engine 'sglang' is not one of"):
        checkpoint_policy(tiny_model, "sglang")
    with pytest.raises(PolicyError, match="vLLM is not installed"):
        checkpoint_policy(tiny_model, "vllm", weight_sync="disk")
