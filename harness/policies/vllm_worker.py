"""Weight updates inside vLLM's workers, through vLLM's supported extension point.

vLLM mixes `WeightSyncExtension` into each of its workers (engine argument `worker_extension_cls`);
the engine then calls these methods by name with `collective_rpc("harness_...", args=...)`, so nothing
is pickled and no insecure serialization has to be allowed. Each method ends with vLLM's in-place weight
reload (`model_runner.reload_weights`), which maps the checkpoint's names onto vLLM's fused layers (qkv,
gate/up) and redoes whatever the kernels did to the weights after loading (the CPU backend repacks them).

Transports (`VLLMPolicy(weight_sync=...)`):
- `load`: the tensors travel in the RPC message itself, as raw bytes with dtype and shape (`pack_weights`),
  and are loaded in the worker's process.
- `disk`: the fallback; the learner's tensors are written to a safetensors file that the workers read.
- `nccl`: the learner's rank 0 broadcasts every tensor over NCCL to the workers' GPUs (CUDA only).
"""

from __future__ import annotations

from typing import Any

import torch


def pack_weights(weights: dict[str, torch.Tensor]) -> list[tuple[str, str, list[int], bytes]]:
    """Tensors as plain (name, dtype name, shape, bytes) records: what any RPC encoding carries unchanged."""
    packed = []
    for name, tensor in weights.items():
        tensor = tensor.detach().to("cpu").contiguous()
        raw = tensor.view(torch.uint8) if tensor.dim() else tensor.reshape(1).view(torch.uint8)
        packed.append((name, str(tensor.dtype).removeprefix("torch."), list(tensor.shape), raw.numpy().tobytes()))
    return packed


def unpack_tensor(dtype: str, shape: list[int], data: bytes) -> torch.Tensor:
    return torch.frombuffer(bytearray(data), dtype=getattr(torch, dtype)).reshape(shape)


class WeightSyncExtension:
    """Methods added to vLLM's `Worker` class (`self` is the worker: `self.model_runner`, `self.device`)."""

    def harness_load_weights(self, packed: list[tuple[str, str, list[int], bytes]]) -> int:
        """Tensors packed by `pack_weights`: (name, dtype name, shape, raw bytes)."""
        weights = [(name, unpack_tensor(dtype, shape, data)) for name, dtype, shape, data in packed]
        self._harness_reload(weights)
        return len(weights)

    def harness_load_weights_file(self, path: str) -> int:
        from safetensors.torch import load_file

        weights = list(load_file(path).items())
        self._harness_reload(weights)
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
        self._harness_reload(weights)
        return len(weights)

    def _harness_reload(self, weights: list[tuple[str, torch.Tensor]]) -> None:
        # vLLM's in-place reload (vllm.model_executor.model_loader.reload): takes checkpoint-format names and
        # tensors, restores the layers that kernels repacked after loading, loads, and processes them again.
        self.model_runner.reload_weights(weights_iterator=weights, is_checkpoint_format=True)

    def harness_weight_checksum(self, name: str) -> float:
        """The sum of one of vLLM's own parameters (tests use it to see an update arrive)."""
        return float(dict(self.model_runner.model.named_parameters())[name].float().sum())
