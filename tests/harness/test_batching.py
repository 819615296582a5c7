"""BatchingPolicy: concurrent turns on one in-process model run as batches, each keeping its own seed."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.batching import BatchingPolicy
from harness.errors import PolicyError
from harness.policies.hf import HFPolicy
from harness.policy import Sampling

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class CountingPolicy(HFPolicy):
    def __init__(self, path):
        super().__init__(path)
        self.batch_sizes: list[int] = []

    def generate_ids_batch(self, prompts, sampling, seeds=None):
        self.batch_sizes.append(len(prompts))
        return super().generate_ids_batch(prompts, sampling, seeds)


def test_concurrent_seeded_turns_are_batched_and_equal_unbatched_ones(tiny_model):
    policy = CountingPolicy(tiny_model)
    prompts = [policy.tokenizer.encode(f"Question number {i}: what is {i} plus {i}?") for i in range(12)]
    samplings = [Sampling(temperature=1.0, max_tokens=8, seed=100 + 7 * i) for i in range(12)]
    alone = [policy.generate_ids(p, s) for p, s in zip(prompts, samplings)]
    policy.batch_sizes.clear()
    engine = BatchingPolicy(policy, wait_s=0.05)
    try:
        with ThreadPoolExecutor(12) as pool:
            together = list(pool.map(engine.generate_ids, prompts, samplings))
    finally:
        engine.close()
    assert [c.token_ids for c in together] == [c.token_ids for c in alone]  # each request keeps its own seed
    assert max(policy.batch_sizes) > 1 and sum(policy.batch_sizes) == 12


def test_a_failing_batch_reaches_every_waiting_request(tiny_model):
    engine = BatchingPolicy(HFPolicy(tiny_model))
    try:
        with ThreadPoolExecutor(3) as pool:
            futures = [pool.submit(engine.generate_ids, [], Sampling(max_tokens=4)) for _ in range(3)]
            for future in futures:
                with pytest.raises(PolicyError, match="empty"):
                    future.result()
    finally:
        engine.close()
    assert not engine.thread.is_alive()
