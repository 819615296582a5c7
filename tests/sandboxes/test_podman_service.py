"""The Podman service a process starts for itself outlives quiet spells and comes back when killed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import require

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
