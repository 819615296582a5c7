"""Where the project comes from: a local git repository, a git URL, a PyPI sdist or an npm package.

Whatever the source, the result is the same: a clean tree without `.git` (the files of one
commit) in the work dir, and the commit it was taken from. A PyPI sdist (or a folder that is
not a repository, or an npm package as `npm pack` fetches it) is first imported as a one-commit repository with a fixed identity and
dates, so its commit is reproducible. `source.json` records what was fetched, so a resumed
run uses the same files (a newer release on PyPI does not change a run half-way).
"""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from ..repos import git
from .errors import SynthError


# An npm package: `npm:NAME[@VERSION]`, or `NAME@VERSION` (`@scope/name@1.2.3`); a PyPI requirement pins with `==`.
NPM_SPEC = re.compile(r"^npm:\S+$|^(@[\w.-]+/)?[\w.-]+@[\w.^~<>=*-]+$")


@dataclass(frozen=True)
class Project:
    """A project's clean tree (`root`, no `.git`) and where it came from."""

    name: str  # normalised: lowercase, '-' separated; names the instances and images
    root: Path
    origin: str  # what the user asked for
    commit: str  # the commit the tree is a copy of
    version: str = ""
    date: str = ""  # when the commit was made or the sdist released (ISO): dependencies of that day are the fallback


def normalise(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "project"


def fetch_project(repo: str, work: Path) -> Project:
    """The project named by `repo` (a path, a git URL or a PyPI requirement), under `work`."""
    record = work / "source.json"
    if record.exists():
        known = json.loads(record.read_text())
        if known["origin"] == repo and Path(known["root"]).is_dir() and not Path(repo).exists():
            return Project(**{**known, "root": Path(known["root"])})
    shutil.rmtree(work / "source", ignore_errors=True)
    (work / "source").mkdir(parents=True)
    if Path(repo).exists():
        project = _from_path(Path(repo).resolve(), work / "source", repo)
    elif re.match(r"^(\w+://|git@)", repo) or repo.endswith(".git"):
        project = _from_git_url(repo, work / "source")
    elif NPM_SPEC.match(repo):
        project = _from_npm(repo.removeprefix("npm:"), work / "source")
    else:
        project = _from_pypi(repo, work / "source")
    record.write_text(json.dumps({**asdict(project), "root": str(project.root)}, indent=1))
    return project


def _from_path(path: Path, into: Path, origin: str) -> Project:
    if not path.is_dir():
        raise SynthError(f"{path} is not a folder: give a git repository, a git URL or a PyPI name")
    if (path / ".git").exists():
        return _export_head(path, into / "tree", origin, normalise(path.name))
    copy = into / "import"
    shutil.copytree(path, copy, ignore=shutil.ignore_patterns(".git", "__pycache__", "*.pyc", ".pytest_cache"))
    return _import(copy, into, origin, normalise(path.name))


def _from_git_url(url: str, into: Path) -> Project:
    clone = into / "clone"
    done = subprocess.run(
        ["git", "clone", "-q", "--depth", "1", url, str(clone)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SynthError(f"cannot clone {url}: {done.stderr.strip()} (is it reachable from here?)")
    name = normalise(url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git"))
    return _export_head(clone, into / "tree", url, name)


def _from_npm(spec: str, into: Path) -> Project:
    """`npm pack` the package from the npm registry, unpack it and import it as a one-commit repository;
    its date is the version's publication day (dependencies are resolved as of then)."""
    download = into / "download"
    download.mkdir(parents=True)
    try:
        done = subprocess.run(
            ["npm", "pack", spec, "--json", "--pack-destination", str(download)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    except FileNotFoundError:
        raise SynthError("npm is not installed on this machine: it fetches npm packages") from None
    if done.returncode != 0:
        raise SynthError(f"cannot fetch {spec!r} from the npm registry: {done.stderr.strip()[-800:]}")
    packed = json.loads(done.stdout)[0]
    published = subprocess.run(
        ["npm", "view", f"{packed['name']}@{packed['version']}", "time", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    date = json.loads(published.stdout or "{}").get(packed["version"], "")[:10] if published.returncode == 0 else ""
    unpacked = into / "import"
    _unpack(download / packed["filename"], unpacked)
    tops = list(unpacked.iterdir())
    top = tops[0] if len(tops) == 1 and tops[0].is_dir() else unpacked
    project = _import(top, into, f"npm:{spec}", normalise(packed["name"]), packed["version"])
    return replace(project, date=date)


def _from_pypi(requirement: str, into: Path) -> Project:
    """`pip download` the sdist, unpack it and import it as a one-commit repository."""
    download = into / "download"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--no-binary",
            ":all:",
            "-d",
            str(download),
            requirement,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    archives = sorted(download.glob("*")) if download.exists() else []
    if done.returncode != 0 or not archives:
        raise SynthError(f"cannot download the sdist of {requirement!r} from PyPI: {done.stderr.strip()[-800:]}")
    unpacked = into / "import"
    _unpack(archives[0], unpacked)
    tops = [p for p in unpacked.iterdir()]
    top = tops[0] if len(tops) == 1 and tops[0].is_dir() else unpacked
    name = normalise(re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0])
    version = archives[0].name.removesuffix(".tar.gz").removesuffix(".zip").rsplit("-", 1)[-1]
    return replace(_import(top, into, requirement, name, version), date=_built_on(archives[0]))


def _built_on(archive: Path) -> str:
    """When the sdist was made: the newest time stamp of its files (the day after, ISO), or "" where
    every file has one time stamp (a reproducible build's fixed date, not the release's)."""
    if archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as handle:
            stamps = {datetime(*info.date_time, tzinfo=timezone.utc).timestamp() for info in handle.infolist()}
    else:
        with tarfile.open(archive) as handle:
            stamps = {member.mtime for member in handle.getmembers()}
    if len(stamps) < 2:
        return ""
    return datetime.fromtimestamp(max(stamps) + 86400, tz=timezone.utc).strftime("%Y-%m-%d")


def _unpack(archive: Path, into: Path) -> None:
    if archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as handle:
            handle.extractall(into)
    else:
        with tarfile.open(archive) as handle:
            handle.extractall(into, filter="data")


def _import(tree: Path, into: Path, origin: str, name: str, version: str = "") -> Project:
    """Commit `tree` as the only commit of a new repository, then export that commit."""
    repo = into / "repo"
    tree.rename(repo)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A", "-f")
    git(repo, "commit", "-q", "--no-verify", "-m", f"Import {origin}")
    return _export_head(repo, into / "tree", origin, name, version, date="")  # its commit's date is made up


def _export_head(repo: Path, tree: Path, origin: str, name: str, version: str = "", date: str | None = None) -> Project:
    """The files of HEAD (as committed: no local changes, no ignored files) copied to `tree`."""
    commit = git(repo, "rev-parse", "HEAD").strip()
    date = git(repo, "log", "-1", "--format=%cI", "HEAD").strip() if date is None else date
    archive = subprocess.run(["git", "archive", "--format=tar", "HEAD"], cwd=repo, capture_output=True, check=False)
    if archive.returncode != 0:
        raise SynthError(f"git archive failed in {repo}: {archive.stderr.decode(errors='replace').strip()}")
    shutil.rmtree(tree, ignore_errors=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as handle:
        handle.extractall(tree, filter="data")
    return Project(name=name, root=tree, origin=origin, commit=commit, version=version, date=date)
