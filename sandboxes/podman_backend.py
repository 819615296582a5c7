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
  not permitted"). Each container gets this process's own hard limits instead (RLIMIT_NPROC at most
  32768, the limit Podman sets on its own processes), which any runtime may set.
- images: Podman keeps its own store. An image it lacks is copied from the Docker engine where one
  runs (`docker save` streamed into Podman's load), once per host; else build or load it into Podman.
- snapshots: Podman's commit keeps the filesystem but not the Env a commit asks for, so the snapshot's
  spec carries the environment the sandbox had.
"""

from __future__ import annotations

import logging
import os
import resource
import shutil
import subprocess
import threading
import time
from pathlib import Path

from .base import Snapshot
from .docker_backend import DockerBackend, DockerSandbox, _share_one_connection_pool, docker_client
from .errors import EngineUnavailable, ImageNotFound, SandboxError
from .images import cache_dir
from .spec import SandboxSpec

PODMAN_HINT = (
    "install Podman (`apt-get install -y podman`), or point CONTAINER_HOST at a running `podman system service`"
)
SERVICE_IDLE_S = 600  # a service this process starts exits after this long without a request
NPROC_CEILING = 32768  # Podman's own RLIMIT_NPROC: no container may have more
LOAD_TIMEOUT_S = 1800  # copying an image in: Podman answers once all of it is stored
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
        _share_one_connection_pool(client)
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


def container_ulimits() -> list:
    """RLIMIT_NOFILE and RLIMIT_NPROC as this process has them (Podman's defaults are higher, and raising
    a hard limit needs a capability the runtime may lack)."""
    from docker.types import Ulimit

    def hard(which: int, ceiling: int | None = None) -> int:
        value = resource.getrlimit(which)[1]
        value = (1 << 20) if value == resource.RLIM_INFINITY else value
        return min(value, ceiling) if ceiling else value

    return [
        Ulimit(name="nofile", soft=hard(resource.RLIMIT_NOFILE), hard=hard(resource.RLIMIT_NOFILE)),
        Ulimit(
            name="nproc",
            soft=hard(resource.RLIMIT_NPROC, NPROC_CEILING),
            hard=hard(resource.RLIMIT_NPROC, NPROC_CEILING),
        ),
    ]


class PodmanSandbox(DockerSandbox):
    backend = "podman"
    engine = "podman"

    def _snapshot(self, cwd: str, env: dict[str, str]) -> Snapshot:
        taken = super()._snapshot(cwd, env)
        spec = SandboxSpec.from_dict({**taken.spec.to_dict(), "env": {**self.spec.env, **env}})
        return Snapshot(self.backend, taken.ref, spec, cwd, env)


class PodmanBackend(DockerBackend):
    name = "podman"
    sandbox_class = PodmanSandbox

    def __init__(self, output_cap: int | None = None):
        super().__init__(output_cap, client=podman_client())
        self._ulimits = container_ulimits()
        self._copying: dict[str, threading.Lock] = {}
        self._copying_lock = threading.Lock()

    def _container_options(self, spec: SandboxSpec) -> dict:
        return {**super()._container_options(spec), "ulimits": self._ulimits}

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
                "from: build it with Podman, or `podman load` its archive"
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
