"""The learner: a policy model, its optimizer and scheduler, one GRPO step at a time.

`single`: one process (CPU, or one GPU). `fsdp2`: one of several data-parallel ranks
(`trainer.workers.LearnerGroup` starts them and splits each batch); the model is sharded with
FSDP2 and gradients are averaged across ranks, so a step equals the single-process step on the
whole batch.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from transformers import AutoModelForCausalLM

from .algorithms import policy_loss, sequence_logprobs
from .batch import Batch
from .errors import ConfigError, TrainerError
from .sharding import full_optimizer_state, full_tensor, full_weights, load_optimizer_state, local, shard


@dataclass
class LearnerSettings:
    learning_rate: float = 1e-5
    weight_decay: float = 0.0
    warmup_steps: int = 0
    total_steps: int = 1000
    lr_scheduler: str = "constant"  # constant | linear | cosine
    max_grad_norm: float = 1.0
    micro_batch_size: int = 4
    #: Optimizer steps per batch (per PPO epoch): the batch's rows in this many runs (SkyRL's mini-batches).
    mini_batches: int = 1
    ppo_epochs: int = 1
    clip_low: float = 0.2
    clip_high: float = 0.28
    kl_coef: float = 0.0
    kl_type: str = "k1"
    loss_aggregation: str = "seq_mean_token_mean"
    max_len: int | None = None
    temperature: float = 1.0
    strategy: str = "single"
    gradient_checkpointing: bool = False
    precision: str = "fp32"  # fp32 | bf16 (autocast of the forward pass)
    logprob_chunk: int | None = None  # positions per slice of the LM head (sequence_logprobs); None = all at once
    #: Asynchronous training: the cap of the truncated importance weight on stale samples (decoupled PPO,
    #: see `policy_loss`); None = the samples are on-policy and the clip is taken around the engine's log-probs.
    is_cap: float | None = None


@dataclass(frozen=True)
class MiniShare:
    """This rank's part of one mini-batch: `rows` consecutive rows of its share, of which the first `real` are the
    mini-batch's own (the rest pad the ranks to equal parts and teach nothing), out of `whole` rows over all ranks."""

    rows: int
    real: int
    whole: int


def lr_factor(step: int, warmup_steps: int, total_steps: int, scheduler: str) -> float:
    """The fraction of the peak learning rate at optimizer step `step` (from 0): a linear warm-up, then
    `constant`, or `linear` / `cosine` decay to 0 at `total_steps`. RL steps and the SFT warm-up share it."""
    if step < warmup_steps:
        return (step + 1) / (warmup_steps + 1)
    progress = min((step - warmup_steps) / max(total_steps - warmup_steps, 1), 1.0)
    if scheduler == "linear":
        return 1.0 - progress
    if scheduler == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    return 1.0


def even_parts(total: int, parts: int) -> list[int]:
    """`total` rows in `parts` consecutive runs as equal as they can be (the first ones one longer); no empty run."""
    parts = max(min(parts, total), 1)
    return [total // parts + (i < total % parts) for i in range(parts)]


def learner_device() -> torch.device:
    """Where a learner trains: the local GPU when there is one (one per rank under FSDP2), else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Learner:
    def __init__(self, model_path: str | Path, settings: LearnerSettings, ref_model_path: str | Path | None = None):
        if settings.strategy not in ("single", "fsdp2"):
            raise ConfigError(f"trainer.strategy: {settings.strategy!r} is not one of single, fsdp2")
        if settings.strategy == "fsdp2" and not dist.is_initialized():
            raise ConfigError(
                "trainer.strategy fsdp2: the learner ranks must join a process group first (LearnerGroup does)"
            )
        if not (Path(model_path) / "config.json").is_file():
            raise ConfigError(f"trainer.policy.model.path: no Hugging Face checkpoint at {model_path}")
        self.settings = settings
        self.device = learner_device()
        self.world_size = dist.get_world_size() if settings.strategy == "fsdp2" else 1
        self.model = self._load(model_path)
        self.model.train()
        self.ref = None
        if settings.kl_coef > 0:
            self.ref = self._load(ref_model_path or model_path).eval()
            self.ref.requires_grad_(False)
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=settings.learning_rate, weight_decay=settings.weight_decay
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_factor)
        self.step = 0

    def _load(self, path: str | Path) -> torch.nn.Module:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(self.device)
        if self.settings.gradient_checkpointing:
            model.config.use_cache = False  # the cache is for generation; checkpointing recomputes instead
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if self.settings.strategy == "fsdp2":
            shard(model, self.device)
        return model

    def _lr_factor(self, step: int) -> float:
        s = self.settings
        return lr_factor(step, s.warmup_steps, s.total_steps, s.lr_scheduler)

    def train_step(self, batch: Batch, minis: list[MiniShare] | None = None) -> dict[str, float]:
        """PPO epochs; in each, one optimizer step per mini-batch (a run of consecutive rows), its gradient the
        mean over the mini-batch's rows. Raises on a non-finite loss.

        `minis`: the mini-batches, in order; None = `settings.mini_batches` runs of rows as equal as the rows allow.
        With several ranks, `batch` is this rank's share: the same part of every mini-batch on every rank
        (`trainer.workers.LearnerGroup` lays it out), so every rank runs the same micro-batches, empty ones included;
        padding rows are left out of the loss and of the mean, so a step equals the single-process step on the whole
        batch, also when its rows do not split evenly over the ranks."""
        if batch.old_logprobs is None or batch.advantages is None:
            raise TrainerError(
                "a policy-gradient step needs the batch's sampled logprobs and advantages "
                "(trainer.batch.build_batch); a batch of tokens and a loss mask only goes to sft_step"
            )
        s = self.settings
        metrics: dict[str, float] = {}
        tokens = float(batch.loss_mask.sum())
        if tokens == 0 and self.world_size == 1:
            return {"skipped": 1.0}
        minis = minis or [MiniShare(rows, rows, rows) for rows in even_parts(len(batch), s.mini_batches)]
        ref_logprobs = self._ref_logprobs(batch) if self.ref is not None else None
        # Asynchronous training scores the batch with the weights before the step (the proximal policy). With one
        # optimizer step those are the weights of the training forward itself: its log-probs, detached, at no extra cost.
        decoupled = s.is_cap is not None
        proximal = self._ref_logprobs(batch, self.model) if decoupled and s.ppo_epochs * len(minis) > 1 else None
        bounds = list(itertools.accumulate((mini.rows for mini in minis), initial=0))
        for _ in range(s.ppo_epochs):
            steps: list[dict[str, float]] = []
            for mini, first, end in zip(minis, bounds, bounds[1:]):
                self.optimizer.zero_grad(set_to_none=True)
                parts: list[dict[str, float]] = []
                for start in range(first, end, s.micro_batch_size):
                    rows = slice(start, min(start + s.micro_batch_size, first + mini.real))  # padding rows left out
                    micro = batch.rows(rows) if rows.start < rows.stop else batch.rows(slice(start, start + 1))
                    empty = rows.start >= rows.stop or micro.loss_mask.sum() == 0
                    if empty and self.world_size == 1:
                        continue
                    if empty:  # nothing to learn here, but the other ranks wait for this rank's (zero) gradients
                        self._zero_backward(micro)
                        continue
                    logprobs = self._logprobs(
                        self.model,
                        micro.input_ids.to(self.device),
                        micro.attention_mask.to(self.device),
                        micro.loss_mask.to(self.device),
                        s.temperature,
                    )
                    old = (
                        micro.old_logprobs
                        if not decoupled
                        else logprobs.detach()
                        if proximal is None
                        else proximal[rows].to(self.device)
                    )
                    loss, part = policy_loss(
                        logprobs,
                        old.to(self.device),
                        micro.advantages.to(self.device),
                        micro.loss_mask.to(self.device),
                        clip_low=s.clip_low,
                        clip_high=s.clip_high,
                        ref_logprobs=None if ref_logprobs is None else ref_logprobs[rows].to(self.device),
                        kl_coef=s.kl_coef,
                        kl_type=s.kl_type,
                        aggregation=s.loss_aggregation,
                        max_len=s.max_len,
                        behaviour_logprobs=micro.old_logprobs.to(self.device) if decoupled else None,
                        is_cap=s.is_cap or 2.0,
                    )
                    if not torch.isfinite(loss):
                        raise TrainerError(
                            f"non-finite loss ({loss.item()}) at step {self.step}: training stopped; the last checkpoint is intact"
                        )
                    # FSDP2 averages the ranks' gradients: each rank weighs its rows by world_size / all the real rows.
                    (loss * len(micro) * (self.world_size / mini.whole)).backward()
                    parts.append({**part, "loss": loss.item()})
                if not parts and self.world_size == 1:
                    continue  # a mini-batch with nothing to learn takes no step
                grad_norm = self.clip_gradients()
                if not torch.isfinite(grad_norm):
                    raise TrainerError(
                        f"non-finite gradient norm at step {self.step}: training stopped; the last checkpoint is intact"
                    )
                self.optimizer.step()
                self.check_finite_weights()
                step = {k: sum(p[k] for p in parts) / len(parts) for k in parts[0]} if parts else {}
                steps.append(step | {"grad_norm": float(grad_norm), "micro_batches": float(len(parts))})
            # The last epoch's optimizer steps, averaged (micro-batches counted).
            metrics = {
                k: sum(m[k] for m in steps if k in m) / (1 if k == "micro_batches" else sum(k in m for m in steps))
                for k in dict.fromkeys(k for m in steps for k in m)
            }
        self.scheduler.step()
        self.step += 1
        return metrics | {
            "lr": self.scheduler.get_last_lr()[0],
            "trained_tokens": tokens,
            "optimizer_steps": float(len(steps)),
        }

    def sft_step(self, batch: Batch, lr: float, total_tokens: float | None = None) -> dict[str, float]:
        """One optimizer step (at learning rate `lr`) of token-mean NLL on the masked tokens (the SFT warm start).

        With several ranks, `batch` is this rank's share of a batch of `total_tokens` masked tokens; the loss
        reported is this rank's part of the whole batch's mean."""
        for group in self.optimizer.param_groups:
            group["lr"] = lr  # reset_optimizer restores the RL schedule's rate
        self.optimizer.zero_grad(set_to_none=True)
        tokens = total_tokens or float(batch.loss_mask.sum())
        total = 0.0
        size = self.settings.micro_batch_size
        for start in range(0, len(batch), size):
            rows = slice(start, start + size)
            mask = batch.loss_mask[rows].to(self.device)
            logprobs = self._logprobs(
                self.model, batch.input_ids[rows].to(self.device), batch.attention_mask[rows].to(self.device), mask
            )
            loss = -(logprobs * mask).sum() / tokens
            if not torch.isfinite(loss):
                raise TrainerError("non-finite SFT loss: training stopped; the last checkpoint is intact")
            (loss * self.world_size).backward()  # FSDP2 averages gradients over ranks
            total += loss.item()
        grad_norm = self.clip_gradients()
        self.optimizer.step()
        self.check_finite_weights()
        return {"sft/loss": total, "sft/grad_norm": float(grad_norm), "sft/tokens": float(batch.loss_mask.sum())}

    def anchor_reference(self) -> None:
        """The KL reference becomes the current policy (after an SFT warm-up: RL is kept near the warm-started model,
        not the one before it)."""
        self.ref.load_state_dict(self.model.state_dict())

    def reset_optimizer(self) -> None:
        """Start RL with fresh optimizer moments after the SFT warm start, at the RL schedule's learning rate
        (SFT steps set their own; the scheduler only sets it again after the first RL step)."""
        self.optimizer.state.clear()
        for group, lr in zip(self.optimizer.param_groups, self.scheduler.get_last_lr()):
            group["lr"] = lr

    def _zero_backward(self, micro) -> None:
        """A forward and backward through every weight that changes nothing: FSDP2's gather and reduce-scatter
        of each layer run as on the other ranks."""
        scored = micro.attention_mask.clone()
        scored[:, 0] = 0
        logprobs = self._logprobs(
            self.model,
            micro.input_ids.to(self.device),
            micro.attention_mask.to(self.device),
            scored.to(self.device),
            self.settings.temperature,
        )
        (logprobs.sum() * 0.0).backward()

    def clip_gradients(self) -> torch.Tensor:
        """Clip to `max_grad_norm` (0: no clipping); the global norm, across ranks, before clipping."""
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.settings.max_grad_norm or float("inf"))
        return full_tensor(norm)

    def check_finite_weights(self) -> None:
        if not all(torch.isfinite(local(p)).all() for p in self.model.parameters()):
            raise TrainerError(
                f"the update at step {self.step} made the weights non-finite (learning rate too high?): "
                "training stopped; the last checkpoint is intact"
            )

    def _logprobs(self, model, input_ids, attention_mask, loss_mask, temperature: float = 1.0) -> torch.Tensor:
        """`sequence_logprobs`, its forward pass in bfloat16 under autocast with `precision: bf16` (the weights, their
        gradients and the optimizer's moments stay fp32; log-softmax runs in fp32 under autocast)."""
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.settings.precision == "bf16"):
            return sequence_logprobs(
                model, input_ids, attention_mask, loss_mask, temperature, chunk=self.settings.logprob_chunk
            )

    @torch.no_grad()
    def _ref_logprobs(self, batch: Batch, model: torch.nn.Module | None = None) -> torch.Tensor:
        """Log-probs of the batch's tokens under the reference model (or `model`, e.g. the policy before the step)."""
        model = model or self.ref
        out = []
        for start in range(0, len(batch), self.settings.micro_batch_size):
            micro = batch.rows(slice(start, start + self.settings.micro_batch_size))
            out.append(
                self._logprobs(
                    model,
                    micro.input_ids.to(self.device),
                    micro.attention_mask.to(self.device),
                    micro.loss_mask.to(self.device),
                    self.settings.temperature,
                ).cpu()
            )
        width = batch.input_ids.shape[1]
        return torch.cat([torch.nn.functional.pad(o, (0, width - o.shape[1])) for o in out])

    def weights(self) -> dict[str, torch.Tensor]:
        """A whole CPU copy of the weights, for the inference engines and checkpoints ({} on ranks other than 0)."""
        return full_weights(self.model)

    def state(self) -> dict:
        """What a resume needs besides the weights, in the same format under every strategy (rank 0's is whole)."""
        optimizer = full_optimizer_state(self.model, self.optimizer)
        return {"optimizer": optimizer, "scheduler": self.scheduler.state_dict(), "step": self.step}

    def load_state(self, state: dict) -> None:
        load_optimizer_state(self.model, self.optimizer, state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.step = state["step"]
