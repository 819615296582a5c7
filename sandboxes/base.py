"""The Sandbox contract shared by every backend, and the bookkeeping that never leaks one."""

from __future__ import annotations

import atexit
import logging
import os
import shlex
import signal
import socket
import threading
import time
import uuid
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .disk import DiskWatchdog
from .errors import DiskLimitExceeded, SandboxClosed, SandboxError, SandboxExpired
from .shell import ShellSession
from .spec import ExecResult, SandboxSpec, parse_bytes

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 120.0
LABEL_MANAGED = "harness.managed"
LABEL_OWNER = "harness.owner"  # "<hostname>:<pid>" of the process that created it
LABEL_RUN = "harness.run_id"
LABEL_CREATED = "harness.created"
# What a shell that installs packages and changes file owners needs; every backend drops the rest.
SHELL_CAPS = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID"]
RUN_ID = os.environ.get("HARNESS_RUN_ID") or uuid.uuid4().hex[:12]


def owner_label() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def owner_alive(owner: str) -> bool:
    """Whether the process named by an owner label still runs (only knowable on this host)."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname():
        return True  # another machine's process: only `prune --all` removes it
    if not pid.isdigit():
        return False
    if int(pid) == os.getpid():
        return True
    try:
        os.kill(int(pid), 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def labels(extra: dict[str, str] | None = None) -> dict[str, str]:
    return {
        LABEL_MANAGED: "1",
        LABEL_OWNER: owner_label(),
        LABEL_RUN: RUN_ID,
        LABEL_CREATED: str(int(time.time())),
        **(extra or {}),
    }


@dataclass
class PullProgress:
    image: str
    done: int  # bytes downloaded so far, all layers together
    total: int  # bytes to download (layers whose size is known yet)
    status: str  # the registry's last word ("Downloading", "Pull complete", ...)


@dataclass
class Snapshot:
    """A frozen sandbox state that `fork` starts new sandboxes from."""

    backend: str
    ref: str  # an image id (docker) or a directory (local)
    spec: SandboxSpec  # the spec forks get, pointing at the snapshot
    cwd: str
    env: dict[str, str]


class Sandbox(ABC):
    """An isolated, stateful machine for one episode, driven through a persistent shell."""

    backend: str = ""

    def __init__(self, spec: SandboxSpec):
        self.spec = spec
        self.id = uuid.uuid4().hex[:12]
        self.deadline = time.monotonic() + spec.wall_time
        self.shell: ShellSession | None = None
        self.closed = False
        self.disk_watchdog: DiskWatchdog | None = None
        # How each of the spec's limits is enforced here ("memory", "pids", "cpu", "disk"), and
        # "none: why" (or the weaker fallback and why) where it cannot be: never silently unlimited.
        self.limits: dict[str, str] = {}
        self._oom_count = 0  # the OOM-kill counter when last read
        _LIVE.add(self)

    # -- commands ------------------------------------------------------------------------

    def exec(self, command: str, timeout: float | None = None) -> ExecResult:
        """Run `command` in the sandbox's shell; cwd, variables and jobs persist."""
        self._check_open()
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            self.close()
            raise SandboxExpired(f"sandbox {self.id} ran past its wall-clock limit of {self.spec.wall_time:.0f}s")
        limit = min(timeout or DEFAULT_TIMEOUT, remaining)
        try:
            result = self.shell.exec(command, limit)
        except SandboxError:
            self._check_open()  # stopped over its disk limit (its shell may have died first): say so
            raise
        self._check_open()  # stopped over its disk limit while the command ran (its shell may have been restarted)
        if result.exit_code == 137 and not result.timed_out and self._oom_killed():
            result.message = f"the command was killed by the out-of-memory killer (memory limit {self.spec.memory})"
        return result

    # -- disk --------------------------------------------------------------------------------

    def _watch_disk(self, paths: list[Path]) -> None:
        """Enforce `spec.disk` on the host folders that take this sandbox's writes."""
        if self.spec.disk:
            self.limits["disk"] = f"watchdog on {', '.join(map(str, paths))}"
            self.disk_watchdog = DiskWatchdog(
                paths, parse_bytes(self.spec.disk), self._stop_over_disk_limit, f"disk-{self.id}"
            )

    @abstractmethod
    def _stop_over_disk_limit(self, used: int) -> None:
        """Freeze the sandbox and remove what it wrote (from the watchdog's thread)."""

    def _oom_killed(self) -> bool:
        """Whether the kernel's OOM killer fired in this sandbox since the last call."""
        count = self._oom_kill_count()
        fired, self._oom_count = count > self._oom_count, count
        return fired

    @abstractmethod
    def _oom_kill_count(self) -> int:
        """This sandbox's memory cgroup's OOM-kill counter (`oom_kill_count` reads it from the cgroup's files)."""

    # -- files ---------------------------------------------------------------------------

    @abstractmethod
    def read_file(self, path: str) -> bytes: ...

    @abstractmethod
    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None: ...

    @abstractmethod
    def upload(self, local_path: str | Path, sandbox_path: str) -> None:
        """Copy a local file or folder to `sandbox_path` (the folder's contents go inside it)."""

    @abstractmethod
    def download(self, sandbox_path: str, local_path: str | Path) -> None:
        """Copy a file or folder out of the sandbox to `local_path`."""

    def extract(self, archive: str | Path, directory: str, timeout: float = 300.0) -> None:
        """Unpack a local tar archive into `directory` (made if missing); what it holds goes inside.

        Here: uploaded as a file, then unpacked by `tar` in the sandbox. Backends that can take
        an archive whole (Docker's put-archive) do it in one step."""
        inside = f"/tmp/.harness-extract-{uuid.uuid4().hex[:8]}.tar"
        self.upload(archive, inside)
        quoted = shlex.quote(directory)
        result = self.exec(
            f"mkdir -p {quoted} && tar -xf {inside} -C {quoted}; status=$?; rm -f {inside}; (exit $status)",
            timeout=timeout,
        )
        if not result.ok:
            raise SandboxError(
                f"cannot unpack {archive} into {directory} in sandbox {self.id}: {result.output[-1000:]}"
            )

    # -- state ---------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """Freeze the filesystem, the cwd and the exported variables into a Snapshot."""
        self._check_open()
        cwd = self.exec("pwd", timeout=10).output.strip() or self.spec.workdir
        raw = self.exec("env -0", timeout=10).output
        env = {}
        for item in raw.split("\x00"):
            key, sep, value = item.partition("=")
            if sep and key not in _SHELL_OWNED_VARS:
                env[key] = value
        return self._snapshot(cwd, env)

    @abstractmethod
    def _snapshot(self, cwd: str, env: dict[str, str]) -> Snapshot: ...

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        _LIVE.discard(self)
        if self.disk_watchdog is not None:
            self.disk_watchdog.close()
        try:
            if self.shell is not None:
                self.shell.close()
        finally:
            self._destroy()

    @abstractmethod
    def _destroy(self) -> None:
        """Release everything the sandbox holds; must not raise if already gone."""

    def _check_open(self) -> None:
        watchdog = self.disk_watchdog
        if watchdog is not None and watchdog.tripped:
            self.close()
            raise DiskLimitExceeded(
                f"sandbox {self.id} hit its disk limit ({self.spec.disk}; {watchdog.used / 2**20:.0f} MiB written) "
                "and was stopped; what it wrote is gone"
            )
        if self.closed:
            raise SandboxClosed(f"sandbox {self.id} is closed")

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id} image={self.spec.image}>"


class Backend(ABC):
    """Creates sandboxes of one kind and forks them from snapshots."""

    name: str = ""

    @abstractmethod
    def create(self, spec: SandboxSpec) -> Sandbox: ...

    @abstractmethod
    def has_image(self, image: str) -> bool:
        """Whether `create` can start `image` as this backend holds it now: nothing built, pulled or unpacked
        from an engine that may not be there. Task loaders ask it before they build an image."""

    def create_within(self, spec: SandboxSpec, seconds: float | None) -> Sandbox:
        """`create`, given up after `seconds` (None: no bound). A start that hangs (a stalled image fetch or
        unpack, a mount that never returns) raises SandboxError then, so its caller's slot is free; the
        start goes on in the background and a sandbox it makes after all is closed on arrival."""
        if seconds is None:
            return self.create(spec)
        outcome: dict = {}
        done = threading.Event()
        lock = threading.Lock()

        def start() -> None:
            try:
                sandbox = self.create(spec)
            except BaseException as err:  # noqa: BLE001 - handed to the caller, or dropped once it gave up
                outcome["error"] = err
            else:
                with lock:
                    outcome["sandbox"] = sandbox
                    abandoned = done.is_set()
                if abandoned:
                    sandbox.close()
            done.set()

        threading.Thread(target=start, name=f"start-{spec.image[-24:]}", daemon=True).start()
        done.wait(max(seconds, 0.0))
        with lock:
            done.set()  # from here on, a sandbox that arrives is the starter's to close
            if "sandbox" in outcome:
                return outcome["sandbox"]
        if "error" in outcome:
            raise outcome["error"]
        raise SandboxError(
            f"starting a sandbox of {spec.image} took longer than the {seconds:.0f}s left in the episode "
            "(a stalled image fetch, unpack or mount); it was given up"
        )

    def fork(self, snapshot: Snapshot, n: int) -> list[Sandbox]:
        """n new sandboxes in the snapshot's state (files, cwd, exported variables)."""
        return self.create_many([snapshot.spec] * n)

    def create_many(self, specs: list[SandboxSpec], workers: int = 8) -> list[Sandbox]:
        """Create sandboxes in parallel; if any fails, close the ones made and raise."""
        with ThreadPoolExecutor(max_workers=min(workers, max(len(specs), 1))) as pool:
            futures = [pool.submit(self.create, spec) for spec in specs]
        made, errors = [], []
        for future in futures:
            try:
                made.append(future.result())
            except Exception as err:
                errors.append(err)
        if errors:
            for sandbox in made:
                sandbox.close()
            raise errors[0]
        return made

    @abstractmethod
    def remove_snapshot(self, snapshot: Snapshot) -> None: ...

    @abstractmethod
    def prune(self, everything: bool = False) -> list[str]:
        """Remove leftovers of dead processes (or all, with everything=True); return their names."""

    @abstractmethod
    def list(self) -> list[dict]:
        """Sandboxes of this backend that exist now, with their labels."""

    def pull(self, image: str, on_progress: Callable[[PullProgress], None] = lambda p: None) -> str:
        """Fetch `image` from its registry into where this backend runs it from; return its id."""
        raise SandboxError(f"the {self.name} backend cannot pull images: pull with --backend docker or overlay")

    def images(self) -> list[dict]:
        """The images this backend stores itself (not an engine's), with their bytes on disk: none here."""
        return []


_SHELL_OWNED_VARS = {"PWD", "OLDPWD", "SHLVL", "_", "PS1", "PS2", "TERM", "HOSTNAME"}


class _LiveSet:
    """Every open sandbox of this process, so that exit and signals close them all."""

    def __init__(self):
        self._items: dict[int, Sandbox] = {}
        self._lock = threading.Lock()

    def add(self, sandbox: Sandbox) -> None:
        with self._lock:
            self._items[id(sandbox)] = sandbox

    def discard(self, sandbox: Sandbox) -> None:
        with self._lock:
            self._items.pop(id(sandbox), None)

    def close_all(self) -> None:
        with self._lock:
            items = list(self._items.values())
        for sandbox in items:
            try:
                sandbox.close()
            except Exception as err:  # keep closing the others
                log.warning("could not close %r: %s", sandbox, err)

    def __len__(self) -> int:
        return len(self._items)


_LIVE = _LiveSet()
atexit.register(_LIVE.close_all)


def live_count() -> int:
    return len(_LIVE)


def close_all() -> None:
    """Close every sandbox this process holds (on Ctrl-C, so running episodes end at once)."""
    _LIVE.close_all()


def _exit_on_sigterm(signum, frame):
    raise SystemExit(128 + signum)  # unwinds context managers, then atexit closes the rest


def install_signal_handlers() -> None:
    """Make SIGTERM unwind like Ctrl-C does, so sandboxes close. Called by the CLI."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _exit_on_sigterm)


def oom_kill_count(text: str) -> int:
    """The `oom_kill N` counter in the text of a memory cgroup's memory.oom_control (v1) or memory.events (v2)."""
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill" and value.strip().isdigit():
            return int(value)
    return 0
