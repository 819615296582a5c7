"""Podman backend: the Docker backend's hardened containers, run by Podman through its Docker-compatible API.

For hosts where users may run Podman but not a Docker daemon (most clusters that allow containers at
all). The client is docker-py, pointed at Podman's socket: `$CONTAINER_HOST` (a `unix://` URL) where
set, else Podman's default socket for this user (`/run/podman/podman.sock` for root,
`$XDG_RUNTIME_DIR/podman/podman.sock` otherwise), else a `podman system service` on
`<cache>/podman/podman.sock`, shared by every process that uses it. That service exits by itself after
ten idle minutes, so each process using it pings it while it lives and starts it again if it is gone
(a long quiet spell would otherwise leave the process a client of a dead socket).

What differs from Docker:
- rlimits: Podman gives each container RLIMIT_NOFILE 1048576 and RLIMIT_NPROC above what it may
  have, and raising a hard limit needs CAP_SYS_RESOURCE, which a user namespace, a container or an
  unprivileged account lacks: runc and crun then refuse to start anything ("setrlimit ...: operation
  not permitted"). Each container gets the lower of this process's and the service's hard limits instead
  (RLIMIT_NPROC at most 32768, the limit Podman sets on its own processes), which any runtime may set. The
  service's count because a shared service may have been started by another process with lower ones.
- images: Podman keeps its own store. An image it lacks is copied from the Docker engine where one
  runs (`docker save` streamed into Podman's load), once per host; else build or load it into Podman.
  An image archive named by absolute path (`docker save`'s format or an OCI archive, as the overlay
  backend takes) is loaded into Podman's store once, tagged `harness-archive:<its sha256>`: the way in
  for a user who may not use the Docker engine.
- snapshots: Podman's commit keeps the filesystem but not the Env a commit asks for, so the snapshot's
  spec carries the environment the sandbox had.
- rootless (an ordinary user's Podman, as Podman's info reports): cgroup limits hold only on cgroup v2
  through systemd, for the controllers delegated to the user. Where one cannot hold, it is not asked of
  Podman (which would ignore it, or refuse to start the container), `limits` says "none: why" (memory
  falls back to RLIMIT_AS, as on the local backends) and the backend warns once. Without a cgroup a
  container cannot be paused, so a snapshot commits it running.
- exec monitors: Podman keeps the conmon of each exec session (the shell's) for its exit_command_delay
  (300 s) after the session ends; closing a sandbox ends them with it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import resource
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

from .base import Snapshot
from .docker_backend import DockerBackend, DockerSandbox, docker_client, share_one_connection_pool
from .errors import EngineUnavailable, ImageNotFound, SandboxError
from .images import cache_dir
from .spec import SandboxSpec, parse_bytes

PODMAN_HINT = (
    "install Podman (`apt-get install -y podman`), or point CONTAINER_HOST at a running `podman system service`"
)
SERVICE_IDLE_S = 600  # a service this process starts exits after this long without a request
NPROC_CEILING = 32768  # Podman's own RLIMIT_NPROC: no container may have more
LOAD_TIMEOUT_S = 1800  # copying an image in: Podman answers once all of it is stored
ARCHIVE_REPOSITORY = "harness-archive"  # an image loaded from an archive is tagged with the archive's sha256
CONTROLLERS = ("memory", "pids", "cpu")
# The container options that set each cgroup limit (dropped where the limit cannot hold).
LIMIT_OPTIONS = {"memory": ("mem_limit", "memswap_limit"), "pids": ("pids_limit",), "cpu": ("nano_cpus",)}
_client_lock = threading.Lock()
log = logging.getLogger(__name__)
_client = None


def podman_client():
    """A shared docker-py client on Podman's socket (its URL in `.podman_url`); raises EngineUnavailable
    with the fix when none answers."""
    global _client
    with _client_lock:
        if _client is None:
            _client = _connect()
        return _client


def _connect():
    import docker

    def answering(url: str):
        try:  # the client asks the service its API version as it is made
            client = docker.DockerClient(base_url=url, timeout=120, max_pool_size=256)
        except Exception:
            return None
        try:
            client.ping()
        except Exception:
            client.close()
            return None
        share_one_connection_pool(client)
        client.podman_url = url
        return client

    if os.environ.get("CONTAINER_HOST"):
        url = os.environ["CONTAINER_HOST"]
        if (client := answering(url)) is None:
            raise EngineUnavailable(f"no Podman service answers at CONTAINER_HOST={url}: {PODMAN_HINT}")
        return client
    default = (
        "/run/podman/podman.sock"
        if os.geteuid() == 0
        else f"{os.environ.get('XDG_RUNTIME_DIR', f'/run/user/{os.getuid()}')}/podman/podman.sock"
    )
    if Path(default).exists() and (client := answering(f"unix://{default}")) is not None:
        return client
    own = cache_dir() / "podman" / "podman.sock"
    if not (own.exists() and (client := answering(f"unix://{own}")) is not None):
        client = _start_service(own, answering)
    threading.Thread(target=_keep_serving, args=(own, answering), name="podman-service", daemon=True).start()
    return client


def _keep_serving(socket_path: Path, answering) -> None:
    """Ping the shared service well within its idle time, and start it again where it has gone."""
    while True:
        time.sleep(SERVICE_IDLE_S / 4)
        if (client := answering(f"unix://{socket_path}")) is not None:
            client.close()
            continue
        try:
            _start_service(socket_path, answering).close()
        except EngineUnavailable as err:
            log.warning("%s", err)


def _start_service(socket_path: Path, answering):
    if shutil.which("podman") is None:
        raise EngineUnavailable(f"no Podman service answers and `podman` is not on PATH: {PODMAN_HINT}")
    socket_path.parent.mkdir(parents=True, exist_ok=True)
    log_path = socket_path.with_name("service.log")
    with open(log_path, "ab") as log_file:
        subprocess.Popen(
            ["podman", "system", "service", f"--time={SERVICE_IDLE_S}", f"unix://{socket_path}"],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=log_file,
            start_new_session=True,
            cwd="/",  # it outlives the caller: a working directory removed later breaks every conmon it starts
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if socket_path.exists() and (client := answering(f"unix://{socket_path}")) is not None:
            return client
        time.sleep(0.1)
    tail = log_path.read_text(errors="replace")[-1000:].strip()
    raise EngineUnavailable(
        f"`podman system service` did not answer on {socket_path} within 30 s: {tail or 'no output'}"
    )


# The rlimits a container gets, by docker-py's name and the heading of /proc/PID/limits.
RLIMITS = {"nofile": (resource.RLIMIT_NOFILE, "Max open files"), "nproc": (resource.RLIMIT_NPROC, "Max processes")}


def service_hard_limits(url: str) -> dict[str, int]:
    """The hard limits in RLIMITS of the process listening on `url` (a `unix://` socket), by name; empty where
    they cannot be read (another kind of URL, another user's process, a peer that is not Podman: socket
    activation answers as systemd, whose limits are not the service's)."""
    if not url.startswith("unix://"):
        return {}
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as peer:
            peer.connect(url.removeprefix("unix://"))
            pid = struct.unpack("3i", peer.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[0]
        if Path(f"/proc/{pid}/comm").read_text().strip() != "podman":
            return {}
        rows = Path(f"/proc/{pid}/limits").read_text().splitlines()
    except OSError:
        return {}
    limits = {}
    for name, (_, heading) in RLIMITS.items():
        for row in rows:
            if row.startswith(heading):
                hard = row[len(heading) :].split()[1]
                limits[name] = resource.RLIM_INFINITY if hard == "unlimited" else int(hard)
    return limits


def container_ulimits(service: dict[str, int] | None = None) -> list:
    """RLIMIT_NOFILE and RLIMIT_NPROC at the lower of this process's and the service's hard limits (Podman's
    defaults are higher, and raising a hard limit needs a capability the runtime may lack)."""
    from docker.types import Ulimit

    def bound(value: int) -> int:
        return (1 << 20) if value == resource.RLIM_INFINITY else value

    ulimits = []
    for name, (which, _) in RLIMITS.items():
        value = min(bound(resource.getrlimit(which)[1]), bound((service or {}).get(name, resource.RLIM_INFINITY)))
        value = min(value, NPROC_CEILING) if name == "nproc" else value
        ulimits.append(Ulimit(name=name, soft=value, hard=value))
    return ulimits


class PodmanSandbox(DockerSandbox):
    backend = "podman"
    engine = "podman"

    def __init__(
        self,
        spec: SandboxSpec,
        container,
        api,
        output_cap: int | None = None,
        unenforced: dict[str, str] | None = None,
        own_cgroups: bool = True,
    ):
        """`unenforced`: the limits this Podman cannot set, and why; `own_cgroups`: whether the container
        has cgroups of its own (without, it cannot be paused for a commit)."""
        self.unenforced = unenforced or {}
        # Without a memory cgroup, the shell and all it runs get RLIMIT_AS (the local backends' fallback):
        # Podman's ulimits have no address-space limit, so the shell sets it on itself before it starts.
        self.rlimit_as = parse_bytes(spec.memory) if "memory" in self.unenforced else None
        self.pause_to_commit = own_cgroups
        super().__init__(spec, container, api, output_cap)
        for name, why in self.unenforced.items():
            weaker = "RLIMIT_AS (address space, not resident memory)" if name == "memory" else "none"
            self.limits[name] = f"{weaker}: {why}"

    def _shell_command(self) -> list[str]:
        command = super()._shell_command()
        if self.rlimit_as is None:
            return command
        return ["bash", "-c", f"ulimit -v {self.rlimit_as // 1024} && exec {shlex.join(command)}"]

    def _snapshot(self, cwd: str, env: dict[str, str]) -> Snapshot:
        taken = super()._snapshot(cwd, env)
        spec = SandboxSpec.from_dict({**taken.spec.to_dict(), "env": {**self.spec.env, **env}})
        return Snapshot(self.backend, taken.ref, spec, cwd, env)

    def _kill(self) -> None:
        super()._kill()
        end_exec_monitors(self.container.id)

    def _oom_kill_count(self) -> int:
        # Without a memory cgroup of its own the container sees a group it shares: its counter is not this sandbox's.
        if "memory" in self.unenforced:
            return 0
        return super()._oom_kill_count()


def end_exec_monitors(container_id: str) -> list[int]:
    """End the conmon processes of `container_id`'s exec sessions (its shell's) once the container is killed;
    their pids.

    Each keeps running for Podman's `exit_command_delay` (300 s by default) after its process has exited, so
    that a client may still ask for the exit code: at dozens of sandboxes a minute, hundreds of idle processes
    that count against the user's RLIMIT_NPROC. Only those this process may signal (its own user's) and that
    this host runs are found; the container's own conmon is left to remove the container."""
    ended = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if not argv[0].endswith(b"conmon") or b"--exec-attach" not in argv:
            continue
        if any(a == b"-c" and b == container_id.encode() for a, b in zip(argv, argv[1:])):
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                ended.append(int(entry.name))
            except OSError:
                pass
    return ended


def own_cgroups(info: dict) -> bool:
    """Whether this Podman (its `/libpod/info`) gives each container cgroups of its own: rootful Podman does,
    rootless Podman only on cgroup v2 through systemd (a user session). Without them no cgroup limit holds
    ("Resource limits are not supported and ignored on cgroups V1 rootless systems") and no container can be
    paused (frozen)."""
    host = info.get("host") or {}
    if not (host.get("security") or {}).get("rootless"):
        return True
    return host.get("cgroupVersion") == "v2" and host.get("cgroupManager") == "systemd"


def unenforceable_limits(info: dict) -> dict[str, str]:
    """The cgroup limits (memory, pids, cpu) that this Podman cannot set, and why, from its `/libpod/info`."""
    host = info.get("host") or {}
    if not own_cgroups(info):
        version, manager = host.get("cgroupVersion", "unknown"), host.get("cgroupManager", "unknown")
        if version != "v2":
            return dict.fromkeys(CONTROLLERS, f"rootless Podman cannot set cgroup limits on cgroup {version}")
        return dict.fromkeys(
            CONTROLLERS,
            f"rootless Podman sets cgroup limits only through systemd (cgroup manager here: {manager}; "
            "it needs a systemd user session)",
        )
    if not (host.get("security") or {}).get("rootless"):
        return {}
    delegated = set(host.get("cgroupControllers") or [])
    return {
        name: f"the cgroup v2 {name} controller is not delegated to this user"
        for name in CONTROLLERS
        if name not in delegated
    }


class PodmanBackend(DockerBackend):
    name = "podman"
    sandbox_class = PodmanSandbox

    def __init__(self, output_cap: int | None = None):
        super().__init__(output_cap, client=podman_client())
        self._ulimits = container_ulimits(service_hard_limits(self.client.podman_url))
        self._copying: dict[str, threading.Lock] = {}
        self._copying_lock = threading.Lock()
        self._archives: dict[str, str] = {}  # archive path -> the tag of its loaded image, as loaded by this process
        info = self.api._result(self.api._get(self.api._url("/libpod/info")), json=True)
        self._unenforced = unenforceable_limits(info)
        self._own_cgroups = own_cgroups(info)
        if self._unenforced:
            why = "; ".join(dict.fromkeys(self._unenforced.values()))
            fallback = " (memory falls back to RLIMIT_AS)" if "memory" in self._unenforced else ""
            log.warning(
                "podman sandboxes run without %s cgroup limits%s: %s", "/".join(self._unenforced), fallback, why
            )
        store = info.get("store") or {}
        if (info.get("host") or {}).get("security", {}).get("rootless") and store.get("graphDriverName") == "vfs":
            log.warning(
                "Podman's store %s uses the vfs driver: every sandbox starts from a full copy of its image (seconds, "
                "and the image's size on disk each). Where the kernel allows overlayfs in a user namespace (Linux "
                '5.13+), put `[storage]` `driver = "overlay"` in ~/.config/containers/storage.conf and run '
                "`podman system reset` (it removes the store's images and containers)",
                store.get("graphRoot", ""),
            )

    def _sandbox_options(self) -> dict:
        return {"unenforced": self._unenforced, "own_cgroups": self._own_cgroups}

    def _container_options(self, spec: SandboxSpec) -> dict:
        options = {**super()._container_options(spec), "ulimits": self._ulimits}
        for name in self._unenforced:
            for option in LIMIT_OPTIONS[name]:
                options.pop(option, None)
        return options

    def _run_container(self, spec: SandboxSpec):
        if spec.image.startswith("/"):
            spec = dataclasses.replace(spec, image=self._load_archive(spec.image))
        return super()._run_container(spec)

    def has_image(self, image: str) -> bool:
        """An archive that exists, an image in Podman's store, or one the Docker engine holds (copied on first use)."""
        if image.startswith("/"):
            return os.path.isfile(image)
        if super().has_image(image):
            return True
        try:
            return DockerBackend(client=docker_client()).has_image(image)
        except EngineUnavailable:
            return False

    def _check_image(self, image: str) -> None:
        """An image Podman lacks is copied from the Docker engine, once (one copy at a time per image)."""
        import docker.errors

        if image in self._known_images:
            return
        with self._copying_lock:
            lock = self._copying.setdefault(image, threading.Lock())
        with lock:
            try:
                self.client.images.get(image)
            except docker.errors.ImageNotFound:
                self._copy_from_docker(image)
        self._known_images.add(image)

    def _copy_from_docker(self, image: str) -> None:
        import docker.errors

        try:
            engine = docker_client()
        except EngineUnavailable:
            raise ImageNotFound(
                f"image {image!r} is not in Podman's store and no Docker engine answers to copy it "
                "from: build it with Podman, `podman load` its archive, or name its archive by absolute path"
            ) from None
        try:
            engine.images.get(image)
        except docker.errors.ImageNotFound:
            raise ImageNotFound(
                f"image {image!r} is neither in Podman's store nor in the Docker engine: build or pull it first"
            ) from None
        # A save and a load outlast any other call (minutes on a busy engine): clients of their own, patient ones.
        saver = docker.from_env(timeout=LOAD_TIMEOUT_S).api
        loader = docker.APIClient(base_url=self.client.podman_url, timeout=LOAD_TIMEOUT_S)
        try:
            for _ in loader.load_image(saver.get_image(image)):
                pass
            self.client.images.get(image)
        except (docker.errors.APIError, OSError) as err:  # requests' timeouts and connection errors are OSErrors
            raise SandboxError(
                f"copying image {image!r} from the Docker engine into Podman failed: "
                f"{getattr(err, 'explanation', None) or err}"
            ) from None
        finally:
            saver.close()
            loader.close()

    def _load_archive(self, path: str) -> str:
        """The tag of the image in the archive at `path`, loaded into Podman's store the first time."""
        import docker.errors

        with self._copying_lock:
            lock = self._copying.setdefault(path, threading.Lock())
        with lock:
            if path in self._archives:
                return self._archives[path]
            try:
                with open(path, "rb") as stream:
                    digest = hashlib.file_digest(stream, "sha256").hexdigest()
            except OSError as err:
                raise ImageNotFound(f"cannot read the image archive {path}: {err.strerror}") from None
            tag = f"{ARCHIVE_REPOSITORY}:{digest}"
            try:
                self.client.images.get(tag)
            except docker.errors.ImageNotFound:
                self._load_into_podman(path, tag)
            self._archives[path] = tag
            return tag

    def _load_into_podman(self, path: str, tag: str) -> None:
        import docker.errors

        loader = docker.APIClient(base_url=self.client.podman_url, timeout=LOAD_TIMEOUT_S)
        loaded = []
        try:
            with open(path, "rb") as stream:
                for event in loader.load_image(stream):
                    if "error" in event:
                        raise docker.errors.APIError(event["error"])
                    loaded += [
                        line.partition(":")[2].strip()
                        for line in str(event.get("stream", "")).splitlines()
                        if line.startswith("Loaded image")
                    ]
            if not loaded:
                raise SandboxError(f"the image archive {path} holds no image Podman could load")
            repository, _, name = tag.partition(":")
            loader.tag(loaded[0].split(",")[0], repository, name)
        except (docker.errors.APIError, OSError) as err:
            raise SandboxError(
                f"loading the image archive {path} into Podman failed: {getattr(err, 'explanation', None) or err}"
            ) from None
        finally:
            loader.close()
