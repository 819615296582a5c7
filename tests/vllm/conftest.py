"""The vLLM tests run in the venv that has vLLM (.venv-vllm on CPUs, made by scripts/setup_vllm_cpu.sh):

    .venv-vllm/bin/python -m pytest -q tests/vllm

The main suite runs them that way (tests/test_vllm_suite.py); in an environment without vLLM they are
not collected. vLLM's engine takes tens of seconds to start on a busy CPU, so each module shares one.
"""

from __future__ import annotations

import importlib.util

import pytest

collect_ignore_glob = [] if importlib.util.find_spec("vllm") else ["test_*.py"]


@pytest.fixture(scope="session")
def vllm_model(tmp_path_factory):
    """The tiny Qwen2 checkpoint at hidden size 128: head_dim 32, the smallest vLLM's CPU attention takes."""
    from harness.tiny_model import init_tiny

    return init_tiny(tmp_path_factory.mktemp("tiny-vllm"), hidden_size=128)
