"""Episodes that end through no action of the policy are left out of training. Real containers are killed
(`docker kill`) in the middle of real episodes: those episodes, and a group they leave too small, enter neither
advantages nor loss, the update equals the one computed without them, and too many of them fail the step."""

from __future__ import annotations

import re

import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest
import torch

from harness.episode import run_episode
from harness.policies.hf import HFPolicy
from harness.policy import Policy, Sampling
from harness.tiny_model import init_tiny
from harness.trajectory import Trajectory, infrastructure_failure
from tasks.gsm8k import gsm8k_tasks
from trainer.batch import build_batch, without_infrastructure_failures
from trainer.errors import TrainerError
from trainer.learner import Learner, LearnerSettings

pytestmark = pytest.mark.usefixtures("one_torch_thread")
SAMPLING = Sampling(temperature=1.0, max_tokens=64)
ROW = {"question": "What is 2 + 3?", "answer": "2 + 3 = <<2+3=5>>5\n#### 5"}


def call(name: str, arguments: str) -> str:
    return f'<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call>'


COMPUTE = call("python", '{"code": "print(2 + 3)"}')
RIGHT, WRONG = [COMPUTE, call("submit", '{"answer": "5"}')], [COMPUTE, call("submit", '{"answer": "4"}')]
SLOW = [call("python", '{"code": "import time; time.sleep(60)"}'), call("submit", '{"answer": "5"}')]


class Forced(Policy):
    """Chosen replies as the tiny model's own tokens: their ids and a forward pass's log-probs, as the engine would
    have recorded them had it sampled these replies (a random tiny model never makes a tool call by itself)."""

    name = "forced"

    def __init__(self, engine: HFPolicy, replies: list[str]):
        self.engine, self.tokenizer, self.replies = engine, engine.tokenizer, list(replies)

    @torch.inference_mode()
    def generate_ids(self, prompt_ids, sampling):
        ids = self.tokenizer(self.replies.pop(0), add_special_tokens=False).input_ids + [self.tokenizer.eos_token_id]
        logits = self.engine.model(torch.tensor([prompt_ids + ids])).logits[0, len(prompt_ids) - 1 : -1].float()
        logprobs = (logits / sampling.temperature).log_softmax(-1).gather(1, torch.tensor(ids)[:, None])[:, 0].tolist()
        return self.engine._completion(len(prompt_ids), ids, logprobs, "stop", sampling.stop)


def kill_during_the_tool_call(container: str) -> None:
    """`docker kill` the container once the `python` tool's snippet runs in it (seen by `docker top`)."""
    for _ in range(600):
        if "snippet.py" in subprocess.run(["docker", "top", container], capture_output=True, text=True).stdout:
            subprocess.run(["docker", "kill", container], capture_output=True, check=True)
            return
        time.sleep(0.1)


def episode(task, engine: HFPolicy, backend, replies: list[str]) -> Trajectory:
    """One real episode; a SLOW one's container is killed from outside while its tool call runs."""
    sandbox = backend.create(task.sandbox)
    if replies is SLOW:
        threading.Thread(target=kill_during_the_tool_call, args=(sandbox.container.id,), daemon=True).start()
    return run_episode(task, Forced(engine, replies), SAMPLING, backend=backend, sandbox=sandbox)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return init_tiny(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def groups(docker_backend, model) -> list[list[Trajectory]]:
    engine = HFPolicy(model, device="cpu")
    task = gsm8k_tasks([ROW], variant="tool")[0]
    plan = [[RIGHT, WRONG, SLOW], [WRONG, SLOW, SLOW], [RIGHT, WRONG, RIGHT]]  # 3 of 9 containers die mid-episode
    with ThreadPoolExecutor(9) as pool:  # at once, as a rollout step runs them
        futures = [
            [pool.submit(episode, replace(task, id=f"{task.id}-{g}"), engine, docker_backend, r) for r in group]
            for g, group in enumerate(plan)
        ]
        return [[future.result() for future in group] for group in futures]


def test_killed_containers_are_infrastructure_failures(groups):
    outcomes = [[(t.exit_status, t.reward) for t in group] for group in groups]
    assert outcomes == [
        [("submitted", 1.0), ("submitted", 0.0), ("sandbox_error", 0.0)],
        [("submitted", 0.0), ("sandbox_error", 0.0), ("sandbox_error", 0.0)],
        [("submitted", 1.0), ("submitted", 0.0), ("submitted", 1.0)],
    ], [t.error for g in groups for t in g]
    died = [t for group in groups for t in group if infrastructure_failure(t)]
    # Which words say so depends on when the shell notices: the shell died, a new one found the sandbox gone,
    # or the engine refused to start one in a container that is not running.
    gone = re.compile(r"died|is gone|is not running")
    assert len(died) == 3 and all(t.turns == 1 and gone.search(t.error) for t in died), [t.error for t in died]
    assert (
        infrastructure_failure(Trajectory("t", exit_status="submitted", error="scoring failed: grading x failed"))
        == "scoring_error"
    )
    assert infrastructure_failure(Trajectory("t", exit_status="wall_time")) == ""


def test_the_update_equals_the_one_without_them(groups, model):
    kept, stats = without_infrastructure_failures(groups, min_valid=2, max_fraction=0.5)
    assert stats == {"infra_failures": 3.0, "infra_failure_fraction": 1 / 3, "dropped_groups": 1.0}
    survivors = [groups[0][:2], groups[2]]  # the group left with one episode is dropped whole
    assert kept == survivors
    masked, clean, unmasked = (
        build_batch(g, pad_id=0, filter_zero_variance=True, filter_truncated=False) for g in (kept, survivors, groups)
    )
    assert masked.advantages[:2].tolist() == pytest.approx(
        [0.7071, -0.7071], abs=1e-4
    )  # [1, 0]: the dead one's 0 is not in
    weights = []
    for batch in (masked, clean, unmasked):
        torch.manual_seed(0)
        learner = Learner(model, LearnerSettings(learning_rate=1e-2, micro_batch_size=2))
        learner.train_step(batch)
        weights.append(learner.weights())
    assert all(torch.equal(weights[0][name], weights[1][name]) for name in weights[0])
    assert any(not torch.equal(weights[0][name], weights[2][name]) for name in weights[0])  # unmasked, they would count


def test_too_many_failures_fail_the_step_loudly(groups):
    with pytest.raises(
        TrainerError, match=r"3 of 9 episodes ended through no fault of the policy \(first: sandbox_error"
    ):
        without_infrastructure_failures(groups, min_valid=2, max_fraction=0.25)
    with pytest.raises(TrainerError, match="no group kept 2 valid episodes"):
        without_infrastructure_failures([groups[1]], min_valid=2, max_fraction=1.0)
