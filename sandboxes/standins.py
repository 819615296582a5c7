"""Stand-ins for public base images: a Dockerfile's `FROM` resolved to a base this project builds itself.

No registry is reachable, so `FROM python:3.11-slim` cannot be pulled. Each `FROM` image is looked up
in the stand-in map, an ordered list of (pattern, Python) pairs matched against `repository:tag` with
the registry host, `library/` and any `@sha256:` digest taken off (`docker.io/library/python:3.11-slim@sha256:...`
is `python:3.11-slim`); the first pattern that matches (fnmatch) names the base (`sandboxes.images.BASES`):
Debian bullseye (3.9), bookworm (3.11) or trixie (3.13). An image the local Docker engine already holds
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
from .images import BASES, base_of

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


@dataclass(frozen=True)
class StandIn:
    image: str  # the name the Dockerfile asked for
    key: str  # `repository:tag` as matched
    python: str  # a key of BASES
    pattern: str  # the map entry that matched

    def describe(self) -> str:
        return f"{self.image} -> the Debian {BASES[self.python].recipe['suite']} base (Python {self.python}; {self.pattern})"


def register_standin(pattern: str, python: str) -> None:
    """Put `pattern` (fnmatch on `repository:tag`) first in the map, standing in with the base of `python`."""
    base_of(python)
    STANDINS.insert(0, (pattern, python))


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
    for pattern, python in _user_standins() + STANDINS:
        if fnmatch.fnmatchcase(key, pattern):
            return StandIn(image, key, python, pattern)
    raise SandboxError(
        f"no stand-in for the base image {image!r} ({key}): public images cannot be pulled here. "
        "Map it to a Debian base with sandboxes.standins.register_standin(PATTERN, PYTHON) or a JSON file "
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
    if not isinstance(entries, dict) or not all(isinstance(v, str) and v in BASES for v in entries.values()):
        raise SandboxError(f"${STANDINS_ENV} ({path}) must map patterns to one of {', '.join(BASES)}")
    return list(entries.items())


def standin_recipe(python: str, packages: list[str]) -> dict:
    """The recipe of a stand-in: the base of `python` with `packages` installed ahead and no apt sources."""
    base = base_of(python).recipe
    added = sorted(set(STANDIN_PACKAGES) | set(packages))
    return {**base, "packages": [*base["packages"], *added], "extends": base, "apt_sources": False}


APT_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")


def check_apt_packages(packages: list[str]) -> None:
    """Debian package names only: what reaches a chroot's apt-get command line."""
    bad = [p for p in packages if not APT_PACKAGE.match(p)]
    if bad:
        raise SandboxError(f"not Debian package names: {', '.join(bad)}")
