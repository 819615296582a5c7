"""The work tree a task starts from, and the patch of what changed since.

A task's environment may change its repository before the agent's first turn: an install step
rewrites a shipped `*.egg-info/SOURCES.txt`, SWE-bench's sphinx images edit `tox.ini`, a
setup script builds files. None of that is the agent's. So the patch is taken against the state
the task starts from (`start_state`: the tree of the work folder after the environment's setup,
tracked and untracked files, ignored ones left out), not against the base commit; grading
applies it onto that same post-setup state (a fresh sandbox from the same image, the same setup).
Where the setup changed nothing, the start state is the base commit itself.
"""

from __future__ import annotations

import shlex

from sandboxes import Sandbox, SandboxError

#: Never part of a patch: caches that tools write in the work tree (running the tests makes them).
NOT_IN_PATCH = ("__pycache__", ".pytest_cache", "*.pyc")
_INDEX = "/tmp/harness_worktree.index"  # a scratch index: the agent's own index is never touched


def _pathspec(exclude: tuple[str, ...]) -> str:
    spec = " ".join(
        f"':(exclude,glob)**/{name}'" + (f" ':(exclude,glob)**/{name}/**'" if "*" not in name else "")
        for name in exclude
    )
    return f" -- . {spec}" if spec else ""


def _staged(workdir: str, exclude: tuple[str, ...]) -> str:
    """Shell: every file of `workdir` (less ignored and `exclude`d ones) staged in the scratch index."""
    paths = _pathspec(exclude)
    return (
        f"cd {shlex.quote(workdir)} && rm -f {_INDEX} && "
        f'{{ cp "$(git rev-parse --git-path index)" {_INDEX} 2>/dev/null || true; }} && '
        f"GIT_INDEX_FILE={_INDEX} git add -A{paths}"
    )


def start_state(sandbox: Sandbox, workdir: str, base_commit: str, exclude: tuple[str, ...] = NOT_IN_PATCH) -> str:
    """What the task starts from: `base_commit` where the work tree matches it, else the tree object
    (hash) of the work tree as it is now, written to the repository's object store."""
    result = sandbox.exec(
        f"{_staged(workdir, exclude)} && tree=$(GIT_INDEX_FILE={_INDEX} git write-tree) && "
        f"base=$(git rev-parse {shlex.quote(base_commit + '^{tree}')}) && rm -f {_INDEX} && "
        f'if [ "$tree" = "$base" ]; then echo {shlex.quote(base_commit)}; else echo "$tree"; fi',
        timeout=300,
    )
    if result.exit_code != 0 or not result.output.strip():
        raise SandboxError(f"cannot read the start state of {workdir}: {result.output.strip()[-500:]}")
    return result.output.strip().splitlines()[-1]


def diff_against(sandbox: Sandbox, workdir: str, start: str, exclude: tuple[str, ...] = NOT_IN_PATCH) -> str:
    """Every change in `workdir` since `start` (a commit or a tree: `start_state`), new files included, as a git
    patch; '' if none or on failure. Paths matching an `exclude` name or glob at any depth are left out."""
    result = sandbox.exec(
        f"{_staged(workdir, exclude)} && GIT_INDEX_FILE={_INDEX} git diff --cached --binary "
        f"{shlex.quote(start)}{_pathspec(exclude)} > /tmp/harness_model.patch; status=$?; rm -f {_INDEX}; "
        "(exit $status)",  # a subshell's exit: `exit` would end the sandbox's persistent shell
        timeout=120,
    )
    if result.exit_code != 0:
        return ""
    return sandbox.read_file("/tmp/harness_model.patch").decode("utf-8", errors="replace")
