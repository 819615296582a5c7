"""The overlay backend with its sandboxes' writes on a tmpfs (writable="tmpfs"): no disk blocks, the disk limit is
the tmpfs's size, the pages count as the sandbox's memory, and nothing is left behind."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sandboxes import SandboxError, SandboxSpec
from sandboxes.images import BASE_IMAGE
from tests.conftest import ROOT, require

SPEC = SandboxSpec(image=BASE_IMAGE, memory="512m", pids=128, wall_time=300, disk="64m")


@pytest.fixture(scope="module")
def tmpfs_backend(overlay_backend):
    from sandboxes.local.overlay import OverlayBackend

    require(Path("/dev/shm").is_dir(), "no /dev/shm on this host")
    return OverlayBackend(writable="tmpfs")


def mounted_anywhere(sandbox_id: str) -> list[str]:
    """Mount table lines that name the sandbox, in the mount namespace of any process on the host."""
    found = []
    for table in Path("/proc").glob("[0-9]*/mountinfo"):
        try:
            found += [line for line in table.read_text().splitlines() if sandbox_id in line]
        except OSError:
            continue
    return found


def gone(sandbox_id: str, folder: Path, holder: int) -> None:
    """No folder (in the cache or on /dev/shm), no holder process, no mount left of a sandbox."""
    assert not os.path.lexists(folder) and not (Path(f"/dev/shm/harness-{os.geteuid()}") / sandbox_id).exists()
    assert not Path(f"/proc/{holder}").exists() or "zombie" in Path(f"/proc/{holder}/status").read_text()
    assert mounted_anywhere(sandbox_id) == []


def test_writes_take_no_disk_and_outlive_a_shell_restart(tmpfs_backend):
    with tmpfs_backend.create(dataclasses.replace(SPEC, read_only=True)) as sandbox:
        assert sandbox.dir.is_symlink() and os.lstat(sandbox.dir).st_blocks == 0  # the cache holds a short link
        assert sandbox.limits["disk"].startswith("tmpfs of 64 MiB")
        result = sandbox.exec("echo kept > /tmp/a && echo kept > /workspace/b; touch /usr/x 2>&1; df -k / | tail -1")
        assert "Read-only file system" in result.output and " 65536 " in result.output, result.output  # df: 64 MiB
        assert sandbox.exec("exit 3").shell_restarted
        assert sandbox.exec("cat /tmp/a /workspace/b").output == "kept\nkept\n"
        assert len(mounted_anywhere(sandbox.id)) >= 2  # the tmpfs and the overlay (bwrap's binds of it too)
        assert not (sandbox.dir / "rw" / "upper").exists()  # the host's folder is only the tmpfs's mount point
        assert sandbox.id in [row["id"] for row in tmpfs_backend.list()]  # found through its link, as on disk
        in_use = {row["digest"] for row in tmpfs_backend.store.images() if row["in_use"]}
        assert sandbox.image.digest in in_use  # so the cache never evicts its layers
        folder, holder = sandbox.dir, sandbox.holder.pid
    gone(sandbox.id, folder, holder)


def test_a_full_tmpfs_stops_the_writer_and_spares_the_host(tmpfs_backend):
    """A writer of 1 GB stops at the 64 MiB tmpfs with ENOSPC; the host's disk takes none of it (measured against
    half the attempt: other programs write to this disk meanwhile)."""
    stats = os.statvfs("/")
    before = lowest = stats.f_bavail * stats.f_frsize
    done = threading.Event()

    def watch_host():
        nonlocal lowest
        while not done.is_set():
            stats = os.statvfs("/")
            lowest = min(lowest, stats.f_bavail * stats.f_frsize)
            time.sleep(0.002)

    with tmpfs_backend.create(SPEC) as sandbox:
        watcher = threading.Thread(target=watch_host)
        watcher.start()
        try:
            full = sandbox.exec("dd if=/dev/zero of=/big bs=1M count=1000 2>&1; echo rc=$?; df -k / | tail -1")
        finally:
            done.set()
            watcher.join()
        assert "No space left on device" in full.output and "rc=1" in full.output, full.output
        assert full.output.split()[-2] == "100%", full.output  # df: the tmpfs is full
        assert os.lstat(sandbox.dir).st_blocks == 0
        assert sandbox.exec("rm /big && echo freed > /f && cat /f").output == "freed\n"  # it goes on, as on a quota
    assert (before - lowest) / 2**20 < 500, f"the host lost {(before - lowest) / 2**20:.0f} MiB"


def test_written_bytes_count_in_the_sandboxs_memory_cgroup(tmpfs_backend):
    with tmpfs_backend.create(SPEC) as sandbox:
        group = sandbox.cgroups.groups.get("memory") if sandbox.cgroups else None
        require(group is not None, "no memory cgroup for sandboxes here")

        def shmem() -> int:
            stat = dict(line.split() for line in (group / "memory.stat").read_text().splitlines())
            return int(stat["shmem"])

        empty = shmem()
        sandbox.exec("head -c 32M /dev/zero > /workspace/data && sync")
        assert shmem() - empty >= 32 << 20


def test_snapshot_and_fork_and_their_writes_on_tmpfs(tmpfs_backend):
    with tmpfs_backend.create(SPEC) as parent:
        parent.exec("cd /etc && echo one > one.txt && rm -f motd && export STAGE=1")
        snapshot = parent.snapshot()
    try:
        forks = tmpfs_backend.fork(snapshot, 2)
        for number, fork in enumerate(forks):
            with fork:
                assert fork.dir.is_symlink()
                fork.exec(f"echo {number} > mine.txt")
                result = fork.exec("pwd; cat one.txt mine.txt; ls motd 2>&1 | grep -c 'No such'; echo $STAGE")
                assert result.output == f"/etc\none\n{number}\n1\n1\n"
    finally:
        tmpfs_backend.remove_snapshot(snapshot)


_CRASH = """
import json, sys
sys.path.insert(0, sys.argv[1])
from sandboxes import SandboxSpec
from sandboxes.local.overlay import OverlayBackend
sandbox = OverlayBackend(writable="tmpfs").create(SandboxSpec(image=sys.argv[2], disk="16m"))
sandbox.exec("echo x > /x")
print(json.dumps({"id": sandbox.id, "dir": str(sandbox.dir), "holder": sandbox.holder.pid}), flush=True)
sys.stdin.read()
"""


def test_a_killed_owner_leaves_no_mount_and_prune_removes_its_folders(tmpfs_backend):
    owner = subprocess.Popen(
        [sys.executable, "-c", _CRASH, str(ROOT), BASE_IMAGE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        made = json.loads(owner.stdout.readline())
        assert len(mounted_anywhere(made["id"])) >= 2  # its tmpfs and overlay, in the namespace they live in
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    deadline = time.monotonic() + 10
    while mounted_anywhere(made["id"]) and time.monotonic() < deadline:  # the holder and shell see their pipes close
        time.sleep(0.05)
    assert mounted_anywhere(made["id"]) == []
    assert f"sandbox {made['id']}" in tmpfs_backend.prune()  # its owner is dead
    gone(made["id"], Path(made["dir"]), made["holder"])


def test_an_unknown_place_for_writes_is_a_clear_error(monkeypatch, overlay_backend):
    from sandboxes.local.overlay import OverlayBackend

    monkeypatch.setenv("HARNESS_OVERLAY_WRITABLE", "ram")
    with pytest.raises(SandboxError, match="disk or tmpfs, not 'ram'"):
        OverlayBackend()
