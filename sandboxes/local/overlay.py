"""Overlay backend: any task image without a daemon, each sandbox a copy-on-write layer over it.

The image's layers are unpacked once each (`image_store`); a sandbox is `<cache>/overlay/<id>` with
`upper/` (everything it writes), `work/` (overlayfs's own) and `merged/`. Its command line is
`unshare` into a private mount namespace (and, for a user other than root, a user namespace
where that user is root), an overlayfs mount of `upper` over the image's layers at `merged`,
and bubblewrap with `merged` as its root: the mount lives exactly as long as the sandbox's
processes, so nothing stays mounted after a crash. Everything else (pty shell, cgroups, no
network, files through /proc/<pid>/root, owner records, prune) is the local backend's.

A snapshot copies `upper` into `<cache>/overlay-snapshots/<id>/layers/0` and hard-links the
layers of the snapshot it was forked from under it (lower layers are never written, so links
are safe): each snapshot stands alone, and forks mount its layers over the image's.

The image's Env comes before the spec's env and its User is the user where the spec names none;
the spec's workdir is where the shell starts (made if the image lacks it), and /etc/hosts and
/etc/hostname are the sandbox's own (bound in, never part of a snapshot), as with Docker. With
`spec.read_only` everything but the workdir and /tmp is read-only (writes there still go to `upper`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from ..base import PullProgress, Snapshot, labels
from ..errors import ImageNotFound, SandboxError
from ..images import BASE_REPOSITORY, PATH, rootfs_of_image
from ..spec import SandboxSpec
from .cgroups import Hierarchy
from .files import copy_tree, remove_tree
from .image_store import ImageStore, UnpackedImage
from .process import bwrap_command
from .sandbox import SNAPSHOT_META, BwrapSandbox, LocalBackend, _read_json

# Runs as root of the new mount namespace: mount the overlay (options, mount point), make the folders
# named before `--` in it, then become bwrap.
_MOUNT_THEN_EXEC = (
    'mount -t overlay overlay -o "$1" "$2" || exit 125; root=$2; shift 2; '
    'while [ "$1" != -- ]; do mkdir -p "$root$1" || exit 125; shift; done; shift; exec "$@"'
)
# What Docker binds at /etc/hosts of a container without a network: images seldom have their own,
# and tests that serve on "localhost" need it to resolve.
HOSTS = """127.0.0.1\tlocalhost
::1\tlocalhost ip6-localhost ip6-loopback
fe00::0\tip6-localnet
ff00::0\tip6-mcastprefix
ff02::1\tip6-allnodes
ff02::2\tip6-allrouters
"""


class OverlaySandbox(BwrapSandbox):
    backend = "overlay"

    def __init__(
        self,
        spec: SandboxSpec,
        image: UnpackedImage,
        layers: list[Path],
        output_cap: int | None = None,
        cgroups: tuple[list[Hierarchy], list[str]] | None = None,
    ):
        self.image = image
        self.layers = layers  # read-only layers from the top down: a snapshot's, then the image's
        self.mount_point = spec.workdir
        super().__init__(spec, output_cap, cgroups)

    def _make_filesystem(self) -> None:
        for part in ("upper", "work", "merged"):
            (self.dir / part).mkdir()
        # what the image store's eviction must leave alone while this folder exists
        (self.dir / "layers.json").write_text(json.dumps([str(layer) for layer in self.layers]))
        missing = [layer for layer in self.layers if not layer.is_dir()]
        if missing:  # evicted by another process between the image's lookup and the line above
            raise SandboxError(f"the image layer {missing[0]} was evicted from the cache meanwhile: start it again")
        (self.dir / "hosts").write_text(HOSTS)
        (self.dir / "hostname").write_text(self.id + "\n")

    def _writable(self) -> list[Path]:
        return [self.dir / "upper"]

    def _command(self, info_fd: int) -> list[str]:
        options = ",".join(
            [
                "lowerdir=" + ":".join(map(_option_path, self.layers)),
                "upperdir=" + _option_path(self.dir / "upper"),
                "workdir=" + _option_path(self.dir / "work"),
                *(["userxattr"] if os.geteuid() != 0 else []),
            ]
        )
        merged = str(self.dir / "merged")
        filesystem = [
            "--bind",
            merged,
            "/",
            "--dir",
            self.spec.workdir,
            *(arg for name in ("hosts", "hostname") for arg in ("--bind", str(self.dir / name), f"/etc/{name}")),
        ]
        writable = [self.spec.workdir, "/tmp"] if self.spec.read_only else []
        for folder in writable:  # in a read-only root, binds of the overlay's own folders stay writable
            filesystem += ["--bind", merged + folder, folder]
        inner = bwrap_command(
            self.spec,
            filesystem,
            self.image.passwd_root(),
            self.id,
            info_fd,
            self.image.env,
            read_only_root=self.spec.read_only,
        )
        return [*namespaces(), "sh", "-c", _MOUNT_THEN_EXEC, "sh", options, merged, *writable, "--", *inner]

    def _snapshot(self, cwd: str, env: dict[str, str]) -> Snapshot:
        folder = self._new_snapshot_folder()
        try:
            (folder / "layers").mkdir()
            copy_tree(self.dir / "upper", _fresh(folder / "layers" / "0"))
            own = self.layers[: len(self.layers) - len(self.image.layers)]  # the image's layers stay shared
            for number, layer in enumerate(own, start=1):
                link_tree(layer, _fresh(folder / "layers" / str(number)))
            meta = {"image": self.image.config(), "depth": len(own) + 1, "labels": labels()}
            (folder / SNAPSHOT_META).write_text(json.dumps(meta))
        except BaseException:
            remove_tree(folder)
            raise
        merged = {**self.spec.to_dict(), "image": str(folder), "workdir": cwd, "env": {**self.spec.env, **env}}
        return Snapshot(self.backend, str(folder), SandboxSpec.from_dict(merged), cwd, env)


class OverlayBackend(LocalBackend):
    name = "overlay"

    def __init__(
        self,
        output_cap: int | None = None,
        cgroups: tuple[list[Hierarchy], list[str]] | None = None,
        store: ImageStore | None = None,
    ):
        super().__init__(output_cap=output_cap, cgroups=cgroups)
        for tool in ("unshare", "mount"):
            if shutil.which(tool) is None:
                raise SandboxError(f"the overlay backend needs `{tool}` (util-linux) on PATH")
        self.store = store or ImageStore()

    def create(self, spec: SandboxSpec) -> OverlaySandbox:
        """`spec.image`: an image name or id, or a root filesystem's tar archive by absolute path (unpacked
        on first use), or a snapshot's directory."""
        folder = Path(spec.image)
        if folder.is_absolute() and folder.is_dir():
            meta = _read_json(folder / SNAPSHOT_META)
            if "image" not in meta:
                raise ImageNotFound(f"{folder} is not a snapshot of the overlay backend")
            image = UnpackedImage.from_config(meta["image"])
            layers = [folder / "layers" / str(n) for n in range(meta["depth"])] + list(image.layers)
        else:
            image = self._image(spec.image)
            layers = list(image.layers)
        if spec.user is None and image.user not in ("", "root", "0", "0:0"):
            spec = dataclasses.replace(spec, user=image.user)
        return OverlaySandbox(spec, image, layers, self.output_cap, self.cgroups)

    def _image(self, name: str) -> UnpackedImage:
        """The store's image; a base image neither the store nor an engine holds runs from its root filesystem
        (`harness sandbox build-base` builds it with debootstrap, no engine), as one layer."""
        root = rootfs_of_image(name)
        if name.startswith(BASE_REPOSITORY) and (root / ".harness-complete").exists() and not self.store.has(name):
            return UnpackedImage(
                "sha256:" + hashlib.sha256(str(root).encode()).hexdigest(), (root,), {"PATH": PATH}, ""
            )
        return self.store.get(name)

    def has_image(self, image: str) -> bool:
        """A snapshot or an archive that exists, an image the store holds (or the engine, where one answers),
        or a base image whose root filesystem is built."""
        if image.startswith("/"):
            return Path(image).exists()
        if image.startswith(BASE_REPOSITORY) and (rootfs_of_image(image) / ".harness-complete").exists():
            return True
        return self.store.has(image)

    def prune(self, everything: bool = False) -> list[str]:
        return super().prune(everything) + self.store.prune()

    def images(self) -> list[dict]:
        return self.store.images()

    def pull(self, image: str, on_progress=lambda p: None) -> str:
        """From the registry into the image store, with no engine (`registry_pull`)."""
        from .registry_pull import pull_into_store

        def report(done: int, total: int) -> None:
            on_progress(PullProgress(image, done, total, "Downloading"))

        return pull_into_store(image, self.store, report)


def namespaces() -> list[str]:
    """`unshare` into a mount namespace of the sandbox's own; without root, into a user namespace too,
    where this user is root (so it may mount the overlay: Linux 5.11 or newer)."""
    command = ["unshare", "--mount", "--propagation", "private"]
    return command + (["--user", "--map-root-user"] if os.geteuid() != 0 else [])


def link_tree(source: Path, target: Path) -> None:
    """A read-only layer's copy that shares its files' data (hard links; folders are new)."""
    result = subprocess.run(
        ["cp", "-a", "--link", f"{source}/.", str(target)], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise SandboxError(f"could not link {source} into {target}: {result.stderr.strip()}")


def _fresh(folder: Path) -> Path:
    folder.mkdir()
    return folder


def _option_path(path: Path) -> str:
    if re.search(r"[,:\\\s]", str(path)):
        raise SandboxError(
            f"the overlay backend cannot mount {path}: its path holds ',', ':', '\\' or a space "
            "(set HARNESS_CACHE to a plainer folder)"
        )
    return str(path)
