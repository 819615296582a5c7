"""File operations of a local sandbox, resolved through the sandbox's own view of its filesystem.

Every path is opened under `/proc/<pid>/root` of the sandbox's pid 1 with openat2(2) and
RESOLVE_IN_ROOT, so `..` and symlinks planted by the agent resolve inside the sandbox (like a
chroot) and never reach the host's files.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import posixpath
import shutil
import stat
import subprocess
from abc import ABC, abstractmethod
from pathlib import Path

from ..errors import FileNotFoundInSandbox, SandboxError
from ..spec import SandboxSpec

log = logging.getLogger(__name__)

_CHUNK = 1 << 20
_SYS_OPENAT2 = 437  # the same number on every architecture
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_IN_ROOT = 0x10
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class RootFiles(ABC):
    """read_file, write_file, upload and download for a sandbox that gives `_root_fd()`: an
    O_PATH fd of its root as its processes see it. Mixed into LocalSandbox."""

    id: str
    spec: SandboxSpec
    mount_point: str

    @abstractmethod
    def _root_fd(self) -> int:
        """An O_PATH fd of the sandbox's root, as its processes see it (the caller closes it)."""

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
                writable = [self.mount_point, "/tmp"] + [
                    inside for _, inside, read_only in self.spec.mounts if not read_only
                ]
                raise SandboxError(
                    f"cannot write {where}: only {', '.join(writable)} are writable ({err.strerror})"
                ) from None
            raise SandboxError(f"{where}: {err.strerror}") from None


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


def copy_tree(source: Path, target: Path) -> None:
    """A host folder's contents into another (seeding a sandbox, taking a snapshot)."""
    result = subprocess.run(["cp", "-a", "--reflink=auto", f"{source}/.", str(target)], capture_output=True, text=True)
    if result.returncode != 0:
        raise SandboxError(f"could not copy {source} to {target}: {result.stderr.strip()}")


def remove_tree(path: Path) -> None:
    """Remove a host folder a sandbox wrote, also where it left folders without permissions
    (overlayfs's work folder, `chmod 000` by the agent) that its owner must open first."""

    def retry(function, failed: str, exc_info) -> None:
        if not isinstance(exc_info[1], PermissionError):
            return
        try:
            os.chmod(os.path.dirname(failed), 0o700)
            if os.path.isdir(failed) and not os.path.islink(failed):
                os.chmod(failed, 0o700)
                remove_tree(Path(failed))
            else:
                function(failed)
        except OSError:
            pass

    if os.path.lexists(path):
        shutil.rmtree(path, onerror=retry)


def runtime_dir() -> Path:
    """This user's folder on the host's tmpfs (`/dev/shm/harness-<uid>`, private to the user): sandbox folders that
    must take no disk blocks and need not outlive a reboot (no sandbox does)."""
    folder = _runtime_path()
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = folder.lstat()
    except OSError as err:
        raise SandboxError(f"cannot make {folder} for sandbox folders on a tmpfs: {err.strerror}") from None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise SandboxError(f"{folder} is not a folder of this user's alone: remove it, or keep writes on disk")
    return folder


def remove_sandbox_folder(folder: Path) -> None:
    """A sandbox's folder; where it is a link to its folder in `runtime_dir()`, that folder and the link (a link
    elsewhere is removed, never followed)."""
    if folder.is_symlink():
        target = Path(os.readlink(folder))
        if target.parent == _runtime_path() and target.name == folder.name:
            remove_tree(target)
        folder.unlink(missing_ok=True)
        return
    remove_tree(folder)


def _runtime_path() -> Path:
    return Path("/dev/shm") / f"harness-{os.geteuid()}"
