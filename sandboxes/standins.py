"""Stand-ins for public base images: a Dockerfile's `FROM` resolved to a base this project builds itself.

No registry is reachable, so `FROM python:3.11-slim` cannot be pulled. Each `FROM` image is looked up
in the stand-in map, an ordered list of (pattern, base) pairs matched against `repository:tag` with
the registry host, `library/` and any `@sha256:` digest taken off (`docker.io/library/python:3.11-slim@sha256:...`
is `python:3.11-slim`); the first pattern that matches (fnmatch) names the base: a Python of
`sandboxes.images.BASES` (Debian bullseye 3.9, bookworm 3.11 or trixie 3.13), or a language's toolchain base,
which each language of `tasks.languages` registers (`node:*` is JavaScript's: trixie with Debian's Node, npm and
tsc; `golang:*` Go's, `rust:*` Rust's). An image the local Docker engine already holds
is used as it is. Add to the map with `register_standin(pattern, python)`, or with a JSON file of
`{"pattern": "python"}` named by `$HARNESS_STANDINS` (its patterns come first).

A stand-in is the base's root filesystem with the Debian packages the build asks for installed ahead
(apt in a chroot, with the host's network, as a base's builder is made), `python-is-python3`, and no
apt sources: `apt-get update` and `apt-get install` of a package that is already there then succeed
without a network, and the Dockerfile's own steps run as written in an offline build.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from dataclasses import dataclass

from .errors import SandboxError
from .images import BASES, TOOLCHAIN_BASE, base_of

STANDIN_PACKAGES = ["python-is-python3"]  # `python` is python3, as in the python:* images
STANDINS_ENV = "HARNESS_STANDINS"

# Newest first within a family; `*` matches any tag (or suffix such as -slim-bookworm).
STANDINS: list[tuple[str, str]] = [
    ("debian:bullseye*", "3.9"),
    ("debian:11*", "3.9"),
    ("debian:bookworm*", "3.11"),
    ("debian:12*", "3.11"),
    ("debian:trixie*", "3.13"),
    ("debian:13*", "3.13"),
    ("debian:stable*", "3.13"),
    ("debian:latest", "3.13"),
    ("python:3.9*", "3.9"),
    ("python:3.10*", "3.11"),
    ("python:3.11*", "3.11"),
    ("python:3.12*", "3.13"),
    ("python:3.13*", "3.13"),
    ("python:3*", "3.13"),
    ("python:latest", "3.13"),
    ("ubuntu:18.04", "3.9"),
    ("ubuntu:bionic*", "3.9"),
    ("ubuntu:20.04", "3.9"),
    ("ubuntu:focal*", "3.9"),
    ("ubuntu:22.04", "3.11"),
    ("ubuntu:jammy*", "3.11"),
    ("ubuntu:24.04", "3.13"),
    ("ubuntu:noble*", "3.13"),
    ("ubuntu:*", "3.13"),
    # Terminal-Bench's own base images
    ("laude-institute/t-bench/python-3-13:*", "3.13"),
    ("laude-institute/t-bench/ubuntu-24-04:*", "3.13"),
]
# Toolchain bases: language -> the Debian packages of its toolchain, added to the trixie base. Each language of
# tasks.languages registers its own with the images it stands in for (`register_toolchain`): node:*, golang:*, rust:*.
TOOLCHAINS: dict[str, tuple[str, ...]] = {}


@dataclass(frozen=True)
class StandIn:
    image: str  # the name the Dockerfile asked for
    key: str  # `repository:tag` as matched
    python: str  # a key of BASES: the Python of the base (a language's base is trixie's)
    pattern: str  # the map entry that matched
    language: str = ""  # a language of tasks.languages whose toolchain the base adds, or ""
    packages: tuple[str, ...] = ()  # that toolchain's Debian packages

    @property
    def base(self) -> tuple[str, tuple[str, ...]]:
        """What tells two stand-in bases apart: the Python and the toolchain packages."""
        return self.python, self.packages

    def describe(self) -> str:
        suite = BASES[self.python].recipe["suite"]
        toolchain = f"{self.language} toolchain, " if self.language else ""
        return f"{self.image} -> the Debian {suite} base ({toolchain}Python {self.python}; {self.pattern})"


def _base(name: str) -> tuple[str, str, tuple[str, ...]]:
    """(python, language, packages) of a map entry's base: a key of BASES, or a language's toolchain."""
    if name in BASES:
        return name, "", ()
    if name in TOOLCHAINS:
        return TOOLCHAIN_BASE, name, TOOLCHAINS[name]
    known = ", ".join([*BASES, *TOOLCHAINS])
    raise SandboxError(f"no base {name!r} to stand in with: the bases are {known}")


def register_toolchain(language: str, packages: tuple[str, ...], patterns: tuple[str, ...]) -> None:
    """A language's toolchain base (the trixie base plus `packages`) stands in for the images of `patterns`."""
    TOOLCHAINS[language] = tuple(packages)
    STANDINS.extend((pattern, language) for pattern in patterns if (pattern, language) not in STANDINS)


def register_standin(pattern: str, base: str) -> None:
    """Put `pattern` (fnmatch on `repository:tag`) first in the map, standing in with `base` (a Python of BASES, or
    a language)."""
    _base(base)
    STANDINS.insert(0, (pattern, base))


def image_key(image: str) -> str:
    """`repository:tag` of an image name: no registry host, no `library/` (nor `docker/library/`, the Docker
    official images' path on mirrors such as public.ecr.aws), no digest; `latest` where no tag is given."""
    name = image.split("@", 1)[0]
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        name = rest.removeprefix("docker/library/")
    name = name.removeprefix("library/")
    repository, _, tag = name.rpartition(":") if ":" in name.rsplit("/", 1)[-1] else (name, "", "latest")
    return f"{repository}:{tag}"


def standin_for(image: str) -> StandIn:
    """The stand-in of a public image, or a SandboxError that says how to add one."""
    key = image_key(image)
    for pattern, base in _user_standins() + STANDINS:
        if fnmatch.fnmatchcase(key, pattern):
            python, language, packages = _base(base)
            return StandIn(image, key, python, pattern, language, packages)
    raise SandboxError(
        f"no stand-in for the base image {image!r} ({key}): public images cannot be pulled here. "
        "Map it to a Debian base with sandboxes.standins.register_standin(PATTERN, BASE) or a JSON file "
        f'{{"PATTERN": "3.11"}} named by ${STANDINS_ENV}, or load the image into the Docker engine'
    )


def _user_standins() -> list[tuple[str, str]]:
    path = os.environ.get(STANDINS_ENV)
    if not path:
        return []
    try:
        entries = json.loads(open(path, encoding="utf-8").read())
    except (OSError, ValueError) as err:
        raise SandboxError(f"${STANDINS_ENV} ({path}) is not a readable JSON object: {err}") from None
    if not isinstance(entries, dict) or not all(isinstance(v, str) for v in entries.values()):
        raise SandboxError(
            f"${STANDINS_ENV} ({path}) must map patterns to a Python of {', '.join(BASES)} or a language"
        )
    for base in entries.values():
        _base(base)
    return list(entries.items())


def standin_recipe(standin: StandIn, packages: list[str]) -> dict:
    """The recipe of a stand-in: its base (a Python's, with its toolchain's packages) with `packages` installed ahead
    and no apt sources."""
    base = base_of(standin.python).recipe
    added = sorted(set(STANDIN_PACKAGES) | set(standin.packages) | set(packages))
    return {**base, "packages": [*base["packages"], *added], "extends": base, "apt_sources": False}


APT_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")


def check_apt_packages(packages: list[str]) -> None:
    """Debian package names only: what reaches a chroot's apt-get command line."""
    bad = [p for p in packages if not APT_PACKAGE.match(p)]
    if bad:
        raise SandboxError(f"not Debian package names: {', '.join(bad)}")
