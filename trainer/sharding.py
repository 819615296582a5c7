"""Data-parallel learner ranks with PyTorch FSDP2 (`fully_shard`): NCCL on GPUs, gloo on CPUs.

Each rank holds a shard of the weights, gradients and optimizer moments, trains on its share of
the batch, and FSDP2 averages the gradients. Full (unsharded) weights and optimizer state are
gathered only to leave the group: for the inference engines and for checkpoints, which are the
same Hugging Face folders a single-process run writes, so a run can resume under either strategy.
"""

from __future__ import annotations

import socket
from dataclasses import fields, replace
from typing import Any

import torch
import torch.distributed as dist
from torch import nn


def free_address() -> tuple[str, int]:
    """This node's IP address and a free TCP port, for the group's rendezvous (called on rank 0's node)."""
    import ray

    with socket.socket() as probe:
        probe.bind(("", 0))
        return ray.util.get_node_ip_address(), probe.getsockname()[1]


def join_group(address: tuple[str, int], rank: int, world_size: int, device: torch.device) -> None:
    """Blocks until all `world_size` ranks have joined."""
    backend = "nccl" if device.type == "cuda" else "gloo"
    host, port = address
    dist.init_process_group(backend, init_method=f"tcp://{host}:{port}", rank=rank, world_size=world_size)


def shard(model: nn.Module, device: torch.device) -> None:
    """FSDP2 over every rank: one unit per decoder layer (gathered only while it runs), then the rest."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    layers = getattr(getattr(model, "model", None), "layers", None)
    for layer in layers if layers is not None else []:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)


def local(tensor: torch.Tensor) -> torch.Tensor:
    """This rank's part of a sharded tensor (the tensor itself when it is not sharded)."""
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def full_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """The whole of a sharded tensor on every rank (collective), e.g. a global gradient norm."""
    return tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor


def full_weights(model: nn.Module) -> dict[str, torch.Tensor]:
    """The unsharded weights as CPU tensors on rank 0 ({} on other ranks); a plain copy without a group."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    if not dist.is_initialized():
        return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def full_optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The optimizer state keyed by parameter name, unsharded, on rank 0 (the same format in every strategy)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    return get_optimizer_state_dict(model, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def load_optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """Restore what `full_optimizer_state` returned; every rank passes the whole state and keeps its shard."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    options = StateDictOptions(full_state_dict=dist.is_initialized())  # without a group the state is already whole
    set_optimizer_state_dict(model, optimizer, state, options=options)


def real_rows(total: int, parts: int) -> list[int]:
    """How many of each share's rows `split_rows` takes from the batch (the rest of a share is padding)."""
    size = -(-total // parts)
    return [max(0, min(size, total - i * size)) for i in range(parts)]


def split_rows(batch, parts: int) -> list:
    """`parts` equal shares of a batch's rows (a dataclass of [B, ...] tensors), in order, the last ones padded
    with copies of row 0 whose loss mask is zero, so that every rank runs the same number of micro-batches."""
    size = -(-len(batch) // parts)
    missing = size * parts - len(batch)
    tensors = {
        f.name: getattr(batch, f.name) for f in fields(batch) if isinstance(getattr(batch, f.name), torch.Tensor)
    }
    if missing:
        padding = {name: value[:1].repeat(missing, *[1] * (value.dim() - 1)) for name, value in tensors.items()}
        padding["loss_mask"] = torch.zeros_like(padding["loss_mask"])
        tensors = {name: torch.cat([value, padding[name]]) for name, value in tensors.items()}
    return [
        replace(batch, **{name: value[i * size : (i + 1) * size] for name, value in tensors.items()})
        for i in range(parts)
    ]


def concat_rows(batches: list) -> object:
    """The rows of several batches (dataclasses of [B, ...] tensors, of one width) as one, in order."""
    first = batches[0]
    tensors = {
        f.name: torch.cat([getattr(b, f.name) for b in batches])
        for f in fields(first)
        if isinstance(getattr(first, f.name), torch.Tensor)
    }
    return replace(first, **tensors)
