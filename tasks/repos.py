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
    "GIT_AUTHOR_NAME": "harness", "GIT_AUTHOR_EMAIL": "harness@localhost",
    "GIT_COMMITTER_NAME": "harness", "GIT_COMMITTER_EMAIL": "harness@localhost",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
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
    git(repo, "apply", str(bug_patch))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Initial import")
    base_commit = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "apply", "-R", str(bug_patch))
    gold = git(repo, "diff")
    git(repo, "checkout", "--", ".")
    return base_commit, gold
