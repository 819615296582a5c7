"""Fixtures for the harness tests: a tiny Qwen2 checkpoint built once per session (one torch thread for tiny
models: `one_torch_thread`, in tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    from harness.tiny_model import init_tiny

    return init_tiny(tmp_path_factory.mktemp("tiny-qwen2"))
