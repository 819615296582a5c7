"""The vLLM engine in process: exact ids and logprobs, seeds, weight sync, clear refusals. One engine for the module."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from harness.errors import PolicyError
from harness.policies.vllm import VLLMPolicy
from harness.policy import Sampling
from tests.token_exactness import check_multi_turn_token_exactness, check_rewritten_history_token_exactness

# vLLM's CPU kernels and transformers' float32 forward differ by rounding only: ~1e-5 on this model.
ATOL = 1e-3

pytestmark = pytest.mark.timeout(1200)  # a vLLM engine start on a busy CPU


@pytest.fixture(scope="module")
def engine(vllm_model):
    policy = VLLMPolicy(vllm_model)
    yield policy
    policy.close()


@pytest.fixture(scope="module")
def learner_model(vllm_model):
    return AutoModelForCausalLM.from_pretrained(vllm_model, dtype=torch.float32).eval()


def prompts(engine) -> list[list[int]]:
    texts = ["Natalia sold clips to 48 of her friends.", "def add(a, b):", "The answer is"]
    return [engine.tokenizer.encode(text) for text in texts]


def forward_logprobs(model, ids: list[int], temperature: float = 1.0) -> torch.Tensor:
    """Logprob of each of ids[1:] given what precedes it, from a plain forward pass."""
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, :-1].float() / temperature
    return torch.log_softmax(logits, -1).gather(1, torch.tensor(ids[1:])[:, None])[:, 0]


@pytest.mark.parametrize("temperature", [0.7, 0.0])
def test_sampled_ids_and_logprobs_match_a_forward_pass(engine, learner_model, temperature):
    batch = prompts(engine)
    completions = engine.generate_ids_batch(batch, Sampling(temperature=temperature, max_tokens=12, seed=5))
    for prompt, done in zip(batch, completions):
        assert done.token_ids and len(done.token_ids) == len(done.logprobs) == done.completion_tokens <= 12
        assert done.prompt_tokens == len(prompt) and done.finish_reason in ("stop", "length")
        expected = forward_logprobs(learner_model, prompt + done.token_ids, temperature or 1.0)[len(prompt) - 1 :]
        assert torch.allclose(torch.tensor(done.logprobs), expected, atol=ATOL), (done.logprobs, expected.tolist())
        if temperature == 0:  # greedy: every token is the forward pass's argmax
            with torch.no_grad():
                logits = learner_model(torch.tensor([prompt + done.token_ids])).logits[0, len(prompt) - 1 : -1]
            assert logits.argmax(-1).tolist() == done.token_ids


def test_a_seed_fixes_the_turn_whatever_runs_beside_it(engine):
    prompt = prompts(engine)[0]
    sampling = Sampling(temperature=1.0, max_tokens=10, seed=11)
    alone = engine.generate_ids(prompt, sampling)
    crowded = engine.generate_ids_batch([prompt] * 4, sampling, seeds=[11, 12, 13, 11])
    assert crowded[0].token_ids == crowded[3].token_ids == alone.token_ids
    assert len({tuple(c.token_ids) for c in crowded[:3]}) > 1  # other seeds, other samples


def test_multi_turn_tokens_are_exactly_what_vllm_produced(engine, learner_model, docker_backend):
    check_multi_turn_token_exactness(engine, learner_model, docker_backend, atol=ATOL)


def test_a_rewritten_history_is_trained_on_exactly_what_vllm_sampled(engine, docker_backend):
    check_rewritten_history_token_exactness(engine, docker_backend)


def test_weight_sync_makes_vllm_score_like_the_learner(engine, learner_model, vllm_model):
    """After a sync vLLM's logprobs of a fixed sequence equal the learner's (within ATOL) and differ from before."""
    sequence = engine.tokenizer.encode("Weights travel from the learner to the engine after every step.")
    before = torch.tensor(engine.sequence_logprobs(sequence))
    assert torch.allclose(before, forward_logprobs(learner_model, sequence), atol=ATOL)
    original = {k: v.clone() for k, v in learner_model.state_dict().items()}
    learner = AutoModelForCausalLM.from_pretrained(vllm_model, dtype=torch.float32).eval()
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():  # a learner some steps later: every weight moved
        for parameter in learner.parameters():
            parameter.add_(torch.randn(parameter.shape, generator=generator) * 0.05)
    expected = forward_logprobs(learner, sequence)
    try:
        for transport in ("load", "disk"):
            engine.load_weights(original, transport="load")
            assert torch.allclose(torch.tensor(engine.sequence_logprobs(sequence)), before, atol=ATOL)
            engine.load_weights(learner.state_dict(), transport=transport)
            after = torch.tensor(engine.sequence_logprobs(sequence))
            assert torch.allclose(after, expected, atol=ATOL), (transport, (after - expected).abs().max())
            assert (after - before).abs().max() > 0.05, transport
    finally:
        engine.load_weights(original)
    # a subset of the weights is a sync too (here: one layer's MLP back to the original)
    partial = {k: v for k, v in learner.state_dict().items() if ".0.mlp." not in k}
    engine.load_weights(partial)
    mixed = torch.tensor(engine.sequence_logprobs(sequence))
    assert not torch.allclose(mixed, before, atol=ATOL) and not torch.allclose(mixed, expected, atol=ATOL)
    engine.load_weights(original)
    assert torch.allclose(torch.tensor(engine.sequence_logprobs(sequence)), before, atol=ATOL)


def test_weights_of_another_model_are_refused(engine):
    with pytest.raises(PolicyError, match="no weights named"):
        engine.load_weights({"transformer.h.0.attn.weight": torch.zeros(2)})


def test_prompt_that_fills_the_context_is_refused(engine):
    with pytest.raises(PolicyError, match="fills the context"):
        engine.generate_ids([1] * engine.context, Sampling(max_tokens=4))


def test_nccl_is_refused_on_cpu_before_starting(vllm_model):
    with pytest.raises(PolicyError, match="no GPU here"):
        VLLMPolicy(vllm_model, weight_sync="nccl")


def test_head_dim_the_cpu_kernels_lack_is_refused_clearly(tmp_path):
    from harness.tiny_model import init_tiny

    with pytest.raises(PolicyError, match=r"head_dim 16 .*--hidden-size 128"):
        VLLMPolicy(init_tiny(tmp_path))  # hidden 64 / 4 heads
