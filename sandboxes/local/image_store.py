"""Task images unpacked once into a content-addressed cache, for sandboxes that need no daemon.

`<cache>/images/<digest>/` holds `rootfs/` (the image's filesystem, all layers flattened) and
`config.json` (the image's Env and User). The digest is the image id (the sha256 of
its config), so two names of one image share a folder and an image rebuilt under its old name
gets a new one. A folder appears only complete: the unpack goes to `<digest>.partial-<pid>` and
is renamed when done, so a crash, a corrupt layer or a full disk leaves no half image behind
(`prune` removes partial folders of dead processes). `<cache>/images/names/` remembers which
digest each name had when last seen, so sandboxes start where no engine answers at all.

Images come from a Docker engine (`docker export` of a container made from the image and
never started; the engine flattens the layers) the first time they are used, or from a tar
archive of a root filesystem (what `docker export` writes), named by its absolute path and
addressed by the sha256 of its bytes: hosts without any engine (and users without access to
one) run images handed to them as files.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

from ..base import labels, owner_alive
from ..errors import EngineUnavailable, ImageNotFound, SandboxError
from ..images import cache_dir
from .files import remove_tree


@dataclass(frozen=True)
class UnpackedImage:
    """An image's filesystem on the host and what its config says about running it."""

    digest: str
    rootfs: Path
    env: dict[str, str]
    user: str

    def config(self) -> dict:
        data = asdict(self)
        data["rootfs"] = str(self.rootfs)
        return data

    @classmethod
    def from_config(cls, data: dict) -> "UnpackedImage":
        return cls(**{**data, "rootfs": Path(data["rootfs"])})


class ImageStore:
    """Resolves image names to unpacked images, unpacking each digest once per host."""

    def __init__(self, root: Path | None = None):
        self.root = root or cache_dir() / "images"
        self._lock = threading.Lock()
        self._unpacking: dict[str, threading.Lock] = {}  # one unpack per digest at a time in this process
        self._digests: dict[str, str] = {}  # name -> digest, as first resolved by this process

    def get(self, name: str) -> UnpackedImage:
        archive = Path(name) if name.startswith("/") else None
        digest = self._digests.get(name) or (_file_digest(archive) if archive else self.resolve(name))
        self._digests[name] = digest
        folder = self.root / _hex(digest)
        if not (folder / "config.json").exists():
            with self._lock:
                lock = self._unpacking.setdefault(digest, threading.Lock())
            with lock:
                if not (folder / "config.json").exists():
                    self._unpack(digest, folder, archive)
        return UnpackedImage.from_config({**json.loads((folder / "config.json").read_text()), "rootfs": folder / "rootfs"})

    def resolve(self, name: str) -> str:
        """The digest `name` stands for: the engine's answer where one answers, else the one
        remembered from the last time it did. (`get` asks once per name and process, as the
        Docker backend checks each image once.)"""
        from ..docker_backend import docker_client

        remembered = self._names() / hashlib.sha256(name.encode()).hexdigest()[:32]
        try:
            client = docker_client()
        except EngineUnavailable:
            if remembered.exists():
                return json.loads(remembered.read_text())["digest"]
            raise ImageNotFound(f"image {name!r} was never unpacked into {self.root} and no Docker engine answers "
                                "to export it: run it once on a host with the engine and copy the cache, or start one") from None
        import docker.errors

        try:
            digest = client.images.get(name).id
        except docker.errors.ImageNotFound:
            raise ImageNotFound(f"image {name!r} is neither in the Docker engine nor in {self.root}: build or pull it first") from None
        except docker.errors.APIError as err:
            raise SandboxError(f"cannot look up image {name!r}: {err.explanation or err}") from None
        remembered.parent.mkdir(parents=True, exist_ok=True)
        _write_atomically(remembered, json.dumps({"name": name, "digest": digest}))
        return digest

    def _names(self) -> Path:
        return self.root / "names"

    def _unpack(self, digest: str, folder: Path, archive: Path | None) -> None:
        staging = folder.with_name(f"{folder.name}.partial-{socket.gethostname()}-{os.getpid()}")
        remove_tree(staging)
        (staging / "rootfs").mkdir(parents=True)
        api = container = None
        try:
            if archive is not None:
                config = {}
                with open(archive, "rb") as stream:
                    unpack_tar(iter(lambda: stream.read(1 << 20), b""), staging / "rootfs", f"the image archive {archive}")
            else:
                from ..docker_backend import docker_client

                api = docker_client().api
                config = api.inspect_image(digest).get("Config") or {}
                container = api.create_container(digest, command=["true"], network_disabled=True, labels=labels())["Id"]
                unpack_tar(api.export(container), staging / "rootfs", f"the image {digest[:19]}")
            env = dict(item.partition("=")[::2] for item in config.get("Env") or [])
            image = UnpackedImage(digest, folder / "rootfs", env, config.get("User") or "")
            (staging / "config.json").write_text(json.dumps(image.config()))
            try:
                staging.rename(folder)
            except OSError:  # another process finished the same digest first
                if not (folder / "config.json").exists():
                    raise
        except BaseException:
            remove_tree(staging)
            raise
        finally:
            if container is not None:
                try:
                    api.remove_container(container, force=True)
                except Exception:  # noqa: BLE001 - pruned with the other labelled leftovers
                    pass
        remove_tree(staging)

    def prune(self) -> list[str]:
        """Remove unpacks that a dead process left half done."""
        removed = []
        for folder in sorted(self.root.glob("*.partial-*")):
            owner = folder.name.rpartition(".partial-")[2]
            host, _, pid = owner.rpartition("-")
            if not owner_alive(f"{host}:{pid}"):
                remove_tree(folder)
                removed.append(f"partial image {folder.name}")
        return removed


def unpack_tar(chunks, target: Path, what: str) -> None:
    """Extract a stream of tar bytes (an exported container) into `target` with GNU tar: owners kept as
    numbers where this process may set them, /dev left out (every sandbox gets its own)."""
    command = ["tar", "-x", "-p", "--numeric-owner", "-C", str(target), "--exclude=./dev/*", "--exclude=dev/*"]
    tar = subprocess.Popen(command, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        for chunk in chunks:
            tar.stdin.write(chunk)
        tar.stdin.close()
    except BrokenPipeError:
        pass  # tar gave up: its message says why
    except BaseException:
        tar.kill()
        tar.wait()
        raise
    errors = tar.stderr.read().decode(errors="replace").strip()
    if tar.wait() != 0:
        if shutil.disk_usage(target).free < (1 << 20):
            errors = f"no space left on the disk holding {target.parent.parent} (set HARNESS_CACHE elsewhere or free some)\n{errors}"
        raise SandboxError(f"unpacking {what} failed (nothing of it is kept): {errors[-1500:] or f'tar exited with {tar.returncode}'}")


def _file_digest(archive: Path) -> str:
    try:
        with open(archive, "rb") as stream:
            return "sha256:" + hashlib.file_digest(stream, "sha256").hexdigest()
    except OSError as err:
        raise ImageNotFound(f"cannot read the image archive {archive}: {err.strerror}") from None


def _hex(digest: str) -> str:
    algorithm, _, value = digest.partition(":")
    if algorithm != "sha256" or not re.fullmatch(r"[0-9a-f]{64}", value):
        raise SandboxError(f"not an image digest: {digest!r}")
    return value


def _write_atomically(path: Path, text: str) -> None:
    staging = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}")
    staging.write_text(text)
    staging.replace(path)
