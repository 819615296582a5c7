"""The image of a task in a SWE-bench task repository: the `Dockerfile` written to rebuild it, and that
Dockerfile built here, offline.

SWE-bench 5 builds a task's image from its task directory (`swebench eval --task-repo`: `docker buildx`,
the directory as the build context) and names it as `task.yaml`'s `image` says. What we write rebuilds
the environment our build made from public parts: the Debian suite and packages of our base image
(`FROM debian:<suite>-slim`, apt), the repository at its base commit from `repo.bundle` beside the
Dockerfile (a git bundle of the commit our image holds), and, where the instance records how its
environment was installed (`environment`: mined and synthesized instances), its wheels pinned by name
and version, fetched from PyPI, then the same install command. Its first lines say what the build needs.

Built here (a task whose image is absent), each `FROM` image the engine lacks is stood in for by a base of
our own (`sandboxes.standins`, the packages its `apt-get install` lines ask for installed ahead), every
substitution recorded; the build has no network, so a step that downloads fails, and the reason is reported.
"""

from __future__ import annotations

import logging
import shlex
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from sandboxes import SandboxError
from sandboxes.images import base_of, build_base_image, build_image, image_exists
from . import languages  # noqa: F401  (each language registers its toolchain's stand-ins on import)
from sandboxes.standins import check_apt_packages, standin_for, standin_recipe

from .errors import TaskError
from .harbor.image import dockerfile_instructions, shell_installs
from .languages import language_of
from .synth.project_image import SOURCE_ON_PATH

log = logging.getLogger(__name__)
BUNDLE = "repo.bundle"
PINS = "requirements.lock"


def rebuild_files(instance: dict[str, Any], image: str, workdir: str) -> dict[str, bytes]:
    """The Dockerfile that rebuilds `instance`'s environment and the files it copies from its task directory,
    by name; `image` is the one our build made (with any start-time work baked in), whose repository is bundled."""
    notes = instance.get("environment") if isinstance(instance.get("environment"), dict) else {}
    recipe = base_of(notes["python"]).recipe if notes.get("python") else language_of(instance).base_recipe()
    files = {BUNDLE: _bundle(image, workdir, instance["instance_id"], instance["base_commit"])}
    needs = ["debian:%s-slim and deb.debian.org" % recipe["suite"]]
    steps = [
        f"FROM debian:{recipe['suite']}-slim",
        "RUN apt-get update && apt-get install -y --no-install-recommends "
        + " ".join([*recipe["packages"], *notes.get("debian_packages", [])])
        + " && rm -rf /var/lib/apt/lists/*",
        f"COPY {BUNDLE} /tmp/{BUNDLE}",
        f"RUN git clone -q /tmp/{BUNDLE} {workdir} && git -C {workdir} checkout -q {instance['base_commit']}"
        f" && git -C {workdir} remote remove origin && rm /tmp/{BUNDLE}"
        " && git config --global --add safe.directory '*'",
        f"WORKDIR {workdir}",
        "STOPSIGNAL SIGKILL",  # the official harness `docker stop`s each container: at once, without the grace period
    ]
    pins = _pins(notes.get("wheels") or [])
    if pins and notes.get("install_command"):
        needs.append(f"pypi.org ({len(pins)} pinned wheels or sdists)")
        files[PINS] = "".join(f"{pin}\n" for pin in pins).encode()
        install = notes["install_command"]
        if SOURCE_ON_PATH.name in install:
            files[SOURCE_ON_PATH.name] = SOURCE_ON_PATH.read_bytes()
            steps.append(f"COPY {SOURCE_ON_PATH.name} /tmp/")
        steps += [
            f"COPY {PINS} /tmp/{PINS}",
            f"RUN python3 -m pip wheel -q --no-deps -w /tmp/wheelhouse -r /tmp/{PINS} && {install}"
            f" && rm -rf /tmp/wheelhouse /tmp/{PINS} /tmp/{SOURCE_ON_PATH.name}",
        ]
    header = [
        f"# The environment of {instance['instance_id']}, rebuilt from public parts: Debian {recipe['suite']}"
        f" with our base's packages, the repository at {instance['base_commit'][:12]} from {BUNDLE}"
        + (", its test dependencies pinned as when it was made." if PINS in files else "."),
        f"# The build needs {' and '.join(needs)}.",
    ]
    files["Dockerfile"] = ("\n".join(header + steps) + "\n").encode()
    return files


def _pins(wheels: list[str]) -> list[str]:
    """`name==version` of each wheel in an environment's notes (its wheelhouse, by file name)."""
    pins = []
    for wheel in wheels:
        try:
            name, version, _, _ = parse_wheel_filename(wheel)
        except InvalidWheelFilename:
            continue
        pins.append(f"{name}=={version}")
    return sorted(set(pins))


def _bundle(image: str, workdir: str, instance_id: str, base_commit: str) -> bytes:
    """A git bundle of the commit checked out at `workdir` in `image` (HEAD and what it reaches), which must
    reach the base commit."""
    import io
    import tarfile

    import docker.errors

    from sandboxes.docker_backend import docker_client

    git = f"git -C {shlex.quote(workdir)}"
    command = (
        f"git config --global --add safe.directory '*' && {git} merge-base --is-ancestor {shlex.quote(base_commit)} HEAD"
        f" && {git} bundle create -q /tmp/{BUNDLE} HEAD"
    )
    try:
        container = docker_client().containers.create(
            image, ["bash", "-c", command], network_mode="none", entrypoint=[]
        )
    except docker.errors.ImageNotFound as err:
        raise TaskError(
            f"{instance_id}: {image} is not present locally, so its repository cannot be bundled: {err}"
        ) from None
    try:
        container.start()
        if container.wait()["StatusCode"] != 0:
            raise TaskError(
                f"{instance_id}: the repository at {workdir} in {image} cannot be bundled with its base commit "
                f"{base_commit}: {container.logs().decode(errors='replace')[-500:]}"
            )
        stream, _ = container.get_archive(f"/tmp/{BUNDLE}")
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as archive:
            return archive.extractfile(BUNDLE).read()
    finally:
        container.remove(force=True)


def build_from_dockerfile(task_dir: Path, image: str) -> list[str]:
    """Build `task_dir/Dockerfile` (context: the task directory) as `image`, offline; returns the substitutions
    made. A TaskError says why it cannot be built."""
    where = f"tasks/{task_dir.name}/Dockerfile"
    text = (task_dir / "Dockerfile").read_text(encoding="utf-8")
    instructions = dockerfile_instructions(text)
    if not instructions or instructions[0][0] not in ("FROM", "ARG"):
        raise TaskError(f"{where}: does not start with FROM")
    apt = [p for keyword, args in instructions if keyword == "RUN" for p in shell_installs(args, [task_dir]).apt]
    stages: set[str] = set()
    lines, substituted = [], []
    try:
        check_apt_packages(apt)
        for keyword, args in instructions:
            if keyword == "FROM":
                words = [w for w in args.split() if not w.startswith("--")]
                name = words[0]
                if name not in stages and not image_exists(name):
                    standin = standin_for(name)
                    tag = build_base_image(standin_recipe(standin, sorted(set(apt))))
                    substituted.append(standin.describe())
                    args = " ".join([tag, *words[1:]])
                if len(words) >= 3 and words[1].upper() == "AS":
                    stages.add(words[2])
            lines.append(f"{keyword} " + args.replace("\n", " \\\n"))
        context = {p.name: p for p in task_dir.iterdir() if p.name != "Dockerfile"}
        build_image(image, "\n".join(lines) + "\n", context, labels={"harness.task": task_dir.name})
    except SandboxError as err:
        raise TaskError(f"{where}: cannot be built here (offline, no registry): {err}") from None
    return substituted
