"""A free-form request on the user's own repository, as a task ("Fix this bug: ...").

The repository is copied, never mounted: `stage_repo` copies its files (tracked and untracked,
not ignored ones; without its `.git`) into a staging folder and commits them there as the base.
The sandbox gets that copy; the model patch is the diff of the sandbox's work tree against the
state it started from (`tasks.worktree`); a test command, when given, judges the patch in a fresh sandbox, as grading does.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path
from typing import Any

from sandboxes import Backend, Sandbox
from sandboxes.spec import SandboxSpec

from .errors import TaskError
from .repos import git
from .swe import SWE_TOOLS
from .task import Reward, Task

WORKDIR = "/testbed"
ENV_CLASS = "repo"
TEST_TIMEOUT = 900.0
# The copy's files belong to the host's user: git in the sandbox may work on them whoever runs it
# (command-line scope, the only one besides the read-only global config that git trusts for this).
# Python writes no bytecode, so running the tests leaves nothing behind in the patch.
SANDBOX_ENV = {
    "GIT_CONFIG_COUNT": "1",
    "GIT_CONFIG_KEY_0": "safe.directory",
    "GIT_CONFIG_VALUE_0": "*",
    "PYTHONDONTWRITEBYTECODE": "1",
}
PROMPT = """<uploaded_files>
{workdir}
</uploaded_files>
A copy of the user's repository is at {workdir} (a git work tree; the current state is the last commit).
The user asks:

<request>
{request}
</request>

Explore the code, make the change in {workdir}, check it, then call `submit`."""


def repo_files(repo: Path) -> list[str]:
    """The files to copy: git's tracked and untracked-but-not-ignored files, else every file outside VCS folders."""
    if (repo / ".git").exists():
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=repo,
            capture_output=True,
            text=True,
        )
        if listed.returncode != 0:
            raise TaskError(f"git ls-files failed in {repo}: {listed.stderr.strip()}")
        return sorted(name for name in set(listed.stdout.split("\0")) if name and (repo / name).is_file())
    skip = {".git", ".hg", ".svn", "__pycache__", ".venv", "node_modules", ".pytest_cache"}
    return sorted(
        str(p.relative_to(repo))
        for p in repo.rglob("*")
        if p.is_file() and not skip.intersection(p.relative_to(repo).parts)
    )


def stage_repo(repo: str | Path, staging: str | Path) -> str:
    """Copy `repo`'s files to `staging` and commit them as one base commit; returns its hash."""
    repo, staging = Path(repo).expanduser().resolve(), Path(staging)
    if not repo.is_dir():
        raise TaskError(f"--repo {repo} is not a folder")
    files = repo_files(repo)
    if not files:
        raise TaskError(f"{repo} holds no files to work on")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name in files:
        target = staging / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(repo / name, target, follow_symlinks=False)
    git(staging, "init", "-q", "-b", "main")
    git(staging, "add", "-A", "--force")
    git(staging, "commit", "-q", "--no-verify", "-m", f"The state of {repo.name} given to the agent")
    return git(staging, "rev-parse", "HEAD").strip()


def repo_task(
    repo: str | Path,
    request: str,
    staging: str | Path,
    test_command: str | None = None,
    max_turns: int = 30,
    image: str = "harness-base:latest",
) -> Task:
    """The task of carrying out `request` on a copy of `repo` (staged in `staging`)."""
    if not request.strip():
        raise TaskError("the request is empty: say what the agent should do, e.g. 'Fix this bug: ...'")
    repo = Path(repo).expanduser().resolve()
    base_commit = stage_repo(repo, staging)
    digest = hashlib.sha256(f"{repo}\0{request}".encode()).hexdigest()[:8]
    return Task(
        id=f"{repo.name}-{digest}",
        data_source=str(repo),
        prompt=[{"role": "user", "content": PROMPT.format(workdir=WORKDIR, request=request.strip())}],
        env_class=ENV_CLASS,
        reward_spec={"method": "test_command" if test_command else "none", "ground_truth": test_command or ""},
        sandbox=SandboxSpec(image=image, workdir=WORKDIR, memory="2g", pids=512, wall_time=3600, env=SANDBOX_ENV),
        tools=list(SWE_TOOLS),
        max_turns=max_turns,
        metadata={
            "repo": str(repo),
            "staging": str(Path(staging).resolve()),
            "base_commit": base_commit,
            "workdir": WORKDIR,
            "test_command": test_command,
        },
    )


def load_repo(sandbox: Sandbox, task: Task) -> None:
    """Copy the staged repository (with its base commit) into the sandbox's work folder."""
    meta = task.metadata
    sandbox.upload(meta["staging"], meta["workdir"])
    result = sandbox.exec(f"cd {meta['workdir']} && git rev-parse HEAD", timeout=60)
    if result.exit_code != 0 or result.output.strip() != meta["base_commit"]:
        raise TaskError(f"the repository copy in the sandbox is not at the base commit: {result.output.strip()[-300:]}")


def verify_repo(task: Task, patch: str, backend: Backend | None) -> Reward:
    """Run the task's test command on the base plus `patch` in a fresh sandbox: 1.0 if it exits 0.

    Without a test command nothing is judged: 0.0 with `details["judged"]` False."""
    meta = task.metadata
    command = meta.get("test_command")
    if not command:
        return Reward(0.0, {"judged": False, "reason": "no test command was given, so nothing judged the patch"})
    if backend is None:
        raise TaskError("running the test command needs a sandbox backend")
    with backend.create(task.sandbox) as sandbox:
        load_repo(sandbox, task)
        details: dict[str, Any] = {"judged": True, "test_command": command, "patch_applied": True}
        if patch.strip():
            sandbox.write_file("/tmp/harness_eval.patch", patch)
            applied = sandbox.exec(f"cd {meta['workdir']} && git apply --binary /tmp/harness_eval.patch", timeout=120)
            if applied.exit_code != 0:
                return Reward(
                    0.0,
                    {**details, "patch_applied": False, "reason": f"the patch does not apply: {applied.output[-500:]}"},
                )
        result = sandbox.exec(f"cd {meta['workdir']} && {command}", timeout=TEST_TIMEOUT)
    passed = result.exit_code == 0 and not result.timed_out
    details |= {
        "exit_code": result.exit_code,
        "timed_out": result.timed_out,
        "test_output": result.output[-4000:],
        "reason": "the test command passed" if passed else f"the test command failed (exit {result.exit_code})",
    }
    return Reward(1.0 if passed else 0.0, details)


def apply_to_branch(repo: str | Path, patch: str, branch: str, message: str) -> str:
    """Commit `patch` on a new `branch` of `repo` from its HEAD, leaving the work tree as it is; returns the commit."""
    repo = Path(repo).expanduser().resolve()
    if not (repo / ".git").exists():
        raise TaskError(f"{repo} is not a git repository: write the patch out instead (--patch-out)")
    if not patch.strip():
        raise TaskError("the agent changed nothing: there is no patch to commit")
    if subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"], cwd=repo).returncode == 0:
        raise TaskError(f"branch {branch!r} already exists in {repo}; choose another name")
    worktree = repo / ".git" / f"harness-worktree-{branch.replace('/', '_')}"
    git(repo, "worktree", "add", "-q", "-b", branch, str(worktree), "HEAD")
    try:
        applied = subprocess.run(
            ["git", "apply", "--binary", "-"], cwd=worktree, input=patch, capture_output=True, text=True
        )
        if applied.returncode != 0:
            git(repo, "worktree", "remove", "--force", str(worktree))
            git(repo, "branch", "-D", branch)
            raise TaskError(
                f"the patch does not apply to {repo}'s HEAD (uncommitted changes were given to the agent?): "
                f"{applied.stderr.strip()[-300:]}; write it out with --patch-out instead"
            )
        git(worktree, "add", "-A")
        committed = subprocess.run(
            [
                "git",
                "-c",
                "user.name=harness agent",
                "-c",
                "user.email=harness@localhost",
                "commit",
                "-q",
                "--no-verify",
                "-m",
                message,
            ],
            cwd=worktree,
            capture_output=True,
            text=True,
        )
        if committed.returncode != 0:
            raise TaskError(f"git commit failed on branch {branch}: {committed.stderr.strip()}")
        return git(worktree, "rev-parse", "HEAD").strip()
    finally:
        if worktree.exists():
            git(repo, "worktree", "remove", "--force", str(worktree))
