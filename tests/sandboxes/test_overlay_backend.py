"""What only the overlay backend does: images unpacked once, copy-on-write layers, bad images, rootless runs.

The behaviour every backend shares is in test_contract.py.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from sandboxes import ImageNotFound, SandboxError, SandboxSpec
from sandboxes.images import BASE_IMAGE
from tests.conftest import ROOT, require

SPEC = SandboxSpec(image=BASE_IMAGE, memory="512m", pids=128, wall_time=300)


@pytest.fixture
def private_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def leftovers(cache: Path) -> list[str]:
    """Sandboxes, snapshots and half-made layers left in the cache."""
    found = [str(p.relative_to(cache)) for p in cache.glob("*/*") if p.parent.name != "images"]
    return [name for name in found if not name.startswith("images/")] + [
        p.name for p in cache.glob("images/layers/*.partial-*")
    ]


def add_file(tar: tarfile.TarFile, name: str, data: bytes | Path, mode: int = 0o644) -> None:
    """A file (bytes), a symlink (a Path: its target) or, for a name ending in '/', a folder."""
    info = tarfile.TarInfo(name.rstrip("/"))
    info.mode = mode
    if isinstance(data, Path):
        info.type, info.linkname = tarfile.SYMTYPE, str(data)
    elif name.endswith("/"):
        info.type = tarfile.DIRTYPE
    else:
        info.size = len(data)
    tar.addfile(info, io.BytesIO(data) if info.isfile() else None)


def image_archive(path: Path, layers: list[dict[str, bytes | Path] | bytes], config: dict) -> Path:
    """A `docker save` archive: one tar per layer (name -> content as for `add_file`, or the layer's raw
    bytes), the image config, the manifest."""
    with tarfile.open(path, "w") as outer:
        names = []
        for number, files in enumerate(layers):
            if isinstance(files, dict):
                layer = io.BytesIO()
                with tarfile.open(fileobj=layer, mode="w") as tar:
                    for name, data in files.items():
                        add_file(tar, name, data, 0o1777 if name == "tmp/" else 0o755)
                files = layer.getvalue()
            names.append(f"layer{number}/layer.tar")
            add_file(outer, names[-1], files)
        add_file(outer, "config.json", json.dumps({"config": config}).encode())
        add_file(outer, "manifest.json", json.dumps([{"Config": "config.json", "Layers": names}]).encode())
    return path


def oci_archive(path: Path, archive: Path) -> Path:
    """The image of a `docker save` archive as an OCI image layout, its layers gzipped (as registries hold them)."""
    blobs: dict[str, bytes] = {}

    def blob(data: bytes) -> dict:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return {"digest": digest, "size": len(data)}

    with tarfile.open(archive) as saved:
        manifest = json.loads(saved.extractfile("manifest.json").read())[0]
        layers = [blob(gzip.compress(saved.extractfile(name).read())) for name in manifest["Layers"]]
        config = blob(saved.extractfile(manifest["Config"]).read())
    image = blob(json.dumps({"schemaVersion": 2, "config": config, "layers": layers}).encode())
    with tarfile.open(path, "w") as tar:
        add_file(tar, "oci-layout", b'{"imageLayoutVersion": "1.0.0"}')
        add_file(tar, "index.json", json.dumps({"schemaVersion": 2, "manifests": [image]}).encode())
        for digest, data in blobs.items():
            add_file(tar, "blobs/sha256/" + digest.partition(":")[2], data)
    return path


def test_layers_are_unpacked_once_and_each_sandbox_writes_only_its_own(overlay_backend):
    image = overlay_backend.store.get(BASE_IMAGE)
    assert image.digest.startswith("sha256:") and any(
        (layer / "usr" / "bin" / "bash").exists() for layer in image.layers
    )
    assert image.env["PATH"].startswith("/usr/local/sbin")  # the image's Env, from its config
    with overlay_backend.create(SPEC) as first, overlay_backend.create(SPEC) as second:
        first.exec("echo mine > /etc/motd && rm /usr/bin/patch && mkdir -p /opt/new && echo 1 > /opt/new/f")
        assert second.exec("cat /etc/motd; command -v patch").output.strip().endswith("/usr/bin/patch")
        assert first.exec("cat /etc/motd; command -v patch || echo gone").output == "mine\ngone\n"
        assert any(
            (layer / "usr" / "bin" / "patch").exists() for layer in image.layers
        )  # shared layers are never written
        upper = first.dir / "upper"
        written = sorted(str(p.relative_to(upper)) for p in upper.rglob("*") if not p.is_dir())
        assert {"etc/motd", "usr/bin/patch", "opt/new/f"} <= set(written) and len(written) < 20
        assert (upper / "usr" / "bin" / "patch").stat().st_size == 0  # a whiteout, not a copy


def test_first_use_takes_the_engines_own_layers_in_place(overlay_backend, private_cache):
    """As root on the engine's host, an image's layers are the engine's overlay2 folders (no `docker save`)."""
    from sandboxes.local.image_store import ImageStore

    require(os.geteuid() == 0, "the engine's layer store is readable by root only")
    image = ImageStore().get(BASE_IMAGE)
    assert all(layer.is_symlink() and layer.resolve().name == "diff" for layer in image.layers)
    assert (image.layers[-1] / "usr" / "bin" / "bash").exists()


def test_snapshots_stand_alone_when_their_parent_is_removed(overlay_backend):
    with overlay_backend.create(SPEC) as sandbox:
        sandbox.exec("cd /etc && echo one > one.txt && rm -f motd && export STAGE=1")
        first = sandbox.snapshot()
    try:
        [fork] = overlay_backend.fork(first, 1)
        with fork:
            fork.exec("echo two > two.txt && export STAGE=2")
            second = fork.snapshot()
    finally:
        overlay_backend.remove_snapshot(first)
    try:
        [grandchild] = overlay_backend.fork(second, 1)
        with grandchild:
            result = grandchild.exec("pwd; cat one.txt two.txt; ls /etc/motd 2>&1 | grep -c 'No such'; echo $STAGE")
            assert result.output == "/etc\none\ntwo\n1\n2\n"
    finally:
        overlay_backend.remove_snapshot(second)


def test_read_only_root_and_a_localhost_like_dockers(overlay_backend):
    """spec.read_only: only the workdir and /tmp take writes (into the sandbox's own layer). /etc/hosts is
    Docker's, so a test server on "localhost" starts in images that have none (as the base image)."""
    spec = dataclasses.replace(SPEC, workdir="/srv/work", read_only=True)
    with overlay_backend.create(spec) as sandbox:
        result = sandbox.exec(
            "touch /usr/x 2>&1; touch /srv/work/a /tmp/b && echo wrote; "
            "python3 -c \"import socket; socket.create_server(('localhost', 0)); print('served')\""
        )
        assert result.output.splitlines() == ["touch: cannot touch '/usr/x': Read-only file system", "wrote", "served"]
        with pytest.raises(SandboxError, match="only /srv/work, /tmp are writable"):
            sandbox.write_file("/etc/motd", "x")
        assert (sandbox.dir / "upper" / "srv" / "work" / "a").exists() and (
            sandbox.dir / "upper" / "tmp" / "b"
        ).exists()


def test_image_archives_docker_save_and_oci_layout(overlay_backend, tmp_path, private_cache):
    """Images handed over as files: the config's Env and User honoured, layers and deletions applied in order."""
    from sandboxes.local.overlay import OverlayBackend

    base = overlay_backend.store.get(BASE_IMAGE).layers[-1]
    saved = image_archive(
        tmp_path / "saved.tar",
        [
            {**shell_files(base), "etc/motd": b"old\n", "opt/keep/a": b"a\n", "opt/drop/b": b"b\n"},
            {"etc/.wh.motd": b"", "opt/drop/.wh..wh..opq": b"", "opt/drop/c": b"c\n"},
        ],
        {"Env": ["PATH=/usr/bin", "FLAVOUR=saved"], "User": "nobody"},
    )
    backend = OverlayBackend()
    for archive in (saved, oci_archive(tmp_path / "oci.tar", saved)):
        with backend.create(SandboxSpec(image=str(archive), workdir="/w")) as sandbox:
            listing = sandbox.exec("id -u; echo $FLAVOUR; cat /opt/keep/a /opt/drop/*; test -e /etc/motd || echo gone")
            assert listing.output.split() == ["65534", "saved", "a", "c", "gone"], listing.output
    assert len(list((private_cache / "images" / "layers").iterdir())) == 4  # two per format: gzip changes the digests


def test_missing_image_is_a_clear_error_and_leaves_nothing(overlay_backend, private_cache):
    from sandboxes.local.overlay import OverlayBackend

    backend = OverlayBackend()
    with pytest.raises(ImageNotFound, match="harness-no-such-image:1"):
        backend.create(SandboxSpec(image="harness-no-such-image:1"))
    with pytest.raises(ImageNotFound, match="cannot read the image archive"):
        backend.create(SandboxSpec(image=str(private_cache.parent / "missing.tar")))
    assert leftovers(private_cache) == []


def test_corrupt_archive_and_full_disk_fail_clearly_and_leave_nothing(overlay_backend, tmp_path, private_cache):
    from sandboxes.local.overlay import OverlayBackend

    archive = image_archive(
        tmp_path / "image.tar", [{"etc/hostname": b"box\n", "usr/big.bin": os.urandom(4 << 20)}], {}
    )
    data = archive.read_bytes()
    corrupt = tmp_path / "corrupt.tar"
    corrupt.write_bytes(data[: len(data) // 2])
    with pytest.raises(SandboxError, match="image archive .* is not a readable image archive"):
        OverlayBackend().create(SandboxSpec(image=str(corrupt)))
    garbled = image_archive(tmp_path / "garbled.tar", [{"etc/hostname": b"box\n"}, b"\x01" * 4096], {})
    with pytest.raises(SandboxError, match="unpacking a layer of the image archive .* failed"):
        OverlayBackend().create(SandboxSpec(image=str(garbled)))
    assert leftovers(private_cache) == [] and not list((private_cache / "images").glob("*.json"))

    require(os.geteuid() == 0, "mounting a small tmpfs as a full disk needs root")
    private_cache.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(private_cache)], check=True)
    try:
        with pytest.raises(SandboxError, match="no space left on the disk holding"):
            OverlayBackend().create(SandboxSpec(image=str(archive)))
        assert leftovers(private_cache) == [] and list((private_cache / "images" / "layers").iterdir()) == []
    finally:
        subprocess.run(["umount", str(private_cache)], check=True)


_ROOTLESS = """
import json, logging, sys
sys.path.insert(0, sys.argv[1])
logging.basicConfig(level=logging.WARNING)
from sandboxes import SandboxSpec, get_backend
backend = get_backend("overlay")
with backend.create(SandboxSpec(image=sys.argv[2], workdir="/work", memory="256m")) as sandbox:
    seen = {"limits": sandbox.limits,
            "inside": sandbox.exec("id -u; echo changed > /etc/motd && cat /etc/motd; pwd").output}
    snapshot = sandbox.snapshot()
[fork] = backend.fork(snapshot, 1)
with fork:
    seen["fork"] = fork.exec("cat /etc/motd").output
backend.remove_snapshot(snapshot)
seen["left"] = backend.list()
print(json.dumps(seen))
"""


def shell_files(base: Path) -> dict[str, bytes | Path]:
    """A few programs of the base image's (merged-/usr) layer, their libraries and /etc/passwd."""
    files: dict[str, bytes | Path] = {
        "etc/passwd": (base / "etc" / "passwd").read_bytes(),
        "tmp/": b"",
        "bin": Path("usr/bin"),
        "lib": Path("usr/lib"),
        "lib64": Path("usr/lib64"),
    }
    for program in ("bash", "cat", "env", "id", "pwd", "stty"):
        files[f"usr/bin/{program}"] = (base / "usr" / "bin" / program).read_bytes()
        needed = subprocess.run(
            ["ldd", str(base / "usr" / "bin" / program)], capture_output=True, text=True, check=True
        ).stdout
        for library in re.findall(r"(/\S+\.so[.\d]*) \(", needed):
            inside = "usr" + library if not library.startswith("/usr/") else library[1:]
            files[inside] = (base / inside).read_bytes()
    return files


@pytest.mark.parametrize("writable", ["disk", "tmpfs"])
def test_rootless_run_in_a_user_namespace(overlay_backend, unprivileged_user, tmp_path, writable):
    """An unprivileged user runs the image from its archive (no engine access): its own
    cache, root inside a user namespace, copy-on-write /etc (on disk, or on a tmpfs mounted in that namespace);
    cgroup limits it cannot set are said."""
    userns = Path("/proc/sys/user/max_user_namespaces")
    require(userns.exists() and int(userns.read_text()) > 0, "this kernel allows no user namespaces")
    home = Path(unprivileged_user.pw_dir)
    code = home / "code"
    shutil.copytree(ROOT / "sandboxes", code / "sandboxes", ignore=shutil.ignore_patterns("__pycache__"))
    archive = image_archive(
        home / "image.tar", [shell_files(overlay_backend.store.get(BASE_IMAGE).layers[-1])], {"Env": ["PATH=/usr/bin"]}
    )
    subprocess.run(["chown", "-R", f"{unprivileged_user.pw_uid}:{unprivileged_user.pw_gid}", str(home)], check=True)
    python = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
    run = subprocess.run(
        [
            "setpriv",
            f"--reuid={unprivileged_user.pw_uid}",
            f"--regid={unprivileged_user.pw_gid}",
            "--clear-groups",
            "env",
            f"HOME={home}",
            f"HARNESS_CACHE={home}/cache",
            f"HARNESS_OVERLAY_WRITABLE={writable}",
            python,
            "-c",
            _ROOTLESS,
            str(code),
            str(archive),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=home,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["inside"].split() == ["0", "changed", "/work"] and seen["fork"].strip() == "changed"
    assert seen["left"] == []
    for name in ("memory", "pids", "cpu"):  # this user may not make cgroups here: said, never silent
        how = seen["limits"][name]
        assert how.startswith(("cgroup v", "RLIMIT_AS", "none: ")), how
        if not how.startswith("cgroup"):
            assert "without" in run.stderr and name in run.stderr
    assert not list((home / "cache" / "overlay").iterdir())
    assert not list(Path(f"/dev/shm/harness-{unprivileged_user.pw_uid}").glob("*"))
    assert not list((home / "cache" / "overlay-snapshots").iterdir())
    assert (
        subprocess.run(["pgrep", "-u", str(unprivileged_user.pw_uid)], capture_output=True, check=False).stdout == b""
    )


def test_the_cache_evicts_least_recently_used_images_no_sandbox_uses(
    overlay_backend, tmp_path, private_cache, monkeypatch
):
    """Three images on one shared shell layer, each with 2 MiB of its own; room for about two."""
    from sandboxes.local.overlay import OverlayBackend

    shell = shell_files(overlay_backend.store.get(BASE_IMAGE).layers[-1])
    archives = {
        name: image_archive(tmp_path / f"{name}.tar", [shell, {f"opt/{name}.bin": os.urandom(2 << 20)}], {})
        for name in ("old", "running", "new")
    }
    backend = OverlayBackend()
    backend.store.get(str(archives["old"]))
    shell_bytes = backend.store.images()[0]["bytes"] - (2 << 20)
    monkeypatch.setenv("HARNESS_IMAGE_CACHE_MAX", str(shell_bytes + (5 << 20)))
    with backend.create(SandboxSpec(image=str(archives["running"]), workdir="/w")) as running:
        record = private_cache / "images" / f"{running.image.digest.partition(':')[2]}.json"
        os.utime(record, (0, 0))  # `running` is now the least recently used
        new = backend.store.get(str(archives["new"]))  # over the limit: `old` goes, `running` is in use
        stored = {row["digest"]: row for row in backend.store.images()}
        assert set(stored) == {running.image.digest, new.digest} and stored[running.image.digest]["in_use"]
        assert running.exec("cat /opt/running.bin > /dev/null && echo read").output == "read\n"
        with backend.create(SandboxSpec(image=str(archives["old"]), workdir="/w")) as again:  # unpacked anew
            assert again.exec("cat /opt/old.bin > /dev/null && echo read").output == "read\n"
        assert {row["digest"] for row in backend.store.images()} == {running.image.digest, again.image.digest}
    monkeypatch.setenv("HARNESS_IMAGE_CACHE_MAX", "1")
    removed = [line for line in backend.prune() if line.startswith("image sha256:")]
    assert len(removed) == 2 and removed[0].endswith("(2.0 MiB)")  # the second frees the shared layer too
    assert backend.store.images() == []
    assert list((private_cache / "images" / "layers").iterdir()) == []


def test_sandbox_ls_shows_stored_images_and_prune_says_what_it_frees(
    overlay_backend, tmp_path, private_cache, monkeypatch
):
    from sandboxes.local.overlay import OverlayBackend
    from tests.cli_helpers import harness

    archive = image_archive(tmp_path / "image.tar", [{"opt/data.bin": os.urandom(1 << 20)}], {})
    digest = OverlayBackend().store.get(str(archive)).digest
    listed = harness("sandbox", "ls", "--backend", "overlay")
    assert listed.returncode == 0 and digest[7:19] in listed.stdout and "1.0 MiB" in listed.stdout, listed.stdout
    monkeypatch.setenv("HARNESS_IMAGE_CACHE_MAX", "1")
    pruned = harness("sandbox", "prune", "--backend", "overlay")
    assert pruned.returncode == 0 and f"removed image {digest} (1.0 MiB)" in pruned.stdout, pruned.stdout
