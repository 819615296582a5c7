"""`harness tasks pull`: images of a task set pulled by name from a real registry (Debian's
docker-registry serving on 127.0.0.1), with progress."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time

import pytest

from tests.cli_helpers import harness
from tests.conftest import require


@pytest.fixture
def registry(tmp_path, docker_backend):
    require(shutil.which("docker-registry") is not None, "Debian's docker-registry package is not installed")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = tmp_path / "registry.yml"
    config.write_text(
        f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {tmp_path / 'store'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    server = subprocess.Popen(
        ["docker-registry", "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(100):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_pull_fetches_every_image_of_a_task_set_from_the_registry(registry, tmp_path):
    from sandboxes.docker_backend import docker_client
    from tasks.synth.project_image import build_image

    client = docker_client()
    name = f"{registry}/harness-test/pulled:v1"
    (tmp_path / "payload").write_bytes(os.urandom(4 << 20))  # a small image of its own: the push stays quick
    build_image(name, "FROM scratch\nCOPY payload /payload\n", {"payload": tmp_path / "payload"}, what="a test image")
    built = client.images.get(name).id
    for line in client.api.push(name, stream=True, decode=True):
        assert "error" not in line, line
    client.images.remove(name)
    instance = {
        "instance_id": "demo__pulled-1",
        "repo": "demo/pulled",
        "base_commit": "0" * 40,
        "patch": "diff",
        "test_patch": "",
        "problem_statement": "x",
        "image": name,
    }
    tasks = tmp_path / "set.jsonl"
    tasks.write_text(json.dumps(instance) + "\n")

    done = harness("tasks", "pull", str(tasks))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{name}: sha256:" in done.stdout
    assert client.images.get(name).id == built
    client.images.remove(name)


def test_pull_into_the_overlay_store_needs_no_engine(registry, tmp_path, monkeypatch):
    """The same registry read by the overlay backend's own client: the image id is the engine's."""
    from sandboxes.docker_backend import docker_client
    from tasks.synth.project_image import build_image

    client = docker_client()
    name = f"{registry}/harness-test/daemonless:v1"
    (tmp_path / "payload").write_bytes(os.urandom(1 << 20))
    build_image(name, "FROM scratch\nCOPY payload /payload\n", {"payload": tmp_path / "payload"}, what="a test image")
    built = client.images.get(name).id
    for line in client.api.push(name, stream=True, decode=True):
        assert "error" not in line, line
    client.images.remove(name)
    tasks = tmp_path / "set.jsonl"
    instance = {"instance_id": "demo__daemonless-1", "repo": "demo/daemonless", "base_commit": "0" * 40}
    tasks.write_text(
        json.dumps({**instance, "patch": "diff", "test_patch": "", "problem_statement": "x", "image": name})
    )
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))

    done = harness("tasks", "pull", str(tasks), "--backend", "overlay")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{name}: {built[:19]}" in done.stdout
    record = json.loads((tmp_path / "cache" / "images" / f"{built.partition(':')[2]}.json").read_text())
    assert len(record["layers"]) == 1


def test_a_missing_image_is_a_clear_error(registry, tmp_path):
    instance = {
        "instance_id": "demo__gone-1",
        "repo": "demo/gone",
        "base_commit": "0" * 40,
        "patch": "diff",
        "test_patch": "",
        "problem_statement": "x",
        "image": f"{registry}/harness-test/absent:v1",
    }
    tasks = tmp_path / "set.jsonl"
    tasks.write_text(json.dumps(instance) + "\n")
    done = harness("tasks", "pull", str(tasks))
    assert done.returncode == 1
    assert "absent:v1" in done.stdout + done.stderr and "Traceback" not in done.stderr
