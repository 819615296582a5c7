"""Sdists turned into wheels for the base's Python, before the offline image build.

The image installs from a wheelhouse of wheels only: `build_wheels` replaces each sdist in it by a
wheel built for the base's Python. That is done on the host where the base's Python is the host's, or
where the sdist builds a pure-Python wheel; an sdist that compiles code for another Python (its archive
holds C, C++, Cython, Fortran or Rust sources, or its backend compiles) is built by the base's own
Python instead, in a throwaway container of the base's builder (the base plus a compiler), offline.
Each sdist is built once per Python: the wheels built are kept in a host cache, by the sdist's file
name and a hash of its bytes, for the next wheelhouse that pins it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tarfile
import tempfile
import tomllib
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name
from sandboxes.images import Base, build_base_image, builder_recipe, cache_dir

from .build_backend import DEFAULT_BUILD_REQUIRES, declared_backend
from .errors import SynthError
from .host_pip import for_python, host_python, pinned, pip, quote, timed
from .metadata import read_ini, read_pyproject, setup_py_literals

SDIST_SUFFIXES = (".tar.gz", ".zip", ".tar.bz2")


def _release(filename: str) -> tuple[str, str]:
    """(normalised project name, version) of an sdist or wheel file name."""
    stem = next((filename[: -len(s)] for s in (*SDIST_SUFFIXES, ".whl") if filename.endswith(s)), filename)
    name, _, version = stem.partition("-") if filename.endswith(".whl") else stem.rpartition("-")
    return re.sub(r"[-_.]+", "_", name).lower(), version.split("-")[0]


def _built_wheels(python: str) -> Path:
    """Wheels built from sdists for the base's Python (cffi 1.15.0 for Python 3.9, ...), one folder per sdist
    and Python: a release built once serves every wheelhouse for that Python that pins it."""
    return cache_dir() / "synth" / "built-wheels" / f"py{python.replace('.', '')}"


def _kept(sdist: Path, python: str) -> Path:
    """The folder of the wheels built from `sdist` for `python`, named by the sdist's file name and a hash of
    its bytes: a re-uploaded or locally built sdist of the same name is another sdist."""
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    return _built_wheels(python) / f"{sdist.name}-{digest[:16]}"


def _reuse_built_wheel(sdist: Path, wheelhouse: Path, python: str) -> bool:
    kept = list(_kept(sdist, python).glob("*.whl"))
    for wheel in kept:
        shutil.copy2(wheel, wheelhouse / wheel.name)
    return bool(kept)


def _keep_built_wheels(sdists: list[Path], wheelhouse: Path, python: str) -> None:
    wheels = {_release(w.name): w for w in wheelhouse.glob("*.whl")}
    for sdist in sdists:
        wheel = wheels.get(_release(sdist.name))
        if wheel is not None:
            folder = _kept(sdist, python)
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copy2(wheel, folder / wheel.name)


def build_wheels(
    project: Path,
    name: str,
    wheelhouse: Path,
    base: Base,
    before: str | None,
    version: str,
    on_step: Callable[[str], None],
) -> None:
    """Replace the sdists in `wheelhouse` by wheels for the base's Python: those built before for that
    Python are reused from the cache, the rest are built (`_build_sdists`) and kept there."""
    sdists = [p for p in wheelhouse.iterdir() if p.name.endswith(SDIST_SUFFIXES)]
    unbuilt = [p for p in sdists if not _reuse_built_wheel(p, wheelhouse, base.python)]
    if unbuilt:
        _build_sdists(project, name, unbuilt, wheelhouse, base, before, version, on_step)
        _keep_built_wheels(unbuilt, wheelhouse, base.python)
    for sdist in sdists:
        sdist.unlink()


def _build_sdists(
    project: Path,
    name: str,
    sdists: list[Path],
    wheelhouse: Path,
    base: Base,
    before: str | None,
    version: str,
    on_step: Callable[[str], None],
) -> None:
    """Build `sdists` into wheels in `wheelhouse` for the base's Python.

    Where the host's Python is the base's, on the host, in one pip run (the build backends are fetched once).
    For another Python, an sdist whose archive shows that it compiles code (`_compiles_code`) is built by the
    base's own Python, in a container of the base's builder, offline (`_build_in_base`). The others are built
    on the host first, and a pure-Python wheel (`-none-any`) serves; the rest, a wheel for the host's Python
    or an sdist the host could not build, is built again by the base's Python."""
    same = base.python == host_python()
    on_host = sdists if same else [p for p in sdists if not _compiles_code(p)]
    if on_host:
        with timed(on_step, f"{name}: building wheels of {', '.join(p.name for p in on_host)}"):
            try:
                pip(project, "wheel", "--no-deps", "-w", wheelhouse, *on_host, version=version)
            except SynthError as err:
                if same:
                    raise
                on_step(f"{name}: the host could not build every sdist; the base's Python will: {str(err)[-300:]}")
    if same:
        return
    wheels = {_release(w.name): w for w in wheelhouse.glob("*.whl")}
    again = []
    for sdist in sdists:
        wheel = wheels.get(_release(sdist.name))
        if wheel is None or not wheel.name.endswith("-none-any.whl"):
            if wheel is not None:
                wheel.unlink()  # built for the host's Python
            again.append(sdist)
    if again:
        with timed(on_step, f"{name}: building {', '.join(p.name for p in again)} with Python {base.python}"):
            _build_in_base(again, wheelhouse, base, before, on_step)


COMPILED_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".pyx", ".f", ".f90", ".rs")
COMPILING_BACKENDS = {"meson-python", "scikit-build-core", "maturin", "setuptools-rust"}
TEST_FOLDER = re.compile(r"(^|/)tests?/", re.IGNORECASE)


def _compiles_code(sdist: Path) -> bool:
    """Whether building `sdist` compiles code, as its archive tells without unpacking it: a C, C++, Cython,
    Fortran or Rust source among its files outside test folders (pycparser's tests hold C files); a backend
    that compiles among its pyproject.toml's build requirements; or extension modules declared where their
    sources may be made at build time (setup.py's `ext_modules`, `Extension(`, `cffi_modules`, `cythonize`,
    `mypycify`; pyproject's `[tool.setuptools] ext-modules`). An archive that cannot be read counts as not
    compiling: the host tries it, and says why not."""
    try:
        names, top = _names_and_build_files(sdist)
    except (OSError, tarfile.TarError, zipfile.BadZipFile):
        return False
    if any(n.lower().endswith(COMPILED_SUFFIXES) and not TEST_FOLDER.search(n) for n in names):
        return True
    if EXTENSIONS_DECLARED.search(top.get("setup.py", "")):
        return True
    try:
        pyproject = tomllib.loads(top.get("pyproject.toml", ""))
    except tomllib.TOMLDecodeError:
        return False
    if pyproject.get("tool", {}).get("setuptools", {}).get("ext-modules"):
        return True
    requires = pyproject.get("build-system", {}).get("requires", [])
    return any(canonicalize_name(re.match(r"[A-Za-z0-9._-]*", str(r)).group()) in COMPILING_BACKENDS for r in requires)


EXTENSIONS_DECLARED = re.compile(r"\b(ext_modules|cffi_modules|Extension\(|cythonize\(|mypycify\()")
BUILD_FILES = ("pyproject.toml", "setup.py")


def _names_and_build_files(sdist: Path) -> tuple[list[str], dict[str, str]]:
    """The file names in an sdist archive (.tar.*, .zip), and the texts of its top folder's BUILD_FILES."""
    if sdist.name.endswith(".zip"):
        with zipfile.ZipFile(sdist) as archive:
            names = archive.namelist()
            return names, {name: archive.read(path).decode(errors="replace") for name, path in _top(names).items()}
    with tarfile.open(sdist) as archive:
        names = archive.getnames()
        members = {name: archive.extractfile(path) for name, path in _top(names).items()}
        return names, {name: member.read().decode(errors="replace") for name, member in members.items() if member}


def _top(names: list[str]) -> dict[str, str]:
    """BUILD_FILES found in the archive's top folder: file name -> member name."""
    return {m.split("/")[1]: m for m in names if re.fullmatch(r"[^/]+/[^/]+", m) and m.split("/")[1] in BUILD_FILES}


BUILD_DIR = "/tmp/harness-build"  # in the builder's container
ASK_BACKEND = Path(__file__).with_name("ask_backend.py")


@dataclass(frozen=True)
class SdistBackend:
    """An sdist's build backend, as its source declares it."""

    backend: str
    requires: list[str]  # `build-system.requires` (setuptools and wheel where none), and `setup_requires`
    backend_path: list[str]
    source: str  # the unpacked source, relative to the build folder


def _build_in_base(
    sdists: list[Path], wheelhouse: Path, base: Base, before: str | None, on_step: Callable[[str], None]
) -> None:
    """Build `sdists` into wheels in `wheelhouse` with the base's Python: `pip wheel --no-index` in a throwaway
    container of the base's builder (`builder_recipe`: the base plus a compiler and the Python headers), with
    no network. Build isolation installs what each sdist's backend needs: what its source declares
    (`_sdist_backend`), and what the backend names when asked in the container (`_ask_in_builder`), each
    resolved on the host for the base's Python (as of `before`) and downloaded beforehand: only those go in,
    not the whole wheelhouse."""
    from sandboxes import SandboxSpec
    from sandboxes.docker_backend import DockerBackend

    builder = build_base_image(builder_recipe(base.recipe), on_step)
    with tempfile.TemporaryDirectory(prefix="harness-build-") as scratch:
        work = Path(scratch)
        requires = work / "requires"
        requires.mkdir()
        backends = {sdist: _sdist_backend(sdist, work) for sdist in sdists}
        pins = sorted({pin for b in backends.values() for pin in pinned(work, b.requires, before, base.python)})
        install = ""
        if base.pip:  # the suite's pip will not do: the wheelhouse's is installed first, as in project images
            pips = list(wheelhouse.glob("pip-*.whl"))
            for wheel in pips:
                shutil.copy2(wheel, requires / wheel.name)
            pins += [] if pips else [base.pip]
            install = f"python3 -m pip install -q --no-index --find-links requires {quote(base.pip)} && "
        pip(work, "download", "--no-deps", *for_python(base.python), "-d", requires, *pins)
        for sdist in sdists:
            shutil.copy2(sdist, requires / sdist.name)
        shutil.copy2(ASK_BACKEND, work / ASK_BACKEND.name)
        spec = SandboxSpec(
            image=builder,
            workdir="/tmp",
            cpus=float(os.cpu_count() or 1),
            memory="4g",
            wall_time=3600.0,
        )
        with DockerBackend().create(spec) as sandbox:
            sandbox.upload(work, BUILD_DIR)
            if install and not (done := sandbox.exec(f"cd {BUILD_DIR} && {install}true", timeout=600)).ok:
                raise SynthError(f"installing {base.pip} in the builder failed: {done.output.strip()[-1500:]}")
            asked = sorted(
                set(_ask_in_builder(sandbox, backends, on_step)) - {r for b in backends.values() for r in b.requires}
            )
            if asked:
                on_step(f"the build backends also asked for {', '.join(asked)}")
                more = work / "more"
                more.mkdir()
                pip(
                    work,
                    "download",
                    "--no-deps",
                    *for_python(base.python),
                    "-d",
                    more,
                    *pinned(work, asked, before, base.python),
                )
                sandbox.upload(more, f"{BUILD_DIR}/requires")
            command = (
                f"cd {BUILD_DIR} && python3 -m pip wheel -q --no-deps --no-cache-dir --no-index --find-links requires "
                f"-w out {' '.join(quote(f'requires/{p.name}') for p in sdists)}"
            )
            done = sandbox.exec(command, timeout=3000)
            if not done.ok:
                raise SynthError(
                    f"building {', '.join(p.name for p in sdists)} with Python {base.python} failed: "
                    f"{done.message or done.output.strip()[-1500:]}"
                )
            sandbox.download(f"{BUILD_DIR}/out", work / "out")
        for wheel in (work / "out").glob("*.whl"):
            on_step(f"built {wheel.name} with Python {base.python}")
            shutil.move(wheel, wheelhouse / wheel.name)


def _ask_in_builder(sandbox, backends: dict[Path, SdistBackend], on_step: Callable[[str], None]) -> list[str]:
    """What each sdist's backend names when asked for its wheel's build requirements (PEP 517
    `get_requires_for_build_wheel`), asked by the base's Python in the builder's container with the declared
    requirements installed (offline) and, as in pip's isolated builds, without the base's own site-packages
    (`-S`: bullseye's importlib_metadata 1.x would stand in for the one setuptools brings). A backend that
    cannot be asked is reported and left to `pip wheel`."""
    asked = []
    for number, (sdist, backend) in enumerate(backends.items()):
        site = f"ask/site-{number}"
        command = (
            f"cd {BUILD_DIR} && python3 -m pip install -q --no-index --find-links requires --target {site} "
            f"{' '.join(map(quote, backend.requires))} && PYTHONPATH={BUILD_DIR}/{site} python3 -S {ASK_BACKEND.name} "
            f"{quote(f'{BUILD_DIR}/{backend.source}')} {quote(backend.backend)} {quote(json.dumps(backend.backend_path))}"
        )
        done = sandbox.exec(command, timeout=600)
        answer = [line for line in done.output.splitlines() if line.startswith("ASKED ")]
        if not done.ok or not answer:
            on_step(f"could not ask the build backend of {sdist.name}: {done.output.strip()[-300:]}")
            continue
        asked += json.loads(answer[-1].removeprefix("ASKED "))
    return asked


def _sdist_backend(sdist: Path, scratch: Path) -> SdistBackend:
    """An sdist's backend as its source declares it: `build-system` (setuptools and wheel where it declares
    none), and setuptools' `setup_requires` where setup.py or setup.cfg names them. The source stays unpacked
    in `scratch`, for the builder to ask the backend in."""
    unpacked = scratch / "sources" / sdist.name
    shutil.unpack_archive(sdist, unpacked)
    tops = [p for p in unpacked.iterdir() if p.is_dir()]
    root = tops[0] if len(tops) == 1 else unpacked
    backend, requires, backend_path = declared_backend(read_pyproject(root).get("build-system", {}))
    setup_requires = setup_py_literals(root).get("setup_requires") or []
    setup_requires = [setup_requires] if isinstance(setup_requires, str) else list(setup_requires)
    declared = read_ini(root / "setup.cfg").get("options", "setup_requires", fallback="")
    setup_requires += [line.strip() for line in declared.splitlines() if line.strip()]
    requires = sorted({*requires, *DEFAULT_BUILD_REQUIRES, *map(str, setup_requires)})
    return SdistBackend(backend, requires, backend_path, str(root.relative_to(scratch)))
