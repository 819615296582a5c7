"""The bubblewrap process of a local sandbox: how it is spawned, its pty, its command line."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import termios
import threading
import time
from concurrent.futures import Future
from pathlib import Path

from ..base import SHELL_CAPS
from ..cgroupfs import read_text
from ..errors import SandboxError
from ..images import PATH
from ..shell import wait_readable
from ..spec import SandboxSpec


class _Spawner:
    """Forks every bwrap from one daemon thread that lives as long as the process.

    bwrap's --die-with-parent is PR_SET_PDEATHSIG, which fires when the *thread* that forked
    it exits: sandboxes made in short-lived threads (create_many, pools) would die with them.
    """

    def __init__(self):
        self._reset()
        os.register_at_fork(after_in_child=self._reset)  # a forked child has no such thread

    def _reset(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def popen(self, *args, **kwargs) -> subprocess.Popen:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="bwrap-spawner", daemon=True)
                self._thread.start()
        future: Future = Future()
        self._jobs.put((future, args, kwargs))
        return future.result()

    def _run(self) -> None:
        while True:
            future, args, kwargs = self._jobs.get()
            try:
                future.set_result(subprocess.Popen(*args, **kwargs))
            except BaseException as err:
                future.set_exception(err)


SPAWNER = _Spawner()


class PtyTransport:
    """The master side of the pty that a sandbox's bash runs on; owns the bwrap process."""

    def __init__(self, process: subprocess.Popen, master_fd: int, child_pid: int):
        self.process = process
        self.master_fd = master_fd
        self.child_pid = child_pid  # host pid of the sandbox's pid 1
        self.tail = b""  # the last output, to explain a shell that died while starting

    def send(self, data: bytes) -> None:
        try:
            while data:
                data = data[os.write(self.master_fd, data) :]
        except OSError:
            pass  # a dead shell shows up as EOF on the next recv

    def recv(self, timeout: float) -> bytes | None:
        try:
            if not wait_readable(self.master_fd, timeout):
                return b""
            data = os.read(self.master_fd, 1 << 16)
        except OSError:  # EIO once every holder of the slave side is gone
            return None
        self.tail = (self.tail + data)[-2048:]
        return data or None

    def kill_foreground(self, shell_pid: int) -> None:
        try:
            group = os.tcgetpgrp(self.master_fd)  # a host pid: the kernel translates it for us
        except OSError:
            return
        if group <= 0 or namespace_pid(group) == shell_pid:
            return
        try:
            os.killpg(group, signal.SIGKILL)
        except OSError:
            pass

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        # Killing the namespace's pid 1 kills every process in it; bwrap then reaps it and exits.
        # (Killing bwrap first would work too, through --die-with-parent, but leave pid 1 as a
        # zombie for the host's init to reap.)
        if self.process.poll() is None and is_bwrap(self.child_pid):
            kill(self.child_pid)
            try:
                self.process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        if self.master_fd >= 0:
            os.close(self.master_fd)
            self.master_fd = -1


def open_pty() -> tuple[int, int]:
    """(master, slave) of a new pty whose input is not echoed (bash's first input would be)."""
    master, slave = os.openpty()
    modes = termios.tcgetattr(slave)
    modes[3] &= ~termios.ECHO
    termios.tcsetattr(slave, termios.TCSANOW, modes)
    return master, slave


# Joins each cgroup named before `--` and sets RLIMIT_AS (KiB, "-" for none) before any process
# in the sandbox exists, then becomes the command after `--`.
_JOIN_THEN_EXEC = (
    'limit=$1; shift; while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; '
    '[ "$limit" = - ] || ulimit -v "$limit" || exit 125; exec "$@"'
)


def launcher(cgroups: list[Path], memory_rlimit: int | None) -> list[str]:
    """What a sandbox's command runs under: a new session with the pty (stdin) as its controlling
    terminal, in the sandbox's cgroups, under its address-space limit.

    Done by `setsid --ctty` and `sh` rather than a Python preexec_fn: a preexec_fn makes
    subprocess fork the whole interpreter (13 ms with torch loaded), where without one it uses
    vfork (0.3 ms)."""
    limit = "-" if memory_rlimit is None else str(memory_rlimit // 1024)
    procs = [str(group / "cgroup.procs") for group in cgroups]
    return ["setsid", "--ctty", "sh", "-c", _JOIN_THEN_EXEC, "sh", limit, *procs, "--"]


def root_binds(root: Path) -> list[str]:
    """The root filesystem read-only, one top-level entry at a time, so that a workdir or mount
    point missing from it can still be made in bwrap's own (later read-only) root."""
    args = []
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if entry.name.startswith(".") or entry.name in ("proc", "dev", "tmp"):
            continue
        if entry.is_symlink():
            args += ["--symlink", os.readlink(entry.path), "/" + entry.name]
        else:
            args += ["--ro-bind", entry.path, "/" + entry.name]
    return args


def read_child_pid(fd: int, timeout: float = 20.0) -> int:
    """bwrap writes {"child-pid": N, ...} to --info-fd once it has cloned the sandbox (0 if it failed)."""
    data = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            chunk = os.read(fd, 4096) if wait_readable(fd, deadline - time.monotonic()) else b""
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    try:
        return int(json.loads(data)["child-pid"])
    except (ValueError, KeyError):
        return 0


def user_ids(user: str | None, root: Path) -> tuple[int, int, str] | None:
    """(uid, gid, home) for spec.user, or None to run as root."""
    if not user or user in ("root", "0", "0:0"):
        return None
    name, _, group = user.partition(":")
    for line in read_text(root / "etc" / "passwd").splitlines():
        fields = line.split(":")
        if len(fields) >= 6 and name in (fields[0], fields[2]):
            return int(fields[2]), int(group) if group.isdigit() else int(fields[3]), fields[5]
    if name.isdigit():
        return int(name), int(group) if group.isdigit() else int(name), "/"
    raise SandboxError(f"user {user!r} is not in {root}/etc/passwd: give a numeric uid[:gid] or a user it knows")


def namespace_pid(pid: int) -> int | None:
    """The pid that host process `pid` has in its innermost pid namespace."""
    for line in read_text(Path(f"/proc/{pid}/status")).splitlines():
        if line.startswith("NSpid:"):
            return int(line.split()[-1])
    return None


def is_bwrap(pid: int) -> bool:
    return pid > 0 and read_text(Path(f"/proc/{pid}/comm")).strip() == "bwrap"


def kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def bwrap_command(
    spec: SandboxSpec,
    filesystem: list[str],
    users_root: Path,
    hostname: str,
    info_fd: int,
    image_env: dict[str, str] | None = None,
    read_only_root: bool = True,
) -> list[str]:
    """The bwrap command line of a sandbox whose root and writable parts `filesystem` binds;
    `users_root` is the root filesystem whose /etc/passwd names spec.user."""
    command = ["bwrap", "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    if not spec.network:
        command.append("--unshare-net")
    command += ["--hostname", hostname, *filesystem]
    for host, inside, read_only in spec.mounts:
        command += ["--ro-bind" if read_only else "--bind", host, inside]
    # /proc/sys and sysrq-trigger are host-wide knobs that uid 0 could otherwise write.
    command += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys"]
    command += ["--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger"]
    command += ["--dev", "/dev", "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
    if read_only_root:
        command += ["--remount-ro", "/"]
    user = user_ids(spec.user, users_root)
    if user is None:
        command += ["--cap-drop", "ALL"] + [arg for cap in SHELL_CAPS for arg in ("--cap-add", f"CAP_{cap}")]
        home = "/root"
    else:
        uid, gid, home = user
        command += ["--unshare-user", "--uid", str(uid), "--gid", str(gid), "--cap-drop", "ALL"]
    command += ["--chdir", spec.workdir, "--clearenv", "--info-fd", str(info_fd)]
    for key, value in {"PATH": PATH, "HOME": home, **(image_env or {}), **spec.env}.items():
        command += ["--setenv", key, value]
    # No --new-session: it would take the pty away as controlling terminal, and with it job
    # control and ^C. TIOCSTI through it is no risk: the pty is private to this sandbox.
    return command + ["bash", "--norc", "--noprofile", "-i"]
