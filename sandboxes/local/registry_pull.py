"""Pulling an image from a registry straight into the overlay backend's store: no Docker engine.

The registry's HTTP API (distribution spec v2): the manifest by tag or digest (an index or manifest
list resolves to this machine's platform), then the config and each layer as blobs. Auth as
registries ask for it: a `401` with `WWW-Authenticate: Bearer realm=...` gets a token from the realm
(anonymously, or with the credentials of HARNESS_REGISTRY_AUTH=`user:password` or of the registry's
entry in ~/.docker/config.json), `Basic` gets those credentials. Every blob is checked against its
digest before it is used, so a corrupt or substituted layer is an error, never an image.

Blobs download into `<cache>/images/downloads/<digest>` under a lock shared by every process (two
pulls of images that share a layer fetch it once), and a download cut off resumes with a `Range`
request where it stopped. Layers may be plain, gzip or zstd tars (GNU tar unpacks all three). The
image is recorded under its config digest, as the engine names it, and the name is remembered, so
`create` and `has_image` answer with no engine.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import platform
import re
from collections.abc import Callable
from pathlib import Path

from ..cache_lock import cache_lock
from ..errors import ImageNotFound, SandboxError
from .image_store import ImageStore, digest_hex

MANIFESTS = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
TIMEOUT = 60  # seconds without a byte before a download counts as stalled (it resumes on the next pull)
ARCHITECTURES = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "ppc64le": "ppc64le", "s390x": "s390x"}


def split_reference(image: str) -> tuple[str, str, str]:
    """(registry host, repository, tag or digest) of `image`, Docker's defaults filled in."""
    rest, at, digest = image.partition("@")
    head, _, last = rest.rpartition("/")
    tag = "latest"
    if ":" in last:
        last, _, tag = last.partition(":")
    path = f"{head}/{last}" if head else last
    first, _, remainder = path.partition("/")
    if remainder and ("." in first or ":" in first or first == "localhost"):
        host, repository = first, remainder
    else:
        host, repository = "registry-1.docker.io", path if "/" in path else f"library/{path}"
    return host, repository, digest if at else tag


class Registry:
    """One registry's HTTP API, with the token or credentials it asks for."""

    def __init__(self, host: str, repository: str):
        import requests

        self.session = requests.Session()
        self.host, self.repository = host, repository
        local = host.startswith(("127.", "localhost")) or os.environ.get("HARNESS_REGISTRY_HTTP") == host
        self.base = f"{'http' if local else 'https'}://{host}/v2/{repository}"

    def get(self, path: str, headers: dict | None = None, stream: bool = False):
        import requests

        url = f"{self.base}/{path}"
        try:
            response = self.session.get(url, headers=headers, stream=stream, timeout=TIMEOUT)
            if response.status_code == 401:
                self._authenticate(response.headers.get("WWW-Authenticate", ""))
                response = self.session.get(url, headers=headers, stream=stream, timeout=TIMEOUT)
        except requests.RequestException as err:
            raise SandboxError(f"registry {self.host} did not answer for {self.repository}: {err}") from None
        if response.status_code == 401:
            raise SandboxError(
                f"registry {self.host} refused {self.repository} (401 after authenticating): set "
                "HARNESS_REGISTRY_AUTH=user:password, or `docker login` writes ~/.docker/config.json"
            )
        if response.status_code == 404:
            raise ImageNotFound(f"registry {self.host} has no {self.repository} {path.rpartition('/')[2]}")
        if response.status_code >= 400:
            raise SandboxError(f"registry {self.host} answered {response.status_code} for {self.repository}/{path}")
        return response

    def _authenticate(self, challenge: str) -> None:
        scheme, _, params = challenge.partition(" ")
        credentials = _credentials(self.host)
        if scheme.lower() == "basic":
            if credentials is None:
                raise SandboxError(f"registry {self.host} wants a password: set HARNESS_REGISTRY_AUTH=user:password")
            self.session.auth = credentials
            return
        fields = dict(re.findall(r'(\w+)="([^"]*)"', params))
        if scheme.lower() != "bearer" or "realm" not in fields:
            raise SandboxError(f"registry {self.host} asks for an authentication this client lacks: {challenge!r}")
        query = {key: fields[key] for key in ("service", "scope") if key in fields}
        query.setdefault("scope", f"repository:{self.repository}:pull")
        import requests

        try:
            answer = requests.get(fields["realm"], params=query, auth=credentials, timeout=TIMEOUT)
        except requests.RequestException as err:
            raise SandboxError(f"the token service of {self.host} did not answer: {err}") from None
        if answer.status_code != 200:
            raise SandboxError(
                f"the token service of {self.host} refused a token for {self.repository} ({answer.status_code}): "
                "check HARNESS_REGISTRY_AUTH=user:password or ~/.docker/config.json"
            )
        body = answer.json()
        token = body.get("token") or body.get("access_token")
        if not token:
            raise SandboxError(f"the token service of {self.host} answered without a token")
        self.session.headers["Authorization"] = f"Bearer {token}"


def _credentials(host: str) -> tuple[str, str] | None:
    """HARNESS_REGISTRY_AUTH (`user:password`), else the host's entry in ~/.docker/config.json."""
    given = os.environ.get("HARNESS_REGISTRY_AUTH")
    if given:
        user, _, password = given.partition(":")
        return user, password
    try:
        auths = json.loads((Path.home() / ".docker" / "config.json").read_text()).get("auths", {})
    except (OSError, ValueError):
        return None
    for key in (host, f"https://{host}", "https://index.docker.io/v1/" if host == "registry-1.docker.io" else ""):
        if key in auths and auths[key].get("auth"):
            user, _, password = base64.b64decode(auths[key]["auth"]).decode().partition(":")
            return user, password
    return None


def this_platform() -> tuple[str, str]:
    machine = platform.machine()
    return "linux", ARCHITECTURES.get(machine, machine)


def pull_into_store(
    image: str, store: ImageStore | None = None, on_bytes: Callable[[int, int], None] = lambda done, total: None
) -> str:
    """Pull `image` into the overlay store (layers already there are not fetched); return its digest (its
    config's, as the Docker engine names it). `on_bytes(done, total)` hears the progress of the layers."""
    store = store or ImageStore()
    host, repository, reference = split_reference(image)
    registry = Registry(host, repository)
    manifest = _manifest(registry, reference)
    config_digest = manifest["config"]["digest"]
    downloads = store.root / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    config_blob = downloads / digest_hex(config_digest)
    with cache_lock(config_blob, "download"):
        _download(registry, config_digest, manifest["config"].get("size", 0), config_blob)
        config = json.loads(config_blob.read_bytes())
        config_blob.unlink()  # the image record keeps what sandboxes need of it
    layers = manifest["layers"]
    total, done = sum(layer.get("size", 0) for layer in layers), 0
    stored = []
    for layer in layers:
        layer_hex = digest_hex(layer["digest"])
        blob = downloads / layer_hex
        with cache_lock(blob, "download"):  # a second pull of the same layer waits, then finds it stored
            if not store.has_layer(layer_hex):
                _download(registry, layer["digest"], layer.get("size", 0), blob)
                store.store_layer(blob, layer_hex, image)
                blob.unlink()
        stored.append(layer_hex)
        done += layer.get("size", 0)
        on_bytes(done, total)
    store.add_image(image, config_digest, stored, config.get("config") or {})
    return config_digest


def _manifest(registry: Registry, reference: str) -> dict:
    """The image manifest of `reference`; from an index, the one for this machine's platform."""
    response = registry.get(f"manifests/{reference}", {"Accept": ", ".join(MANIFESTS)})
    body = response.content
    if reference.startswith("sha256:") and "sha256:" + hashlib.sha256(body).hexdigest() != reference:
        raise SandboxError(f"registry {registry.host} sent a manifest for {reference} whose digest differs")
    manifest = json.loads(body)
    if "manifests" not in manifest:
        return manifest
    system, architecture = this_platform()
    for entry in manifest["manifests"]:
        wanted = entry.get("platform") or {}
        if wanted.get("os") == system and wanted.get("architecture") == architecture:
            return _manifest(registry, entry["digest"])
    offered = sorted(f"{(e.get('platform') or {}).get('os')}/{(e.get('platform') or {}).get('architecture')}"
                     for e in manifest["manifests"])  # fmt: skip
    raise ImageNotFound(
        f"{registry.repository}:{reference} has no image for {system}/{architecture} (it offers {', '.join(offered)})"
    )


def _download(registry: Registry, digest: str, size: int, target: Path) -> None:
    """Fetch the blob `digest` into `target` (resuming `<target>.download` where an earlier try stopped) and
    check it against its digest. The caller holds the blob's lock."""
    partial = target.with_name(target.name + ".download")
    have = partial.stat().st_size if partial.exists() else 0
    response = registry.get(f"blobs/{digest}", {"Range": f"bytes={have}-"} if have else None, stream=True)
    if response.status_code != 206:  # the registry sends it whole
        have = 0
    import requests

    try:
        with open(partial, "ab" if have else "wb") as out:
            for chunk in response.iter_content(1 << 16):  # small: a cut loses at most one
                out.write(chunk)
    except (requests.RequestException, OSError) as err:
        raise SandboxError(
            f"downloading {digest[:19]} from {registry.host} stopped at {partial.stat().st_size} of {size or '?'}"
            f" bytes ({err}); pull again to resume"
        ) from None
    with open(partial, "rb") as stream:
        got = "sha256:" + hashlib.file_digest(stream, "sha256").hexdigest()
    if got != digest:
        partial.unlink()
        raise SandboxError(
            f"the blob {digest} of {registry.repository} from {registry.host} has the digest {got}: "
            "a corrupt or substituted download, removed (pull again; if it persists, the registry is at fault)"
        )
    partial.rename(target)
