"""Dynamic batching of the turns of concurrent episodes on one in-process policy.

Episodes ask for one turn at a time from many threads (a GRPO group is n episodes of one
prompt; `harness eval` runs several episodes at once). `BatchingPolicy` gathers the requests
that arrive within a few milliseconds and runs them as one batched generation, which is what
makes CPU rollouts bearable and what vLLM does internally on GPUs. Each request keeps its own
seed, so a seeded turn is the same whichever requests it is batched with.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from dataclasses import replace
from typing import Any, Callable

from .policy import Completion, Policy, Sampling


class BatchingPolicy(Policy):
    """A policy around an in-process one (`HFPolicy`): the calls of many threads are answered by batched
    generations on a thread of its own."""

    def __init__(self, policy: Policy, max_batch: int = 64, wait_s: float = 0.01):
        self.policy = policy
        self.name, self.tokenizer, self.streams_tokens = policy.name, policy.tokenizer, policy.streams_tokens
        self.max_batch = max_batch
        self.wait_s = wait_s
        self.requests: queue.Queue[tuple[list[int], Sampling, Future, Callable | None] | None] = queue.Queue()
        self.lock = threading.Lock()  # generation and weight loading never overlap
        self.thread = threading.Thread(target=self._serve, name="batching-policy", daemon=True)
        self.thread.start()

    def generate_ids(self, prompt_ids: list[int], sampling: Sampling, listener: Callable | None = None) -> Completion:
        """`listener`, where the policy streams tokens, is called with the tokens so far as each is sampled."""
        future: Future = Future()
        self.requests.put((prompt_ids, sampling, future, listener))
        return future.result()

    def load_weights(self, state_dict: dict[str, Any]) -> None:
        with self.lock:
            self.policy.load_weights(state_dict)

    def close(self) -> None:
        """Stop serving (requests already queued are answered first)."""
        self.requests.put(None)
        self.thread.join()

    def _serve(self) -> None:
        while True:
            first = self.requests.get()
            if first is None:
                return
            pending, closing = [first], False
            try:
                while len(pending) < self.max_batch:
                    request = self.requests.get(timeout=self.wait_s)
                    if request is None:
                        closing = True
                        break
                    pending.append(request)
            except queue.Empty:
                pass
            by_sampling: dict[str, list] = {}
            for request in pending:  # one batch per sampling setting; each request keeps its seed
                by_sampling.setdefault(repr(replace(request[1], seed=None)), []).append(request)
            for requests in by_sampling.values():
                self._run(requests)
            if closing:
                return

    def _run(self, requests: list) -> None:
        try:
            with self.lock:
                if hasattr(self.policy, "generate_ids_batch"):
                    streaming = self.streams_tokens and any(r[3] for r in requests)  # the argument only when used
                    listeners = {"listeners": [r[3] for r in requests]} if streaming else {}
                    results = self.policy.generate_ids_batch(
                        [r[0] for r in requests], requests[0][1], seeds=[r[1].seed for r in requests], **listeners
                    )
                else:
                    results = [self.policy.generate_ids(r[0], r[1]) for r in requests]
            for (_, _, future, _), result in zip(requests, results):
                future.set_result(result)
        except Exception as err:  # every waiting episode learns what went wrong
            for _, _, future, _ in requests:
                future.set_exception(err)


def shared_policy(policy: Policy) -> Policy:
    """The policy that concurrent episodes share: a BatchingPolicy around an in-process policy, unless that one
    batches concurrent requests itself (vLLM's continuous batching)."""
    return BatchingPolicy(policy) if policy.tokenizer is not None and not policy.concurrent else policy
