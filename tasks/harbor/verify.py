"""The Harbor verifier, run as Harbor runs it: in the agent's sandbox, after the agent stops.

`tests/` is copied to `/tests`, stale rewards are removed, and `/tests/test.sh` runs with its output in
`/logs/verifier/test-stdout.txt`: in the task's working directory, as `[verifier].user` (else the agent's
user), with the sandbox's environment as it was before the agent's first command plus `[verifier].env`,
for at most `[verifier].timeout_sec`. The reward is read from `/logs/verifier/reward.json` when it exists
(an object of numbers), else from `reward.txt` (one number). The scalar reward is the `reward` key of
reward.json, else its only key, else the mean of its values; every key is kept in the reward's details.

A verifier that times out, or writes no reward, an empty one or one that is not a number, gives no
verdict: `VerifierFailed` (a TaskError), which the episode records as a scoring failure (never a 0).
"""

from __future__ import annotations

import json
import math
import shlex
import shutil
import tempfile
import time
from pathlib import Path

from sandboxes import FileNotFoundInSandbox, Sandbox

from ..errors import TaskError
from ..task import Reward

LOGS = "/logs"
VERIFIER_DIR = "/logs/verifier"
TESTS_DIR = "/tests"
SOLUTION_DIR = "/solution"  # the oracle's (harness.kinds.harbor)
TEST_OUTPUT = f"{VERIFIER_DIR}/test-stdout.txt"
GRACE = 30.0  # seconds beyond the verifier's own limit before the sandbox command is given up


class VerifierFailed(TaskError):
    """The verifier gave no verdict: it timed out or wrote no usable reward."""


def run_verifier(
    sandbox: Sandbox,
    tests: list[Path],
    workdir: str,
    env: dict[str, str],
    timeout: float,
    user: str | None = None,
) -> Reward:
    """Run `test.sh` of the folders `tests` (copied to /tests in turn, a later file over an earlier one: a step's
    tests over its task's) in `sandbox` and read its reward (see the module's docstring)."""
    started = time.monotonic()
    # The image made both folders writable by any user; what the agent left in /tests goes.
    sandbox.exec(
        f"rm -rf {TESTS_DIR}/* {TESTS_DIR}/.[!.]* {VERIFIER_DIR}/reward.txt {VERIFIER_DIR}/reward.json", timeout=60
    )
    with tempfile.TemporaryDirectory() as staging:  # test.sh executable whoever owns the copy (Harbor: chmod as root)
        copy = Path(staging) / "tests"
        for folder in tests:
            shutil.copytree(folder, copy, dirs_exist_ok=True)
        (copy / "test.sh").chmod(0o755)
        sandbox.upload(copy, TESTS_DIR)
    variables = " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
    run = f"cd {shlex.quote(workdir)} && exec env -i {variables} /tests/test.sh > {TEST_OUTPUT} 2>&1 < /dev/null"
    if user:
        run = f"runuser -u {shlex.quote(user)} -- bash -c {shlex.quote(run)}"
    result = sandbox.exec(f"timeout -k 5 {timeout:g} bash -c {shlex.quote(run)}", timeout=timeout + GRACE)
    output = _read(sandbox, TEST_OUTPUT)
    details = {"test_exit_code": result.exit_code, "test_output": output[-3000:], "verifier_s": 0.0}
    if result.timed_out or result.exit_code == 124:
        raise VerifierFailed(
            f"the verifier ran past [verifier].timeout_sec ({timeout:g} s); its output ends:\n{output[-800:]}"
        )
    rewards, source = read_rewards(sandbox, output)
    details.update(rewards=rewards, reward_file=source, verifier_s=round(time.monotonic() - started, 3))
    return Reward(scalar_reward(rewards), details)


def read_rewards(sandbox: Sandbox, output: str = "") -> tuple[dict[str, float], str]:
    """The rewards the verifier wrote, and the file they came from (reward.json takes precedence, as in Harbor)."""
    raw_json = _read(sandbox, f"{VERIFIER_DIR}/reward.json", missing=None)
    if raw_json is not None:
        return parse_reward_json(raw_json), "reward.json"
    raw_text = _read(sandbox, f"{VERIFIER_DIR}/reward.txt", missing=None)
    if raw_text is not None:
        return {"reward": parse_reward_text(raw_text)}, "reward.txt"
    raise VerifierFailed(
        f"the verifier wrote no reward ({VERIFIER_DIR}/reward.txt or reward.json); its output ends:\n{output[-800:]}"
    )


def parse_reward_text(text: str) -> float:
    if not text.strip():
        raise VerifierFailed("reward.txt is empty")
    try:
        value = float(text)
    except ValueError:
        raise VerifierFailed(f"reward.txt is not a number: {text[:200]!r}") from None
    if not math.isfinite(value):
        raise VerifierFailed(f"reward.txt holds a non-finite reward: {text[:200]!r}")
    return value


def parse_reward_json(text: str) -> dict[str, float]:
    if not text.strip():
        raise VerifierFailed("reward.json is empty")
    try:
        rewards = json.loads(text)
    except ValueError as err:
        raise VerifierFailed(f"reward.json is not JSON: {err}") from None
    if not isinstance(rewards, dict) or not rewards:
        raise VerifierFailed(f"reward.json must be an object of numbers, not {text[:200]!r}")
    for key, value in rewards.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise VerifierFailed(f"reward.json: {key} = {value!r} is not a finite number")
    return {key: float(value) for key, value in rewards.items()}


def scalar_reward(rewards: dict[str, float]) -> float:
    """The one reward training and the report use: `reward`, else the only value, else the mean."""
    if "reward" in rewards:
        return rewards["reward"]
    return sum(rewards.values()) / len(rewards)


def _read(sandbox: Sandbox, path: str, missing: str | None = "") -> str | None:
    try:
        return sandbox.read_file(path).decode("utf-8", errors="replace")
    except FileNotFoundInSandbox:
        return missing


def trial_reward(steps: list[dict], strategy: str) -> Reward:
    """A multi-step trial's reward by Harbor's rule, from its steps' results (`harness.kinds.harbor`): `final`, the
    last step's rewards; `mean`, each key's mean over the steps (a key a step lacks counts 0). A step without a
    verdict (its verifier or setup.sh failed) leaves the trial without one: Harbor would average the others."""
    failed = [step for step in steps if "error" in step]
    if failed:
        summary = "; ".join(
            f"{s['step']}: " + (s["error"] if "error" in s else f"reward {s['reward']:g}") for s in steps
        )
        raise VerifierFailed(f"step {failed[0]['step']} gave no verdict ({summary})")
    if strategy == "final":
        rewards = steps[-1]["rewards"]
    else:
        keys = sorted({key for step in steps for key in step["rewards"]})
        rewards = {key: sum(step["rewards"].get(key, 0.0) for step in steps) / len(steps) for key in keys}
    return Reward(scalar_reward(rewards), {"rewards": rewards, "reward_strategy": strategy, "steps": steps})
