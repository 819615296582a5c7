"""Pulling into the overlay store with no Docker engine, from a registry served on 127.0.0.1 by the test:
token auth, an index of platforms, gzip and zstd layers, and registries that misbehave."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import subprocess
import tarfile
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sandboxes import ImageNotFound, SandboxError, SandboxSpec
from sandboxes.local.registry_pull import split_reference, this_platform
from tests.sandboxes.test_overlay_backend import add_file, shell_files
from sandboxes.images import BASE_IMAGE

INDEX = "application/vnd.oci.image.index.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def layer_tar(files: dict) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in files.items():
            add_file(tar, name, data, 0o1777 if name == "tmp/" else 0o755)
    return out.getvalue()


class Registry(ThreadingHTTPServer):
    """The distribution API's reads: manifests and blobs of one repository, behind a bearer token."""

    def __init__(self, blobs: dict[str, bytes], manifests: dict[str, tuple[str, bytes]]):
        super().__init__(("127.0.0.1", 0), Handler)
        self.blobs, self.manifests = blobs, manifests
        self.cut: set[str] = set()  # blobs whose next download stops halfway
        self.served: dict[str, bytes] = {}  # what to send instead of a blob's bytes
        self.ranges: list[str] = []
        self.fetches: Counter[str] = Counter()  # blob -> downloads begun
        self.daemon_threads = True

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        registry: Registry = self.server
        if self.path.startswith("/token"):
            if self.headers.get("Authorization") != "Basic " + base64.b64encode(b"reader:secret").decode():
                return self.answer(401, b"{}")
            return self.answer(200, b'{"token": "granted"}')
        if self.headers.get("Authorization") != "Bearer granted":
            realm = f"http://{registry.host}/token"
            return self.answer(401, b"{}", {"WWW-Authenticate": f'Bearer realm="{realm}",service="test"'})
        kind, _, reference = self.path.partition("/demo/shell/")[2].partition("/")
        if kind == "manifests" and reference in registry.manifests:
            media, body = registry.manifests[reference]
            return self.answer(200, body, {"Content-Type": media})
        if kind == "blobs" and reference in registry.blobs:
            body = registry.served.get(reference, registry.blobs[reference])
            registry.fetches[reference] += 1
            start = int(self.headers["Range"].removeprefix("bytes=").rstrip("-")) if "Range" in self.headers else 0
            if start:
                registry.ranges.append(self.headers["Range"])
            if reference in registry.cut:  # promise the whole blob, send half, hang up
                registry.cut.discard(reference)
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.connection.shutdown(2)
                return
            return self.answer(206 if start else 200, body[start:])
        self.answer(404, b"{}")

    def answer(self, status: int, body: bytes, headers: dict | None = None) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def blob(blobs: dict, data: bytes, media: str) -> dict:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    blobs[digest] = data
    return {"mediaType": media, "digest": digest, "size": len(data)}


@pytest.fixture(scope="module")
def shell_layer(overlay_backend) -> bytes:
    return gzip.compress(layer_tar(shell_files(overlay_backend.store.get(BASE_IMAGE).layers[-1])), 1)


@pytest.fixture
def registry(shell_layer, tmp_path, monkeypatch):
    """An image of two layers (the shell, gzip; a file, zstd) listed in an index beside another platform's;
    then no Docker engine, an empty store and the registry's password."""
    shell = shell_layer
    extra = subprocess.run(
        ["zstd", "-q", "-c"], input=layer_tar({"opt/greeting": b"hello from zstd\n"}), capture_output=True, check=True
    ).stdout
    blobs: dict[str, bytes] = {}
    layers = [
        blob(blobs, shell, "application/vnd.oci.image.layer.v1.tar+gzip"),
        blob(blobs, extra, "application/vnd.oci.image.layer.v1.tar+zstd"),
    ]
    config = blob(blobs, json.dumps({"config": {"Env": ["PATH=/usr/bin", "FROM=registry"]}}).encode(), "config")
    manifest = json.dumps({"schemaVersion": 2, "mediaType": MANIFEST, "config": config, "layers": layers}).encode()
    digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
    system, architecture = this_platform()
    index = {
        "schemaVersion": 2,
        "mediaType": INDEX,
        "manifests": [
            {
                "digest": "sha256:" + "0" * 64,
                "mediaType": MANIFEST,
                "platform": {"os": system, "architecture": "s390x"},
            },
            {"digest": digest, "mediaType": MANIFEST, "platform": {"os": system, "architecture": architecture}},
        ],
    }
    server = Registry(blobs, {"1": (INDEX, json.dumps(index).encode()), digest: (MANIFEST, manifest)})
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    monkeypatch.setenv("HARNESS_REGISTRY_AUTH", "reader:secret")
    import sandboxes.docker_backend as engine

    monkeypatch.setattr(engine, "_client", None)
    server.layers = [layer["digest"] for layer in layers]
    yield server
    server.shutdown()


def fresh_backend():
    from sandboxes.local.overlay import OverlayBackend

    return OverlayBackend()


def test_pulled_with_a_token_resumed_after_a_cut_and_run_with_no_engine(registry, tmp_path):
    backend, image = fresh_backend(), f"{registry.host}/demo/shell:1"
    assert not backend.has_image(image)
    registry.cut.add(registry.layers[0])
    with pytest.raises(SandboxError, match="pull again to resume"):
        backend.pull(image)
    digest = backend.pull(image)  # the cut layer resumes where it stopped
    assert registry.ranges and digest.startswith("sha256:")
    assert backend.has_image(image) and fresh_backend().has_image(image)
    with fresh_backend().create(SandboxSpec(image=image, workdir="/w")) as sandbox:
        assert sandbox.exec("cat /opt/greeting; echo $FROM").output == "hello from zstd\nregistry\n"
    assert list((tmp_path / "cache" / "images" / "downloads").glob("*[0-9a-f]")) == []  # blobs go once unpacked


def test_concurrent_pulls_of_one_image_fetch_each_blob_once(registry):
    image = f"{registry.host}/demo/shell:1"
    with ThreadPoolExecutor(4) as pool:
        digests = set(pool.map(lambda _: fresh_backend().pull(image), range(4)))
    assert len(digests) == 1 and all(registry.fetches[layer] == 1 for layer in registry.layers)
    assert fresh_backend().has_image(image)


def test_a_substituted_layer_is_refused_and_nothing_of_it_kept(registry, tmp_path):
    registry.served[registry.layers[1]] = b"not the layer the manifest names"
    backend = fresh_backend()
    with pytest.raises(SandboxError, match="has the digest sha256:.*a corrupt or substituted download"):
        backend.pull(f"{registry.host}/demo/shell:1")
    assert not backend.has_image(f"{registry.host}/demo/shell:1")
    assert [p.name for p in (tmp_path / "cache" / "images" / "downloads").iterdir() if "lock" not in p.name] == []


def test_a_corrupt_layer_with_the_right_digest_fails_to_unpack(registry):
    corrupt = gzip.compress(b"no tar in here")[:-6]  # a truncated gzip stream, named by its own digest
    digest = "sha256:" + hashlib.sha256(corrupt).hexdigest()
    manifest = json.loads(registry.manifests[next(k for k in registry.manifests if k != "1")][1])
    manifest["layers"][1] = {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": digest}
    registry.blobs[digest] = corrupt
    registry.manifests["2"] = (MANIFEST, json.dumps(manifest).encode())
    with pytest.raises(SandboxError, match="unpacking a layer of .* failed"):
        fresh_backend().pull(f"{registry.host}/demo/shell:2")


def test_wrong_credentials_and_a_missing_platform_are_clear_errors(registry, monkeypatch):
    monkeypatch.setenv("HARNESS_REGISTRY_AUTH", "reader:wrong")
    with pytest.raises(SandboxError, match="refused a token .* HARNESS_REGISTRY_AUTH"):
        fresh_backend().pull(f"{registry.host}/demo/shell:1")
    monkeypatch.setenv("HARNESS_REGISTRY_AUTH", "reader:secret")
    index = json.loads(registry.manifests["1"][1])
    index["manifests"] = index["manifests"][:1]
    registry.manifests["other"] = (INDEX, json.dumps(index).encode())
    with pytest.raises(ImageNotFound, match=r"has no image for linux/.* \(it offers linux/s390x\)"):
        fresh_backend().pull(f"{registry.host}/demo/shell:other")
    with pytest.raises(ImageNotFound, match="has no demo/shell"):
        fresh_backend().pull(f"{registry.host}/demo/shell:absent")


def test_references_get_dockers_defaults():
    assert split_reference("python:3.11") == ("registry-1.docker.io", "library/python", "3.11")
    assert split_reference("swebench/sweb.eval.x86_64.a_1776_b-1") == (
        "registry-1.docker.io",
        "swebench/sweb.eval.x86_64.a_1776_b-1",
        "latest",
    )
    assert split_reference("127.0.0.1:5000/demo/shell@sha256:" + "a" * 64) == (
        "127.0.0.1:5000",
        "demo/shell",
        "sha256:" + "a" * 64,
    )
