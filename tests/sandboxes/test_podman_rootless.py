"""The podman backend run by an ordinary user: rootless Podman, the image from an archive the user can read.

The user has no access to the Docker engine: the test saves the base image (as root) into the user's home,
and the user's process names that archive as the sandbox's image.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from sandboxes.images import BASE_IMAGE
from tests.conftest import ROOT, require

MEMORY, PIDS, CPUS = 256 << 20, 64, 1.0
# What the user's interpreter needs besides the standard library and `sandboxes`: docker-py and its dependencies
# (this interpreter's site-packages may be out of the user's reach).
DISTRIBUTIONS = ("docker", "requests", "urllib3", "idna", "certifi", "charset-normalizer")

_ROOTLESS = """
import json, logging, sys, time
sys.path.insert(0, sys.argv[1])
logging.basicConfig(level=logging.WARNING)
import sandboxes.podman_backend as podman
podman.SERVICE_IDLE_S = 10  # the service this process starts exits soon after it: the test checks what is left
from sandboxes import SandboxSpec, get_backend
backend = get_backend("podman")
spec = SandboxSpec(image=sys.argv[2], workdir="/work", memory="256m", pids=64, cpus=1.0, wall_time=300)
with backend.create(spec) as sandbox:
    seen = {
        "limits": sandbox.limits,
        "inside": sandbox.exec("id -u; cd /tmp && export KEPT=yes; echo changed > /etc/motd && cat /etc/motd").output,
        "kept": sandbox.exec("pwd; echo $KEPT").output,
        "uid_map": sandbox.exec("cat /proc/self/uid_map").output,
        "interfaces": sandbox.exec("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '").output,
        "connect": sandbox.exec("(exec 3<>/dev/tcp/192.0.2.1/80) 2>&1; echo status=$?", timeout=30).output,
        "cgroup": sandbox.exec(
            "for f in memory.max memory/memory.limit_in_bytes pids.max pids/pids.max cpu.max cpu/cpu.cfs_quota_us; "
            'do echo "$f=$(cat /sys/fs/cgroup/$f 2>/dev/null)"; done'
        ).output,
        "ulimit_v": sandbox.exec("ulimit -v").output,
    }
    snapshot = sandbox.snapshot()
[fork] = backend.fork(snapshot, 1)
with fork:
    seen["fork"] = fork.exec("cat /etc/motd; pwd; echo $KEPT").output
backend.remove_snapshot(snapshot)
deadline = time.monotonic() + 60  # closing kills the container; Podman removes it (auto-remove) right after
while backend.list() and time.monotonic() < deadline:
    time.sleep(0.5)
seen["left"] = backend.list()
seen["service"] = backend.client.podman_url
print(json.dumps(seen))
"""


def as_user(user, *command: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`command` run as `user` (no groups, no capabilities) with a minimal environment of its own."""
    home = user.pw_dir
    return subprocess.run(
        ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", "env", "-i"]
        + [f"HOME={home}", f"USER={user.pw_name}", f"LOGNAME={user.pw_name}", "PATH=/usr/bin:/bin"]
        + [f"HARNESS_CACHE={home}/cache", *command],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=home,
        check=False,
    )


def subordinate_ids(user) -> None:
    """Give the user subordinate uid and gid ranges (Podman maps the image's other owners onto them) where
    useradd gave none: 65536 ids above every range already given."""
    for table, option in (("/etc/subuid", "--add-subuids"), ("/etc/subgid", "--add-subgids")):
        lines = [line.split(":") for line in Path(table).read_text().splitlines() if line.count(":") == 2]
        if any(name == user.pw_name for name, _, _ in lines):
            continue
        start = max([100000] + [int(first) + int(count) for _, first, count in lines])
        subprocess.run(["usermod", option, f"{start}-{start + 65535}", user.pw_name], check=True)


def cgroup_values(text: str) -> dict[str, str]:
    """The container's own view of each limit's cgroup file: memory, pids, cpu (v2's file or v1's)."""
    files = dict(line.partition("=")[::2] for line in text.splitlines() if "=" in line)
    pick = {
        "memory": files.get("memory.max") or files.get("memory/memory.limit_in_bytes", ""),
        "pids": files.get("pids.max") or files.get("pids/pids.max", ""),
        "cpu": files.get("cpu.max", "").split(" ")[0] or files.get("cpu/cpu.cfs_quota_us", ""),
    }
    return {name: value.strip() for name, value in pick.items()}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_rootless_podman_runs_a_sandbox_from_an_archive(docker_backend, unprivileged_user, tmp_path):
    """A persistent shell as root of a user namespace, no network, each limit either set by a cgroup the
    container sees or said to be missing (and warned about), a snapshot and its fork, nothing left."""
    require(shutil.which("podman") is not None, "Podman is not installed")
    require(shutil.which("newuidmap") is not None, "rootless Podman needs newuidmap and newgidmap (package uidmap)")
    userns = Path("/proc/sys/user/max_user_namespaces")
    require(userns.exists() and int(userns.read_text()) > 0, "this kernel allows no user namespaces")
    user = unprivileged_user
    probe = as_user(user, "unshare", "--user", "--map-root-user", "true")
    if probe.returncode != 0:
        pytest.skip(f"this kernel lets no ordinary user make a user namespace: {probe.stderr.strip()}")
    subordinate_ids(user)

    home = Path(user.pw_dir)
    code = home / "code"
    shutil.copytree(ROOT / "sandboxes", code / "sandboxes", ignore=shutil.ignore_patterns("__pycache__"))
    for name in DISTRIBUTIONS:
        for file in importlib.metadata.distribution(name).files:
            if file.suffix != ".pyc" and not file.parts[0].endswith(".dist-info") and ".." not in file.parts:
                (code / file).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(file.locate(), code / file)
    archive = home / "base.tar"
    subprocess.run(["docker", "save", "-o", str(archive), BASE_IMAGE], check=True, timeout=300)
    subprocess.run(["chown", "-R", f"{user.pw_uid}:{user.pw_gid}", str(home)], check=True)
    python = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")

    run = as_user(user, python, "-c", _ROOTLESS, str(code), str(archive), timeout=480)
    assert run.returncode == 0, run.stderr[-3000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])

    assert seen["inside"].split() == ["0", "changed"]  # root inside: uid 0 of the user's namespace
    assert seen["kept"].split() == ["/tmp", "yes"]  # cwd and variables persist between commands
    first_map = seen["uid_map"].split()[:3]
    assert first_map == ["0", str(user.pw_uid), "1"], seen["uid_map"]  # container root is the user, no more
    assert seen["interfaces"].split() == ["lo"], seen["interfaces"]
    assert "status=0" not in seen["connect"], seen["connect"]
    assert seen["fork"].split() == ["changed", "/tmp", "yes"]

    wanted = {"memory": str(MEMORY), "pids": str(PIDS), "cpu": str(int(CPUS * 100_000))}
    values = cgroup_values(seen["cgroup"])
    for name in ("memory", "pids", "cpu"):
        how = seen["limits"][name]
        if how.startswith("podman (cgroup"):
            assert values[name] == wanted[name], (name, how, values)
            continue
        assert values[name] != wanted[name], (name, how, values)  # not set: the record must not claim it
        assert how.startswith("RLIMIT_AS" if name == "memory" else "none: "), how
        assert re.search(rf"without \S*{name}\S* cgroup limits", run.stderr), run.stderr[-2000:]
    if seen["limits"]["memory"].startswith("RLIMIT_AS"):
        assert int(seen["ulimit_v"]) * 1024 == MEMORY, seen["ulimit_v"]

    assert seen["left"] == []
    assert as_user(user, "podman", "ps", "--all", "--quiet").stdout.strip() == ""
    # What may outlive the sandbox is Podman's own: the shared service (until its idle time ends) and the
    # process that holds the user's namespace open. No conmon, runtime or container process.
    socket = seen["service"].removeprefix("unix://")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and service_running(user, socket):
        time.sleep(1)
    left = processes(user)
    assert all(is_pause_process(args) for args in left), left


def processes(user) -> list[str]:
    """The command lines of the user's processes, but for exited ones that wait to be reaped (zombies: their
    parent is this machine's init, which may be slow to reap them or never do)."""
    listed = subprocess.run(
        ["ps", "-ww", "-o", "stat=,args=", "-u", str(user.pw_uid)], capture_output=True, text=True, check=False
    )
    rows = [line.split(None, 1) for line in listed.stdout.splitlines() if line.strip()]
    return [row[1] for row in rows if len(row) == 2 and not row[0].startswith("Z")]


def service_running(user, socket: str) -> bool:
    return any("system service" in args and socket in args for args in processes(user))


def is_pause_process(args: str) -> bool:
    """Rootless Podman's pause process (`catatonit -P`): it keeps the user's namespace for later podman commands."""
    return args.split()[0].endswith("catatonit") and args.split()[1:] == ["-P"]
