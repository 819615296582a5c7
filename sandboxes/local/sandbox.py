"""LocalSandbox and LocalBackend: one bubblewrap sandbox per Sandbox, and their bookkeeping."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from abc import abstractmethod
from pathlib import Path

from ..base import LABEL_OWNER, Backend, Sandbox, Snapshot, labels, owner_alive
from ..disk import tree_bytes
from ..errors import ImageNotFound, SandboxClosed, SandboxError
from ..images import cache_dir, rootfs_of_image
from ..shell import ShellSession
from ..spec import SandboxSpec
from .cgroups import Hierarchy, SandboxCgroups, host_hierarchies, remove_groups
from .files import RootFiles, copy_tree, remove_sandbox_folder, remove_tree
from .process import (
    SPAWNER,
    PtyTransport,
    bwrap_command,
    is_bwrap,
    kill,
    launcher,
    open_pty,
    read_child_pid,
    root_binds,
)

BWRAP_HINT = "install bubblewrap (`apt-get install -y bubblewrap`) or use the Docker backend"
SNAPSHOT_META = "harness-snapshot.json"


class BwrapSandbox(RootFiles, Sandbox):
    """A bubblewrap process tree with its pty shell, cgroups, disk watchdog and owner record in
    `<cache>/<backend>/<id>`. Subclasses say what its filesystem is made of."""

    def __init__(
        self, spec: SandboxSpec, output_cap: int | None = None, cgroups: tuple[list[Hierarchy], list[str]] | None = None
    ):
        super().__init__(spec)
        self.dir = cache_dir() / self.backend / self.id
        self.cgroups: SandboxCgroups | None = None
        self._transport: PtyTransport | None = None
        try:
            self._make_folder()
            self._make_filesystem()
            self._make_cgroups(cgroups or host_hierarchies())
            self.shell = self._start_shell(output_cap)
            self._watch_disk(self._writable())
        except BaseException:
            self.close()
            raise

    def _make_folder(self) -> None:
        self.dir.mkdir(parents=True)

    @abstractmethod
    def _make_filesystem(self) -> None:
        """Make the host folders under self.dir that the sandbox's writes go to."""

    @abstractmethod
    def _writable(self) -> list[Path]:
        """The host folders that take the sandbox's writes (measured for its disk limit)."""

    @abstractmethod
    def _command(self, info_fd: int) -> list[str]:
        """The command line that starts the sandbox (ends in bwrap, which reports on `info_fd`)."""

    def _make_cgroups(self, cgroups: tuple[list[Hierarchy], list[str]]) -> None:
        hierarchies, problems = cgroups
        self.cgroups = SandboxCgroups(f"harness-{self.id}", self.spec, list(hierarchies), list(problems))
        self.limits.update(self.cgroups.limits)
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

    def _open_shell(self) -> PtyTransport:
        master, slave = open_pty()
        info_read, info_write = os.pipe()
        command = launcher(self.cgroups.paths, self.cgroups.rlimit_as) + self._command(info_write)
        try:
            process = SPAWNER.popen(command, stdin=slave, stdout=slave, stderr=slave, pass_fds=(info_write,))
        except BaseException:
            os.close(master)
            os.close(info_read)
            raise
        finally:
            os.close(slave)
            os.close(info_write)
        self._transport = PtyTransport(process, master, read_child_pid(info_read))
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

    def _root_fd(self) -> int:
        transport = self._transport
        self._check_open()
        if transport is None or not transport.alive():
            raise SandboxClosed(f"sandbox {self.id} has no running shell")
        try:
            return os.open(f"/proc/{transport.child_pid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as err:
            raise SandboxClosed(f"sandbox {self.id} is no longer running ({err.strerror})") from None

    def _write_owner(self, pid: int) -> None:
        groups = [str(g) for g in self.cgroups.paths] if self.cgroups else []
        owner = {"labels": labels(), "pid": pid, "cgroups": groups, "image": self.spec.image, "limits": self.limits}
        (self.dir / "owner").write_text(json.dumps(owner))

    def _stop_over_disk_limit(self, used: int) -> None:
        if self.cgroups is not None:
            self.cgroups.freeze()  # v2: every writer stops at once (v1: the kill below does it)
        transport = self._transport
        if transport is not None and transport.process.poll() is None:
            # The namespace's pid 1: every writer in it dies with it (once thawed, on close).
            kill(transport.child_pid if is_bwrap(transport.child_pid) else transport.process.pid)
        for folder in self._writable():
            remove_tree(folder)

    def _oom_kill_count(self) -> int:
        return self.cgroups.oom_kill_count() if self.cgroups else 0

    def _new_snapshot_folder(self) -> Path:
        folder = cache_dir() / f"{self.backend}-snapshots" / uuid.uuid4().hex[:12]
        folder.mkdir(parents=True)
        return folder

    def close(self) -> None:
        if self.cgroups is not None and not self.closed:
            self.cgroups.freeze(False)  # a frozen bwrap could not reap the sandbox's pid 1 as the shell closes
        super().close()

    def _destroy(self) -> None:
        if self._transport is not None:
            self._transport.close()
        if self.cgroups is not None:
            self.cgroups.remove()
        remove_sandbox_folder(self.dir)


class LocalSandbox(BwrapSandbox):
    """Over a read-only root filesystem, with `workspace` bound at the workdir and `tmp` at /tmp."""

    backend = "local"

    def __init__(
        self,
        spec: SandboxSpec,
        root: Path,
        mount_point: str,
        seed: Path | None = None,
        output_cap: int | None = None,
        cgroups: tuple[list[Hierarchy], list[str]] | None = None,
    ):
        self.root = root
        self.mount_point = mount_point  # where the workspace is bound; spec.workdir is where the shell starts
        self.seed = seed
        super().__init__(spec, output_cap, cgroups)

    def _make_filesystem(self) -> None:
        for part in ("workspace", "tmp"):
            if self.seed is None:
                (self.dir / part).mkdir()
            else:
                copy_tree(self.seed / part, self.dir / part)
        (self.dir / "tmp").chmod(0o1777)

    def _writable(self) -> list[Path]:
        return [self.dir / "workspace", self.dir / "tmp"]

    def _command(self, info_fd: int) -> list[str]:
        filesystem = root_binds(self.root) + [
            "--bind",
            str(self.dir / "tmp"),
            "/tmp",
            "--bind",
            str(self.dir / "workspace"),
            self.mount_point,
        ]
        return bwrap_command(self.spec, filesystem, self.root, self.id, info_fd)

    def _snapshot(self, cwd: str, env: dict[str, str]) -> Snapshot:
        folder = self._new_snapshot_folder()
        try:
            for part in ("workspace", "tmp"):
                copy_tree(self.dir / part, folder / part)
            meta = {"root": str(self.root), "workdir": self.mount_point, "labels": labels()}
            (folder / SNAPSHOT_META).write_text(json.dumps(meta))
        except BaseException:
            remove_tree(folder)
            raise
        merged = {**self.spec.to_dict(), "image": str(folder), "workdir": cwd, "env": {**self.spec.env, **env}}
        return Snapshot("local", str(folder), SandboxSpec.from_dict(merged), cwd, env)


class LocalBackend(Backend):
    name = "local"

    def __init__(
        self,
        output_cap: int | None = None,
        rootfs: str | Path | None = None,
        cgroups: tuple[list[Hierarchy], list[str]] | None = None,
    ):
        """`cgroups`: (hierarchies, why any controller is missing) to use instead of what this
        host has (`cgroups.host_hierarchies()`); ([], ["..."]) runs without cgroups."""
        if shutil.which("bwrap") is None:
            raise SandboxError(f"bubblewrap (`bwrap`) is not on PATH: {BWRAP_HINT}")
        if shutil.which("setsid") is None:
            raise SandboxError("`setsid` (util-linux) is not on PATH: local sandboxes start their shell with it")
        self.output_cap = output_cap
        self.rootfs = Path(rootfs) if rootfs is not None else None
        self.cgroups = cgroups

    def create(self, spec: SandboxSpec) -> LocalSandbox:
        """`spec.image`: a base image name (`harness-base:latest`, `harness-base:<hash>`), a root filesystem
        directory, or a snapshot's directory."""
        image = spec.image
        if image.startswith("harness-base"):
            return self._sandbox(spec, self._base_root(image), spec.workdir)
        folder = Path(image)
        if not folder.is_absolute() or not folder.is_dir():
            raise ImageNotFound(
                f"the local backend runs the base image or a root filesystem directory, and {image!r} is "
                "neither: build the base with `harness sandbox build-base`, or use the Docker backend"
            )
        if (folder / SNAPSHOT_META).exists():
            meta = json.loads((folder / SNAPSHOT_META).read_text())
            return self._sandbox(spec, Path(meta["root"]), meta["workdir"], folder)
        return self._sandbox(spec, folder, spec.workdir)

    def has_image(self, image: str) -> bool:
        if image.startswith("harness-base"):
            return self.rootfs is not None or (rootfs_of_image(image) / ".harness-complete").exists()
        return Path(image).is_absolute() and Path(image).is_dir()

    def _sandbox(self, spec: SandboxSpec, root: Path, mount_point: str, seed: Path | None = None) -> LocalSandbox:
        return LocalSandbox(spec, root, mount_point, seed, self.output_cap, self.cgroups)

    def _base_root(self, image: str) -> Path:
        root = self.rootfs or rootfs_of_image(image)
        if self.rootfs is None and not (root / ".harness-complete").exists():
            raise ImageNotFound(
                f"the root filesystem of {image} is not built ({root}): run `harness sandbox build-base` "
                "(with the base's `--python`)"
            )
        if not root.is_dir():
            raise ImageNotFound(f"the root filesystem {root} does not exist")
        return root

    def remove_snapshot(self, snapshot: Snapshot) -> None:
        remove_tree(Path(snapshot.ref))

    def _snapshots(self) -> Path:
        return cache_dir() / f"{self.name}-snapshots"

    def _sandbox_dirs(self) -> list[tuple[Path, dict]]:
        return [(folder, _read_json(folder / "owner")) for folder in sorted((cache_dir() / self.name).glob("*"))]

    def list(self) -> list[dict]:
        found = []
        for folder, owner in self._sandbox_dirs():
            status = "running" if is_bwrap(owner.get("pid", 0)) else "exited"
            found.append(
                {
                    "id": folder.name,
                    "status": status,
                    "image": owner.get("image", "?"),
                    "bytes": tree_bytes(folder),  # what it wrote: its image's files are not in its folder
                    **owner.get("labels", {}),
                }
            )
        return found

    def prune(self, everything: bool = False) -> list[str]:
        removed = []
        for folder, owner in self._sandbox_dirs():
            if everything or not owner_alive(owner.get("labels", {}).get(LABEL_OWNER, "")):
                if is_bwrap(owner.get("pid", 0)):
                    kill(owner["pid"])
                remove_groups([Path(group) for group in owner.get("cgroups", [])])
                remove_sandbox_folder(folder)
                removed.append(f"sandbox {folder.name}")
        for folder in sorted(self._snapshots().glob("*")):
            meta = _read_json(folder / SNAPSHOT_META)
            if everything or not owner_alive(meta.get("labels", {}).get(LABEL_OWNER, "")):
                remove_tree(folder)
                removed.append(f"snapshot {folder.name}")
        return removed


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
