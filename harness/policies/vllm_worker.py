"""Weight updates inside vLLM's workers, through vLLM's supported extension point.

vLLM mixes `WeightSyncExtension` into each of its workers (engine argument `worker_extension_cls`);
the engine then calls these methods by name with `collective_rpc("harness_...", args=...)`, so nothing
is pickled and no insecure serialization has to be allowed. Each method ends with the model's own
`load_weights`, which knows how the checkpoint's names map onto vLLM's fused layers (qkv, gate/up).

Transports (`VLLMPolicy(weight_sync=...)`):
- `load`: the tensors travel in the RPC message itself (vLLM's msgpack encoder carries tensors as raw
  buffers) and are loaded in the worker's process.
- `disk`: the fallback; the learner's tensors are written to a safetensors file that the workers read.
- `nccl`: the learner's rank 0 broadcasts every tensor over NCCL to the workers' GPUs (CUDA only).
"""

from __future__ import annotations

from typing import Any

import torch


class WeightSyncExtension:
    """Methods added to vLLM's `Worker` class (`self` is the worker: `self.model_runner`, `self.device`)."""

    def harness_load_weights(self, weights: list[tuple[str, torch.Tensor]]) -> int:
        self.model_runner.model.load_weights(weights=weights)
        return len(weights)

    def harness_load_weights_file(self, path: str) -> int:
        from safetensors.torch import load_file

        weights = list(load_file(path).items())
        self.model_runner.model.load_weights(weights=weights)
        return len(weights)

    def harness_init_weight_group(self, host: str, port: int, rank_offset: int, world_size: int) -> bool:
        """Join the group the learner's rank 0 (rank 0) broadcasts from; this worker is rank_offset + its own rank."""
        from vllm.distributed.parallel_state import get_world_group
        from vllm.distributed.weight_transfer.nccl_common import stateless_init_process_group

        rank = rank_offset + get_world_group().rank
        self.harness_weight_group = stateless_init_process_group(host, port, rank, world_size, device=self.device)
        return True

    def harness_receive_weights(self, specs: list[tuple[str, str, list[int]]]) -> int:
        """Receive, in this order, one broadcast per (name, dtype name, shape) and load them all."""
        group = getattr(self, "harness_weight_group", None)
        if group is None:
            raise RuntimeError("harness_receive_weights before harness_init_weight_group")
        weights: list[tuple[str, Any]] = []
        for name, dtype, shape in specs:
            tensor = torch.empty(shape, dtype=getattr(torch, dtype), device=self.device)
            group.broadcast(tensor, src=0, stream=torch.cuda.current_stream())
            weights.append((name, tensor))
        torch.cuda.synchronize()
        self.model_runner.model.load_weights(weights=weights)
        return len(weights)

    def harness_weight_checksum(self, name: str) -> float:
        """The sum of one of vLLM's own parameters (tests use it to see an update arrive)."""
        return float(dict(self.model_runner.model.named_parameters())[name].float().sum())
