"""The image of a JavaScript/TypeScript project to plant bugs in, on the language's Node base.

A published npm package carries no lock file: its dependencies, dev dependencies (the test runner) among
them, are resolved on the host into a `package-lock.json` (`npm install` in a scratch folder: the newest
versions the ranges allow, else those of the release day with `--before DATE`), which then pins the image's install (`JavaScript.build_image`: fetched
on the host, `npm ci --offline` in the image). The test command runs the runner of `scripts.test` on the
project's test files, named one by one (tape, unlike jest or mocha, has no search of its own).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from sandboxes import SandboxError
from sandboxes.images import image_exists

from ..languages import LANGUAGES
from ..languages.javascript import ProjectError, package_json
from .errors import SynthError
from .mutations import SKIPPED_DIRS
from .project_image import IMAGE_REPOSITORY, ProjectImage, _hash, _tree_digest
from .js_mutations import EXTENSIONS
from .source import Project

TEST_FOLDERS = ("test", "tests", "__tests__", "spec")
LOCK = "package-lock.json"


def log_parser(root: Path) -> str:
    try:
        return LANGUAGES["javascript"].log_parser_for(root)
    except ProjectError as err:
        raise SynthError(str(err)) from None


def test_files(root: Path) -> list[str]:
    """The project's test files: those the language calls test files, and the scripts directly in a test
    folder at the root (`test/parse.js`; helpers and fixtures deeper down are not run)."""
    language = LANGUAGES["javascript"]
    found = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if path.suffix not in EXTENSIONS or not path.is_file() or path.name.endswith((".d.ts", ".d.mts")):
            continue
        if any(p in SKIPPED_DIRS - {"test", "tests"} or p.startswith(".") or p == "fixtures" for p in relative.parts):
            continue
        if language.is_test_path(relative.as_posix()) or (
            len(relative.parts) == 2 and relative.parts[0] in TEST_FOLDERS
        ):
            found.append(relative.as_posix())
    return found


def lock_dependencies(project: Project, on_step: Callable[[str], None]) -> str:
    """Write the project's package-lock.json where it has none: the newest versions its ranges allow, else
    (where those cannot be resolved) the versions of its release day. Returns what was done, for the notes."""
    root = project.root
    manifest = package_json(root)
    if (root / LOCK).exists() or not (manifest.get("dependencies") or manifest.get("devDependencies")):
        return ""
    on_step(f"{project.name}: resolving its dependencies into {LOCK}")
    problem = _resolve(root, [])
    if not problem:
        return f"{LOCK} resolved by npm (the newest versions allowed)"
    if project.date:
        on_step(f"{project.name}: the newest failed ({problem[-200:]}); resolving as of {project.date}")
        if not _resolve(root, ["--before", project.date]):
            return f"{LOCK} resolved by npm as of {project.date}"
    raise SynthError(f"{project.name}: npm could not resolve its dependencies: {problem}")


def _resolve(root: Path, options: list[str]) -> str:
    """Install the project's package.json in a scratch folder (no install scripts) and keep the lock file it
    writes; returns npm's error, "" on success. A full install, not `--package-lock-only`: that leaves some
    entries (optional platform packages) without the `resolved` address `npm ci --offline` needs, as does an
    npm configured with `omit-lockfile-registry-resolved`."""
    with tempfile.TemporaryDirectory(prefix="harness-npm-lock-") as scratch:
        shutil.copy(root / "package.json", scratch)
        done = subprocess.run(
            [
                "npm",
                "install",
                "--ignore-scripts",
                "--no-audit",
                "--no-fund",
                "--omit-lockfile-registry-resolved=false",
                *options,
            ],
            cwd=scratch,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if done.returncode:
            return done.stderr.strip()[-1500:]
        shutil.copy(Path(scratch) / LOCK, root / LOCK)
    return ""


def build_js_project_image(
    project: Project, test_command: str | None, on_step: Callable[[str], None], python: str | None = None
) -> ProjectImage:
    """The project at /testbed with its dependencies installed, on the Node base; `python` does not apply."""
    language = LANGUAGES["javascript"]
    try:
        lock = lock_dependencies(project, on_step)
        if not test_command:
            tests = test_files(project.root)
            if not tests:
                raise SynthError(f"{project.name}: no test files (test/, *.test.js, __tests__/) to run")
            test_command = language.test_command(project.root, tests)
        digest = _hash(_tree_digest(project.root), json.dumps(language.base_recipe(), sort_keys=True))
        image = f"{IMAGE_REPOSITORY}/{project.name}-env:{digest}"
        if not image_exists(image):
            on_step(f"building the project image {image}")
            language.build_image(project.root, image)
    except (ProjectError, SandboxError) as err:
        raise SynthError(f"{project.name}: {err}") from None
    notes = {"language": language.name, "install": language.install_command(project.root) or "none"}
    if lock:
        notes["lock"] = lock
    return ProjectImage(project, image, (test_command,), notes)
