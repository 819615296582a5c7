"""What only the bubblewrap backend does: its confinement, its cgroups, its bookkeeping.

The behaviour both backends share is in test_contract.py.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from sandboxes import FileNotFoundInSandbox, ImageNotFound, SandboxError, SandboxSpec
from sandboxes.images import base_rootfs

SPEC = SandboxSpec(image="harness-base:latest", memory="256m", pids=64, cpus=0.5, wall_time=300)


@pytest.fixture(scope="module")
def rootfs() -> Path:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (bwrap) is not installed")
    if (base_rootfs() / ".harness-complete").exists():
        return base_rootfs()
    if Path("/tmp/rootfs-test/usr/bin/bash").exists():
        return Path("/tmp/rootfs-test")
    pytest.skip("no root filesystem: run `harness sandbox build-base` (or debootstrap one into /tmp/rootfs-test)")


@pytest.fixture
def local(rootfs, tmp_path, monkeypatch):
    from sandboxes.local import LocalBackend

    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))  # sandboxes, snapshots: private to the test
    return LocalBackend(rootfs=rootfs)


@pytest.fixture
def box(local):
    with local.create(SPEC) as sandbox:
        yield sandbox


@pytest.fixture
def host_secret():
    """A host file at a path the sandbox has a (read-only, different) folder for."""
    folder = Path(tempfile.mkdtemp(dir="/var/tmp"))
    (folder / "secret.txt").write_text("host secret\n")
    yield folder / "secret.txt"
    shutil.rmtree(folder)


def test_writes_outside_the_workspace_and_tmp_fail(box, rootfs):
    result = box.exec("touch /etc/x /x; touch /workspace/ok /tmp/ok && echo fine")
    assert result.output.count("Read-only file system") == 2 and result.output.endswith("fine\n")
    for path in ("/etc/x", "/usr/new/dir/x"):
        with pytest.raises(SandboxError, match="only /workspace, /tmp are writable") as caught:
            box.write_file(path, "x")
        assert not isinstance(caught.value, FileNotFoundInSandbox)
    assert not (rootfs / "etc" / "x").exists() and not (rootfs / "usr" / "new").exists()
    box.write_file("/tmp/a/b.txt", "ok")
    assert box.exec("cat /tmp/a/b.txt").output == "ok"


def test_planted_symlinks_resolve_inside_the_sandbox(box, rootfs, host_secret, tmp_path):
    folder = host_secret.parent
    box.exec(f"ln -s {host_secret} leak; ln -s {folder} leakdir; ln -s ../../../../../../.. up; ln -s /etc/passwd pw")
    box.exec(
        f"mkdir -p d/sub; echo x > d/f; ln -s {folder} d/host; ln -s f d/rel; ln -s ../f d/sub/up; ln -s ../../x d/sub/out"
    )
    for path in ("leak", "leakdir/secret.txt", f"up{host_secret}", f"/workspace/up/up{host_secret}"):
        with pytest.raises(FileNotFoundInSandbox):
            box.read_file(path)
        with pytest.raises(FileNotFoundInSandbox):
            box.download(path, tmp_path / "out")
    assert box.read_file("pw") == (rootfs / "etc" / "passwd").read_bytes()  # the sandbox's own /etc
    box.download("d", tmp_path / "d")
    assert sorted(os.listdir(tmp_path / "d")) == ["f", "rel", "sub"]  # links out of the folder stay behind
    assert os.listdir(tmp_path / "d" / "sub") == ["up"] and (tmp_path / "d" / "sub" / "up").read_text() == "x\n"
    with pytest.raises(SandboxError):
        box.write_file("leakdir/planted.txt", "x")  # /var/tmp/... is read-only in the sandbox
    assert sorted(os.listdir(folder)) == ["secret.txt"]


def test_network_is_unreachable(box):
    probe = "import socket\ntry: socket.create_connection(('1.1.1.1', 53), timeout=5)\nexcept OSError as e: print(e)\n"
    box.write_file("probe.py", probe)
    assert "unreachable" in box.exec("python3 probe.py", timeout=30).output
    assert box.exec("grep -c : /proc/net/dev").output.strip() == "1"  # only lo


def test_pid_namespace_hides_host_processes(box):
    pids = box.exec("ls /proc | grep -E '^[0-9]+$'").output.split()
    assert len(pids) < 10
    names = box.exec("cat /proc/[0-9]*/comm").output.split()
    assert names[0] == "bwrap" and "pytest" not in names and "python" not in names


def test_cgroup_limits_are_set(box):
    groups = box.cgroups.groups
    if set(groups) != {"memory", "pids", "cpu"}:
        pytest.skip(f"cgroup memory/pids/cpu are not all writable here: {box.limits}")
    assert all(box.limits[c].startswith("cgroup v") for c in ("memory", "pids", "cpu"))
    if box.cgroups.versions[groups["memory"]] == 1:
        assert (groups["memory"] / "memory.limit_in_bytes").read_text().strip() == str(256 << 20)
        assert (groups["cpu"] / "cpu.cfs_quota_us").read_text().strip() == "50000"
    else:
        assert (groups["memory"] / "memory.max").read_text().strip() == str(256 << 20)
        assert (groups["cpu"] / "cpu.max").read_text().strip() == "50000 100000"
    assert (groups["pids"] / "pids.max").read_text().strip() == "64"
    inside = box.exec("cat /proc/self/cgroup").output
    assert all(f"harness-{box.id}" in line for line in inside.splitlines() if ":memory:" in line or ":pids:" in line)


def test_memory_hog_is_killed_by_the_memory_cgroup(box):
    if "memory" not in box.cgroups.groups:
        pytest.skip("the memory cgroup is not writable here")
    result = box.exec("python3 -c 'x = bytearray(1024**3)'", timeout=60)
    assert result.exit_code == 137 and not result.timed_out
    assert result.message == "the command was killed by the out-of-memory killer (memory limit 256m)"
    assert box.exec("echo alive").output == "alive\n"


def test_without_writable_cgroups_memory_falls_back_to_rlimit(rootfs, local, caplog, monkeypatch):
    from sandboxes.local import LocalBackend, cgroups

    monkeypatch.setattr(cgroups, "_warned", set())
    without = LocalBackend(rootfs=rootfs, cgroups=([], ["cgroups switched off by the test"]))
    with caplog.at_level("WARNING"), without.create(SPEC) as sandbox:
        assert sandbox.cgroups.groups == {}
        assert (
            sandbox.limits["memory"]
            == "RLIMIT_AS (address space, not resident memory): cgroups switched off by the test"
        )
        assert sandbox.limits["pids"] == sandbox.limits["cpu"] == "none: cgroups switched off by the test"
        warning = "local sandboxes run without memory/pids/cpu cgroup limits (memory falls back to RLIMIT_AS): cgroups switched off by the test"
        with without.create(SPEC):
            pass
        assert [r.getMessage() for r in caplog.records].count(warning) == 1  # said once per process, not per sandbox
        result = sandbox.exec("python3 -c 'x = bytearray(1024**3)'", timeout=60)
        assert result.exit_code == 1 and "MemoryError" in result.output
        assert sandbox.exec("echo alive").output == "alive\n"


def test_fork_bomb_is_contained_by_pids_max(local):
    sandbox = local.create(SPEC)
    group = sandbox.cgroups.groups.get("pids")
    if group is None:
        sandbox.close()
        pytest.skip("the pids cgroup is not writable here")
    sandbox.exec(":(){ :|:& };:", timeout=5)
    time.sleep(1)
    assert int((group / "pids.current").read_text()) <= SPEC.pids
    assert int((group / "pids.events").read_text().split()[1]) > 0  # it did hit the limit
    assert subprocess.run(["true"]).returncode == 0
    sandbox.close()
    assert not group.exists()


def test_close_leaves_no_process_and_no_folder(local):
    sandbox = local.create(SPEC)
    sandbox.exec("sleep 300 & sleep 300 &")
    pids = [sandbox.process.pid, sandbox._transport.child_pid]
    folder, groups = sandbox.dir, sandbox.cgroups.paths
    sandbox.close()
    sandbox.close()
    assert [pid for pid in pids if Path(f"/proc/{pid}").exists()] == []
    assert not folder.exists() and not any(group.exists() for group in groups)
    assert local.list() == []


def test_prune_removes_sandboxes_whose_owner_died(local):
    dead = subprocess.Popen(["true"])
    dead.wait()
    orphan, kept = local.create(SPEC), local.create(SPEC)
    owner = json.loads((orphan.dir / "owner").read_text())
    owner["labels"]["harness.owner"] = f"{socket.gethostname()}:{dead.pid}"
    (orphan.dir / "owner").write_text(json.dumps(owner))
    try:
        assert local.prune() == [f"sandbox {orphan.id}"]
        assert orphan.process.wait(timeout=10) < 0 and not orphan.dir.exists()
        assert [s["id"] for s in local.list()] == [kept.id]
        assert kept.exec("echo ok").output == "ok\n"
    finally:
        orphan.close()
        kept.close()


def test_fork_keeps_the_workspace_mount_and_the_cwd(local, box):
    box.exec("mkdir -p sub && cd sub && echo v1 > f && export PHASE=1")
    snapshot = box.snapshot()
    assert Path(snapshot.ref).is_dir() and snapshot.spec.workdir == "/workspace/sub"
    (fork,) = local.fork(snapshot, 1)
    with fork:
        assert fork.exec("pwd; cat f; echo $PHASE; ls /workspace").output == "/workspace/sub\nv1\n1\nsub\n"
        again = fork.snapshot()
        with local.fork(again, 1)[0] as grandchild:
            assert grandchild.exec("cat /workspace/sub/f").output == "v1\n"
        local.remove_snapshot(again)
    local.remove_snapshot(snapshot)
    assert not Path(snapshot.ref).exists()


def test_runs_as_a_numeric_user(local):
    with local.create(SandboxSpec(image="harness-base:latest", user="1000")) as sandbox:
        assert sandbox.exec("id -u; id -g").output == "1000\n1000\n"
        assert sandbox.exec("touch /workspace/mine && echo ok").output == "ok\n"
        assert sandbox.exec("touch /etc/x").exit_code != 0


def test_unknown_images_and_bad_workdirs_say_why(local, tmp_path, monkeypatch):
    from sandboxes.local import LocalBackend

    with pytest.raises(ImageNotFound, match="Docker backend"):
        local.create(SandboxSpec(image="python:3.11"))
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "empty"))
    with pytest.raises(ImageNotFound, match="harness sandbox build-base"):
        LocalBackend().create(SandboxSpec())
    with pytest.raises(SandboxError, match="Can't mkdir .*/usr/no/such"):
        local.create(SandboxSpec(image="harness-base:latest", workdir="/usr/no/such/dir"))


def test_a_host_without_setsid_gets_a_clear_error(tmp_path, monkeypatch):
    from sandboxes.local import LocalBackend

    (tmp_path / "bwrap").symlink_to(shutil.which("bwrap"))
    monkeypatch.setenv("PATH", str(tmp_path))  # bwrap alone
    with pytest.raises(SandboxError, match="`setsid` \\(util-linux\\) is not on PATH"):
        LocalBackend()
