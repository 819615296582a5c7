"""Checkpoints in Hugging Face format, plus what a resume needs, written atomically.

`checkpoints/global_step_N/` loads as it is with `AutoModelForCausalLM.from_pretrained` and
`harness eval --checkpoint`; `trainer_state.pt` beside the weights holds the optimizer,
scheduler, data position and RNG states. A checkpoint is written to a temporary folder and
renamed into place, so a run killed mid-save never leaves a half checkpoint behind.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

STATE = "trainer_state.pt"


def checkpoint_dir(run_dir: Path, step: int) -> Path:
    return run_dir / "checkpoints" / f"global_step_{step}"


def save_checkpoint(
    run_dir: Path,
    step: int,
    model,
    tokenizer,
    trainer_state: dict[str, Any],
    weights: dict[str, torch.Tensor] | None = None,
    keep: int = 2,
) -> Path:
    """`weights`: the whole state dict when `model` itself is sharded (FSDP2); else the model's own is saved."""
    final = checkpoint_dir(run_dir, step)
    save_weights(
        final,
        model,
        tokenizer,
        weights,
        lambda staging: torch.save({**trainer_state, "rng": rng_state()}, staging / STATE),
    )
    (run_dir / "checkpoints" / "latest").write_text(final.name + "\n")
    _prune(run_dir, keep)
    return final


def save_weights(
    final: Path,
    model,
    tokenizer,
    weights: dict[str, torch.Tensor] | None = None,
    also: Callable[[Path], Any] = lambda staging: None,
) -> Path:
    """The model as a Hugging Face checkpoint at `final` (plus what `also` writes beside it), written to a
    `.partial` folder and renamed into place."""
    staging = final.with_name(final.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    model.save_pretrained(staging, state_dict=weights, safe_serialization=True)
    tokenizer.save_pretrained(staging)
    also(staging)
    shutil.rmtree(final, ignore_errors=True)
    staging.rename(final)
    return final


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete checkpoint (a `.partial` folder is never one)."""
    found = [
        p
        for p in (run_dir / "checkpoints").glob("global_step_*")
        if not p.name.endswith(".partial") and (p / STATE).exists()
    ]
    return max(found, key=lambda p: int(p.name.rsplit("_", 1)[1]), default=None)


def load_trainer_state(path: Path) -> dict[str, Any]:
    state = torch.load(path / STATE, weights_only=False)
    set_rng_state(state.pop("rng"))
    return state


def rng_state() -> dict[str, Any]:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def _prune(run_dir: Path, keep: int) -> None:
    found = sorted(
        (p for p in (run_dir / "checkpoints").glob("global_step_*") if not p.name.endswith(".partial")),
        key=lambda p: int(p.name.rsplit("_", 1)[1]),
    )
    for old in found[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
