"""Local backend: one bubblewrap sandbox per Sandbox, for machines without Docker.

A sandbox is a bwrap process tree in its own pid, ipc, uts and (unless asked) network
namespaces, over a read-only root filesystem, with two writable host directories bound in:
`<cache>/local/<id>/workspace` at the workdir and `<cache>/local/<id>/tmp` at /tmp. Its shell
is `bash -i` on a pty whose master this process holds. Memory, pids and cpu are limited by
cgroup v1 groups `harness-<id>` nested in this process's own groups (setrlimit where those
are not writable). Files move through the sandbox's own view of its filesystem
(`/proc/<pid>/root` opened with RESOLVE_IN_ROOT), so symlinks planted by the agent resolve
inside the sandbox and never reach the host.

What differs from Docker: the root filesystem is always read-only (only the workdir, /tmp and
read-write mounts take writes); `spec.disk` is enforced by a watchdog on the workspace and /tmp
folders (`sandboxes.disk`; read-write mounts are the caller's); `spec.user` is a numeric
`uid[:gid]` or a name from the root filesystem's /etc/passwd, run in a user namespace that
maps it onto this process's uid; a workdir or mount point must exist in the root filesystem
unless it sits directly under /.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import logging
import os
import posixpath
import queue
import resource
import shutil
import signal
import stat
import subprocess
import termios
import threading
import time
import uuid
from concurrent.futures import Future
from pathlib import Path

from .base import LABEL_OWNER, Backend, Sandbox, Snapshot, labels, oom_kill_count, owner_alive
from .docker_backend import SHELL_CAPS
from .errors import FileNotFoundInSandbox, ImageNotFound, SandboxClosed, SandboxError
from .images import PATH, base_rootfs, cache_dir
from .shell import ShellSession, wait_readable
from .spec import SandboxSpec, parse_bytes

log = logging.getLogger(__name__)

BWRAP_HINT = "install bubblewrap (`apt-get install -y bubblewrap`) or use the Docker backend"
CGROUP_ROOT = Path("/sys/fs/cgroup")
SNAPSHOT_META = "harness-snapshot.json"
_CPU_PERIOD_US = 100_000
_CHUNK = 1 << 20


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


_SPAWNER = _Spawner()


class _PtyTransport:
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
        if group <= 0 or _namespace_pid(group) == shell_pid:
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
        if self.process.poll() is None and _is_bwrap(self.child_pid):
            _kill(self.child_pid)
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


class LocalSandbox(Sandbox):
    backend = "local"

    def __init__(
        self, spec: SandboxSpec, root: Path, mount_point: str, seed: Path | None = None, output_cap: int | None = None
    ):
        super().__init__(spec)
        self.root = root
        self.mount_point = mount_point  # where the workspace is bound; spec.workdir is where the shell starts
        self.dir = cache_dir() / "local" / self.id
        self.cgroups: dict[str, Path] = {}  # controller -> this sandbox's group
        self._transport: _PtyTransport | None = None
        try:
            self._prepare(seed)
            self.shell = self._start_shell(output_cap)
            self._watch_disk([self.dir / "workspace", self.dir / "tmp"])
        except BaseException:
            self.close()
            raise

    def _prepare(self, seed: Path | None) -> None:
        self.dir.mkdir(parents=True)
        for part in ("workspace", "tmp"):
            if seed is None:
                (self.dir / part).mkdir()
            else:
                _copy_tree(seed / part, self.dir / part)
        (self.dir / "tmp").chmod(0o1777)
        self.cgroups = _make_cgroups(f"harness-{self.id}", self.spec)
        self._write_owner(pid=0)

    # -- the bwrap process and its shell ----------------------------------------------------

    def _start_shell(self, output_cap: int | None) -> ShellSession:
        try:
            return ShellSession(self._open_shell, is_alive=self._alive, output_cap=output_cap)
        except SandboxError as err:
            if self._transport is None or self._transport.process.poll() is None:
                raise
            output = self._transport.tail.decode(errors="replace").strip()  # bwrap says why it failed
            raise SandboxError(f"sandbox {self.id} did not start ({err}): {output or 'no output'}") from None

    def _open_shell(self) -> _PtyTransport:
        master, slave = os.openpty()
        modes = termios.tcgetattr(slave)
        modes[3] &= ~termios.ECHO  # bash's first input is not echoed back (the shell turns echo off too)
        termios.tcsetattr(slave, termios.TCSANOW, modes)
        info_read, info_write = os.pipe()
        cgroup_fds = [os.open(group / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC) for group in self.cgroups.values()]
        try:
            process = _SPAWNER.popen(
                self._bwrap_command(info_write),
                stdin=slave,
                stdout=slave,
                stderr=slave,
                pass_fds=(info_write,),
                start_new_session=True,
                preexec_fn=_child_setup(cgroup_fds, None if "memory" in self.cgroups else parse_bytes(self.spec.memory)),
            )
        except BaseException:
            os.close(master)
            os.close(info_read)
            raise
        finally:
            for fd in (slave, info_write, *cgroup_fds):
                os.close(fd)
        self._transport = _PtyTransport(process, master, _read_child_pid(info_read))
        self._write_owner(pid=process.pid)
        return self._transport

    @property
    def process(self) -> subprocess.Popen | None:
        """The running bwrap process (a new one after each restart of the shell)."""
        return self._transport.process if self._transport else None

    def _alive(self) -> bool:
        """False once bwrap itself was killed (from outside, or by close); a shell that merely
        exited ends bwrap with an exit status instead, and gets restarted."""
        if self.closed or self._transport is None:
            return False
        try:
            return self._transport.process.wait(timeout=2) >= 0
        except subprocess.TimeoutExpired:
            return True

    def _bwrap_command(self, info_fd: int) -> list[str]:
        spec = self.spec
        command = ["bwrap", "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
        if not spec.network:
            command.append("--unshare-net")
        command += ["--hostname", self.id, *_root_binds(self.root)]
        command += ["--bind", str(self.dir / "tmp"), "/tmp", "--bind", str(self.dir / "workspace"), self.mount_point]
        for host, inside, read_only in spec.mounts:
            command += ["--ro-bind" if read_only else "--bind", host, inside]
        # /proc/sys and sysrq-trigger are host-wide knobs that uid 0 could otherwise write.
        command += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys"]
        command += ["--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger"]
        command += ["--dev", "/dev", "--tmpfs", "/dev/shm", "--remount-ro", "/dev", "--remount-ro", "/"]
        user = _user_ids(spec.user, self.root)
        if user is None:
            command += ["--cap-drop", "ALL"] + [arg for cap in SHELL_CAPS for arg in ("--cap-add", f"CAP_{cap}")]
            home = "/root"
        else:
            uid, gid, home = user
            command += ["--unshare-user", "--uid", str(uid), "--gid", str(gid), "--cap-drop", "ALL"]
        command += ["--chdir", spec.workdir, "--clearenv", "--info-fd", str(info_fd)]
        for key, value in {"PATH": PATH, "HOME": home, **spec.env}.items():
            command += ["--setenv", key, value]
        # No --new-session: it would take the pty away as controlling terminal, and with it job
        # control and ^C. TIOCSTI through it is no risk: the pty is private to this sandbox.
        return command + ["bash", "--norc", "--noprofile", "-i"]

    def _write_owner(self, pid: int) -> None:
        owner = {"labels": labels(), "pid": pid, "cgroups": [str(g) for g in self.cgroups.values()], "image": self.spec.image}
        (self.dir / "owner").write_text(json.dumps(owner))

    def _stop_over_disk_limit(self, used: int) -> None:
        transport = self._transport
        if transport is not None and transport.process.poll() is None:
            _kill(transport.process.pid)  # bwrap: its pid namespace, and every writer in it, dies with it
        for part in ("workspace", "tmp"):
            shutil.rmtree(self.dir / part, ignore_errors=True)

    def _oom_kill_count(self) -> int:
        group = self.cgroups.get("memory")
        return oom_kill_count(_read_text(group / "memory.oom_control")) if group else 0

    # -- files, through the sandbox's own root ----------------------------------------------

    def read_file(self, path: str) -> bytes:
        with self._open(path, os.O_RDONLY) as fd:
            _require_regular(fd, path)
            return _read_all(fd)

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        if isinstance(data, str):
            data = data.encode()
        with self._create(path, mode) as fd:
            _write_all(fd, data)

    def upload(self, local_path: str | Path, sandbox_path: str) -> None:
        local = Path(local_path)
        if not local.exists():
            raise FileNotFoundError(f"cannot upload {local}: no such file or folder")
        if not local.is_dir():
            self._upload_file(local, sandbox_path)
            return
        base = self._absolute(sandbox_path)
        self._makedirs(base)
        for folder, dirs, files in os.walk(local):
            inside = posixpath.join(base, os.path.relpath(folder, local))
            for name in dirs + files:
                source = Path(folder, name)
                if source.is_symlink():
                    with self._open_dir(inside) as parent, self._errors(posixpath.join(inside, name)):
                        os.symlink(os.readlink(source), name, dir_fd=parent)
                elif source.is_dir():
                    self._makedirs(posixpath.join(inside, name))
                else:
                    self._upload_file(source, posixpath.join(inside, name))

    def download(self, sandbox_path: str, local_path: str | Path) -> None:
        local = Path(local_path)
        with self._open(sandbox_path, os.O_RDONLY) as fd:
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                local.mkdir(parents=True, exist_ok=True)
                _download_tree(fd, local)
                return
            _require_regular(fd, sandbox_path)
            local.parent.mkdir(parents=True, exist_ok=True)
            with open(local, "wb") as out:
                _copy_fd(fd, out.fileno())

    def _upload_file(self, local: Path, sandbox_path: str) -> None:
        with open(local, "rb") as source, self._create(sandbox_path, local.stat().st_mode & 0o7777) as fd:
            _copy_fd(source.fileno(), fd)

    def _absolute(self, path: str) -> str:
        return path if path.startswith("/") else posixpath.join(self.spec.workdir, path)

    def _open(self, path: str, flags: int, mode: int = 0) -> "_Fd":
        """An fd for `path` resolved as the sandbox sees it (symlinks and .. stay inside)."""
        with _Fd(self._root_fd()) as root, self._errors(path):
            if not flags & os.O_PATH:
                flags |= os.O_NONBLOCK | os.O_NOCTTY  # a planted fifo or tty must not block or adopt us
            return _Fd(_openat2(root, self._absolute(path), flags, mode))

    def _open_dir(self, path: str) -> "_Fd":
        return self._open(path, os.O_PATH | os.O_DIRECTORY)

    def _create(self, path: str, mode: int) -> "_Fd":
        self._makedirs(posixpath.dirname(self._absolute(path)))
        fd = self._open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        try:
            _require_regular(fd.fd, path)
            os.fchmod(fd.fd, mode)
        except BaseException:
            fd.close()
            raise
        return fd

    def _makedirs(self, path: str) -> None:
        try:
            self._open_dir(path).close()
            return
        except FileNotFoundInSandbox:
            pass
        parent, name = posixpath.split(path.rstrip("/"))
        self._makedirs(parent)
        with self._open_dir(parent) as fd, self._errors(path):
            try:
                os.mkdir(name, 0o755, dir_fd=fd)  # one component under a resolved parent: no escape
            except FileExistsError:
                pass

    def _root_fd(self) -> int:
        transport = self._transport
        self._check_open()
        if transport is None or not transport.alive():
            raise SandboxClosed(f"sandbox {self.id} has no running shell")
        try:
            return os.open(f"/proc/{transport.child_pid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as err:
            raise SandboxClosed(f"sandbox {self.id} is no longer running ({err.strerror})") from None

    @contextlib.contextmanager
    def _errors(self, path: str):
        """Turn OSErrors of a file operation into the sandbox's errors, naming the sandbox path."""
        try:
            yield
        except SandboxError:
            raise
        except OSError as err:
            where = f"{path} in sandbox {self.id}"
            if err.errno == errno.ENOENT:
                raise FileNotFoundInSandbox(f"{where}: no such file or folder") from None
            if err.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
                writable = [self.mount_point, "/tmp"] + [inside for _, inside, read_only in self.spec.mounts if not read_only]
                raise SandboxError(f"cannot write {where}: only {', '.join(writable)} are writable ({err.strerror})") from None
            raise SandboxError(f"{where}: {err.strerror}") from None

    # -- state -----------------------------------------------------------------------------

    def _snapshot(self, cwd: str, env: dict[str, str]) -> Snapshot:
        folder = cache_dir() / "local-snapshots" / uuid.uuid4().hex[:12]
        folder.mkdir(parents=True)
        try:
            for part in ("workspace", "tmp"):
                _copy_tree(self.dir / part, folder / part)
            meta = {"root": str(self.root), "workdir": self.mount_point, "labels": labels()}
            (folder / SNAPSHOT_META).write_text(json.dumps(meta))
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        merged = {**self.spec.to_dict(), "image": str(folder), "workdir": cwd, "env": {**self.spec.env, **env}}
        return Snapshot("local", str(folder), SandboxSpec.from_dict(merged), cwd, env)

    def _destroy(self) -> None:
        if self._transport is not None:
            self._transport.close()
        _remove_cgroups(list(self.cgroups.values()))
        shutil.rmtree(self.dir, ignore_errors=True)


class LocalBackend(Backend):
    name = "local"

    def __init__(self, output_cap: int | None = None, rootfs: str | Path | None = None):
        if shutil.which("bwrap") is None:
            raise SandboxError(f"bubblewrap (`bwrap`) is not on PATH: {BWRAP_HINT}")
        self.output_cap = output_cap
        self.rootfs = Path(rootfs) if rootfs is not None else None

    def create(self, spec: SandboxSpec) -> LocalSandbox:
        """`spec.image`: the base image name, a root filesystem directory, or a snapshot's directory."""
        image = spec.image
        if image.startswith("harness-base"):
            return LocalSandbox(spec, self._base_root(), spec.workdir, output_cap=self.output_cap)
        folder = Path(image)
        if not folder.is_absolute() or not folder.is_dir():
            raise ImageNotFound(
                f"the local backend runs the base image or a root filesystem directory, and {image!r} is "
                "neither: build the base with `harness sandbox build-base`, or use the Docker backend"
            )
        if (folder / SNAPSHOT_META).exists():
            meta = json.loads((folder / SNAPSHOT_META).read_text())
            return LocalSandbox(spec, Path(meta["root"]), meta["workdir"], folder, self.output_cap)
        return LocalSandbox(spec, folder, spec.workdir, output_cap=self.output_cap)

    def _base_root(self) -> Path:
        root = self.rootfs or base_rootfs()
        if self.rootfs is None and not (root / ".harness-complete").exists():
            raise ImageNotFound(f"the base root filesystem is not built ({root}): run `harness sandbox build-base`")
        if not root.is_dir():
            raise ImageNotFound(f"the root filesystem {root} does not exist")
        return root

    def remove_snapshot(self, snapshot: Snapshot) -> None:
        shutil.rmtree(snapshot.ref, ignore_errors=True)

    def list(self) -> list[dict]:
        found = []
        for folder, owner in _sandbox_dirs():
            status = "running" if _is_bwrap(owner.get("pid", 0)) else "exited"
            found.append({"id": folder.name, "status": status, "image": owner.get("image", "?"), **owner.get("labels", {})})
        return found

    def prune(self, everything: bool = False) -> list[str]:
        removed = []
        for folder, owner in _sandbox_dirs():
            if everything or not owner_alive(owner.get("labels", {}).get(LABEL_OWNER, "")):
                if _is_bwrap(owner.get("pid", 0)):
                    _kill(owner["pid"])
                _remove_cgroups([Path(group) for group in owner.get("cgroups", [])])
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(f"sandbox {folder.name}")
        for folder in sorted((cache_dir() / "local-snapshots").glob("*")):
            meta = _read_json(folder / SNAPSHOT_META)
            if everything or not owner_alive(meta.get("labels", {}).get(LABEL_OWNER, "")):
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(f"snapshot {folder.name}")
        return removed


# -- spawning --------------------------------------------------------------------------------


def _child_setup(cgroup_fds: list[int], memory_rlimit: int | None):
    """Runs in the forked child before it execs bwrap: only simple system calls here."""

    def setup() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)  # the pty becomes this new session's terminal
        pid = str(os.getpid()).encode()
        for fd in cgroup_fds:
            os.write(fd, pid)
        if memory_rlimit is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory_rlimit, memory_rlimit))

    return setup


def _root_binds(root: Path) -> list[str]:
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


def _read_child_pid(fd: int, timeout: float = 20.0) -> int:
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


def _user_ids(user: str | None, root: Path) -> tuple[int, int, str] | None:
    """(uid, gid, home) for spec.user, or None to run as root."""
    if not user or user in ("root", "0", "0:0"):
        return None
    name, _, group = user.partition(":")
    for line in _read_text(root / "etc" / "passwd").splitlines():
        fields = line.split(":")
        if len(fields) >= 6 and name in (fields[0], fields[2]):
            return int(fields[2]), int(group) if group.isdigit() else int(fields[3]), fields[5]
    if name.isdigit():
        return int(name), int(group) if group.isdigit() else int(name), "/"
    raise SandboxError(f"user {user!r} is not in {root}/etc/passwd: give a numeric uid[:gid] or a user it knows")


def _namespace_pid(pid: int) -> int | None:
    """The pid that host process `pid` has in its innermost pid namespace."""
    for line in _read_text(Path(f"/proc/{pid}/status")).splitlines():
        if line.startswith("NSpid:"):
            return int(line.split()[-1])
    return None


def _is_bwrap(pid: int) -> bool:
    return pid > 0 and _read_text(Path(f"/proc/{pid}/comm")).strip() == "bwrap"


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        log.warning(message)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


# -- cgroups ---------------------------------------------------------------------------------


def _make_cgroups(name: str, spec: SandboxSpec) -> dict[str, Path]:
    memory = parse_bytes(spec.memory)
    settings = {
        "memory": [("memory.limit_in_bytes", memory), ("memory.memsw.limit_in_bytes", memory)],
        "pids": [("pids.max", spec.pids)],
        "cpu": [("cpu.cfs_period_us", _CPU_PERIOD_US), ("cpu.cfs_quota_us", int(spec.cpus * _CPU_PERIOD_US))],
    }
    made, missing = {}, []
    for controller, values in settings.items():
        parent = _own_cgroup(controller)
        try:
            if parent is None:
                raise OSError(errno.ENOENT, "no cgroup v1 hierarchy")
            group = parent / name
            group.mkdir()
            try:
                for file, value in values:
                    if (group / file).exists():
                        (group / file).write_text(str(value))
            except OSError:
                group.rmdir()
                raise
            made[controller] = group
        except OSError as err:
            log.debug("cgroup %s: %s", controller, err)
            missing.append(controller)
    if missing:
        fallback = " (memory falls back to RLIMIT_AS)" if "memory" in missing else ""
        _warn_once(f"cgroup v1 {'/'.join(missing)} is not writable here: local sandboxes run without those limits{fallback}")
    return made


def _own_cgroup(controller: str) -> Path | None:
    """This process's group in the v1 hierarchy of `controller` (sandboxes nest under it)."""
    for line in _read_text(Path("/proc/self/cgroup")).splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            folder = CGROUP_ROOT / controller / path.lstrip("/")
            return folder if os.access(folder, os.W_OK) else None
    return None


def _remove_cgroups(groups: list[Path]) -> None:
    """Kill whatever still runs in the groups (only this sandbox's processes), then remove them."""
    for group in groups:
        for pid in _read_text(group / "cgroup.procs").split():
            _kill(int(pid))
    deadline = time.monotonic() + 5.0
    for group in groups:
        while group.exists():
            try:
                group.rmdir()
            except OSError as err:
                if err.errno != errno.EBUSY or time.monotonic() > deadline:
                    log.warning("could not remove cgroup %s: %s", group, err)
                    break
                time.sleep(0.02)


# -- files -----------------------------------------------------------------------------------

_SYS_OPENAT2 = 437  # the same number on every architecture
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_IN_ROOT = 0x10
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def _openat2(root_fd: int, path: str, flags: int, mode: int = 0) -> int:
    """openat2(2) with RESOLVE_IN_ROOT: `..` and absolute symlinks stop at `root_fd`, like a chroot."""
    how = _OpenHow(flags | os.O_CLOEXEC, mode if flags & os.O_CREAT else 0, _RESOLVE_IN_ROOT | _RESOLVE_NO_MAGICLINKS)
    size = ctypes.c_size_t(ctypes.sizeof(how))
    fd = _libc.syscall(ctypes.c_long(_SYS_OPENAT2), ctypes.c_int(root_fd), os.fsencode(path), ctypes.byref(how), size)
    if fd < 0:
        code = ctypes.get_errno()
        if code == errno.ENOSYS:
            raise SandboxError("the local backend needs openat2(2) (Linux 5.6 or newer)")
        raise OSError(code, os.strerror(code), path)
    return fd


class _Fd:
    """A file descriptor closed on leaving a `with` block."""

    def __init__(self, fd: int):
        self.fd = fd

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> int:
        return self.fd

    def __exit__(self, *exc) -> None:
        self.close()


def _require_regular(fd: int, path: str) -> None:
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise SandboxError(f"{path} in the sandbox is not a regular file")


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, _CHUNK):
        chunks.append(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _copy_fd(source: int, target: int) -> None:
    while chunk := os.read(source, _CHUNK):
        _write_all(target, chunk)


def _download_tree(dir_fd: int, local: Path, depth: str = ".") -> None:
    """Copy a sandbox folder out one entry at a time, never following the sandbox's symlinks;
    `depth` is where `dir_fd` sits in the folder being downloaded."""
    for entry in os.scandir(dir_fd):
        target = local / entry.name
        if entry.is_symlink():
            link = os.readlink(entry.name, dir_fd=dir_fd)
            if posixpath.isabs(link) or posixpath.normpath(posixpath.join(depth, link)).startswith(".."):
                log.warning("not downloading symlink %s -> %s: it points outside the folder", target, link)
            else:
                target.symlink_to(link)
            continue
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        if entry.is_dir(follow_symlinks=False):
            target.mkdir(exist_ok=True)
            with _Fd(os.open(entry.name, flags | os.O_DIRECTORY, dir_fd=dir_fd)) as child:
                _download_tree(child, target, posixpath.join(depth, entry.name))
        elif entry.is_file(follow_symlinks=False):
            with _Fd(os.open(entry.name, flags, dir_fd=dir_fd)) as child, open(target, "wb") as out:
                _copy_fd(child, out.fileno())
            target.chmod(entry.stat(follow_symlinks=False).st_mode & 0o7777)


def _copy_tree(source: Path, target: Path) -> None:
    result = subprocess.run(["cp", "-a", "--reflink=auto", f"{source}/.", str(target)], capture_output=True, text=True)
    if result.returncode != 0:
        raise SandboxError(f"could not copy {source} to {target}: {result.stderr.strip()}")


# -- bookkeeping -----------------------------------------------------------------------------


def _sandbox_dirs() -> list[tuple[Path, dict]]:
    return [(folder, _read_json(folder / "owner")) for folder in sorted((cache_dir() / "local").glob("*"))]


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _read_text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


