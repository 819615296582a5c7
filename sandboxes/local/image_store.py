"""Task images unpacked once, layer by layer, into a content-addressed cache: no daemon needed to run them.

    <cache>/images/layers/<sha256>/   one layer's files, its deletions in overlayfs's own form
    <cache>/images/<sha256>.json      an image: its layers (bottom first), Env and User
    <cache>/images/names/<hash>       the image digest a name had when last resolved

A layer is named by the sha256 of its tar as the archive holds it (for `docker save`, the
layer's diff id), so the base layer that sixteen task images share is unpacked and stored
once, and an image whose layers are all here needs no export at all. Each layer is unpacked
alone into an empty folder (so no link of one layer can aim another's files outside it),
then its whiteouts (`.wh.NAME`, `.wh..wh..opq`) become what overlayfs reads in a lower
layer: a 0/0 character device, an `overlay.opaque` attribute. Everything appears complete
or not at all: layers are unpacked into `<sha256>.partial-<host>-<pid>` and renamed when done,
image records are written last, so a crash, a corrupt layer or a full disk leaves nothing
half made (and `prune` removes the partial folders of dead processes).

Images come from a Docker engine the first time they are used: its overlay2 store's own layer
folders where this process may read them (root on the engine's host), else `docker save`; or
from an image archive named by absolute path: `docker save`'s format or an OCI image layout, tar or
gzip layers (hosts without an engine, users without access to one, clusters with images as
files). The archive's digest is the sha256 of its bytes. Or from their registry, with no engine
(`registry_pull`).

HARNESS_IMAGE_CACHE_MAX bounds the layers' bytes: after each new image, the least recently used
images (a record's mtime is its last use) go with their layers that no kept image, sandbox or
snapshot uses (each overlay sandbox folder lists its layers in `layers.json`).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import posixpath
import re
import shutil
import socket
import stat
import subprocess
import tarfile
import threading
from dataclasses import dataclass
from pathlib import Path

from ..base import owner_alive
from ..disk import tree_bytes
from ..errors import EngineUnavailable, ImageNotFound, SandboxError
from ..images import cache_dir
from ..spec import parse_bytes
from .files import remove_tree
from .sandbox import SNAPSHOT_META

# How a machine without a Docker engine gets an image it never unpacked.
HOW_TO_GET = (
    "pull it from its registry (`harness tasks pull SET --backend overlay`), name its archive (`docker save -o`, "
    "or an OCI layout) by absolute path, or run the task set once where a Docker engine answers with the same "
    "HARNESS_CACHE (the store then remembers it)"
)
WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"


@dataclass(frozen=True)
class UnpackedImage:
    """An image's layers on the host (top first, as overlayfs's lowerdir lists them) and its config."""

    digest: str
    layers: tuple[Path, ...]
    env: dict[str, str]
    user: str

    def passwd_root(self) -> Path:
        """The layer whose /etc/passwd the image sees (the topmost that has one)."""
        return next((layer for layer in self.layers if (layer / "etc" / "passwd").exists()), self.layers[-1])

    def config(self) -> dict:
        return {"digest": self.digest, "layers": [str(p) for p in self.layers], "env": self.env, "user": self.user}

    @classmethod
    def from_config(cls, data: dict) -> UnpackedImage:
        return cls(data["digest"], tuple(Path(p) for p in data["layers"]), data["env"], data["user"])


# One unpack per image, and per layer, at a time in this process, whichever store object asks (other
# processes stage under their own names; the rename decides).
_LOCK = threading.Lock()
_LOCKS: dict[str, threading.Lock] = {}


class ImageStore:
    """Resolves image names to unpacked images, unpacking each layer once per host."""

    def __init__(self, root: Path | None = None):
        self.root = root or cache_dir() / "images"
        self._lock = _LOCK
        self._locks = _LOCKS
        self._digests: dict[str, str] = {}  # name -> digest, as first resolved by this process

    def get(self, name: str) -> UnpackedImage:
        archive = Path(name) if name.startswith("/") else None
        digest = self._digests.get(name) or (_file_digest(archive) if archive else self.resolve(name))
        self._digests[name] = digest
        record = self.root / f"{digest_hex(digest)}.json"
        unpacked = False
        if not self._complete(record):
            with self._lock_of(digest):
                if not self._complete(record):
                    self._unpack(digest, record, archive)
                    unpacked = True
        image = self._image(json.loads(record.read_text()))
        os.utime(record)  # its last use, which eviction goes by
        if unpacked and (limit := cache_limit()) is not None:
            self.evict(limit, keep={record})
        return image

    def _lock_of(self, key: str) -> threading.Lock:
        with self._lock:
            return self._locks.setdefault(f"{self.root}/{key}", threading.Lock())

    def resolve(self, name: str) -> str:
        """The digest `name` stands for: the engine's answer where one answers, else the one
        remembered from the last time it did. (`get` asks once per name and process, as the
        Docker backend checks each image once.)"""
        from ..docker_backend import docker_client

        remembered = self._remembered(name)
        try:
            client = docker_client()
        except EngineUnavailable:
            if remembered.exists():
                return json.loads(remembered.read_text())["digest"]
            raise ImageNotFound(
                f"image {name!r} was never unpacked into {self.root} and no Docker engine answers "
                f"to save it: {HOW_TO_GET}"
            ) from None
        import docker.errors

        try:
            digest = client.images.get(name).id
        except docker.errors.ImageNotFound:
            if remembered.exists():  # pulled into the store without the engine
                return json.loads(remembered.read_text())["digest"]
            raise ImageNotFound(
                f"image {name!r} is neither in the Docker engine nor in {self.root}: build it, or pull it "
                "(`harness tasks pull SET --backend overlay` needs no engine)"
            ) from None
        except docker.errors.APIError as err:
            raise SandboxError(f"cannot look up image {name!r}: {err.explanation or err}") from None
        self._remember(name, digest)
        return digest

    def _remember(self, name: str, digest: str) -> None:
        remembered = self._remembered(name)
        remembered.parent.mkdir(parents=True, exist_ok=True)
        _write_atomically(remembered, json.dumps({"name": name, "digest": digest}))

    def has(self, name: str) -> bool:
        """Whether `get(name)` needs no engine: the store remembers the name and holds all its layers;
        else whether an engine answers and holds it (the first `get` unpacks it)."""
        from ..docker_backend import DockerBackend, docker_client

        try:
            remembered = json.loads(self._remembered(name).read_text())["digest"]
            if self._complete(self.root / f"{digest_hex(remembered)}.json"):
                return True
        except (OSError, ValueError, KeyError, SandboxError):
            pass
        try:
            return DockerBackend(client=docker_client()).has_image(name)
        except EngineUnavailable:
            return False

    def has_layer(self, layer_hex: str) -> bool:
        return self._layer(layer_hex).is_dir()

    def _remembered(self, name: str) -> Path:
        return self.root / "names" / hashlib.sha256(name.encode()).hexdigest()[:32]

    def _layer(self, layer_hex: str) -> Path:
        return self.root / "layers" / layer_hex

    def _image(self, record: dict) -> UnpackedImage:
        layers = tuple(self._layer(layer) for layer in reversed(record["layers"]))
        return UnpackedImage(record["digest"], layers, record["env"], record["user"])

    def _complete(self, record: Path) -> bool:
        """An image record whose layers are all here (a pruned or damaged layer gets unpacked again)."""
        try:
            layers = json.loads(record.read_text())["layers"]
        except (OSError, ValueError, KeyError):
            return False
        return all(self._layer(layer).is_dir() for layer in layers)

    def _unpack(self, digest: str, record: Path, archive: Path | None) -> None:
        (self.root / "layers").mkdir(parents=True, exist_ok=True)
        if archive is not None:
            with open(archive, "rb") as stream:
                config, layers = self._read_archive(stream, f"the image archive {archive}")
        else:
            from ..docker_backend import docker_client

            api = docker_client().api
            details = api.inspect_image(digest)
            config = details.get("Config") or {}
            layers = [digest_hex(layer) for layer in (details.get("RootFS") or {}).get("Layers") or []]
            if not layers or not (
                all(self._layer(layer).is_dir() for layer in layers) or self._use_engine_layers(details, layers)
            ):
                _, layers = self._read_archive(_ChunkReader(api.get_image(digest)), f"the image {digest[:19]}")
        env = dict(item.partition("=")[::2] for item in config.get("Env") or [])
        _write_atomically(
            record, json.dumps({"digest": digest, "layers": layers, "env": env, "user": config.get("User") or ""})
        )

    def _use_engine_layers(self, details: dict, layers: list[str]) -> bool:
        """Use the image's layers where the engine's overlay2 store holds them, already unpacked with
        overlayfs's own whiteouts: each stored layer is a symlink to the engine's folder, so no `docker
        save` and nothing copied. Only for root on the engine's host; False where it cannot, and the
        image is read from `docker save` instead. Sandboxes only ever read these folders. Removing the
        image from the engine leaves dangling links: the next first use saves it again."""
        driver = details.get("GraphDriver") or {}
        data = driver.get("Data") or {}
        if os.geteuid() != 0 or driver.get("Name") != "overlay2" or not data.get("UpperDir"):
            return False
        folders = [data["UpperDir"], *(data.get("LowerDir") or "").split(":")][::-1]  # bottom first, as `layers`
        folders = [Path(folder) for folder in folders if folder]
        if len(folders) != len(layers) or not all(folder.is_dir() for folder in folders):
            return False
        for layer, folder in zip(layers, folders):
            target = self._layer(layer)
            with self._lock_of(target.name):
                if target.is_dir():
                    continue
                staging = target.with_name(f"{target.name}.partial-{_owner()}")
                remove_tree(staging)
                if os.path.lexists(target):  # a link whose folder the engine removed since
                    target.unlink()
                try:
                    staging.symlink_to(folder, target_is_directory=True)
                    staging.rename(target)
                except OSError:
                    staging.unlink(missing_ok=True)
                    if not target.is_dir():
                        return False
        return True

    def _read_archive(self, stream, what: str) -> tuple[dict, list[str]]:
        """Unpack every layer of a `docker save` or OCI archive read from `stream`: (the image's
        config, its layers' digests bottom first)."""
        documents: dict[str, dict] = {}  # the archive's small JSON files by member name
        layers: dict[str, str] = {}  # member name -> layer digest
        links: dict[str, str] = {}  # member name -> the member it links to (a layer shared by two images)
        try:
            with tarfile.open(fileobj=stream, mode="r|") as outer:
                for member in outer:
                    if member.issym():
                        links[member.name] = posixpath.normpath(
                            posixpath.join(posixpath.dirname(member.name), member.linkname)
                        )
                    elif member.islnk():
                        links[member.name] = member.linkname
                    elif member.isfile():
                        content = outer.extractfile(member)
                        head = content.read(1)
                        if head in (b"{", b"[") and member.size < (8 << 20):
                            documents[member.name] = json.loads(head + content.read())
                        elif member.name.endswith("layer.tar") or member.name.startswith("blobs/"):
                            layers[member.name] = self._store_layer(head, content, what)
        except (tarfile.TarError, ValueError, EOFError) as err:
            raise SandboxError(f"{what} is not a readable image archive ({err}); nothing of it is kept") from None

        def layer_of(name: str) -> str:
            name = links.get(name, name)
            if name not in layers:
                raise SandboxError(f"{what} names a layer {name} that it does not hold")
            return layers[name]

        if "manifest.json" in documents:  # docker save
            manifest = documents["manifest.json"][0]
            return documents[manifest["Config"]].get("config") or {}, [layer_of(name) for name in manifest["Layers"]]
        if "index.json" in documents:  # OCI image layout
            manifest = documents["index.json"]
            while "manifests" in manifest:  # an index of manifests: the first image
                manifest = documents[_blob(manifest["manifests"][0]["digest"])]
            return (
                documents[_blob(manifest["config"]["digest"])].get("config") or {},
                [layer_of(_blob(layer["digest"])) for layer in manifest["layers"]],
            )
        raise SandboxError(f"{what} holds neither a manifest.json (docker save) nor an index.json (OCI layout)")

    def _store_layer(self, head: bytes, content, what: str) -> str:
        """Spool one layer tar to disk while hashing it, and unpack it unless a layer of that digest is here."""
        spool = self.root / "layers" / f"spool-{threading.get_ident()}.partial-{_owner()}"
        digest = hashlib.sha256(head)
        try:
            with open(spool, "wb") as out:
                out.write(head)
                while chunk := content.read(1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
            self.store_layer(spool, digest.hexdigest(), what)
        except OSError as err:
            raise SandboxError(
                f"cannot store a layer of {what} in {self.root / 'layers'}: {err.strerror}"
                f"{_disk_hint(self.root)}; nothing of it is kept"
            ) from None
        finally:
            spool.unlink(missing_ok=True)
        return digest.hexdigest()

    def store_layer(self, archive: Path, layer_hex: str, what: str) -> None:
        """Unpack the layer tar (plain, gzip or zstd) `archive`, whose sha256 is `layer_hex`, unless it is here."""
        target = self._layer(layer_hex)
        target.parent.mkdir(parents=True, exist_ok=True)
        with self._lock_of(target.name):  # images that share a layer, unpacked at once: the layer once
            if not target.is_dir():
                staging = target.with_name(f"{target.name}.partial-{_owner()}")
                remove_tree(staging)
                staging.mkdir()
                try:
                    unpack_layer(archive, staging, f"a layer of {what}")
                    staging.rename(target)
                except OSError:
                    if not target.is_dir():  # else another process finished the same layer first: fine
                        raise
                finally:
                    remove_tree(staging)

    def add_image(self, name: str, digest: str, layers: list[str], config: dict) -> None:
        """Record an image whose layers (digests, bottom first) are stored, and remember `name` for it."""
        env = dict(item.partition("=")[::2] for item in config.get("Env") or [])
        record = {"digest": digest, "layers": layers, "env": env, "user": config.get("User") or ""}
        _write_atomically(self.root / f"{digest_hex(digest)}.json", json.dumps(record))
        self._remember(name, digest)

    def prune(self) -> list[str]:
        """Remove what a dead process left half unpacked, then evict images down to `cache_limit()`."""
        removed = []
        for folder in sorted((self.root / "layers").glob("*.partial-*")):
            host, _, pid = folder.name.rpartition(".partial-")[2].rpartition("-")
            if not owner_alive(f"{host}:{pid}"):
                size = tree_bytes(folder)
                remove_tree(folder)
                removed.append(f"partial layer {folder.name} ({_mib(size)})")
        limit = cache_limit()
        if limit is not None:
            removed += [f"image {name} ({_mib(size)})" for name, size in self.evict(limit)]
        return removed

    # -- the cache's size ---------------------------------------------------------------------------

    def images(self) -> list[dict]:
        """Each stored image: its digest, the names it was last resolved by, its bytes on disk (`own`: in layers
        no other image shares), when it was last used, and whether a sandbox or snapshot uses it now."""
        records = self._records()
        sizes = {layer: self._layer_size(layer) for layers in records.values() for layer in layers}
        names: dict[str, list[str]] = {}
        for path in (self.root / "names").glob("*"):
            try:
                entry = json.loads(path.read_text())
                names.setdefault(entry["digest"], []).append(entry["name"])
            except (OSError, ValueError, KeyError):
                continue
        in_use = self._layers_in_use()
        rows = []
        for record, layers in records.items():
            shared = {layer for other, their in records.items() if other != record for layer in their}
            digest = "sha256:" + record.stem
            rows.append(
                {
                    "digest": digest,
                    "names": sorted(names.get(digest, [])),
                    "layers": len(layers),
                    "bytes": sum(sizes[layer] for layer in layers),
                    "own_bytes": sum(sizes[layer] for layer in layers if layer not in shared),
                    "last_used": record.stat().st_mtime,
                    "in_use": set(layers) <= in_use,
                }
            )
        return sorted(rows, key=lambda row: row["last_used"], reverse=True)

    def evict(self, limit: int, keep: set[Path] = frozenset()) -> list[tuple[str, int]]:
        """Remove least recently used images (their layers that no kept image, sandbox or snapshot uses) until
        the layers take at most `limit` bytes; never an image a sandbox or snapshot runs, nor those in `keep`.
        Returns (digest, bytes freed) of each image removed."""
        records = self._records()
        sizes = {
            layer.name: self._layer_size(layer.name) for layer in (self.root / "layers").glob("*") if _is_layer(layer)
        }
        total = sum(sizes.values())
        in_use = self._layers_in_use()
        freed = []
        for record in sorted(records, key=lambda path: path.stat().st_mtime):
            if total <= limit:
                break
            layers = records.pop(record)
            if record in keep or set(layers) <= in_use:
                records[record] = layers
                continue
            shared = in_use | {layer for their in records.values() for layer in their}
            record.unlink(missing_ok=True)  # first the record: the image is gone before any of its layers is
            size = 0
            for layer in set(layers) - shared:
                if layer in sizes and self._remove_layer(layer):
                    size += sizes.pop(layer)
            total -= size
            freed.append(("sha256:" + record.stem, size))
        return freed

    def _records(self) -> dict[Path, list[str]]:
        found = {}
        for record in self.root.glob("*.json"):
            try:
                found[record] = json.loads(record.read_text())["layers"]
            except (OSError, ValueError, KeyError):
                continue
        return found

    def _layers_in_use(self) -> set[str]:
        """Layers the sandboxes and snapshots of the overlay backend mount (each folder lists its own)."""
        used = set()
        for listing in cache_dir().glob("overlay/*/layers.json"):
            try:
                used.update(Path(layer).name for layer in json.loads(listing.read_text()))
            except (OSError, ValueError):
                continue
        for meta in cache_dir().glob(f"overlay-snapshots/*/{SNAPSHOT_META}"):
            try:
                used.update(Path(layer).name for layer in json.loads(meta.read_text())["image"]["layers"])
            except (OSError, ValueError, KeyError):
                continue
        return used

    def _layer_size(self, layer_hex: str) -> int:
        """A layer's bytes on disk, measured once (0 for a link to the engine's own folder)."""
        sidecar = self.root / "layers" / f"{layer_hex}.size"
        try:
            return int(sidecar.read_text())
        except (OSError, ValueError):
            pass
        layer = self._layer(layer_hex)
        if not layer.is_dir():
            return 0
        size = 0 if layer.is_symlink() else tree_bytes(layer)
        _write_atomically(sidecar, str(size))
        return size

    def _remove_layer(self, layer_hex: str) -> bool:
        """Rename the layer out of the way (atomic: one process wins), then remove it."""
        layer = self._layer(layer_hex)
        doomed = layer.with_name(f"{layer_hex}.partial-{_owner()}")
        try:
            layer.rename(doomed)
        except OSError:
            return False
        (self.root / "layers" / f"{layer_hex}.size").unlink(missing_ok=True)
        if doomed.is_symlink():
            doomed.unlink()
        else:
            remove_tree(doomed)
        return True


def cache_limit() -> int | None:
    """HARNESS_IMAGE_CACHE_MAX: the most bytes the overlay backend's unpacked layers may take (e.g. `50g`);
    unset: no bound."""
    value = os.environ.get("HARNESS_IMAGE_CACHE_MAX", "").strip()
    if not value:
        return None
    try:
        return parse_bytes(value)
    except ValueError:
        raise SandboxError(f"HARNESS_IMAGE_CACHE_MAX must be a size such as 50g or 512m, not {value!r}") from None


def _is_layer(path: Path) -> bool:
    return re.fullmatch(r"[0-9a-f]{64}", path.name) is not None


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def unpack_layer(archive: Path, target: Path, what: str) -> None:
    """Extract one layer tar (or tar.gz) into the empty folder `target` with GNU tar (owners kept as numbers
    where this process may set them, /dev left out: every sandbox gets its own), then turn its whiteouts
    into overlayfs's form."""
    command = [
        "tar",
        "-x",
        "-p",
        "--numeric-owner",
        "-f",
        str(archive),
        "-C",
        str(target),
        "--exclude=./dev/*",
        "--exclude=dev/*",
    ]
    done = subprocess.run(command, capture_output=True, text=True, errors="replace", check=False)
    if done.returncode != 0:
        errors = done.stderr.strip()[-1500:] or f"tar exited with {done.returncode}"
        raise SandboxError(f"unpacking {what} failed{_disk_hint(target)} (nothing of it is kept): {errors}")
    opaque = "trusted.overlay.opaque" if os.geteuid() == 0 else "user.overlay.opaque"  # the latter with `userxattr`
    for folder, dirs, files in os.walk(target):
        for name in files:
            if name == OPAQUE:
                os.unlink(os.path.join(folder, name))
                os.setxattr(folder, opaque, b"y")
            elif name.startswith(WHITEOUT):
                os.unlink(os.path.join(folder, name))
                os.mknod(os.path.join(folder, name[len(WHITEOUT) :]), 0o600 | stat.S_IFCHR, os.makedev(0, 0))


class _ChunkReader(io.RawIOBase):
    """A file to read from an iterator of byte chunks (the engine's `docker save` stream)."""

    def __init__(self, chunks):
        self._chunks = iter(chunks)
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._pending:
            try:
                self._pending = next(self._chunks)
            except StopIteration:
                return 0
        size = min(len(buffer), len(self._pending))
        buffer[:size], self._pending = self._pending[:size], self._pending[size:]
        return size


def _disk_hint(folder: Path) -> str:
    """What to say where a write failed for want of space."""
    if shutil.disk_usage(folder).free >= (1 << 20):
        return ""
    return f": no space left on the disk holding {folder} (set HARNESS_CACHE elsewhere, or free some)"


def _blob(digest: str) -> str:
    algorithm, _, value = digest.partition(":")
    return f"blobs/{algorithm}/{value}"


def _owner() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def _file_digest(archive: Path) -> str:
    try:
        with open(archive, "rb") as stream:
            return "sha256:" + hashlib.file_digest(stream, "sha256").hexdigest()
    except OSError as err:
        raise ImageNotFound(f"cannot read the image archive {archive}: {err.strerror}") from None


def digest_hex(digest: str) -> str:
    """The hex of a `sha256:` digest; anything else is an error."""
    algorithm, _, value = digest.partition(":")
    if algorithm != "sha256" or not re.fullmatch(r"[0-9a-f]{64}", value):
        raise SandboxError(f"not an image digest: {digest!r}")
    return value


def _write_atomically(path: Path, text: str) -> None:
    staging = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}")
    staging.write_text(text)
    staging.replace(path)
