"""After a learner step, the new weights reach the inference engines (`inference.weight_sync`).

- `load`: the learner's whole state dict goes through Ray's object store to each engine, which loads
  it in place (the transformers engine copies it into its model; vLLM passes it to its workers in
  its RPC message).
- `disk`: vLLM only, the fallback: as `load` to the engine, which hands its workers a safetensors file.
- `nccl`: vLLM on GPUs: the learner's rank 0 and every vLLM worker form one NCCL group (vLLM's own
  `trainer_init` / `stateless_init_process_group`, a `PyNcclCommunicator`; rank 0 the learner) and rank 0 broadcasts each
  tensor from GPU memory; the engines' workers receive into their GPUs and load. Names, dtypes and
  shapes are sent beforehand through Ray. Needs the engines on GPUs of their own (one NCCL rank per GPU).
"""

from __future__ import annotations

from typing import Any

import ray
import torch

from .async_grpo import get_within
from .errors import TrainerError


def setup_weight_sync(transport: str, learner, engines: list, tensor_parallel_size: int) -> None:
    """Form the NCCL group (nothing to do for `load` and `disk`)."""
    if transport != "nccl":
        return
    host, port = ray.get(learner.actors[0].rendezvous.remote())
    world_size = 1 + len(engines) * tensor_parallel_size
    joins = [learner.actors[0].init_weight_sender.remote(host, port, world_size)]
    joins += [
        engine.init_weight_group.remote(host, port, 1 + i * tensor_parallel_size, world_size)
        for i, engine in enumerate(engines)
    ]
    _get(joins, "forming the NCCL weight-sync group")


def sync_weights(transport: str, learner, engines: list, deadline_s: float) -> None:
    """Within `deadline_s` (trainer.deadlines.weight_sync_s), or the run fails with the last checkpoint intact."""
    if transport == "nccl":
        specs = ray.get(learner.actors[0].weight_specs.remote())
        sends = [actor.broadcast_weights.remote() for actor in learner.actors]  # every FSDP2 rank helps gather
        refs, what = sends + [engine.receive_weights.remote(specs) for engine in engines], "the NCCL weight broadcast"
    else:
        weights = learner.weights()
        refs, what = (
            [engine.load_weights.remote(weights) for engine in engines],
            "the weight sync to the inference engines",
        )
    get_within(refs, deadline_s, what, "trainer.deadlines.weight_sync_s")


class WeightSender:
    """The learner's rank 0 in the NCCL group: broadcasts full tensors to the vLLM workers (ranks 1...)."""

    def __init__(self, host: str, port: int, world_size: int):
        if not torch.cuda.is_available():
            raise TrainerError("inference.weight_sync 'nccl' needs the learner on a GPU")
        from vllm.distributed.weight_transfer.nccl_common import trainer_init

        self.device = torch.device("cuda", torch.cuda.current_device())
        self.group = trainer_init({"master_address": host, "master_port": port, "world_size": world_size}, rank=0)

    def send(self, weights: dict[str, torch.Tensor]) -> None:
        stream = torch.cuda.current_stream()
        for tensor in weights.values():
            self.group.broadcast(tensor.to(self.device, non_blocking=True).contiguous(), src=0, stream=stream)
        stream.synchronize()


def weight_specs(state_dict: dict[str, Any]) -> list[tuple[str, str, list[int]]]:
    """(name, dtype name, full shape) of each tensor, in the order `WeightSender.send` broadcasts them."""
    return [(name, str(t.dtype).removeprefix("torch."), list(t.shape)) for name, t in state_dict.items()]


def _get(refs, what: str):
    try:
        return ray.get(refs)
    except ray.exceptions.RayError as err:
        raise TrainerError(f"{what} failed ({err}); the last checkpoint is intact: rerun to resume") from None
