"""Fixtures for the harness tests: a tiny Qwen2 checkpoint built once per session."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny models spend their time in thread hand-offs: one thread is several times faster,
    far more on a busy machine. Module scope, so that other tests keep torch's default."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    from harness.tiny_model import init_tiny

    return init_tiny(tmp_path_factory.mktemp("tiny-qwen2"))
