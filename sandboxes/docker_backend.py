"""Docker backend: one hardened container per sandbox, one bash on a pty inside it."""

from __future__ import annotations

import base64
import io
import logging
import os
import shlex
import socket
import tarfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath

from .base import (
    LABEL_MANAGED,
    LABEL_OWNER,
    SHELL_CAPS,
    Backend,
    Sandbox,
    Snapshot,
    labels,
    oom_kill_count,
    owner_alive,
)
from .cgroupfs import freezer_file, write_control
from .errors import EngineUnavailable, FileNotFoundInSandbox, ImageNotFound, SandboxClosed, SandboxError
from .shell import ShellSession, wait_readable
from .spec import SandboxSpec, parse_bytes

log = logging.getLogger(__name__)

ENGINE_HINT = (
    "Start the engine with `dockerd --bridge=none --iptables=false &` (or `systemctl start docker`), "
    "point DOCKER_HOST at a running one, or use the local bubblewrap backend (`--backend local`)."
)
IMAGE_HINTS = {
    "harness-base": "build it with `harness sandbox build-base`",
    "harness-swe-demo/": "build the task images with `harness tasks ls swe-demo`",
}
SHELL_WRITE_LIMIT = 256 * 1024  # bytes: larger files go through a put-archive call
_client_lock = threading.Lock()
_client = None


def docker_client():
    """A shared docker-py client; raises EngineUnavailable with the fix when none answers."""
    global _client
    with _client_lock:
        if _client is None:
            import docker

            try:
                client = docker.from_env(timeout=120, max_pool_size=256)
                share_one_connection_pool(client)
                client.ping()
            except Exception as err:
                where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
                raise EngineUnavailable(f"no Docker engine answers at {where} ({err}). {ENGINE_HINT}") from None
            _client = client
        return _client


def share_one_connection_pool(client) -> None:
    """Send every request to a local engine through one connection pool.

    docker-py's unix-socket adapter keeps a pool per request URL and closes all but the 25 most
    recently used: with many sandboxes busy at once, a pool still in use by one thread is closed
    by another ("Pool is closed", docker/compose#3586). All requests go to the same socket, so a
    single pool (of max_pool_size connections) serves them all.
    """
    adapter = client.api.get_adapter(client.api.base_url)
    if hasattr(adapter, "socket_path") and hasattr(adapter, "pools"):
        per_url = adapter.get_connection
        adapter.get_connection = lambda url, proxies=None: per_url(client.api.base_url, proxies)


def engine_available() -> bool:
    try:
        docker_client()
        return True
    except EngineUnavailable:
        return False


class _ExecSocketTransport:
    """The raw, hijacked socket of a `docker exec -it bash` (no stream multiplexing with a tty)."""

    def __init__(self, api, container_id: str, sock):
        self.api = api
        self.container_id = container_id
        self.holder = sock  # keeps the HTTP response alive
        self.sock: socket.socket = getattr(sock, "_sock", sock)
        self.sock.setblocking(True)

    def send(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError:
            pass  # a dead stream shows up as EOF on the next recv

    def recv(self, timeout: float) -> bytes | None:
        try:
            if not wait_readable(self.sock, timeout):
                return b""
            data = self.sock.recv(1 << 16)
        except OSError:
            return None
        return data or None

    def kill_foreground(self, shell_pid: int) -> None:
        script = (
            f"fg=$(cut -d' ' -f8 /proc/{shell_pid}/stat 2>/dev/null); "
            f'[ -n "$fg" ] && [ "$fg" -gt 0 ] && [ "$fg" != {shell_pid} ] && kill -9 -"$fg"'
        )
        try:
            exec_id = self.api.exec_create(self.container_id, ["sh", "-c", script], user="root")["Id"]
            self.api.exec_start(exec_id)
        except Exception as err:
            log.warning("could not kill the foreground job in %s: %s", self.container_id[:12], err)

    def close(self) -> None:
        for thing in (self.sock, self.holder):
            try:
                thing.close()
            except Exception:
                pass


class DockerSandbox(Sandbox):
    backend = "docker"
    engine = "docker engine"  # what enforces the limits, as `limits` says
    pause_to_commit = True  # a snapshot freezes the container (its cgroup's freezer) while it is taken

    def __init__(self, spec: SandboxSpec, container, api, output_cap: int | None = None):
        super().__init__(spec)
        self.container = container
        self.api = api
        self._freezer: tuple[Path, str] | None = None  # set where the disk watchdog enforces spec.disk
        self.limits.update({name: f"{self.engine} (cgroup of the container)" for name in ("memory", "pids", "cpu")})
        if spec.disk:
            self.limits["disk"] = "docker storage quota (storage-opt size)"  # or the watchdog, set by the backend
        try:
            # A new container's memory cgroup has seen no OOM kill: its counter starts at 0, no probe needed.
            self.shell = ShellSession(self._open_shell, is_alive=self._alive, output_cap=output_cap)
        except BaseException:
            self.close()
            raise

    def _open_shell(self) -> _ExecSocketTransport:
        try:
            exec_id = self.api.exec_create(
                self.container.id,
                self._shell_command(),
                stdin=True,
                tty=True,
                user=self.spec.user or "",
                workdir=None,
            )["Id"]
            sock = self.api.exec_start(exec_id, socket=True, tty=True)
        except Exception as err:
            raise SandboxClosed(f"cannot start a shell in sandbox {self.id}: {err}") from None
        return _ExecSocketTransport(self.api, self.container.id, sock)

    def _shell_command(self) -> list[str]:
        return ["bash", "--norc", "--noprofile", "-i"]

    def _alive(self) -> bool:
        try:
            self.container.reload()
            return self.container.status == "running"
        except Exception:
            return False

    def _watch_writable_layer(self) -> None:
        """Enforce `spec.disk` with the watchdog (for storage drivers that cannot limit sizes). The
        freezer file is found now, so that the stop needs no round trip to the engine."""
        info = self.api.inspect_container(self.container.id)
        self._freezer = freezer_file(info["State"]["Pid"])
        self._watch_disk([self._writable_layer(info)])

    def _stop_over_disk_limit(self, used: int) -> None:
        # Freeze first (the cgroup's freezer file directly: the engine's pause is a round trip
        # slower), then remove the container with its writable layer: the host gets the space back.
        frozen = self._freezer is not None and write_control(*self._freezer)
        for step in ([] if frozen else [self.api.pause]) + [lambda cid: self.api.remove_container(cid, force=True)]:
            try:
                step(self.container.id)
            except Exception as err:  # noqa: BLE001 - already paused or gone
                log.debug("stopping sandbox %s over its disk limit: %s", self.id, err)

    def _writable_layer(self, info: dict) -> Path:
        """The host folder holding what the container writes (the overlay upper directory)."""
        data = info.get("GraphDriver", {})
        upper = data.get("Data", {}).get("UpperDir") if data.get("Name") in ("overlay2", "overlay") else None
        if not upper or not Path(upper).is_dir():
            raise SandboxError(
                f"cannot enforce disk={self.spec.disk}: the container's writable layer ({data.get('Name')}: {upper}) "
                "is not visible from this process (a remote engine, or another storage driver)"
            )
        return Path(upper)

    def _oom_kill_count(self) -> int:
        """Read inside the container, where the cgroup files are visible read-only."""
        probe = self.shell.exec(
            "cat /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events 2>/dev/null", 10
        )
        return oom_kill_count(probe.output)

    # -- files, all through tar archives ---------------------------------------------------

    def read_file(self, path: str) -> bytes:
        self._check_open()
        with tarfile.open(fileobj=self._get_archive(path)) as tar:
            member = tar.next()
            if member is None or not member.isfile():
                raise SandboxError(f"{path} in sandbox {self.id} is not a regular file")
            return tar.extractfile(member).read()

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        self._check_open()
        if isinstance(data, str):
            data = data.encode()
        target = PurePosixPath(self._absolute(path))
        if len(data) <= SHELL_WRITE_LIMIT and self._write_through_shell(target, data, mode):
            return
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            info = tarfile.TarInfo(target.name)
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            tar.addfile(info, io.BytesIO(data))
        self._ensure_dir(str(target.parent))
        self._put_archive(str(target.parent), buffer.getvalue())

    def _write_through_shell(self, target: PurePosixPath, data: bytes, mode: int) -> bool:
        """Small files as base64 in one command of the session (a millisecond), not a put-archive
        call (the engine starts a helper process per call: tens to hundreds of milliseconds).
        False where the shell cannot (no `base64` in the image, a read-only path): the archive path decides."""
        name, folder = shlex.quote(str(target)), shlex.quote(str(target.parent))
        encoded = base64.b64encode(data).decode()
        result = self.shell.exec(
            f"command mkdir -p {folder} && builtin printf %s {encoded} | command base64 -d > {name} "
            f"&& command chmod {mode:o} {name}",
            60,
        )
        return result.exit_code == 0

    def upload(self, local_path: str | Path, sandbox_path: str) -> None:
        self._check_open()
        local = Path(local_path)
        if not local.exists():
            raise FileNotFoundError(f"cannot upload {local}: no such file or folder")
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            if local.is_dir():
                for child in sorted(local.iterdir()):
                    tar.add(child, arcname=child.name)
                destination = self._absolute(sandbox_path)
            else:
                tar.add(local, arcname=PurePosixPath(sandbox_path).name)
                destination = str(PurePosixPath(self._absolute(sandbox_path)).parent)
        self._ensure_dir(destination)
        self._put_archive(destination, buffer.getvalue())

    def download(self, sandbox_path: str, local_path: str | Path) -> None:
        self._check_open()
        local = Path(local_path)
        with tarfile.open(fileobj=self._get_archive(sandbox_path)) as tar:
            members = tar.getmembers()
            root = members[0].name if members else ""
            for member in members:
                relative = PurePosixPath(member.name).relative_to(root)
                member.name = str(relative) if str(relative) != "." else ""
            if len(members) == 1 and members[0].isfile():
                local.parent.mkdir(parents=True, exist_ok=True)
                local.write_bytes(tar.extractfile(members[0]).read())
                return
            local.mkdir(parents=True, exist_ok=True)
            tar.extractall(local, members=[m for m in members if m.name], filter="data")

    def extract(self, archive: str | Path, directory: str, timeout: float = 300.0) -> None:
        """One put-archive call: the engine unpacks the tar into the container (no copy inside)."""
        self._check_open()
        self._ensure_dir(self._absolute(directory))
        self._put_archive(self._absolute(directory), Path(archive).read_bytes())

    def _absolute(self, path: str) -> str:
        return path if path.startswith("/") else str(PurePosixPath(self.spec.workdir) / path)

    def _get_archive(self, path: str) -> io.BytesIO:
        import docker.errors

        try:
            stream, _ = self.api.get_archive(self.container.id, self._absolute(path))
            return io.BytesIO(b"".join(stream))
        except docker.errors.NotFound:
            if not self._alive():
                raise SandboxClosed(f"sandbox {self.id} is no longer running") from None
            raise FileNotFoundInSandbox(f"{path}: no such file or folder in sandbox {self.id}") from None

    def _put_archive(self, directory: str, data: bytes) -> None:
        import docker.errors

        try:
            self.api.put_archive(self.container.id, directory, data)
        except docker.errors.APIError as err:
            raise SandboxError(f"cannot write into {directory} in sandbox {self.id}: {err.explanation}") from None

    def _ensure_dir(self, directory: str) -> None:
        # Through the session (a millisecond), not a new `docker exec` (tens of milliseconds).
        result = self.shell.exec(f"mkdir -p {shlex.quote(directory)}", 30)
        if result.exit_code != 0:
            raise SandboxError(f"cannot create {directory} in sandbox {self.id}: {result.output.strip()}")

    # -- state -----------------------------------------------------------------------------

    def _snapshot(self, cwd: str, env: dict[str, str]) -> Snapshot:
        image = self.container.commit(
            pause=self.pause_to_commit,
            repository="harness-snapshot",
            tag=self.id,
            conf={"WorkingDir": cwd, "Env": [f"{k}={v}" for k, v in env.items()], "Labels": labels()},
        )
        spec = SandboxSpec.from_dict({**self.spec.to_dict(), "image": image.id, "workdir": cwd})
        return Snapshot(self.backend, image.id, spec, cwd, env)

    def _destroy(self) -> None:
        # SIGKILL from a background thread and return: the sandbox is closed for every caller at
        # once (its shell is gone), the engine removes the container (auto_remove) without us
        # waiting; at interpreter exit the pending kills finish first (or run here, inline). If a
        # kill does not take, `harness sandbox prune` finds the container by its label.
        try:
            _KILLER.submit(self._kill)
        except RuntimeError:  # the interpreter is shutting down: no new threads
            self._kill()

    def _kill(self) -> None:
        try:
            self.api.kill(self.container.id)
        except Exception as err:
            if not any(s in str(err) for s in ("No such container", "is not running", "is already in progress")):
                log.warning("could not kill the container of sandbox %s: %s", self.id, err)


_KILLER = ThreadPoolExecutor(max_workers=4, thread_name_prefix="sandbox-kill")


class DockerBackend(Backend):
    name = "docker"
    sandbox_class = DockerSandbox

    def __init__(self, output_cap: int | None = None, client=None):
        """`client`: a docker-py client of another engine with Docker's API (default: the Docker engine's)."""
        self.client = client or docker_client()
        self.api = self.client.api
        self.output_cap = output_cap
        self._disk_quota_supported: bool | None = None
        self._known_images: set[str] = set()

    def create(self, spec: SandboxSpec) -> DockerSandbox:
        container = self._run_container(spec)
        try:
            sandbox = self.sandbox_class(spec, container, self.api, self.output_cap, **self._sandbox_options())
            if spec.disk and self._disk_quota_supported is False:
                sandbox._watch_writable_layer()
            return sandbox
        except BaseException:
            try:
                container.remove(force=True)
            except Exception:
                pass
            raise

    def _sandbox_options(self) -> dict:
        """What this backend's sandbox class takes beyond the spec, the container, the API and the output cap."""
        return {}

    def _run_container(self, spec: SandboxSpec):
        import docker.errors

        options = self._container_options(spec)
        self._check_image(spec.image)
        try:
            return self._create_and_start(options)
        except docker.errors.APIError as err:
            if "storage-opt" in str(err) and "storage_opt" in options:
                log.info("the storage driver cannot limit disk size: a watchdog enforces spec.disk")
                self._disk_quota_supported = False
                return self._run_container(spec)
            raise SandboxError(f"cannot start a container from {spec.image!r}: {err.explanation or err}") from None

    def _create_and_start(self, options: dict):
        """`containers.run(detach=True)` without its inspect round trip after the create."""
        from docker.models.containers import _create_container_args

        created = self.api.create_container(**_create_container_args({**options, "version": self.api._version}))
        try:
            self.api.start(created["Id"])
        except BaseException:
            self.api.remove_container(created["Id"], force=True)
            raise
        return self.client.containers.prepare_model({"Id": created["Id"]})

    def pull(self, image: str, on_progress=lambda p: None) -> str:
        from .registry import pull_image

        return pull_image(image, on_progress, self.client)

    def has_image(self, image: str) -> bool:
        import docker.errors

        try:
            self.client.images.get(image)
            return True
        except docker.errors.ImageNotFound:
            return False

    def _check_image(self, image: str) -> None:
        """Fail clearly on a missing image; never let `run` try to pull it from a registry."""
        import docker.errors

        if image in self._known_images:
            return
        try:
            self.client.images.get(image)
        except docker.errors.ImageNotFound:
            hint = next((h for prefix, h in IMAGE_HINTS.items() if image.startswith(prefix)), "build or pull it first")
            raise ImageNotFound(f"image {image!r} not found locally: {hint}") from None
        self._known_images.add(image)

    def _container_options(self, spec: SandboxSpec) -> dict:
        memory = parse_bytes(spec.memory)
        options = dict(
            image=spec.image,
            # The container stops by itself at the wall-clock limit even if this process is gone.
            command=["sleep", str(int(2 * spec.wall_time) + 60)],  # room for time spent in a pool
            entrypoint=[],
            detach=True,
            init=True,
            auto_remove=True,
            working_dir=spec.workdir,
            environment=spec.env,
            user=spec.user or None,
            labels=labels(),
            network_mode="bridge" if spec.network else "none",
            nano_cpus=int(spec.cpus * 1e9),
            mem_limit=memory,
            memswap_limit=memory,
            pids_limit=spec.pids,
            cap_drop=["ALL"],
            cap_add=SHELL_CAPS,
            security_opt=["no-new-privileges"],
            read_only=spec.read_only,
            tmpfs={"/tmp": "size=512m"} if spec.read_only else None,
            volumes={host: {"bind": inside, "mode": "ro" if ro else "rw"} for host, inside, ro in spec.mounts},
        )
        if spec.disk and self._disk_quota_supported is not False:
            options["storage_opt"] = {"size": spec.disk}
        return options

    def remove_snapshot(self, snapshot: Snapshot) -> None:
        self._known_images.discard(snapshot.ref)
        try:
            self.api.remove_image(snapshot.ref, force=True)
        except Exception as err:
            log.warning("could not remove snapshot image %s: %s", snapshot.ref[:19], err)

    def list(self) -> list[dict]:
        # One low-level call: no per-container inspect that races with auto-removal.
        found = self.api.containers(all=True, filters={"label": f"{LABEL_MANAGED}=1"})
        return [
            {"id": c["Id"][:12], "status": c.get("State", ""), "image": c.get("Image", ""), **(c.get("Labels") or {})}
            for c in found
        ]

    def prune(self, everything: bool = False) -> list[str]:
        import docker.errors

        removed = []
        for container in self.list():
            if everything or not owner_alive(container.get(LABEL_OWNER, "")):
                try:
                    self.api.remove_container(container["id"], force=True)
                    removed.append(f"container {container['id']}")
                except docker.errors.NotFound:
                    pass  # removed meanwhile (auto-remove)
                except Exception as err:
                    log.warning("could not remove %s: %s", container["id"], err)
        for image in self.client.images.list(filters={"label": f"{LABEL_MANAGED}=1"}):
            if everything or not owner_alive(image.labels.get(LABEL_OWNER, "")):
                try:
                    self.api.remove_image(image.id, force=True)
                    removed.append(f"snapshot {image.id[:19]}")
                except Exception as err:
                    log.warning("could not remove image %s: %s", image.id[:19], err)
        return removed
