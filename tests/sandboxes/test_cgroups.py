"""The local backend's cgroup v2 support, against the host's real cgroup2 hierarchy.

On a hybrid host (cgroup v1 controllers, plus a cgroup2 mount without them, like the machine
this was written on) memory/pids/cpu cannot be limited through v2: the test still makes a real
v2 group, runs the sandbox in it, freezes it, kills it through cgroup.kill and checks that the
limits it could not set are reported. On a pure v2 host the same test checks memory.max,
pids.max and cpu.max.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from sandboxes import SandboxSpec
from sandboxes.cgroupfs import cgroup_mounts, process_groups
from sandboxes.local.cgroups import CONTROLLERS, HOST_LEAF, Hierarchy, delegate

SPEC = SandboxSpec(image="harness-base:latest", memory="256m", pids=64, cpus=0.5, wall_time=300)
ROOT = Path(__file__).resolve().parents[2]


def _v2_own_group() -> Path:
    mounts, own = cgroup_mounts()[2], process_groups()
    if not mounts or "" not in own or os.geteuid() != 0:
        pytest.skip("no cgroup2 hierarchy writable by this process")
    group = mounts[0][0] / own[""].lstrip("/")
    return group.parent if group.name == HOST_LEAF else group


def _events(group: Path) -> dict[str, str]:
    return dict(line.split() for line in (group / "cgroup.events").read_text().splitlines())


def _cpu_usage(group: Path, seconds: float) -> int:
    """Microseconds of cpu the group's processes used during `seconds` (cpu.stat: in every v2 group)."""
    usage = lambda: int(dict(line.split() for line in (group / "cpu.stat").read_text().splitlines())["usage_usec"])
    before = usage()
    time.sleep(seconds)
    return usage() - before


def test_sandbox_in_a_v2_group_is_limited_frozen_and_killed(local_backend):
    from sandboxes.local import LocalBackend

    parent, enabled, problems = delegate(_v2_own_group(), list(CONTROLLERS))
    local = LocalBackend(cgroups=([Hierarchy(2, parent, tuple(enabled))], problems))
    box = local.create(SPEC)
    try:
        (group,) = box.cgroups.paths
        assert group.parent == parent and box.cgroups.versions[group] == 2
        inside = Path(f"/proc/{box._transport.child_pid}/cgroup").read_text()
        assert f"0::/{group.relative_to(cgroup_mounts()[2][0][0])}\n" in inside  # bwrap's child joined it
        expected = {
            "memory": ("memory.max", str(256 << 20)),
            "pids": ("pids.max", "64"),
            "cpu": ("cpu.max", "50000 100000"),
        }
        for controller in CONTROLLERS:
            if controller in enabled:
                file, value = expected[controller]
                assert (group / file).read_text().strip() == value
                assert box.limits[controller] == f"cgroup v2 {group}"
            else:  # said, not silent: which controller is missing and why
                assert f"the cgroup v2 {controller} controller is not delegated to {parent}" in box.limits[controller]
        if "memory" not in enabled:
            assert box.limits["memory"].startswith("RLIMIT_AS") and box.cgroups.rlimit_as == 256 << 20
        box.exec("sleep 300 & (while :; do :; done) &")  # one process that sleeps, one that burns cpu
        pids = (group / "cgroup.procs").read_text().split()
        assert len(pids) >= 4  # bwrap's pid 1, bash, the sleep, the loop
        assert _cpu_usage(group, 0.3) > 10_000  # the loop runs (10 ms of cpu at least, on a loaded machine)
        assert box.cgroups.freeze()
        deadline = time.monotonic() + 5
        while _events(group)["frozen"] != "1" and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _events(group)["frozen"] == "1" and _cpu_usage(group, 0.3) == 0  # nothing runs any more
    finally:
        box.close()
    assert not group.exists()  # cgroup.kill, thaw and rmdir: nothing was left in it
    assert [pid for pid in pids if Path(f"/proc/{pid}").exists()] == []


def test_v2_delegation_moves_a_lone_process_into_a_leaf():
    """A process alone in its v2 group moves into `harness-host` so the group can hand controllers
    down; one that shares its group with other processes says why it cannot."""
    own = _v2_own_group()
    grantable = [
        c
        for c in (own / "cgroup.subtree_control").read_text().split()
        if c in (own / "cgroup.controllers").read_text().split()
    ]
    if not grantable:
        pytest.skip(f"{own} hands no controller to its children here (cgroup v1 holds them)")
    controller = grantable[0]
    group = own / f"harness-test-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    script = (
        "import json, os, sys; from pathlib import Path; from sandboxes.local.cgroups import delegate\n"
        "group = Path(sys.argv[1]); (group / 'cgroup.procs').write_text(str(os.getpid()))\n"
        "parent, enabled, problems = delegate(group, [sys.argv[2]])\n"
        "print(json.dumps([str(parent), enabled, problems, open('/proc/self/cgroup').read()]))\n"
    )

    def run(where: Path) -> list:
        """delegate() in a new process that joined the group `where`, as harness would run there."""
        done = subprocess.run(
            [sys.executable, "-c", script, str(where), controller], cwd=ROOT, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    try:
        parent, enabled, problems, cgroup = run(group)
        assert (parent, enabled, problems) == (str(group), [controller], [])
        assert cgroup.strip().endswith(f"/{group.name}/{HOST_LEAF}")
        assert controller in (group / "cgroup.subtree_control").read_text().split()
        parent, enabled, problems, _ = run(group / HOST_LEAF)  # one started by it finds the prepared group
        assert (parent, enabled) == (str(group), [controller])
        (group / HOST_LEAF).rmdir()
        (group / "cgroup.subtree_control").write_text(f"-{controller}")
        with subprocess.Popen(["sleep", "60"]) as other:
            (group / "cgroup.procs").write_text(str(other.pid))
            parent, enabled, problems, _ = run(group)
            other.kill()
        assert enabled == [] and "holds other processes (1)" in problems[0]
    finally:
        for leaf in (group / HOST_LEAF, group):
            if leaf.exists():
                for pid in (leaf / "cgroup.procs").read_text().split():
                    os.kill(int(pid), 9)
                time.sleep(0.1)
                leaf.rmdir()
