"""The one image builder (task images for swe-demo and synthesized tasks): offline, labelled, clear on failure."""

from __future__ import annotations

import uuid

import pytest

from sandboxes import SandboxError, SandboxSpec
from sandboxes.images import build_image, image_exists


def test_build_copies_files_without_caches_and_failures_say_why(docker_backend, tmp_path):
    from sandboxes.docker_backend import docker_client

    (tmp_path / "pkg" / "__pycache__").mkdir(parents=True)
    (tmp_path / "pkg" / "mod.py").write_text("VALUE = 42\n")
    (tmp_path / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"stale")
    tag = f"harness-test/images:{uuid.uuid4().hex[:8]}"
    assert not image_exists(tag)
    try:
        build_image(
            tag,
            "FROM harness-base:latest\nCOPY pkg /opt/pkg\n",
            {"pkg": tmp_path / "pkg"},
            labels={"harness.test": "1"},
        )
        assert image_exists(tag)
        assert docker_client().images.get(tag).labels["harness.test"] == "1"
        with docker_backend.create(SandboxSpec(image=tag)) as sandbox:
            assert sandbox.exec("test -e /opt/pkg/__pycache__").exit_code != 0  # the stale cache stayed behind
            assert sandbox.exec("cd /opt && python3 -c 'import pkg.mod; print(pkg.mod.VALUE)'").output.strip() == "42"
        with pytest.raises(SandboxError, match="(?s)building the image .* failed:.*no-such-command"):
            build_image(tag + "-bad", "FROM harness-base:latest\nRUN no-such-command\n", {}, labels={})
    finally:
        docker_client().images.remove(tag, force=True)
