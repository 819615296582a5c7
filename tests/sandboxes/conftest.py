"""Fixtures of the sandbox tests that run as another user."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import require


@pytest.fixture
def unprivileged_user():
    """A new ordinary user with a home of its own (and, where useradd gives them, subordinate id ranges);
    removed afterwards with every process and every top-level /tmp entry it left."""
    require(os.geteuid() == 0 and shutil.which("useradd") is not None, "making a user for the rootless run needs root")
    name = f"harness-rl-{os.getpid() % 100000}"
    subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", name], check=True, capture_output=True)
    try:
        yield pwd.getpwnam(name)
    finally:
        uid = pwd.getpwnam(name).pw_uid
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and subprocess.run(["pgrep", "-u", str(uid)], capture_output=True).stdout:
            subprocess.run(["pkill", "-KILL", "-u", str(uid)], capture_output=True, check=False)  # only that user's
            time.sleep(0.1)
        for entry in [*Path("/tmp").iterdir(), *Path("/dev/shm").iterdir()]:  # its programs' (Podman's run root)
            if entry.lstat().st_uid != uid:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
        subprocess.run(["userdel", "--remove", name], capture_output=True, check=False)
