"""HFPolicy on the tiny checkpoint: exact tokens, faithful logprobs, stops, batching, reproducibility."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from harness.errors import PolicyError
from harness.policies.hf import HFPolicy
from harness.policy import Sampling

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ANSWERS = {"What is 2+2?": "4", "Say hello.": "hello there, friend", "Name a Python file.": "setup.py"}


@pytest.fixture(scope="module")
def policy(tiny_model):
    return HFPolicy(tiny_model, device="cpu")


@pytest.fixture(scope="module")
def prompt(policy):
    return _prompt(policy, "Fix the failing test.")


@pytest.fixture(scope="module")
def fitted_policy(tiny_model):
    """A policy whose weights were fitted (and synced with load_weights) to answer ANSWERS then stop."""
    policy = HFPolicy(tiny_model, device="cpu")
    policy.load_weights(_fit(tiny_model, policy))
    return policy


def _prompt(policy, question):
    return policy.tokenizer.apply_chat_template(
        [{"role": "user", "content": question}], add_generation_prompt=True, tokenize=True, return_dict=False
    )


def _fit(model_dir, policy, steps=60):
    """A few Adam steps on the answers (ending in <|im_end|>), right-padded into one batch."""
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    rows = []
    for question, answer in ANSWERS.items():
        prompt = _prompt(policy, question)
        reply = policy.tokenizer.encode(answer, add_special_tokens=False) + [policy.tokenizer.eos_token_id]
        rows.append((prompt + reply, [-100] * len(prompt) + reply))
    width = max(len(ids) for ids, _ in rows)
    input_ids = torch.tensor([ids + [policy.pad_id] * (width - len(ids)) for ids, _ in rows])
    labels = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in rows])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(steps):
        loss = model(input_ids=input_ids, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.state_dict()


def _forward_logprobs(policy, prompt_ids, completion, temperature):
    """Logprobs of the generated tokens recomputed with one plain forward pass, no cache."""
    ids = torch.tensor([prompt_ids + completion.token_ids])
    with torch.no_grad():
        logits = policy.model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1].float()
    logprobs = (logits / (temperature or 1.0)).log_softmax(-1)
    return logprobs.gather(-1, torch.tensor(completion.token_ids)[:, None]).squeeze(-1)


@pytest.mark.parametrize("path_kind", ["missing", "empty", "garbage"])
def test_bad_path_raises_policy_error(tmp_path, path_kind):
    if path_kind != "missing":
        tmp_path.mkdir(exist_ok=True)
    if path_kind == "garbage":
        (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(PolicyError, match=str(tmp_path)):
        HFPolicy(tmp_path if path_kind != "missing" else tmp_path / "nope", device="cpu")


def test_name_and_tokenizer(policy, tiny_model):
    assert policy.name == str(tiny_model)
    assert policy.tokenizer.eos_token == "<|im_end|>"


def test_seed_makes_sampling_reproducible(policy, prompt):
    sampling = Sampling(temperature=1.0, max_tokens=24, seed=7)
    first, again = policy.generate_ids(prompt, sampling), policy.generate_ids(prompt, sampling)
    other = policy.generate_ids(prompt, Sampling(temperature=1.0, max_tokens=24, seed=8))
    assert first.token_ids == again.token_ids and first.logprobs == again.logprobs
    assert first.token_ids != other.token_ids


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 0.9), (1.5, 0.5), (0.0, 1.0)])
def test_logprobs_match_a_fresh_forward_pass(policy, prompt, temperature, top_p):
    completion = policy.generate_ids(prompt, Sampling(temperature=temperature, top_p=top_p, max_tokens=32, seed=1))
    assert len(completion.logprobs) == len(completion.token_ids) == completion.completion_tokens == 32
    expected = _forward_logprobs(policy, prompt, completion, temperature)
    assert torch.allclose(torch.tensor(completion.logprobs), expected, atol=1e-4)


def test_max_tokens_ends_with_length(policy, prompt):
    completion = policy.generate_ids(prompt, Sampling(max_tokens=5, seed=0))
    assert completion.finish_reason == "length"
    assert len(completion.token_ids) == completion.completion_tokens == 5
    assert completion.prompt_tokens == len(prompt)
    assert completion.text == policy.tokenizer.decode(completion.token_ids, skip_special_tokens=False)


def test_tiny_top_p_is_greedy_but_logprobs_are_not(policy, prompt):
    greedy = policy.generate_ids(prompt, Sampling(temperature=0, max_tokens=8))
    nucleus = policy.generate_ids(prompt, Sampling(temperature=1.0, top_p=1e-6, max_tokens=8, seed=0))
    assert nucleus.token_ids == greedy.token_ids
    assert all(lp < -1 for lp in nucleus.logprobs)  # the full distribution, before top-p


def test_stops_at_eos_and_keeps_it(fitted_policy):
    eos = fitted_policy.tokenizer.eos_token_id
    for question, answer in ANSWERS.items():
        prompt = _prompt(fitted_policy, question)
        completion = fitted_policy.generate_ids(prompt, Sampling(temperature=0, max_tokens=40))
        assert (completion.text, completion.finish_reason) == (answer, "stop")
        assert completion.token_ids[-1] == eos and completion.token_ids.count(eos) == 1
        assert len(completion.logprobs) == len(completion.token_ids)


def test_stop_string_cuts_text_but_keeps_tokens(policy, prompt):
    full = policy.generate_ids(prompt, Sampling(max_tokens=40, seed=3))
    pieces = [policy.tokenizer.decode([t]) for t in full.token_ids]
    stop = next(p for p in pieces[8:] if p.strip() and "\ufffd" not in p)
    completion = policy.generate_ids(prompt, Sampling(max_tokens=40, seed=3, stop=["never appears", stop]))
    assert completion.finish_reason == "stop"
    assert completion.token_ids == full.token_ids[: len(completion.token_ids)]
    assert stop in policy.tokenizer.decode(completion.token_ids)
    assert stop not in policy.tokenizer.decode(completion.token_ids[:-1])
    assert completion.text == full.text[: full.text.index(stop)]


def test_batched_greedy_equals_unbatched(fitted_policy):
    prompts = [_prompt(fitted_policy, q) for q in ANSWERS] + [_prompt(fitted_policy, "Something else entirely?")[3:]]
    sampling = Sampling(temperature=0, max_tokens=4)  # "4" ends in time, "hello there, friend" does not
    batched = fitted_policy.generate_ids_batch(prompts, sampling)
    for prompt, together in zip(prompts, batched):
        alone = fitted_policy.generate_ids(prompt, sampling)
        assert (together.token_ids, together.text, together.finish_reason) == (
            alone.token_ids,
            alone.text,
            alone.finish_reason,
        )
        assert torch.allclose(torch.tensor(together.logprobs), torch.tensor(alone.logprobs), atol=1e-4)
        assert together.prompt_tokens == len(prompt)
    assert {c.finish_reason for c in batched} == {"stop", "length"}


def test_batched_sampling_seeds_row_i_with_seed_plus_i(policy, prompt):
    prompts = [prompt, prompt[:-5], prompt]
    batched = policy.generate_ids_batch(prompts, Sampling(temperature=0.8, max_tokens=10, seed=11))
    for i, (p, together) in enumerate(zip(prompts, batched)):
        assert (
            together.token_ids
            == policy.generate_ids(p, Sampling(temperature=0.8, max_tokens=10, seed=11 + i)).token_ids
        )
    assert batched[0].token_ids != batched[2].token_ids


def test_generate_renders_the_chat_template(policy):
    messages = [{"role": "user", "content": "List the files."}]
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {}}}}]
    completion = policy.generate(messages, tools, Sampling(max_tokens=4, seed=0))
    expected = policy.tokenizer.apply_chat_template(
        messages, tools=tools, add_generation_prompt=True, tokenize=True, return_dict=False
    )
    assert completion.prompt_tokens == len(expected)
    assert completion.token_ids == policy.generate_ids(expected, Sampling(max_tokens=4, seed=0)).token_ids


def test_prompt_must_fit_the_context(policy):
    with pytest.raises(PolicyError, match="context"):
        policy.generate_ids([1] * 4096, Sampling(max_tokens=1))
    with pytest.raises(PolicyError, match="empty"):
        policy.generate_ids([], Sampling())


def test_max_tokens_is_capped_by_the_context(policy):
    completion = policy.generate_ids([1] * 4090, Sampling(max_tokens=100, seed=0))
    assert (len(completion.token_ids), completion.finish_reason) == (6, "length")


def test_load_weights_rejects_unknown_names(policy):
    with pytest.raises(PolicyError, match="no weights named"):
        policy.load_weights({"not.a.weight": torch.zeros(1)})
