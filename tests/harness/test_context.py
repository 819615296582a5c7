"""Context strategies: what each prompt holds of the history, and that every turn is trained on the exact prompt it
was sampled from when a strategy rewrites the history."""

from __future__ import annotations

import pytest

from harness.context import Context, parse_context
from harness.episode import Limits, run_episode
from harness.errors import HarnessError, PolicyError
from harness.policies.hf import HFPolicy
from harness.policy import Sampling
from tasks.taskset import load_tasks
from tests.token_exactness import ForcedCall, check_rewritten_history_token_exactness
from trainer.batch import build_batch, token_rows


def _history(turns: int) -> list[dict]:
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
    for n in range(1, turns + 1):
        messages.append({"role": "assistant", "content": f"reply {n}"})
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "name": "bash", "content": f"output {n} " * 10})
    return messages


def _chars(text: str) -> int:
    return len(text)


def test_window_keeps_the_task_the_first_turn_and_the_last_turns():
    view = Context("window:2", _chars).view(_history(5))
    assert [m["content"] for m in view if m["role"] == "assistant"] == ["reply 1", "reply 4", "reply 5"]
    assert view[:2] == _history(0)
    assert Context("window:2", _chars).view(_history(3)) == _history(3)


def test_masked_observations_keep_the_newest_outputs_within_the_budget():
    history = _history(4)  # each output is 90 characters
    view = Context("mask-observations:200", _chars).view(history)
    outputs = [m["content"] for m in view if m["role"] == "tool"]
    assert outputs[2:] == [history[7]["content"], history[9]["content"]]
    assert outputs[:2] == ["[output omitted from the context: 90 tokens]"] * 2
    assert [m["content"] for m in view if m["role"] != "tool"] == [m["content"] for m in history if m["role"] != "tool"]
    assert Context("keep-all", _chars).view(history) is history


@pytest.mark.parametrize("spec", ["window", "window:0", "window:x", "keep-all:3", "summarise:3", "summarize"])
def test_a_context_that_is_not_a_strategy_is_refused(spec):
    with pytest.raises(HarnessError, match="context"):
        parse_context(spec)


def test_summarize_replaces_the_turns_between_the_first_and_the_last_past_the_budget():
    requests = []

    def write(messages):
        requests.append(messages)
        return f"summary {len(requests)}", 50, 3

    context = Context("summarize:400", _chars, write)
    assert context.view(_history(3)) == _history(3)  # within the budget: nothing to summarize
    view = context.view(_history(5))
    assert [m["content"] for m in view if m["role"] == "assistant"] == ["reply 1", "reply 5"]
    assert view[4] == {"role": "user", "content": "[summary of turns 2-4, written in place of them]\nsummary 1"}
    assert requests[0][:4] == _history(1) and requests[0][-1]["content"].startswith("Summarize the conversation")
    assert [m["content"] for m in requests[0] if m["role"] == "assistant"] == [f"reply {n}" for n in range(1, 5)]
    assert context.view(_history(6)) == view + _history(6)[-2:]  # the summary holds while the prompt fits
    context.view(_history(9))  # the next summary extends the last one
    assert requests[1][4]["content"].endswith("summary 1") and context.view(_history(9))[4]["content"].endswith(
        "summary 2"
    )
    assert (context.summarizer.summaries[-1].first_turn, context.summarizer.summaries[-1].last_turn) == (2, 8)


@pytest.mark.parametrize("answer", ["  ", PolicyError("the endpoint answered 500")])
def test_a_summary_that_fails_falls_back_to_masking_and_says_so(answer):
    def write(messages):
        if isinstance(answer, Exception):
            raise answer
        return answer, 50, 1

    context, record = Context("summarize:200", _chars, write), {}
    context.prompt(_history(4), None, 5, record)
    view = context.prompt(_history(5), None, 6, record)
    assert view == Context("mask-observations:200", _chars).view(_history(5))
    assert [m["content"] for m in view if m["role"] == "tool"][:3] == [
        "[output omitted from the context: 90 tokens]"
    ] * 3
    reason = "came back empty" if isinstance(answer, str) else "failed: the endpoint answered 500"
    assert record["context"]["fallback"] == f"mask-observations:200: the summary of turns 2-3 {reason}"
    assert record["context"]["summaries"] == []


class RecordingPolicy(HFPolicy):
    """The tiny model, keeping each turn's prompt ids and what it sampled from them."""

    def __init__(self, path):
        super().__init__(path)
        self.sampled: list[tuple[list[int], object]] = []

    def generate_ids(self, prompt_ids, sampling):
        completion = super().generate_ids(prompt_ids, sampling)
        self.sampled.append((list(prompt_ids), completion))
        return completion


def _each_sampled_answer_is_trained_once(policy: RecordingPolicy, rows) -> None:
    """Each answer the policy sampled is trained, after its exact prompt and with its logprobs, in exactly one row;
    a later row's prompt may hold the same tokens again, as context (mask 0)."""
    for prompt, completion in policy.sampled:
        sampled = prompt + completion.token_ids
        trained = [
            row
            for row in rows
            if row[0][: len(sampled)] == sampled
            and row[1][len(prompt) : len(sampled)] == [1] * len(completion.token_ids)
        ]
        assert len(trained) == 1, "a sampled answer is not trained, after its exact prompt, in exactly one row"
        assert trained[0][2][len(prompt) : len(sampled)] == completion.logprobs
    assert sum(sum(mask) for _, mask, _ in rows) == sum(len(c.token_ids) for _, c in policy.sampled)


def test_each_turn_is_trained_on_the_prompt_it_was_sampled_from_after_a_rewrite(
    tiny_model, docker_backend, one_torch_thread
):
    policy = RecordingPolicy(tiny_model)
    limits = Limits(max_turns=5, max_format_errors=10, context="window:1")
    trajectory = run_episode(load_tasks("swe-demo")[0], policy, Sampling(max_tokens=6), limits, backend=docker_backend)
    assert trajectory.turns == 5 and len(policy.sampled) == 5
    # the tiny model calls no tool: each turn adds a reply and a feedback message; from turn 4 the window drops one
    # (unseeded: different replies, so no two turns share a prompt)
    assert trajectory.metadata["context"]["rewritten_at_turns"] == [4, 5]
    assert sum(m["role"] == "assistant" for m in trajectory.messages) == 5  # the record keeps the whole history
    rows = token_rows(trajectory)
    assert len(rows) == 3
    _each_sampled_answer_is_trained_once(policy, rows)
    batch = build_batch(
        [[trajectory]], policy.tokenizer.pad_token_id or 0, filter_zero_variance=False, filter_truncated=False
    )
    for index, (ids, mask, _) in enumerate(rows):
        assert batch.input_ids[index, : len(ids)].tolist() == ids
        assert batch.loss_mask[index, : len(ids)].tolist() == [float(m) for m in mask]
    # the whole history outgrows the room the window's five turns took
    room = max(len(prompt) for prompt, _ in policy.sampled) + 6
    whole = run_episode(
        load_tasks("swe-demo")[0],
        policy,
        Sampling(max_tokens=6),
        Limits(max_turns=5, max_format_errors=10, max_context=room),
        backend=docker_backend,
    )
    assert whole.exit_status == "context_exceeded" and whole.turns < 5 and "context" not in whole.metadata


@pytest.mark.parametrize("family", ["qwen3", "llama3_1", "mistral"])
def test_a_rewritten_history_is_trained_on_exactly_what_was_sampled_on_real_templates(
    family, tiny_on, docker_backend, one_torch_thread
):
    check_rewritten_history_token_exactness(HFPolicy(tiny_on(family)), docker_backend)


def test_a_run_names_its_strategy_or_is_refused():
    from harness.evaluate import EvalConfig
    from trainer.config import config_from_dict
    from trainer.errors import ConfigError

    base = {"data": {"train_data": ["gsm8k-demo"]}, "trainer": {"policy": {"model": {"path": "m"}}}}
    assert config_from_dict({**base, "generator": {"context": "window:3"}}).generator.context == "window:3"
    with pytest.raises(ConfigError, match="generator.context: context 'window:all'"):
        config_from_dict({**base, "generator": {"context": "window:all"}})
    with pytest.raises(ConfigError, match="generator.summarizer: summarizer 'm@x'"):
        config_from_dict({**base, "generator": {"context": "summarize:900", "summarizer": "m@x"}})
    assert (
        EvalConfig(tasks="swe-demo", checkpoint="m", context="mask-observations:800").context == "mask-observations:800"
    )
    with pytest.raises(HarnessError, match="no such strategy"):
        EvalConfig(tasks="swe-demo", checkpoint="m", context="summary")


def test_a_summary_is_trained_after_exactly_the_prompt_it_was_sampled_from(
    tiny_model, docker_backend, one_torch_thread
):
    policy = RecordingPolicy(tiny_model)
    limits = Limits(max_turns=5, max_format_errors=10, context="summarize:300")
    trajectory = run_episode(load_tasks("swe-demo")[0], policy, Sampling(max_tokens=6), limits, backend=docker_backend)
    summaries = trajectory.metadata["context"]["summaries"]
    # the task alone passes the budget: from turn 4 (the first with a turn between the first and the last) each
    # prompt holds the first turn, a summary and the last turn
    assert trajectory.turns == 5 and len(policy.sampled) == 5 + len(summaries)
    assert [s["at_turn"] for s in summaries] == [4, 5] and [s["last_turn"] for s in summaries] == [2, 3]
    rows = token_rows(trajectory)
    _each_sampled_answer_is_trained_once(policy, rows)  # the turns and the summaries alike
    summary_prompt, summary = policy.sampled[3]  # asked before the fourth turn
    assert summaries[0]["text"] == summary.text.strip() and summaries[0]["completion_tokens"] == len(summary.token_ids)
    assert "Summarize the conversation" in policy.tokenizer.decode(summary_prompt)
    fourth_prompt = policy.tokenizer.decode(policy.sampled[4][0])
    assert "[summary of turns 2-2, written in place of them]" in fourth_prompt


def test_a_scripted_policy_writes_no_summary_and_the_episode_goes_on_masking(docker_backend):
    from harness.policies.scripted import ScriptedPolicy
    from harness.policy import tool_turn

    reads = [tool_turn("bash", command=f"seq {n * 100}") for n in range(1, 4)]
    policy = ScriptedPolicy("reader", [*reads, tool_turn("submit")])
    limits = Limits(context="summarize:100")
    trajectory = run_episode(load_tasks("swe-demo")[0], policy, Sampling(), limits, backend=docker_backend)
    assert trajectory.exit_status == "submitted" and trajectory.turns == 4
    assert trajectory.metadata["context"]["fallback"] == (
        "mask-observations:100: the summary of turns 2-2 failed: reader plays fixed turns: it writes no summary"
    )


def test_masked_tool_results_are_trained_on_exactly_what_was_sampled(tiny_model, docker_backend, one_torch_thread):
    """A model that reads `seq 100` (about 290 tokens) each turn, tool results masked past 500 tokens: from the third
    turn each prompt holds placeholders for the older results, and every reply is trained after exactly its prompt
    with the logprobs it came with."""
    reader = ForcedCall(HFPolicy(tiny_model), "bash", command="seq 100")
    policy, trajectory = check_rewritten_history_token_exactness(reader, docker_backend, "mask-observations:500")
    outputs = [m["content"] for m in trajectory.messages if m["role"] == "tool"]
    assert len(outputs) == 5 and all("\n100" in output for output in outputs)  # the tool ran each turn
    assert trajectory.metadata["context"]["rewritten_at_turns"] == [3, 4, 5] and len(token_rows(trajectory)) == 4
    prompts = [policy.tokenizer.decode(prompt) for prompt, *_ in policy.calls]
    assert [prompt.count("[output omitted from the context") for prompt in prompts] == [0, 0, 1, 2, 3]


def test_a_named_endpoint_writes_the_summaries_and_only_the_policys_turns_are_trained(
    tiny_model, docker_backend, one_torch_thread
):
    """`harness serve` on 127.0.0.1 writes the summaries (MODEL@URL): each lands in the next prompt, the policy samples
    only its turns, and the rows train exactly those; an endpoint that cannot be reached leaves the episode masking."""
    from tests.cli_helpers import free_port, serving

    policy = RecordingPolicy(tiny_model)
    with serving(tiny_model) as url:
        limits = Limits(max_turns=5, max_format_errors=10, context="summarize:300", summarizer=f"tiny@{url}")
        trajectory = run_episode(
            load_tasks("swe-demo")[0], policy, Sampling(max_tokens=6, seed=1), limits, backend=docker_backend
        )
    context = trajectory.metadata["context"]
    assert trajectory.turns == 5 and len(policy.sampled) == 5  # the policy wrote no summary
    assert context["summarizer"] == f"tiny@{url}" and [s["at_turn"] for s in context["summaries"]] == [4, 5]
    assert all(s["text"] and s["completion_tokens"] > 0 for s in context["summaries"])
    fourth_prompt = policy.tokenizer.decode(policy.sampled[3][0])
    assert f"[summary of turns 2-2, written in place of them]\n{context['summaries'][0]['text']}" in fourth_prompt
    _each_sampled_answer_is_trained_once(policy, token_rows(trajectory))

    gone = f"http://127.0.0.1:{free_port()}/v1"
    limits = Limits(max_turns=5, max_format_errors=10, context="summarize:300", summarizer=f"tiny@{gone}")
    trajectory = run_episode(load_tasks("swe-demo")[0], policy, Sampling(max_tokens=6), limits, backend=docker_backend)
    assert trajectory.turns == 5 and trajectory.exit_status == "max_turns"
    assert trajectory.metadata["context"]["fallback"].startswith(
        f"mask-observations:300: the summary of turns 2-2 failed: endpoint {gone}/ unreachable after 3 tries"
    )


@pytest.mark.parametrize(
    "context, summarizer, error",
    [
        ("summarize:300", "tiny", "write it as MODEL@URL"),
        ("summarize:300", "tiny@127.0.0.1:8000", "write it as MODEL@URL"),
        ("window:3", "tiny@http://127.0.0.1:8000/v1", "only a strategy that summarizes uses one"),
    ],
)
def test_a_summarizer_that_is_not_an_endpoint_for_summaries_is_refused(context, summarizer, error):
    from harness.evaluate import EvalConfig

    with pytest.raises(HarnessError, match=error):
        EvalConfig(tasks="swe-demo", checkpoint="m", context=context, summarizer=summarizer)
