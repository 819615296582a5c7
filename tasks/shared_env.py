"""One environment image per repository: instances that differ only by commit share it.

A per-instance image is <environment image> + <the repository at the base commit>. Instead, a
shared instance names the environment image as its `image` and a `repo_archive`: a tar on the
host holding the work tree at the base commit and a `.git` with that commit alone (made by
`tasks.repos.base_only_git`: no later commit, ref, reflog or object). Every sandbox the instance
gets (the episode's and each grading's, always fresh) has the archive unpacked into its work
directory at start and every file of the environment's own tree that the commit does not
track or ignore removed (`inject_repo`, called by `tasks.grading.grade.run_setup`), then HEAD is
checked against the base commit. The archive lands in the container's own writable
layer: nothing is shared between sandboxes but the read-only image.

Official SWE-bench instances keep their per-instance images (they have no `repo_archive`).
The archive must be readable where the sandboxes start (on a Ray cluster: shared storage).
"""

from __future__ import annotations

import os
import shlex
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from sandboxes import SandboxError
from sandboxes.images import cache_dir

from .errors import TaskError
from .repos import base_only_git, git, tree_at

REPO_ARCHIVE = "repo_archive"  # the instance field: a host path to the repository's tar
ARCHIVE_FORMAT = "v2"  # in the cached archive's name: bumped when what goes into one changes


def archive_path(name: str, base_commit: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return cache_dir() / "repos" / f"{safe}-{base_commit[:16]}.{ARCHIVE_FORMAT}.tar"


def repo_archive(source: Path, base_commit: str, name: str) -> Path:
    """The tar of the work tree at `base_commit` and its base-only `.git` (index filled), cached by
    name and commit. `source` is any git repository holding the commit."""
    dest = archive_path(name, base_commit)
    if dest.is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="harness-repo-") as scratch:
        tree = tree_at(Path(source), base_commit, Path(scratch) / "tree")
        history = base_only_git(Path(source), base_commit, Path(scratch) / "history")
        shutil.move(str(history), tree / ".git")
        # The index gets the files' stat data here, once; with only whole-second mtimes and sizes
        # compared (the tar keeps both), the sandbox's git needs no re-hash of every file.
        git(tree, "config", "core.trustctime", "false")
        git(tree, "config", "core.checkStat", "minimal")
        git(tree, "read-tree", "HEAD")
        git(tree, "update-index", "-q", "--refresh")
        partial = dest.with_name(f".{dest.name}.{os.getpid()}.partial")
        with tarfile.open(partial, "w") as tar:
            for child in sorted(tree.iterdir()):
                tar.add(child, arcname=child.name, filter=_owned_by_root)
        os.replace(partial, dest)
    return dest


def _owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def share(instance: dict[str, Any], environment_image: str, archive: Path) -> dict[str, Any]:
    """The instance run from `environment_image` with its repository put in at start."""
    return {**instance, "image": environment_image, REPO_ARCHIVE: str(archive)}


def is_shared(instance: dict[str, Any]) -> bool:
    return bool(instance.get(REPO_ARCHIVE))


def inject_repo(sb, instance: dict[str, Any], timeout: float = 300.0) -> None:
    """Put the instance's repository into the work directory in place of the environment's tree.

    The archive is unpacked over the environment image's tree (another commit's, maybe a later
    one), then `git clean -fd` removes every file of that tree this commit does not track,
    keeping only what the repository ignores: the install's build artifacts (`*.egg-info`, a
    setuptools-scm `_version.py`). (Moving the old tree aside instead costs seconds: a
    directory rename on overlayfs copies the whole directory up; checking the commit out with
    git from the `.git` alone is slower than the engine unpacking the files.) The index came
    with stat data matching the unpacked files (`repo_archive`), so git re-hashes nothing.
    Then HEAD must be the base commit and `git status` clean."""
    archive = Path(instance[REPO_ARCHIVE])
    name = instance.get("instance_id", "?")
    if not archive.is_file():
        raise TaskError(
            f"{name}: its repository archive {archive} is missing (rebuild it with `harness tasks mine --share-env`, "
            "or run the per-instance image)"
        )
    workdir = instance.get("workdir", "/testbed")
    wd, base = shlex.quote(workdir), shlex.quote(instance["base_commit"])
    sb.extract(archive, workdir, timeout=timeout)
    checked = sb.exec(
        f'cd {wd} && git clean -fdq && test "$(git rev-parse HEAD)" = {base} && '
        f'test -z "$(git status --porcelain --untracked-files=normal)"',
        timeout=timeout,
    )
    if not checked.ok:
        raise SandboxError(
            f"{name}: the repository put in from {archive} is not clean at the base commit {instance['base_commit']}"
            f"{': ' + checked.output[-500:] if checked.output.strip() else ''}"
        )
