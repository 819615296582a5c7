"""The tiny checkpoint in real multi-turn episodes: in process (token-exact) and over HTTP."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
import torch

from harness.episode import EpisodeLimits, run_episode
from harness.policies.hf import HFPolicy
from harness.policy import Sampling
from tasks.taskset import load_tasks
from tests.cli_helpers import ROOT, harness


class RecordingPolicy(HFPolicy):
    """The real engine, remembering every prompt it continued and every token it produced."""

    def __init__(self, path):
        super().__init__(path)
        self.calls: list[tuple[list[int], list[int], list[float]]] = []

    def generate_ids(self, prompt_ids, sampling):
        completion = super().generate_ids(prompt_ids, sampling)
        self.calls.append((list(prompt_ids), list(completion.token_ids), list(completion.logprobs)))
        return completion


def test_multi_turn_tokens_are_exactly_what_the_engine_produced(tiny_model, docker_backend):
    policy = RecordingPolicy(tiny_model)
    task = load_tasks("swe-demo")[0]  # a reply without a tool call gets feedback: several turns
    sampling = Sampling(temperature=1.0, max_tokens=24, seed=3)
    trajectory = run_episode(task, policy, sampling, EpisodeLimits(max_turns=3, max_format_errors=4), backend=docker_backend)
    assert trajectory.turns == 3 and len(policy.calls) == trajectory.turns
    ids, mask, logprobs = trajectory.token_ids, trajectory.loss_mask, trajectory.logprobs
    assert len(ids) == len(mask) == len(logprobs)
    # every turn continued exactly the recorded sequence, and its tokens sit right after it
    for prompt, generated, _ in policy.calls:
        assert ids[: len(prompt)] == prompt
        assert ids[len(prompt) : len(prompt) + len(generated)] == generated
    # the loss mask selects exactly the generated tokens, with their logprobs
    generated_all = [t for _, g, _ in policy.calls for t in g]
    assert [t for t, m in zip(ids, mask) if m] == generated_all
    assert [l for l, m in zip(logprobs, mask) if m] == [l for *_, lp in policy.calls for l in lp]
    assert sum(mask) < len(ids)  # prompt and observations are masked out
    # and a plain forward pass over the recorded ids gives the same logprobs: no re-tokenizing
    with torch.no_grad():
        logits = policy.model(torch.tensor([ids])).logits[0, :-1].float() / sampling.temperature
    recomputed = torch.log_softmax(logits, -1).gather(1, torch.tensor(ids[1:])[:, None])[:, 0]
    positions = [i for i, m in enumerate(mask) if m]
    assert torch.allclose(recomputed[[p - 1 for p in positions]], torch.tensor([logprobs[p] for p in positions]), atol=1e-4)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served(tiny_model):
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "cli", "serve", "--checkpoint", str(tiny_model), "--port", str(port), "--model-name", "tiny"],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}/models", timeout=2)
            break
        except OSError:
            assert server.poll() is None, server.stdout.read()
            time.sleep(0.3)
    yield url
    server.terminate()
    server.wait(timeout=30)


def test_served_checkpoint_answers_the_real_openai_client(served):
    import openai

    client = openai.OpenAI(base_url=served, api_key="unused")
    assert [m.id for m in client.models.list().data] == ["tiny"]
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}]
    response = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "list files"}], tools=tools,
                                              max_tokens=16, temperature=0.0, seed=0)
    choice = response.choices[0]
    assert choice.finish_reason in ("stop", "length", "tool_calls") and response.usage.completion_tokens > 0
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="tiny", messages="not a list", max_tokens=4)
    request = urllib.request.Request(f"{served}/chat/completions", data=b"{not json", headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request)
    assert caught.value.code == 400 and "error" in json.loads(caught.value.read())


def test_eval_through_the_served_endpoint(served, tmp_path, docker_backend):
    done = harness("eval", "--checkpoint", "endpoint:tiny", "--base-url", served, "--tasks", "gsm8k-tool", "--limit", "2",
                   "--max-turns", "3", "--max-tokens", "24", "--workers", "2", "--output", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["episodes"] == 2 and report["errors"] == 0
    assert set(report["exit_statuses"]) <= {"submitted", "max_turns", "format_errors"}
    trajectory = json.loads(next((tmp_path / "trajectories").glob("*.json")).read_text())
    assert trajectory["turns"] >= 1 and trajectory["messages"][1]["role"] == "assistant"


def test_eval_with_the_local_checkpoint(tiny_model, tmp_path, docker_backend):
    done = harness("eval", "--checkpoint", str(tiny_model), "--tasks", "gsm8k", "--limit", "3", "--max-tokens", "16", "--output", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["episodes"] == 3 and report["total_completion_tokens"] > 0
    trajectory = json.loads(next((tmp_path / "trajectories").glob("*.json")).read_text())
    assert trajectory["token_ids"] and len(trajectory["token_ids"]) == len(trajectory["loss_mask"])
