"""The Podman service a process starts for itself outlives quiet spells, comes back when killed and outlives the folder
it was started from; a service with lower rlimits than its client still runs the client's sandboxes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import resource
import textwrap
import time

import pytest

from tests.conftest import ROOT, require

SCRIPT = textwrap.dedent(
    """
    import subprocess, sys, time
    import sandboxes.podman_backend as podman

    podman.SERVICE_IDLE_S = 4  # the service exits after 4 idle seconds; the process pings it every second
    client = podman.podman_client()
    socket = client.podman_url.removeprefix("unix://")
    assert socket.startswith(sys.argv[1]), socket
    client.ping()
    time.sleep(20)  # five idle times with no request of its own
    assert client.ping(), "the service did not outlive a quiet spell"
    subprocess.run(["pkill", "-f", f"podman system service .*{socket}"], check=True)
    time.sleep(4)
    assert client.ping(), "the service was not started again"
    subprocess.run(["pkill", "-f", f"podman system service .*{socket}"], check=True)
    print("ok")
    """
)


@pytest.mark.timeout(180)
def test_a_quiet_spell_and_a_killed_service_leave_the_client_working(tmp_path):
    require(shutil.which("podman") is not None, "Podman is not installed")
    if os.environ.get("CONTAINER_HOST") or os.path.exists("/run/podman/podman.sock"):
        pytest.skip("a Podman service outside this test is the one used (CONTAINER_HOST or the system socket)")
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        env={**os.environ, "HARNESS_CACHE": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr


LIMITS_SCRIPT = textwrap.dedent(
    """
    from sandboxes import SandboxSpec
    from sandboxes.images import BASE_IMAGE
    from sandboxes.podman_backend import PodmanBackend

    with PodmanBackend().create(SandboxSpec(image=BASE_IMAGE, memory="256m", wall_time=120)) as sandbox:
        print(sandbox.exec("ulimit -Hn").output.strip())
    """
)


@pytest.mark.timeout(300)
def test_a_service_started_with_lower_limits_than_its_client_still_runs_sandboxes(podman_backend, tmp_path):
    """A shared service may have been started by another process with a lower open-files limit; a container asking
    for more than the service holds cannot start ("error setting rlimit"), so it gets the service's."""
    own = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    lower = min(own, 1 << 20) // 2
    socket_path = tmp_path / "podman.sock"
    service = subprocess.Popen(
        ["prlimit", f"--nofile={lower}:{lower}", "podman", "system", "service", "--time=0", f"unix://{socket_path}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not socket_path.exists() and service.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        done = subprocess.run(
            [sys.executable, "-c", LIMITS_SCRIPT],
            env={**os.environ, "CONTAINER_HOST": f"unix://{socket_path}"},
            capture_output=True,
            text=True,
            timeout=240,
        )
    finally:
        service.terminate()
        service.wait(timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.split()[-1] == str(lower), done.stdout


GONE_CWD_SCRIPT = textwrap.dedent(
    """
    import os, shutil, subprocess, sys
    from sandboxes import SandboxSpec
    from sandboxes.images import BASE_IMAGE
    from sandboxes.podman_backend import PodmanBackend

    backend = PodmanBackend()  # starts the service from this working directory
    os.chdir("/")
    shutil.rmtree(sys.argv[1])
    with backend.create(SandboxSpec(image=BASE_IMAGE, memory="256m", wall_time=120)) as sandbox:
        print(sandbox.exec("echo started").output.strip())
    socket = backend.client.podman_url.removeprefix("unix://")
    subprocess.run(["pkill", "-f", f"podman system service .*{socket}"], check=True)
    """
)


@pytest.mark.timeout(300)
def test_the_service_outlives_the_folder_it_was_started_from(podman_backend, tmp_path):
    """The service outlives the process that started it, and so may its working directory: a run started from a
    folder that is removed later (a clone, a temporary directory) must leave later sandboxes starting."""
    if os.environ.get("CONTAINER_HOST") or os.path.exists("/run/podman/podman.sock"):
        pytest.skip("a Podman service outside this test is the one used (CONTAINER_HOST or the system socket)")
    folder = tmp_path / "started-here"
    folder.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", GONE_CWD_SCRIPT, str(folder)],
        cwd=folder,
        env={**os.environ, "HARNESS_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0 and done.stdout.split()[-1:] == ["started"], done.stdout + done.stderr
