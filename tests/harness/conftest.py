"""Fixtures for the harness tests: a tiny Qwen2 checkpoint built once per session (one torch thread for tiny
models: `one_torch_thread`, in tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    from harness.tiny_model import init_tiny

    return init_tiny(tmp_path_factory.mktemp("tiny-qwen2"))


FAMILIES = ("qwen3", "llama3_1", "mistral", "deepseek_v3", "gptoss")  # the folders scripts/fetch_tokenizers.sh writes


@pytest.fixture(scope="session")
def real_tokenizers() -> Path:
    """Real tokenizers and chat templates of the main families, as scripts/fetch_tokenizers.sh caches them."""
    from sandboxes.images import cache_dir
    from tests.conftest import require

    root = cache_dir() / "tokenizers"
    require(
        all((root / family / "tokenizer.json").is_file() for family in FAMILIES),
        f"no real tokenizers in {root}: run scripts/fetch_tokenizers.sh",
    )
    return root


@pytest.fixture(scope="session")
def tiny_on(real_tokenizers, tmp_path_factory):
    """tiny_on(family): a tiny random checkpoint on that family's real tokenizer and template, built once."""
    from harness.tiny_model import init_tiny_on_tokenizer

    built: dict[str, Path] = {}

    def build(family: str) -> Path:
        if family not in built:
            built[family] = init_tiny_on_tokenizer(tmp_path_factory.mktemp(f"tiny-{family}"), real_tokenizers / family)
        return built[family]

    return build
