"""Inference engines behind one interface, with dynamic batching of concurrent requests.

Episodes ask for one turn at a time from many threads (a GRPO group is n episodes of one
prompt). `BatchingEngine` gathers the requests that arrive within a few milliseconds and
runs them as one batched generation, which is what makes CPU rollouts bearable and what
vLLM does internally on GPUs.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from dataclasses import replace
from typing import Any

from harness.policy import Completion, Policy, Sampling

from .errors import ConfigError


def load_engine(backend: str, model_path: str) -> Policy:
    """The rollout engine for `inference.backend`: transformers (CPU or GPU) or vLLM (GPU)."""
    if backend == "transformers":
        from harness.policies.hf import HFPolicy

        return HFPolicy(model_path)
    if backend == "vllm":
        from harness.policies.vllm_engine import VLLMPolicy

        return VLLMPolicy(model_path)
    raise ConfigError(f"inference.backend: {backend!r} is not one of transformers, vllm")


class BatchingEngine:
    def __init__(self, policy: Policy, max_batch: int = 64, wait_s: float = 0.01):
        self.policy = policy
        self.max_batch = max_batch
        self.wait_s = wait_s
        self.requests: queue.Queue[tuple[list[int], Sampling, Future]] = queue.Queue()
        self.lock = threading.Lock()  # generation and weight loading never overlap
        self.thread = threading.Thread(target=self._serve, name="batching-engine", daemon=True)
        self.thread.start()

    def generate_ids(self, prompt_ids: list[int], sampling: Sampling) -> Completion:
        future: Future = Future()
        self.requests.put((prompt_ids, sampling, future))
        return future.result()

    def load_weights(self, state_dict: dict[str, Any]) -> None:
        with self.lock:
            self.policy.load_weights(state_dict)

    def _serve(self) -> None:
        while True:
            pending = [self.requests.get()]
            try:
                while len(pending) < self.max_batch:
                    pending.append(self.requests.get(timeout=self.wait_s))
            except queue.Empty:
                pass
            by_sampling: dict[str, list] = {}
            for request in pending:  # one batch per sampling setting; seeds differ per request
                by_sampling.setdefault(repr(replace(request[1], seed=None)), []).append(request)
            for requests in by_sampling.values():
                self._run(requests)

    def _run(self, requests: list) -> None:
        try:
            with self.lock:
                # The batch is seeded from its first request (row i gets seed + i), so a seeded
                # rollout is reproducible as long as requests are batched the same way.
                if hasattr(self.policy, "generate_ids_batch"):
                    results = self.policy.generate_ids_batch([r[0] for r in requests], requests[0][1])
                else:
                    results = [self.policy.generate_ids(r[0], r[1]) for r in requests]
            for (_, _, future), result in zip(requests, results):
                future.set_result(result)
        except Exception as err:  # every waiting episode learns what went wrong
            for _, _, future in requests:
                future.set_exception(err)
