"""Task images run with no Docker engine reachable: from the overlay store, where an engine once put them."""

from __future__ import annotations

import json

import pytest

from sandboxes.errors import ImageNotFound
from sandboxes.images import build_base_image, images_run_on
from tests.cli_helpers import harness, rows_of

NO_ENGINE = "unix:///nonexistent/docker.sock"


def evaluate(checkpoint: str, output) -> dict:
    done = harness(
        "eval", "--backend", "overlay", "--checkpoint", checkpoint, "--tasks", "swe-demo", "--limit", "2",
        "--output", str(output),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads((output / "report.json").read_text())


def test_swe_demo_on_overlay_needs_no_engine_once_its_images_are_stored(overlay_backend, tmp_path, monkeypatch):
    evaluate("empty", tmp_path / "with-engine")  # the engine answers: the store unpacks and remembers the images
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    gold = evaluate("gold", tmp_path / "gold")
    empty = evaluate("empty", tmp_path / "empty")
    assert gold["resolve_rate"] == 1.0 and empty["resolve_rate"] == 0.0
    rows = rows_of(tmp_path / "gold" / "results.jsonl")
    assert len(rows) == 2 and {row["exit_status"] for row in rows} == {"submitted"}


def test_an_image_no_backend_holds_says_how_to_get_it(overlay_backend, tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))  # an empty store
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    import sandboxes.docker_backend as engine

    monkeypatch.setattr(engine, "_client", None)  # forget this process's connection to the real engine
    assert not overlay_backend.has_image("harness-never-built:1")
    with images_run_on("overlay"), pytest.raises(ImageNotFound, match="archive .* by absolute path"):
        build_base_image()


def test_swe_tiny_runs_on_overlay_from_the_base_root_filesystem_alone(overlay_backend, tmp_path, monkeypatch):
    """A node that built the base with debootstrap (`harness sandbox build-base`) and never had an engine."""
    from sandboxes.images import base_rootfs

    cache = tmp_path / "cache"
    (cache / "rootfs").mkdir(parents=True)
    (cache / "rootfs" / base_rootfs().name).symlink_to(base_rootfs())
    monkeypatch.setenv("HARNESS_CACHE", str(cache))
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    done = harness(
        "eval", "--backend", "overlay", "--checkpoint", "gold", "--tasks", "swe-tiny", "--limit", "2",
        "--output", str(tmp_path / "run"),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert json.loads((tmp_path / "run" / "report.json").read_text())["resolve_rate"] == 1.0
    assert not list(cache.glob("images/*.json"))  # nothing unpacked: the root filesystem is the one layer
