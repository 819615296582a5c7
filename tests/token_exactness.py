"""The token-exactness checks, for any in-process engine (transformers or vLLM): a multi-turn episode's record, and
the rows a rewritten history is trained on."""

from __future__ import annotations

import torch

from harness.episode import Limits, run_episode
from harness.policy import Policy, Sampling
from tasks.taskset import load_tasks
from trainer.batch import token_rows


class Recording(Policy):
    """A real engine, remembering every prompt it continued and every token it produced."""

    def __init__(self, policy: Policy):
        self.policy, self.name, self.tokenizer = policy, policy.name, policy.tokenizer
        self.calls: list[tuple[list[int], list[int], list[float]]] = []

    def generate(self, messages, tools, sampling):
        raise AssertionError("a local engine continues token ids")

    def generate_ids(self, prompt_ids, sampling):
        completion = self.policy.generate_ids(prompt_ids, sampling)
        self.calls.append((list(prompt_ids), list(completion.token_ids), list(completion.logprobs)))
        return completion


class ForcedCall(Policy):
    """A transformers checkpoint whose every reply is one tool call, written in the template's format and scored by
    the model: the call's tokens after the prompt, with the model's logprobs of them (what sampling them would
    report). The tiny random models call no tool; this one does, so tool results fill the history."""

    def __init__(self, engine, name: str, **arguments):
        from harness.parsing import tool_call_format
        from harness.tokens import turn_end

        self.engine, self.name, self.tokenizer = engine, engine.name, engine.tokenizer
        text = tool_call_format(self.tokenizer).render(name, arguments)
        end = self.tokenizer.convert_tokens_to_ids(turn_end(self.tokenizer))
        self.reply = self.tokenizer.encode(text, add_special_tokens=False) + [end]

    def generate(self, messages, tools, sampling):
        raise AssertionError("a local engine continues token ids")

    @torch.no_grad()
    def generate_ids(self, prompt_ids, sampling):
        from harness.policies.in_process import completion

        ids = torch.tensor([list(prompt_ids) + self.reply])
        logits = self.engine.model(ids).logits[0, len(prompt_ids) - 1 : -1].float() / max(sampling.temperature, 1e-6)
        logprobs = torch.log_softmax(logits, -1).gather(1, ids[0, len(prompt_ids) :, None])[:, 0].tolist()
        return completion(self.tokenizer, self.engine.eos_ids, len(prompt_ids), self.reply, logprobs, "stop", [])


def check_multi_turn_token_exactness(
    engine: Policy, model: torch.nn.Module, backend, atol: float, scaffold=None
) -> None:
    """A swe-demo episode of three turns (driven by our loop, or by `scaffold` through the intercepting endpoint):
    the recorded ids are exactly the engine's, and a plain forward pass of `model` (the same weights) over them
    gives the engine's logprobs within `atol`."""
    policy = Recording(engine)
    task = load_tasks("swe-demo")[0]  # a reply without a tool call gets feedback: several turns
    sampling = Sampling(temperature=1.0, max_tokens=24, seed=3)
    trajectory = run_episode(
        task, policy, sampling, Limits(max_turns=3, max_format_errors=4), backend=backend, scaffold=scaffold
    )
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
    # (the output layer only where a generated token is predicted: a real vocabulary's logits over the whole
    # sequence would take most of a GiB)
    positions = [i for i, m in enumerate(mask) if m]
    with torch.no_grad():
        hidden = model.base_model(torch.tensor([ids])).last_hidden_state[0, [p - 1 for p in positions]]
        logits = model.get_output_embeddings()(hidden).float() / sampling.temperature
    recomputed = torch.log_softmax(logits, -1).gather(1, torch.tensor([ids[p] for p in positions])[:, None])[:, 0]
    gap = (recomputed - torch.tensor([logprobs[p] for p in positions])).abs().max()
    assert gap <= atol, f"logprobs differ from a forward pass by {gap:.2e} (> {atol})"


def check_rewritten_history_token_exactness(
    engine: Policy, backend, context: str = "window:1", turns: int = 5, sampling: Sampling | None = None
) -> tuple[Recording, object]:
    """A swe-demo episode under a context strategy that rewrites the history: every reply the engine sampled is
    trained in exactly one of the trajectory's token rows, right after exactly the prompt it was sampled from, with
    the engine's logprobs; nothing else is trained. Unseeded by default, so no two turns share a prompt. Returns the
    engine's record and the trajectory."""
    policy = Recording(engine)
    limits = Limits(max_turns=turns, max_format_errors=2 * turns, context=context)
    sampling = sampling or Sampling(temperature=1.0, max_tokens=6)
    trajectory = run_episode(load_tasks("swe-demo")[0], policy, sampling, limits, backend=backend)
    assert trajectory.turns == turns and trajectory.metadata["context"]["rewritten_at_turns"]
    rows = token_rows(trajectory)
    assert len(rows) > 1, "a rewritten history is trained as several rows"
    for prompt, generated, logprobs in policy.calls:
        sampled = prompt + generated
        trained = [
            row
            for row in rows
            if row[0][: len(sampled)] == sampled and row[1][len(prompt) : len(sampled)] == [1] * len(generated)
        ]
        assert len(trained) == 1, "a sampled reply is not trained, after its exact prompt, in exactly one row"
        assert trained[0][2][len(prompt) : len(sampled)] == logprobs
    assert sum(sum(mask) for _, mask, _ in rows) == sum(len(generated) for _, generated, _ in policy.calls)
    return policy, trajectory
