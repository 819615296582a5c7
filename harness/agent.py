"""An agent on your own repository: a checkpoint, an endpoint or a scripted policy carries out a
free-form request ("Fix this bug: ...") on a copy of a local repository.

    agent = Agent.from_checkpoint("runs/gsm8k-grpo/checkpoints/step_20")
    result = agent.run_task(prompt="Fix this bug: ...", repo="~/src/myproject", max_turns=30,
                            backend="docker", test="python3 -m pytest -q tests/test_x.py")
    result.success, result.patch, result.exit_status, result.trajectory
    result.write_patch("fix.diff"); result.apply_to_branch("agent/fix")

The repository is copied into the sandbox (never mounted); the test command, when given, runs on
the copy plus the patch in a fresh sandbox, as grading does.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from infra.renames import warn_renamed
from sandboxes import Backend, get_backend
from tasks.task import Task
from tasks.user_repo import apply_to_branch, repo_task

from .context import KEEP_ALL, check_summarizer, parse_context
from .episode import Limits, run_episode
from .errors import HarnessError
from .policy import Policy, Sampling
from .scaffolds import OWN_LOOP, get_scaffold
from .trajectory import SCORING_FAILED, Trajectory, result_row, trajectory_file
from .trajectory_formats import OWN_FORMAT, write_trajectory

BACKENDS = ("docker", "local", "overlay", "podman", "auto")
# SkyRL's runtime names that name a scaffold: it drives the turns in a sandbox of the "auto" backend
SCAFFOLD_RUNTIMES = {"openhands": "openhands"}


@dataclass
class AgentResult:
    #: True/False when a test command judged the patch; None when nothing did (no test command, or scoring failed).
    success: bool | None
    trajectory: Trajectory
    #: The agent's changes as a git patch against the repository as it was given ('' for none).
    patch: str
    #: How the episode ended: one of harness.trajectory.EXIT_STATUSES (submitted, max_turns, wall_time, ...).
    exit_status: str
    repo: str
    #: The test command's output (its tail), when one ran.
    test_output: str = ""

    @property
    def success_rate(self) -> float | None:
        """SkyRL's name: 1.0 or 0.0 for one judged attempt; None when nothing judged it."""
        return None if self.success is None else float(self.success)

    def save(self, output: Path, trajectory_format: str = OWN_FORMAT) -> Path:
        """The trajectory (also in `trajectory_format`) and the patch in `output`; the trajectory's file."""
        saved = output / "trajectory.json"
        self.trajectory.save(saved)
        if trajectory_format != OWN_FORMAT:
            write_trajectory(self.trajectory, trajectory_format, output / trajectory_format / saved.name)
        self.write_patch(output / "model.patch")
        return saved

    def write_patch(self, path: str | Path) -> Path:
        path = Path(path).expanduser()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.patch)
        return path

    def apply_to_branch(self, branch: str, message: str | None = None) -> str:
        """Commit the patch on a new branch of the repository (its work tree untouched); returns the commit hash."""
        first_line = self.trajectory.messages[0]["content"] if self.trajectory.messages else ""
        return apply_to_branch(
            self.repo,
            self.patch,
            branch,
            message
            or f"harness agent ({self.trajectory.policy})\n\n"
            f"exit status: {self.exit_status}; tests: {self.success}\n\n{first_line[-500:]}",
        )


@dataclass
class TaskOutcome:
    """One task of `Agent.run_each`: its trajectory, its result row (as eval's results.jsonl has) and file."""

    task: Task
    trajectory: Trajectory
    row: dict[str, Any]
    saved: Path


class Agent:
    def __init__(self, policy: Policy, sampling: Sampling | None = None):
        self.policy = policy
        self.sampling = sampling or Sampling(temperature=0.0, max_tokens=1024)

    @classmethod
    def from_checkpoint(
        cls,
        checkpoint: str | Path,
        base_url: str | None = None,
        temperature: float = 0.0,
        max_tokens: int = 1024,
        seed: int | None = None,
    ) -> "Agent":
        """A checkpoint folder, `endpoint:MODEL` (with `base_url` or $OPENAI_BASE_URL), or a scripted policy
        (`empty`, `replay:PATH`)."""
        from .policies.factory import make_policy

        policy = make_policy(str(checkpoint), base_url=base_url)
        return cls(policy, Sampling(temperature=temperature, max_tokens=max_tokens, seed=seed))

    def run_task(
        self,
        prompt: str,
        repo: str | Path,
        max_turns: int = 30,
        backend: str | Backend = "auto",
        test: str | None = None,
        on_message: Callable[[dict[str, Any]], None] | None = None,
        image: str = "harness-base:latest",
        max_context: int = Limits.max_context,
        episode_timeout: float = Limits.episode_timeout,
        scaffold: str = OWN_LOOP,
        runtime: str | None = None,
        context: str = KEEP_ALL.name,
        wall_time: float | None = None,
        max_format_errors: int = Limits.max_format_errors,
        summarizer: str = "",
    ) -> AgentResult:
        """Carry out `prompt` on a copy of `repo`; `test` (a shell command run in the repository's folder) judges it.
        `backend` is the sandbox backend (a name, as `--backend` takes, or a Backend); `scaffold` drives the turns:
        our own loop, or a registered scaffold such as `mini-swe-agent`; `context` what each prompt holds of the
        history (harness.context: keep-all, mask-observations:N, window:N, summarize:N), written by the endpoint
        `summarizer` (MODEL@URL) where given. `runtime` is SkyRL's
        spelling: a backend name, or `"openhands"` for the OpenHands scaffold on the "auto" backend. `wall_time` is the
        former name of `episode_timeout`. The limits are harness.episode.Limits', with its defaults."""
        if wall_time is not None:
            warn_renamed("run_task(wall_time=...)", "run_task(episode_timeout=...)")
            episode_timeout = wall_time
        if max_turns < 1:
            raise HarnessError(f"max_turns must be at least 1, not {max_turns}")
        scaffold, sandbox_backend = self._drivers(scaffold, backend, runtime, context)  # checked before the copy
        check_summarizer(context, summarizer)
        with tempfile.TemporaryDirectory(prefix="harness-repo-") as staging:
            task = repo_task(repo, prompt, Path(staging) / "repo", test_command=test, max_turns=max_turns, image=image)
            trajectory = self.run_on(
                task,
                max_turns,
                sandbox_backend,
                on_message,
                max_context=max_context,
                episode_timeout=episode_timeout,
                scaffold=scaffold,
                context=context,
                max_format_errors=max_format_errors,
                summarizer=summarizer,
            )
        details = trajectory.reward_details
        judged = bool(details.get("judged")) and SCORING_FAILED not in trajectory.error
        return AgentResult(
            success=trajectory.reward == 1.0 if judged else None,
            trajectory=trajectory,
            patch=trajectory.model_patch,
            exit_status=trajectory.exit_status,
            repo=str(Path(repo).expanduser().resolve()),
            test_output=details.get("test_output", ""),
        )

    def run_on(
        self,
        task: Task,
        max_turns: int | None = None,
        backend: str | Backend = "auto",
        on_message: Callable[[dict[str, Any]], None] | None = None,
        max_context: int = Limits.max_context,
        episode_timeout: float = Limits.episode_timeout,
        scaffold: str = OWN_LOOP,
        context: str = KEEP_ALL.name,
        max_format_errors: int = Limits.max_format_errors,
        summarizer: str = "",
    ) -> Trajectory:
        """One episode on a task of a task set (`tasks.taskset.load_tasks`, e.g. `harbor:PATH`), scored by the
        task's own grader; `max_turns` caps the task's own limit."""
        _, sandbox_backend = self._drivers(scaffold, backend, None, context)
        check_summarizer(context, summarizer)
        driver = get_scaffold(scaffold)
        limits = Limits(
            max_turns=max_turns,
            max_context=max_context,
            episode_timeout=episode_timeout,
            max_format_errors=max_format_errors,
            context=context,
            summarizer=summarizer,
        )
        return run_episode(
            task, self.policy, self.sampling, limits, sandbox_backend, on_message=on_message, scaffold=driver
        )

    def run_each(
        self,
        tasks: list[Task],
        output: Path,
        trajectory_format: str = OWN_FORMAT,
        on_start: Callable[[Task], None] = lambda task: None,
        **run: Any,
    ) -> Iterator[TaskOutcome]:
        """`run_on` each task in turn (`run`: its options), each trajectory saved where `harness eval` writes it
        (and in `trajectory_format`); `on_start` hears of each task before its episode."""
        for task in tasks:
            on_start(task)
            trajectory = self.run_on(task, **run)
            saved = trajectory_file(output, task.id, 0)
            trajectory.save(saved)
            if trajectory_format != OWN_FORMAT:
                write_trajectory(trajectory, trajectory_format, output / trajectory_format / saved.name)
            yield TaskOutcome(task, trajectory, result_row(trajectory), saved)

    @staticmethod
    def _drivers(scaffold: str, backend: str | Backend, runtime: str | None, context: str):
        """(the scaffold's name, the Backend) a run asks for, each checked."""
        if runtime in SCAFFOLD_RUNTIMES:
            if scaffold not in (OWN_LOOP, SCAFFOLD_RUNTIMES[runtime]):
                raise HarnessError(
                    f"runtime {runtime!r} is the {SCAFFOLD_RUNTIMES[runtime]} scaffold: it cannot run scaffold {scaffold!r}"
                )
            scaffold = SCAFFOLD_RUNTIMES[runtime]
        elif runtime is not None:
            backend = runtime
        if isinstance(backend, str) and backend not in BACKENDS:
            raise HarnessError(
                f"sandbox backend {backend!r} is not built: use one of {', '.join(BACKENDS)} "
                "(docker or podman containers, or bubblewrap sandboxes: local on the base image, overlay on any image), "
                f"or runtime={next(iter(SCAFFOLD_RUNTIMES))!r} for the OpenHands scaffold"
            )
        get_scaffold(scaffold)
        parse_context(context)  # a bad strategy is refused before any sandbox starts
        return scaffold, get_backend(backend) if isinstance(backend, str) else backend

    def close(self) -> None:
        self.policy.close()

    def __enter__(self) -> "Agent":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
