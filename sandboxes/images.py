"""The base images, built without a registry: debootstrap a Debian root, then import it.

One base per Python: Debian bullseye (3.9), bookworm (3.11, the default) and trixie (3.13), each
with the suite's own python3, pytest, pip and git. The image tag is a hash of the recipe, so
building twice is a no-op; the root filesystem is kept at `<cache>/rootfs/<hash>`, where the local
(bubblewrap) backend runs it and from where the Docker image is imported. A base's builder
(`builder_recipe`: the same plus a compiler and the Python headers) is the base's root filesystem with those
installed by apt in a chroot, built only where an sdist must be compiled for that base's Python.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator

from .cache_lock import cache_lock
from .errors import SandboxError

log = logging.getLogger(__name__)

BASE_REPOSITORY = "harness-base"
BASE_IMAGE = f"{BASE_REPOSITORY}:latest"
BASE_RECIPE = {
    "suite": "bookworm",
    "variant": "minbase",
    "packages": ["python3", "python3-pytest", "python3-pip", "git", "patch", "procps"],
    "workdir": "/workspace",
    "recipe": 1,  # bump when the steps below change
}


@dataclass(frozen=True)
class Base:
    """A base: its Python, the day that Python was first released, and its recipe."""

    python: str
    released: str  # ISO date of the interpreter's first release
    recipe: dict
    pip: str = ""  # where the suite's pip will not do: the pip project images install first (a requirement)

    @property
    def tag(self) -> str:
        return f"{BASE_REPOSITORY}:{recipe_hash(self.recipe)}"


DEFAULT_PYTHON = "3.11"
BASES = {
    base.python: base
    for base in (
        # bullseye's pip 20.3 cannot make PEP 660 editable installs (pip 21.3 can); pip 25.3 dropped
        # `setup.py develop`, which old setuptools projects need: what bookworm's pip 23 does, both.
        Base("3.9", "2020-10-05", {**BASE_RECIPE, "suite": "bullseye"}, pip="pip>=21.3,<25.3"),
        Base(DEFAULT_PYTHON, "2022-10-24", BASE_RECIPE),
        Base("3.13", "2024-10-07", {**BASE_RECIPE, "suite": "trixie"}),
    )
}
TOOLCHAIN_BASE = "3.13"  # the base language toolchains are added to: trixie's, with the newest toolchains
# What a builder adds to its base: a C and C++ compiler and the Python headers, to build sdists with C extensions
# into wheels for the base's Python (`builder_recipe`).
BUILD_PACKAGES = ["gcc", "g++", "libc6-dev", "python3-dev"]
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def cache_dir() -> Path:
    return Path(os.environ.get("HARNESS_CACHE", Path.home() / ".cache" / "harness"))


def recipe_hash(recipe: dict = BASE_RECIPE) -> str:
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]


def base_of(python: str) -> Base:
    """The base for `python` ("3.9", "3.11", "3.13"); another version is a clear error."""
    if python not in BASES:
        raise SandboxError(f"no base for Python {python!r}: the bases are Python {', '.join(BASES)}")
    return BASES[python]


def builder_recipe(recipe: dict) -> dict:
    """The recipe of a base's builder: the base (`extends`) plus `BUILD_PACKAGES`. It builds sdists into wheels
    for the base's Python; no project image starts from it, so the bases stay without a compiler."""
    return {**recipe, "packages": [*recipe["packages"], *BUILD_PACKAGES], "extends": recipe}


def base_rootfs(recipe: dict = BASE_RECIPE) -> Path:
    """Where the base root filesystem lives (built by `build_rootfs`)."""
    return cache_dir() / "rootfs" / recipe_hash(recipe)


def rootfs_of_image(image: str) -> Path:
    """The root filesystem of a base image name: `harness-base:latest` (the default) or `harness-base:<hash>`."""
    tag = image.partition(":")[2] or "latest"
    return base_rootfs() if tag == "latest" else cache_dir() / "rootfs" / tag


def build_rootfs(recipe: dict = BASE_RECIPE, on_line: Callable[[str], None] = log.info) -> Path:
    """debootstrap the recipe into the cache, once. Needs root and debootstrap."""
    target = base_rootfs(recipe)
    if (target / ".harness-complete").exists():
        return target
    with cache_lock(target):
        return _build_rootfs(target, recipe, on_line)


def _build_rootfs(target: Path, recipe: dict, on_line: Callable[[str], None]) -> Path:
    if (target / ".harness-complete").exists():  # another process built it while this one waited
        return target
    if shutil.which("debootstrap") is None:
        raise SandboxError("debootstrap is not installed: `apt-get install -y debootstrap` (needs root)")
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.parent.mkdir(parents=True, exist_ok=True)
    if "extends" in recipe:
        _extend_rootfs(staging, recipe, on_line)
    else:
        _debootstrap(staging, recipe, on_line)
    _finish_rootfs(staging, recipe)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target


def _debootstrap(staging: Path, recipe: dict, on_line: Callable[[str], None]) -> None:
    command = [
        "debootstrap",
        f"--variant={recipe['variant']}",
        "--include=" + ",".join(recipe["packages"]),
        recipe["suite"],
        str(staging),
    ]
    mirror = os.environ.get("HARNESS_DEBIAN_MIRROR")
    if mirror:
        command.append(mirror)
    _run_streaming(command, on_line)


def _extend_rootfs(staging: Path, recipe: dict, on_line: Callable[[str], None]) -> None:
    """A copy of the base's root filesystem with the packages the recipe adds installed by apt inside it (a
    chroot, with the host's network and resolver): a fraction of a second debootstrap's time."""
    base = recipe["extends"]
    _run_streaming(["cp", "-a", str(build_rootfs(base, on_line)), str(staging)], on_line)
    (staging / ".harness-complete").unlink()
    added = " ".join(package for package in recipe["packages"] if package not in base["packages"])
    resolv = staging / "etc" / "resolv.conf"
    resolv.unlink(missing_ok=True)
    shutil.copyfile("/etc/resolv.conf", resolv)
    install = (
        f"apt-get update -qq && apt-get install -y -qq --no-install-recommends {added} && rm -f /var/cache/apt/*.bin"
    )
    env = ["env", "-i", f"PATH={PATH}", "DEBIAN_FRONTEND=noninteractive"]
    _run_streaming(["chroot", str(staging), *env, "sh", "-c", install], on_line)
    if recipe.get("prepare"):  # a language's one-off step once its toolchain is in (Go: warm the build cache)
        _run_streaming(["chroot", str(staging), *env, "sh", "-c", recipe["prepare"]], on_line)


def _finish_rootfs(root: Path, recipe: dict) -> None:
    """Trim caches and add what sandboxes expect (a workdir, a marker of the recipe)."""
    for junk in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man"):
        for child in (root / junk).glob("*"):
            if child.is_file():
                child.unlink()
            elif child.is_dir():
                shutil.rmtree(child, ignore_errors=True)
    if recipe.get("apt_sources") is False:  # offline apt: `apt-get update` reads nothing and succeeds
        for sources in (root / "etc" / "apt").glob("sources.list*"):
            shutil.rmtree(sources) if sources.is_dir() else sources.unlink()
        (root / "etc" / "apt" / "sources.list.d").mkdir()
    (root / recipe["workdir"].lstrip("/")).mkdir(parents=True, exist_ok=True)
    (root / "etc" / "harness-base").write_text(json.dumps(recipe, sort_keys=True) + "\n")
    (root / ".harness-complete").write_text(recipe_hash(recipe) + "\n")


# The backend the images being loaded will run on (a name, made on the first question), so that a task
# set's loader asks it, not the Docker engine, whether an image is there: the overlay backend answers
# from its store with no engine at all. None: the Docker engine answers.
_RUNS_ON: ContextVar[list | None] = ContextVar("images_run_on", default=None)


@contextmanager
def images_run_on(backend: str | None) -> Iterator[None]:
    """Within: `image_exists` and `build_base_image` ask `backend` (a name, as `get_backend` takes)."""
    token = _RUNS_ON.set([backend] if backend else None)
    try:
        yield
    finally:
        _RUNS_ON.reset(token)


def _image_backend():
    """The backend images are asked of here, made once per `images_run_on`; None for the Docker engine."""
    holder = _RUNS_ON.get()
    if holder is None or holder[0] == "docker":
        return None
    if isinstance(holder[0], str):
        from . import get_backend

        holder[0] = get_backend(holder[0])
    return holder[0]


def _engine_to_build(tag: str):
    """The Docker engine that builds `tag`; where none answers, a missing image says how to get it."""
    from .docker_backend import docker_client
    from .errors import EngineUnavailable, ImageNotFound

    backend = _image_backend()
    try:
        return docker_client()
    except EngineUnavailable as err:
        if backend is None or backend.name == "docker":
            raise
        from .local.image_store import HOW_TO_GET

        raise ImageNotFound(
            f"image {tag!r} is not where the {backend.name} backend finds it, and no Docker engine answers to "
            f"build it: {HOW_TO_GET} ({err})"
        ) from None


def build_base_image(recipe: dict = BASE_RECIPE, on_line: Callable[[str], None] = log.info) -> str:
    """Build (or find) the base image in the local Docker engine; returns its tag (the default recipe's is
    also tagged `latest`). Within `images_run_on(backend)`, an image that backend holds is not looked up in
    the engine."""
    tag = f"{BASE_REPOSITORY}:{recipe_hash(recipe)}"
    backend = _image_backend()
    if backend is not None and backend.has_image(tag):
        return tag
    client = _engine_to_build(tag)
    if not image_exists(tag):
        root = build_rootfs(recipe, on_line)
        with cache_lock(root, "import"):
            if not image_exists(tag):
                _import_rootfs(client, root, recipe, on_line)
    if recipe == BASE_RECIPE:
        client.api.tag(tag, BASE_REPOSITORY, "latest")
    return tag


def _import_rootfs(client, root: Path, recipe: dict, on_line: Callable[[str], None]) -> None:
    """Pack the root filesystem and import it into the engine as the base image."""
    archive = root.with_suffix(".tar")
    on_line(f"packing {root} into {archive}")
    with tarfile.open(archive, "w") as tar:
        for child in sorted(root.iterdir()):
            if child.name != ".harness-complete":
                tar.add(child, arcname=child.name)
    try:
        on_line(f"importing {BASE_REPOSITORY}:{recipe_hash(recipe)} into the Docker engine")
        client.api.import_image(
            src=str(archive),
            repository=BASE_REPOSITORY,
            tag=recipe_hash(recipe),
            changes=[f"ENV PATH={PATH}", f"WORKDIR {recipe['workdir']}", f"LABEL harness.base={recipe_hash(recipe)}"],
        )
    finally:
        archive.unlink(missing_ok=True)


def image_exists(tag: str) -> bool:
    """Whether the local Docker engine holds an image `tag`; within `images_run_on(backend)`, whether that
    backend can start it."""
    import docker.errors

    backend = _image_backend()
    if backend is not None:
        return backend.has_image(tag)
    try:
        _engine_to_build(tag).images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def image_size(tag: str) -> int:
    """The bytes an image adds on disk: its own layers (not its base image's, which it shares); 0 if absent."""
    import docker.errors

    from .docker_backend import docker_client

    client = docker_client()
    try:
        image = client.images.get(tag)
        history = client.api.history(image.id)
    except docker.errors.ImageNotFound:
        return 0
    own = 0
    for layer in history:  # newest first, down to the first layer of another tagged image
        if layer.get("Tags") and layer["Id"] != image.id:
            break
        own += layer.get("Size", 0)
    return own


def build_image(
    tag: str, dockerfile: str, files: dict[str, Path], labels: dict[str, str], timeout: float | None = None
) -> None:
    """Build `dockerfile` offline with `files` in its context (name in the context -> local path; Python caches
    left out). A failed build raises SandboxError with the end of the build log; so does a build whose log
    stays silent for `timeout` seconds."""
    import io

    import docker.errors
    import requests

    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        data = dockerfile.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        for name, path in files.items():
            tar.add(path, arcname=name, filter=_no_caches)
    context.seek(0)
    try:
        _engine_to_build(tag).images.build(
            fileobj=context,
            custom_context=True,
            tag=tag,
            rm=True,
            forcerm=True,
            network_mode="none",
            labels=labels,
            **({"timeout": timeout} if timeout else {}),
        )
    except (requests.exceptions.Timeout, requests.exceptions.ConnectionError):  # silent for `timeout` seconds
        if not timeout:
            raise
        raise SandboxError(f"building the image {tag} stayed silent for {timeout:g} s: stopped") from None
    except docker.errors.BuildError as err:
        # The stream's chunks carry their own line ends (a command's stderr comes in pieces of a line).
        tail = "".join(str(item.get("stream", f"{item.get('error', '')}\n")) for item in err.build_log)[-2000:]
        raise SandboxError(f"building the image {tag} failed:\n{tail}") from None
    except docker.errors.APIError as err:  # refused before any step ran: a Dockerfile the engine cannot parse
        raise SandboxError(f"building the image {tag} was refused: {err.explanation or err}") from None


def _no_caches(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    return None if "__pycache__" in info.name or info.name.endswith(".pyc") else info


def _run_streaming(command: list[str], on_line: Callable[[str], None]) -> None:
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tail: list[str] = []
    for line in process.stdout:
        on_line(line.rstrip())
        tail = (tail + [line.rstrip()])[-20:]
    if process.wait() != 0:
        raise SandboxError(f"{command[0]} failed (exit {process.returncode}):\n" + "\n".join(tail))
