"""`harbor`: a Harbor task (tasks.harbor). The instruction is the prompt; the agent works in the task's image,
in its working directory; when it stops, `tests/test.sh` runs in the same sandbox and its reward file is the
reward (`tasks.harbor.verify`); a task whose verifier is separate gets a fresh sandbox for it, with the
`artifacts` of the agent's sandbox (and /logs/artifacts) copied over to the same paths. `[agent].timeout_sec`
bounds the agent's turns: each command gets at most the time left, and the episode ends (`wall_time`) when none is. The oracle (`gold`) copies `solution/` to
/solution and runs `solve.sh`, as Harbor's oracle agent does: for up to the agent's time, not the per-command limit;
the agent never sees `tests/` or `solution/`.

A multi-step task runs its steps in turn in the one sandbox, as Harbor's multi-step trial does: each step's
`workdir/` uploaded and `setup.sh` run, a fresh agent session on its instruction (`next_session`), its verifier
run in the sandbox; a step below its `min_reward`, or without a verdict, ends the trial. The reward is the
steps' (`tasks.harbor.verify.trial_reward`), each step's result kept in `reward_details["steps"]`. The oracle
runs each step's solution in that step's session.
"""

from __future__ import annotations

import base64
import io
import shlex
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from sandboxes import Sandbox, SandboxError, SandboxSpec
from tasks.harbor.load import DEFAULT_WALL_TIME, ENV_CLASS
from tasks.harbor.verify import LOGS, SOLUTION_DIR, TESTS_DIR, VERIFIER_DIR, VerifierFailed, run_verifier, trial_reward
from tasks.task import Reward, Task

from ..environments import StepResult, ToolEnvironment
from ..parsing import ParsedTurn, ToolCall
from ..policy import Completion, tool_turn as call
from . import register_kind

ORACLE_LOG = f"{LOGS}/agent/oracle.txt"
STEP_OUTPUT = 1000  # characters of each step's test output kept in its result
SETUP_TIMEOUT = 600.0  # a step's setup.sh where the step sets no agent timeout


class HarborEnvironment(ToolEnvironment):
    """The task's image as the agent's sandbox; the verifier runs in it after the agent stops."""

    def init(self) -> list[dict[str, Any]]:
        self.steps = self.task.metadata.get("steps") or []  # a multi-step task: one agent session per step
        self.step_index, self.step_results = 0, []
        problem = self.task.metadata.get("harbor_problem")
        if problem:
            raise SandboxError(f"the Harbor task cannot run: {problem}")
        messages = super().init()
        self.sandbox.exec(f"mkdir -p {LOGS}/agent {VERIFIER_DIR} 2>/dev/null", timeout=30)
        # The verifier's environment is the sandbox's before the agent changes anything.
        self.start_env, self.agent_user = _start_state(self.sandbox)
        if self.steps:
            problem = self._prepare_step(self.steps[0])
            if problem:
                raise SandboxError(problem)
        self.agent_started = time.monotonic()
        return messages

    def next_session(self) -> list[dict[str, Any]] | None:
        """Harbor's next step: this step verified, then (unless its rewards fall below its `min_reward` or it gave
        no verdict) the next step's files and setup.sh, and a fresh session on its instruction."""
        if not self.steps or not self._verify_step() or self.step_index + 1 == len(self.steps):
            return None
        self.step_index += 1
        step = self.steps[self.step_index]
        problem = self._prepare_step(step)
        if problem:
            self.step_results.append({"step": step["name"], "error": problem})
            return None
        self.agent_started = time.monotonic()
        return [{"role": "user", "content": step["instruction"]}]

    def _prepare_step(self, step: dict) -> str | None:
        """Before a step's agent: what the last step's agent and verifier left in /logs and /tests cleared, the
        step's `workdir/` uploaded to the working directory and its `setup.sh` run there. The problem, if any."""
        if self.step_index > 0:
            self.sandbox.exec(
                f"rm -rf {TESTS_DIR}/* {TESTS_DIR}/.[!.]* {VERIFIER_DIR}/* {LOGS}/agent/* 2>/dev/null; true", timeout=60
            )
        files = Path(step["workdir_dir"])
        if not files.is_dir():
            return None
        workdir = self.task.sandbox.workdir
        self.sandbox.upload(files, workdir)
        if not (files / "setup.sh").is_file():
            return None
        limit = step["agent_timeout"] or SETUP_TIMEOUT
        result = self.sandbox.exec(f"bash {shlex.quote(workdir.rstrip('/') + '/setup.sh')}", timeout=limit)
        if result.exit_code != 0 or result.timed_out:
            return f"step {step['name']}: setup.sh exited with {result.exit_code}: {result.output[-800:]}"
        return None

    def _verify_step(self) -> bool:
        """Run the current step's verifier and keep its result; whether the next step may run (Harbor's rule: a
        verdict, and every `min_reward` key at least its threshold, a missing key below any)."""
        step = self.steps[self.step_index]
        try:
            reward = self._verify(
                step.get("verifier_sandbox"),
                step["artifacts"],
                [Path(folder) for folder in step["tests"]],
                step["verifier_env"],
                step["verifier_timeout"],
                step["verifier_user"],
            )
        except (VerifierFailed, SandboxError) as err:
            self.step_results.append({"step": step["name"], "error": str(err)})
            return False
        details = reward.details
        result = {"step": step["name"], "reward": reward.value, "rewards": details["rewards"]}
        result.update(reward_file=details["reward_file"], test_exit_code=details["test_exit_code"])
        result["test_output"] = details["test_output"][-STEP_OUTPUT:]
        self.step_results.append(result)
        below = [
            f"{key}={details['rewards'].get(key, float('-inf'))} below min_reward {threshold}"
            for key, threshold in (step["min_reward"] or {}).items()
            if details["rewards"].get(key, float("-inf")) < threshold
        ]
        if below:
            result["stopped"] = "; ".join(below)
        return not below

    def step(self, turn: ParsedTurn) -> StepResult:
        limit, left = self._agent_time()
        if left is not None and left <= 0:
            from ..episode import EpisodeEnd

            raise EpisodeEnd("wall_time", f"the task's [agent].timeout_sec ({limit:g} s) ran out")
        return super().step(turn)

    def call_timeout(self, call: ToolCall) -> float:
        """Any call, the oracle's solve.sh too, gets at most the agent's time left."""
        left = self._agent_time()[1]
        return super().call_timeout(call) if left is None else min(super().call_timeout(call), left)

    def _agent_time(self) -> tuple[float | None, float | None]:
        """The current step's (or the task's) `[agent].timeout_sec` and the seconds left of it (None: no limit)."""
        limit = self.steps[self.step_index]["agent_timeout"] if self.steps else self.task.metadata.get("agent_timeout")
        return (limit, limit - (time.monotonic() - self.agent_started)) if limit else (None, None)

    def finish(self) -> Reward:
        if self.sandbox is None:  # the episode already ended as a sandbox_error, which training leaves out
            return Reward(0.0, {"reason": "the sandbox never started"})
        if self.steps:
            if len(self.step_results) <= self.step_index:  # the step the agent's work ended in
                self._verify_step()
            return trial_reward(self.step_results, self.task.metadata["reward_strategy"])
        meta = self.task.metadata
        return self._verify(
            meta.get("verifier_sandbox"),
            meta["artifacts"],
            [Path(meta["harbor_dir"]) / "tests"],
            meta["verifier_env"],
            meta["verifier_timeout"],
            meta["verifier_user"],
        )

    def _verify(
        self,
        separate: dict | None,
        artifacts: list[str],
        tests: list[Path],
        env: dict[str, str],
        timeout: float,
        user: str | None,
    ) -> Reward:
        """The verifier run in the agent's sandbox, or (`separate`: its spec) in a fresh one (Harbor's separate
        mode): there, the `artifacts` of the agent's sandbox (and /logs/artifacts) copied to the same paths."""
        if separate is None:
            return self._run_tests(
                self.sandbox, self.task.sandbox.workdir, self.start_env, self.agent_user, tests, env, timeout, user
            )
        spec = SandboxSpec.from_dict(separate)
        with tempfile.TemporaryDirectory() as scratch:
            copied = []
            for index, path in enumerate([f"{LOGS}/artifacts", *artifacts]):
                if self.sandbox.exec(f"test -e {shlex.quote(path)}", timeout=30).exit_code == 0:
                    local = Path(scratch) / str(index)
                    self.sandbox.download(path, local)
                    copied.append((local, path))
            verifier = self.backend.create(spec)
            try:
                verifier.exec(f"mkdir -p {VERIFIER_DIR} 2>/dev/null", timeout=30)
                start_env, users = _start_state(verifier)
                for local, path in copied:
                    verifier.upload(local, path)
                return self._run_tests(verifier, spec.workdir, start_env, users, tests, env, timeout, user)
            finally:
                verifier.close()

    @staticmethod
    def _run_tests(sandbox, workdir, start_env, users, tests, env, timeout, user) -> Reward:
        return run_verifier(
            sandbox, tests, workdir, {**start_env, **env}, timeout, None if user in (None, *users) else user
        )


def _start_state(sandbox: Sandbox) -> tuple[dict[str, str], list[str]]:
    """A sandbox's environment variables and its user's name and uid, as it started."""
    encoded = sandbox.exec("env -0 | base64 -w0", timeout=30).output
    pairs = base64.b64decode(encoded.strip()).decode("utf-8", errors="replace").split("\0")
    user = sandbox.exec("id -un; id -u", timeout=30).output.split()
    return dict(pair.split("=", 1) for pair in pairs if "=" in pair), user


def verifier_sandboxes(task: Task) -> list[SandboxSpec]:
    """The fresh sandbox a separate verifier runs in (started ahead in eval runs)."""
    spec = task.metadata.get("verifier_sandbox")
    return [SandboxSpec.from_dict(spec)] if spec else []


def oracle_turns(task: Task, use_tools: bool) -> list[Completion]:
    """Harbor's oracle: `solution/` copied to /solution (text files with the editor, the rest as an archive),
    `solve.sh` run from the working directory with `[solution].env`, its output in /logs/agent/oracle.txt."""
    if not use_tools:
        raise ValueError("a Harbor task is solved by running its solution in the sandbox: it needs tools")
    if task.metadata.get("harbor_problem"):  # the episode ends before its first turn, with the problem
        return [call("submit")]
    if not task.metadata.get("has_solution"):
        raise ValueError(
            "the Harbor task has no solution/solve.sh" + (" for each step" if task.metadata.get("steps") else "")
        )
    steps, env = task.metadata.get("steps"), task.metadata["solution_env"]
    if steps:  # each step's session: its solution/ (else the task's) run, then submit
        return [
            turn
            for i, step in enumerate(steps)
            for turn in _oracle(Path(step["solution_dir"]), env, step["agent_timeout"], i > 0)
        ]
    return _oracle(Path(task.metadata["harbor_dir"]) / "solution", env, task.metadata.get("agent_timeout"))


def _oracle(solution: Path, solution_env: dict[str, str], limit: float | None, over: bool = False) -> list[Completion]:
    """The turns that copy `solution` to /solution and run its solve.sh, bounded by the agent's time (`limit`, the
    step's or the task's `[agent].timeout_sec`), as Harbor bounds its oracle, not by the per-command limit; `over`:
    its files replace those an earlier step copied (Harbor uploads each step's solution/ over the last)."""
    files = sorted(p for p in solution.rglob("*") if p.is_file())
    paths = " ".join(shlex.quote(f"{SOLUTION_DIR}/{p.relative_to(solution).as_posix()}") for p in files)
    turns, binary = [call("bash", command=f"rm -f {paths}")] if over and files else [], []
    for path in files:
        relative = path.relative_to(solution).as_posix()
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            binary.append(path)
            continue
        turns.append(call("str_replace_editor", command="create", path=f"{SOLUTION_DIR}/{relative}", file_text=text))
    if binary:
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w:gz") as tar:
            for path in binary:
                tar.add(path, arcname=path.relative_to(solution).as_posix())
        encoded = base64.b64encode(archive.getvalue()).decode()
        turns.append(
            call("bash", command=f"mkdir -p {SOLUTION_DIR} && echo {encoded} | base64 -d | tar -xz -C {SOLUTION_DIR}")
        )
    env = " ".join(shlex.quote(f"{k}={v}") for k, v in {"DEBIAN_FRONTEND": "noninteractive", **solution_env}.items())
    run = (
        f"chmod +x {SOLUTION_DIR}/solve.sh && mkdir -p {LOGS}/agent && "
        f'env {env} {SOLUTION_DIR}/solve.sh > {ORACLE_LOG} 2>&1; echo "solve.sh exited with $?"; tail -c 2000 {ORACLE_LOG}'
    )
    solve = call("bash", command=run)
    solve.tool_calls[0].timeout = limit or DEFAULT_WALL_TIME
    return [*turns, solve, call("submit")]


def report_notes(task: Task) -> list[str]:
    """How the task's image was made here, for the run's report: each base stood in for, what was installed
    ahead, the disk its image adds, and what of the task does not apply here."""
    meta = task.metadata
    notes = [f"base_substituted: {line}" for line in meta.get("base_substituted", [])]
    if meta.get("apt_installed_ahead") or meta.get("pip_wheelhouse"):
        apt, pip = meta.get("apt_installed_ahead", []), meta.get("pip_wheelhouse", [])
        notes.append(f"installed ahead: apt {', '.join(apt) or '-'}; pip {', '.join(pip) or '-'}")
    if task.sandbox is not None:
        disk = f", {meta['image_disk_mb']} MiB of its own" if "image_disk_mb" in meta else ""
        notes.append(f"image: {task.sandbox.image}{disk}")
    if meta.get("network", "none") != "none":
        notes.append(f"network: {meta['network']}")
    if meta.get("prior_context_ignored"):
        notes.append(f"prior context ignored: {meta['prior_context_ignored']}")
    return notes


register_kind(
    ENV_CLASS,
    HarborEnvironment,
    gold=oracle_turns,
    verifier_sandboxes=verifier_sandboxes,
    report_notes=report_notes,
)
