"""A sandbox's start counts inside the episode's wall time: one that hangs ends the episode in time."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import threading
import time

import pytest

from harness.episode import Limits, run_episode
from harness.policies.scripted import GoldPolicy
from harness.policy import Sampling
from sandboxes import SandboxError, SandboxSpec, live_count
from sandboxes.images import BASE_IMAGE
from tasks.taskset import load_tasks


@pytest.fixture
def stalled_archive(tmp_path):
    """An image archive that never arrives: a FIFO nobody writes (a fetch that stalls before its first byte).
    Afterwards a writer opens and closes it, so the abandoned start ends (an empty archive: an error)."""
    fifo = tmp_path / "stalled.tar"
    os.mkfifo(fifo)
    yield fifo
    released = threading.Thread(target=lambda: open(fifo, "wb").close(), daemon=True)
    released.start()
    released.join(10)


def test_a_stalled_start_is_given_up_when_its_time_is_up(overlay_backend, stalled_archive):
    spec = dataclasses.replace(load_tasks("swe-tiny")[0].sandbox, image=str(stalled_archive))
    began = time.monotonic()
    with pytest.raises(SandboxError, match="took longer than the 1s left"):
        overlay_backend.create_within(spec, 1.0)
    assert time.monotonic() - began < 3


def test_an_episode_whose_sandbox_never_starts_ends_as_a_sandbox_error_in_time(overlay_backend, stalled_archive):
    task = load_tasks("swe-tiny")[0]
    task = dataclasses.replace(task, sandbox=dataclasses.replace(task.sandbox, image=str(stalled_archive)))
    began = time.monotonic()
    trajectory = run_episode(
        task, GoldPolicy(), Sampling(temperature=0.0), Limits(episode_timeout=2.0), backend=overlay_backend
    )
    assert time.monotonic() - began < 5
    assert trajectory.exit_status == "sandbox_error" and "took longer" in trajectory.error
    assert live_count() == 0


def test_grading_whose_sandbox_never_starts_is_an_error_in_time(overlay_backend, stalled_archive):
    from tasks.grading.grade import grade

    instance = {**load_tasks("swe-tiny")[0].metadata["instance"], "image": str(stalled_archive)}
    began = time.monotonic()
    report = grade(instance, instance["patch"], overlay_backend, timeout=2.0)
    assert time.monotonic() - began < 6
    assert not report.resolved and "took longer than the 2s" in report.error
    assert live_count() == 0


def test_a_start_in_time_hands_the_sandbox_over(overlay_backend):
    spec = load_tasks("swe-tiny")[0].sandbox
    with overlay_backend.create_within(spec, 120.0) as sandbox:
        assert sandbox.exec("echo started").output == "started\n"


def test_a_sandbox_that_arrives_after_its_start_was_given_up_is_closed(overlay_backend, tmp_path, monkeypatch):
    """Its image is being unpacked by another thread (whose lock the test holds) until the start is given up."""
    from sandboxes.local.overlay import OverlayBackend
    from tests.sandboxes.test_overlay_backend import image_archive, shell_files

    archive = image_archive(tmp_path / "image.tar", [shell_files(overlay_backend.store.get(BASE_IMAGE).layers[-1])], {})
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    backend = OverlayBackend()
    unpacking = backend.store._lock_of("sha256:" + hashlib.sha256(archive.read_bytes()).hexdigest())
    with unpacking:
        with pytest.raises(SandboxError, match="took longer"):
            backend.create_within(SandboxSpec(image=str(archive), workdir="/w"), 0.5)
    sandboxes = tmp_path / "cache" / "overlay"  # made with the first sandbox's folder
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not sandboxes.is_dir():
        time.sleep(0.05)
    while time.monotonic() < deadline and (live_count() or list(sandboxes.iterdir())):
        time.sleep(0.05)
    assert sandboxes.is_dir(), "the late start never made its sandbox"
    assert live_count() == 0 and list(sandboxes.iterdir()) == []
