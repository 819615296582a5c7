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

With `writable="tmpfs"` (or HARNESS_OVERLAY_WRITABLE=tmpfs) a sandbox takes no disk blocks: its folder is a link
to one in `runtime_dir()` (a tmpfs), and `upper` and `work` are on a tmpfs of its own, sized by `spec.disk` (else
`spec.memory`), that a holder process mounts in a mount namespace of the sandbox's own, with the overlay; each
start of its shell enters that namespace (`nsenter`), so what it wrote outlives a restart of the shell, and goes
with the holder when the sandbox closes or this process dies (the holder exits when its stdin, a pipe from this
process, closes). A full tmpfs is ENOSPC inside the sandbox; the pages written count in its memory cgroup.
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
from ..spec import SandboxSpec, parse_bytes
from .cgroups import Hierarchy
from .files import copy_tree, remove_tree, runtime_dir
from .image_store import ImageStore, UnpackedImage
from .process import SPAWNER, bwrap_command
from .sandbox import SNAPSHOT_META, BwrapSandbox, LocalBackend, _read_json

# Runs as root of the new mount namespace: mount the overlay (options, mount point), make the folders
# named before `--` in it, then become bwrap.
_MOUNT_THEN_EXEC = (
    'mount -t overlay overlay -o "$1" "$2" || exit 125; root=$2; shift 2; '
    'while [ "$1" != -- ]; do mkdir -p "$root$1" || exit 125; shift; done; shift; exec "$@"'
)
# The holder of a sandbox whose writes go to a tmpfs (tmpfs options, its mount point, then as above but for the
# command): mounts both, says so, and keeps the namespace until its stdin closes.
_HOLD = (
    'mount -t tmpfs -o "$1" tmpfs "$2" && mkdir "$2/upper" "$2/work" || exit 125; shift 2; '
    'mount -t overlay overlay -o "$1" "$2" || exit 125; root=$2; shift 2; '
    'while [ "$1" != -- ]; do mkdir -p "$root$1" || exit 125; shift; done; echo mounted; read -r _'
)
WRITABLE = ("disk", "tmpfs")  # where a sandbox's writes go
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
        writable: str = "disk",
    ):
        self.image = image
        self.layers = layers  # read-only layers from the top down: a snapshot's, then the image's
        self.mount_point = spec.workdir
        self.writable = writable
        self.holder: subprocess.Popen | None = None  # tmpfs: the process whose mount namespace has the mounts
        super().__init__(spec, output_cap, cgroups)

    def _make_folder(self) -> None:
        if self.writable == "disk":
            return super()._make_folder()
        real = runtime_dir() / self.id
        self.dir.parent.mkdir(parents=True, exist_ok=True)
        self.dir.symlink_to(real)  # found where every sandbox folder is, costing no disk block (a short link)
        real.mkdir()  # after the link, which takes it along when the sandbox closes

    def _make_filesystem(self) -> None:
        for part in ("upper", "work", "merged") if self.writable == "disk" else ("rw", "merged"):
            (self.dir / part).mkdir()
        # what the image store's eviction must leave alone while this folder exists
        (self.dir / "layers.json").write_text(json.dumps([str(layer) for layer in self.layers]))
        missing = [layer for layer in self.layers if not layer.is_dir()]
        if missing:  # evicted by another process between the image's lookup and the line above
            raise SandboxError(f"the image layer {missing[0]} was evicted from the cache meanwhile: start it again")
        (self.dir / "hosts").write_text(HOSTS)
        (self.dir / "hostname").write_text(self.id + "\n")
        if self.writable == "tmpfs":
            self._hold_mounts()

    def _tmpfs_bytes(self) -> int:
        """The tmpfs's size: the disk limit, at most the memory limit (its pages are the sandbox's memory)."""
        memory = parse_bytes(self.spec.memory)
        return min(parse_bytes(self.spec.disk), memory) if self.spec.disk else memory

    def _hold_mounts(self) -> None:
        real = self.dir.resolve()
        command = [
            *namespaces(),
            "sh",
            "-c",
            _HOLD,
            "sh",
            f"size={self._tmpfs_bytes()},mode=0700",
            str(real / "rw"),
            self._overlay_options(real / "rw"),
            str(real / "merged"),
            *self._writable_binds(),
            "--",
        ]
        self.holder = SPAWNER.popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )

    def _make_cgroups(self, cgroups: tuple[list[Hierarchy], list[str]]) -> None:
        super()._make_cgroups(cgroups)
        if self.holder is None:
            return
        said = self.holder.stdout.readline()  # it mounted meanwhile
        if said != "mounted\n":  # it failed and exits: the rest of what it said
            said += self.holder.stdout.read()
            raise SandboxError(
                f"sandbox {self.id} could not mount its tmpfs and overlay: {said.strip() or 'no output'}"
            )

    def _watch_disk(self, paths: list[Path]) -> None:
        if self.writable == "disk":
            return super()._watch_disk(paths)
        self.limits["disk"] = (
            f"tmpfs of {self._tmpfs_bytes() / 2**20:.0f} MiB (ENOSPC when full; its pages count as the sandbox's memory)"
        )

    def _upper(self) -> Path:
        """The folder that takes the sandbox's writes, as this process reaches it."""
        if self.writable == "disk":
            return self.dir / "upper"
        return Path(f"/proc/{self.holder.pid}/root") / str(self.dir.resolve() / "rw" / "upper").lstrip("/")

    def _writable(self) -> list[Path]:
        return [self._upper()]

    def _writable_binds(self) -> list[str]:
        """The folders bound writable into a read-only root."""
        return [self.spec.workdir, "/tmp"] if self.spec.read_only else []

    def _overlay_options(self, writable: Path) -> str:
        return ",".join(
            [
                "lowerdir=" + ":".join(map(_option_path, self.layers)),
                "upperdir=" + _option_path(writable / "upper"),
                "workdir=" + _option_path(writable / "work"),
                *(["userxattr"] if os.geteuid() != 0 else []),
            ]
        )

    def _command(self, info_fd: int) -> list[str]:
        merged = str(self.dir / "merged")
        filesystem = [
            "--bind",
            merged,
            "/",
            "--dir",
            self.spec.workdir,
            *(arg for name in ("hosts", "hostname") for arg in ("--bind", str(self.dir / name), f"/etc/{name}")),
        ]
        writable = self._writable_binds()
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
        if self.writable == "tmpfs":  # the holder's namespace, mounted already
            # without root, also its user namespace, where our uid is root (setgroups is denied there: keep ours)
            user = ["--user", "--preserve-credentials"] if os.geteuid() != 0 else []
            return ["nsenter", "--target", str(self.holder.pid), *user, "--mount", *inner]
        options = self._overlay_options(self.dir)
        return [*namespaces(), "sh", "-c", _MOUNT_THEN_EXEC, "sh", options, merged, *writable, "--", *inner]

    def _snapshot(self, cwd: str, env: dict[str, str]) -> Snapshot:
        folder = self._new_snapshot_folder()
        try:
            (folder / "layers").mkdir()
            copy_tree(self._upper(), _fresh(folder / "layers" / "0"))
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

    def _destroy(self) -> None:
        if self.holder is not None:  # with the shell, the last process of the namespace: the tmpfs goes with them
            self.holder.kill()
            self.holder.wait()
            self.holder.stdin.close()
            self.holder.stdout.close()
        super()._destroy()


class OverlayBackend(LocalBackend):
    name = "overlay"

    def __init__(
        self,
        output_cap: int | None = None,
        cgroups: tuple[list[Hierarchy], list[str]] | None = None,
        store: ImageStore | None = None,
        writable: str | None = None,
    ):
        """`writable`: where sandboxes' writes go, "disk" (their folders in the cache) or "tmpfs" (memory, no disk
        blocks; `spec.disk` is the tmpfs's size); default HARNESS_OVERLAY_WRITABLE, else "disk"."""
        super().__init__(output_cap=output_cap, cgroups=cgroups)
        self.writable = writable or os.environ.get("HARNESS_OVERLAY_WRITABLE", "").strip() or "disk"
        if self.writable not in WRITABLE:
            raise SandboxError(
                f"the overlay backend keeps sandboxes' writes on {' or '.join(WRITABLE)}, not {self.writable!r} "
                "(HARNESS_OVERLAY_WRITABLE)"
            )
        for tool in ("unshare", "mount") + (("nsenter",) if self.writable == "tmpfs" else ()):
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
        return OverlaySandbox(spec, image, layers, self.output_cap, self.cgroups, self.writable)

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
