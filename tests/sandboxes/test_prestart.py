"""The pre-start pool on real Docker: bounds, hand-out, give-back, and no container left behind."""

from __future__ import annotations

import time
import uuid
from dataclasses import replace

import pytest

from sandboxes import SandboxSpec
from sandboxes.base import LABEL_RUN, RUN_ID
from sandboxes.docker_backend import docker_client
from sandboxes.images import build_base_image
from sandboxes.prestart import PrestartBackend


def our_containers() -> dict[str, str]:
    """id -> image of every container this test process's run owns (running or not)."""
    listed = docker_client().containers.list(all=True, filters={"label": f"{LABEL_RUN}={RUN_ID}"}, ignore_removed=True)
    return {c.id: c.attrs["Config"]["Image"] for c in listed}


def settle(before: dict[str, str], expected: int, timeout: float = 30.0) -> dict[str, str]:
    """Our containers beyond `before` once their count reaches `expected` (removal finishes in the engine)."""
    end = time.monotonic() + timeout
    while True:
        now = {i: image for i, image in our_containers().items() if i not in before}
        if len(now) == expected or time.monotonic() > end:
            return now
        time.sleep(0.2)


@pytest.fixture(scope="module")
def two_images(docker_backend):
    """The base image under two names: the pool bounds by image name."""
    base = build_base_image()
    other = f"harness-prestart-test:{uuid.uuid4().hex[:8]}"
    docker_client().images.get(base).tag(other)
    yield base, other
    docker_client().images.remove(other)


def test_bounds_per_image_and_in_all_and_close_removes_everything(docker_backend, two_images):
    a, b = (SandboxSpec(image=image, wall_time=300) for image in two_images)
    before = our_containers()
    pool = PrestartBackend(docker_backend, [a] * 5 + [b] * 3, per_image=2, total=3, starters=3)
    try:
        assert pool.wait_idle(120)
        started = settle(before, 3)
        assert sorted(started.values()) == sorted([a.image, a.image, b.image])  # A capped at 2, B fills the total
        assert pool.ready_count() == 3 and pool.peak <= 3 and pool.peak_per_image <= 2
        with pool.job([a]):
            taken = pool.create(replace(a, wall_time=60))  # the wall time does not matter for matching
        assert pool.stats["handed_out"] == 1 and taken.spec.wall_time == 60
        assert taken.exec("echo ok").output.strip() == "ok"
        assert pool.wait_idle(120)
        assert len(settle(before, 4)) == 4  # one more A started for the queue; A's bound counts only what waits
        taken.close()
    finally:
        pool.close()
    assert settle(before, 0) == {}


def test_close_while_starting_leaves_nothing(docker_backend, two_images):
    before = our_containers()
    pool = PrestartBackend(docker_backend, [SandboxSpec(image=two_images[0])] * 6, per_image=6, starters=3)
    deadline = time.monotonic() + 60
    while not pool.stats["prestarted"] and time.monotonic() < deadline:
        time.sleep(0.02)
    pool.close()  # some are still being started: they are removed on arrival
    assert pool.stats["prestarted"] >= 1
    assert settle(before, 0) == {}
    with pytest.raises(RuntimeError, match="closed"):
        pool.create(SandboxSpec(image=two_images[0]))


def test_a_job_gives_back_what_it_did_not_use(docker_backend, two_images):
    episode, grading = SandboxSpec(image=two_images[0]), SandboxSpec(image=two_images[0], memory="1g")
    before = our_containers()
    with PrestartBackend(docker_backend, [episode, grading, episode, grading], per_image=2) as pool:
        assert pool.wait_idle(120) and pool.ready_count() == 2
        with pool.job([episode, grading]):
            sandbox = pool.create(episode)  # the episode failed before grading: its grading sandbox is not wanted
        assert pool.wait_idle(120) and pool.ready_count() == 2  # the next job's pair: the ready grading, a new episode
        assert pool.stats["prestarted"] == 3 and pool.stats["discarded"] == 0  # the second grading was never started
        with pool.job([episode, grading]):
            late = pool.create(SandboxSpec(image=two_images[0], env={"X": "1"}))  # never announced: created cold
        assert pool.stats["cold"] == 1 and pool.stats["discarded"] == 2 and pool.ready_count() == 0
        sandbox.close()
        late.close()
    assert settle(before, 0) == {}


def test_bad_bounds_are_refused(docker_backend):
    for kwargs in ({"per_image": 0}, {"total": 0}, {"starters": 0}):
        with pytest.raises(ValueError):
            PrestartBackend(docker_backend, [], **kwargs)
