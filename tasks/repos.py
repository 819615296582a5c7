"""Git repositories for our own task instances: one commit, fixed identity and dates.

The base commit holds the planted bug and nothing else, so the history never reveals the
fix, and the same content always gives the same commit hash.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from .errors import TaskError

GIT_ENV = {
    "GIT_AUTHOR_NAME": "harness",
    "GIT_AUTHOR_EMAIL": "harness@localhost",
    "GIT_COMMITTER_NAME": "harness",
    "GIT_COMMITTER_EMAIL": "harness@localhost",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
}


def git(repo: Path, *args: str) -> str:
    result = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, env={**os.environ, **GIT_ENV})
    if result.returncode != 0:
        raise TaskError(f"git {' '.join(args)} failed in {repo}: {result.stderr.strip()}")
    return result.stdout


def make_bugged_repo(package_dir: Path, bug_patch: Path, repo: Path) -> tuple[str, str]:
    """A one-commit repository with the bug planted; returns (base commit, gold patch)."""
    shutil.rmtree(repo, ignore_errors=True)
    shutil.copytree(package_dir, repo, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache"))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "apply", str(bug_patch.resolve()))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Initial import")
    base_commit = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "apply", "-R", str(bug_patch.resolve()))
    gold = git(repo, "diff")
    git(repo, "checkout", "--", ".")
    return base_commit, gold


def base_only_git(source: Path, base: str, dest: Path) -> Path:
    """A `.git` holding the base commit and nothing after it: no other ref, reflog or object."""
    shutil.rmtree(dest, ignore_errors=True)
    git(dest.parent, "init", "-q", "-b", "main", str(dest))
    upload = "git -c uploadpack.allowAnySHA1InWant=true upload-pack"
    git(dest, "fetch", "-q", "--depth", "1", "--no-tags", f"--upload-pack={upload}", f"file://{source}", base)
    git(dest, "update-ref", "--no-deref", "refs/heads/main", base)
    git(dest, "symbolic-ref", "HEAD", "refs/heads/main")
    (dest / ".git" / "FETCH_HEAD").unlink(missing_ok=True)
    shutil.rmtree(dest / ".git" / "logs", ignore_errors=True)
    git(dest, "gc", "-q", "--prune=now")
    return dest / ".git"


def tree_at(repo: Path, base: str, dest: Path) -> Path:
    """The work tree of `base` in `dest` (no `.git`)."""
    dest.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", "--format=tar", base], capture_output=True, check=False
    )
    if archive.returncode != 0:
        raise TaskError(f"{repo} lacks the base commit {base}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest
