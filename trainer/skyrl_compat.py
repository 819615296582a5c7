"""SkyRL's config keys, read as aliases of ours.

A SkyRL YAML (or SkyRL's dotted overrides, as its `examples/train/gsm8k/*.sh` pass them) loads
into the same `TrainConfig` as ours. Each SkyRL key is one of:

- renamed: `trainer.policy.optimizer_config.lr` is our `trainer.learning_rate` (values converted
  where the spelling differs: `trainer.strategy: fsdp` is our `fsdp2`);
- without effect here, for a stated reason (`generator.batched`: rollouts are always batched),
  accepted only with the values for which that holds;
- refused with the reason (`trainer.algorithm.advantage_estimator: gae` needs a critic we do not have).

Every mapping is recorded as a note (written at the top of the run's resolved `config.yaml` and
printed by `harness train`); nothing is dropped silently. Defaults stay ours: a SkyRL key that
is absent means our default, not SkyRL's (e.g. no KL penalty unless `use_kl_loss: true`).

Use::

    translation = Translation(placement_keys=frozenset(PlacementConfig.model_fields))
    raw = translation.apply(raw)             # the YAML, then each override the same way
    raw = translation.finish(raw)            # keys that combine (KL switch and coefficient, GPUs)
    translation.notes, translation.problems
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tasks.grading.patch_policy import FORMER_GRADING_MODES

from .choices import AdvantageMethod, LoggerType, Scheduler, Strategy, values


class Refused(ValueError):
    """A SkyRL value harness cannot honour; the message says why and what to use."""


@dataclass(frozen=True)
class Alias:
    #: Our dotted key, or None when the key has no effect here (then `reason` says why).
    target: str | None
    #: SkyRL value -> our value; raises `Refused`. None = the value as it is.
    convert: Callable[[Any], Any] | None = None
    #: Why a key without a target changes nothing.
    reason: str = ""
    #: The key combines with others (a KL switch and its coefficient, GPUs per node and nodes): see Translation.finish.
    combined: bool = False


def _choices(mapping: dict[Any, Any], what: str) -> Callable[[Any], Any]:
    def convert(value: Any) -> Any:
        key = value.lower() if isinstance(value, str) else value
        if key not in mapping:
            allowed = ", ".join(str(k) for k in mapping)
            raise Refused(f"{value!r} is not supported by harness ({what}); supported: {allowed}")
        return mapping[key]

    return convert


def _only(*values: Any, why: str) -> Callable[[Any], Any]:
    """Accept only `values` (those that change nothing here); refuse the rest with `why`."""

    def convert(value: Any) -> Any:
        if value not in values:
            shown = " or ".join(repr(v) for v in values)
            raise Refused(f"{value!r} is not supported by harness: {why} (only {shown} is accepted)")
        return value

    return convert


def _resume_mode(value: Any) -> str:
    if value is None or str(value).lower() in ("none", "null"):
        return "never"
    if value == "latest":
        return "auto"
    if value == "from_path":
        return "from_path"  # the path comes with trainer.resume_path; see Translation.finish
    raise Refused(f"{value!r} is not one of null, latest, from_path")


def _same(choice) -> dict[str, str]:
    """Our own values of a choice key, each standing for itself."""
    return {value: value for value in values(choice)}


def _logger(value: Any) -> str:
    return _choices(
        {"console": "jsonl", **_same(LoggerType)},
        "metrics go to metrics.jsonl, to TensorBoard with tensorboard, to W&B with wandb",
    )(value)


_STRATEGY = _choices(
    {"fsdp": "fsdp2", **_same(Strategy)}, "the learner is FSDP2 (or one device); Megatron and DDP are not built"
)
_ADVANTAGE = _choices(
    _same(AdvantageMethod), "group-relative estimators only; gae needs a critic, reinforce++ is not built"
)
_SCHEDULER = _choices(
    {"constant_with_warmup": "constant", "cosine_with_warmup": "cosine", **_same(Scheduler)},
    "warm-up then constant, cosine or linear",
)

#: SkyRL dotted key -> how it maps. Keys spelled the same in both (data.train_data, trainer.epochs,
#: trainer.train_batch_size, generator.n_samples_per_prompt, ...) need no entry.
ALIASES: dict[str, Alias] = {
    # data
    "trainer.max_prompt_length": Alias("data.max_prompt_length"),
    # schedule and optimizer
    "trainer.max_training_steps": Alias("trainer.max_steps"),
    "trainer.update_epochs_per_batch": Alias("trainer.algorithm.ppo_epochs"),
    "trainer.policy.optimizer_config.lr": Alias("trainer.learning_rate"),
    "trainer.policy.optimizer_config.weight_decay": Alias("trainer.weight_decay"),
    "trainer.policy.optimizer_config.max_grad_norm": Alias("trainer.max_grad_norm"),
    "trainer.policy.optimizer_config.num_warmup_steps": Alias("trainer.warmup_steps"),
    "trainer.policy.optimizer_config.scheduler": Alias("trainer.lr_scheduler", _SCHEDULER),
    "trainer.policy.optimizer_config.adam_betas": Alias(
        None, _only([0.9, 0.999], why="AdamW runs with betas (0.9, 0.999)"), reason="AdamW's betas are (0.9, 0.999)"
    ),
    "trainer.policy.optimizer_config.offload_after_step": Alias(None, reason="optimizer offloading is a memory knob"),
    "trainer.policy_mini_batch_size": Alias("trainer.mini_batch_size"),
    "trainer.micro_train_batch_size_per_gpu": Alias("trainer.micro_batch_samples"),
    "trainer.micro_forward_batch_size_per_gpu": Alias(None, reason="a memory knob of the log-prob pass"),
    "trainer.flash_attn": Alias(None, reason="an attention-kernel choice; the model's default kernel is used"),
    "trainer.eval_batch_size": Alias(None, reason="evaluation runs every held-out prompt, batched by the engines"),
    "trainer.eval_before_train": Alias(
        None,
        _only(True, why="harness always evaluates at step 0 when data.val_data is set"),
        reason="harness always evaluates at step 0 when data.val_data is set",
    ),
    "trainer.critic_mini_batch_size": Alias(None, reason="GRPO-family estimators use no critic"),
    # algorithm
    "trainer.algorithm.name": Alias("trainer.algorithm.advantage", _ADVANTAGE),
    "trainer.algorithm.advantage_estimator": Alias("trainer.algorithm.advantage", _ADVANTAGE),
    "trainer.algorithm.grpo_norm_by_std": Alias(None, combined=True),
    "trainer.algorithm.use_kl_loss": Alias(None, combined=True),
    "trainer.algorithm.kl_loss_coef": Alias(None, combined=True),
    "trainer.algorithm.use_kl_in_reward": Alias(
        None, _only(False, why="the KL penalty is a loss term (use_kl_loss)"), reason="the KL penalty is a loss term"
    ),
    "trainer.algorithm.kl_estimator_type": Alias("trainer.algorithm.kl_type"),
    "trainer.algorithm.eps_clip_low": Alias("trainer.algorithm.clip_low"),
    "trainer.algorithm.eps_clip_high": Alias("trainer.algorithm.clip_high"),
    "trainer.algorithm.loss_reduction": Alias("trainer.algorithm.loss_aggregation"),
    "trainer.algorithm.zero_variance_filter": Alias("trainer.algorithm.filter_zero_variance"),
    "trainer.algorithm.policy_loss_type": Alias(
        None, _only("regular", why="the PPO clipped loss is the one built"), reason="the PPO clipped loss"
    ),
    "trainer.algorithm.use_entropy_loss": Alias(
        None, _only(False, why="no entropy bonus is built"), reason="no entropy bonus"
    ),
    "generator.apply_overlong_filtering": Alias("trainer.algorithm.filter_truncated"),
    # placement and strategy
    "trainer.strategy": Alias("trainer.strategy", _STRATEGY),
    "trainer.placement.colocate_all": Alias("trainer.placement.colocate"),
    "trainer.placement.colocate_policy_ref": Alias(
        None, reason="the reference model always lives on the learner's ranks"
    ),
    "trainer.placement.policy_num_gpus_per_node": Alias(None, combined=True),
    "trainer.placement.policy_num_nodes": Alias(None, combined=True),
    "trainer.placement.ref_num_gpus_per_node": Alias(None, reason="the reference model lives on the learner's ranks"),
    "trainer.placement.ref_num_nodes": Alias(None, reason="the reference model lives on the learner's ranks"),
    "trainer.placement.critic_num_gpus_per_node": Alias(None, reason="GRPO-family estimators use no critic"),
    "trainer.placement.critic_num_nodes": Alias(None, reason="GRPO-family estimators use no critic"),
    "trainer.policy.sequence_parallel_size": Alias(
        None, _only(1, why="sequence parallelism is not built"), reason="no sequence parallelism"
    ),
    # checkpoints, logs, resume
    "trainer.ckpt_path": Alias("trainer.output_dir"),
    "trainer.resume_mode": Alias("trainer.resume", _resume_mode),
    "trainer.resume_path": Alias(None, combined=True),
    "trainer.log_path": Alias(None, reason="logs go to the run directory (trainer.output_dir)"),
    "trainer.logger": Alias("logger.type", _logger),
    "trainer.project_name": Alias("logger.project"),
    "trainer.dump_eval_results": Alias(
        None,
        _only(True, why="evaluation trajectories are always written"),
        reason="evaluation trajectories are always written",
    ),
    # generation
    "generator.sampling_params.max_generate_length": Alias("generator.max_tokens"),
    "generator.sampling_params.temperature": Alias("generator.temperature"),
    "generator.sampling_params.top_p": Alias("generator.top_p"),
    "generator.sampling_params.top_k": Alias(None, _only(-1, why="top-k sampling is not built"), reason="no top-k cut"),
    "generator.sampling_params.min_p": Alias(
        None, _only(0, 0.0, why="min-p sampling is not built"), reason="no min-p cut"
    ),
    "generator.sampling_params.repetition_penalty": Alias(
        None, _only(1, 1.0, why="no repetition penalty is built"), reason="no repetition penalty"
    ),
    "generator.sampling_params.logprobs": Alias(None, reason="the sampled tokens' log-probs are always kept"),
    "generator.batched": Alias(None, reason="rollouts are always batched"),
    "generator.use_conversation_multi_turn": Alias(
        None, _only(True, why="multi-turn episodes keep one message per turn"), reason="one message per turn"
    ),
    # inference engines
    "generator.inference_engine.backend": Alias("inference.engine"),
    "generator.inference_engine.num_engines": Alias("inference.num_engines"),
    "generator.inference_engine.tensor_parallel_size": Alias("inference.tensor_parallel_size"),
    "generator.inference_engine.gpu_memory_utilization": Alias("inference.gpu_memory_utilization"),
    "generator.inference_engine.run_engines_locally": Alias(
        None,
        _only(True, why="engines are Ray actors of the run; remote engines are not built"),
        reason="engines run in the run's Ray cluster",
    ),
    "generator.inference_engine.weight_sync_backend": Alias(
        "inference.weight_sync",
        _choices(
            {"nccl": "load", "gloo": "load", "load": "load"},
            "new weights reach the engines through Ray's object store (the same weights, another transport)",
        ),
    ),
    "generator.inference_engine.async_engine": Alias(None, reason="the engines are asynchronous"),
    "generator.inference_engine.model_dtype": Alias(None, reason="engines load the checkpoint's own dtype"),
    # environment
    "environment.env_class": Alias(None, reason="each task's env_class comes from its data row"),
    "environment.skyrl_gym.max_env_workers": Alias("generator.env_workers"),
}

#: SkyRL sections harness does not have, with the reason (a key under them is refused).
REFUSED_SECTIONS: dict[str, str] = {
    "trainer.critic": "GRPO-family estimators use no critic",
    "trainer.policy.model.lora": "LoRA is not built; the whole model is trained",
    "trainer.policy.fsdp_config": "FSDP2 runs with its defaults (full sharding, no CPU offload)",
    "trainer.ref.fsdp_config": "FSDP2 runs with its defaults",
    "trainer.policy.megatron_config": "Megatron is not built",
    "trainer.fully_async": "rollouts and training alternate (fully asynchronous training is not built)",
    "generator.eval_sampling_params": "evaluation samples greedily with generator.max_tokens",
    "generator.chat_template": "the checkpoint's own chat template is used",
    "trainer.algorithm.dynamic_sampling": "dynamic sampling is not built; trainer.algorithm.filter_zero_variance drops "
    "zero-variance groups",
}

#: The sections only SkyRL has: an unmapped key under them is a SkyRL key harness does not support.
SKYRL_SECTIONS = (
    "generator.inference_engine",
    "generator.sampling_params",
    "trainer.policy.optimizer_config",
    "trainer.placement",
    "environment",
    "trainer.algorithm.off_policy_correction",
)


_UNSET = object()


def _leaves(raw: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted path, value) of every non-mapping value and every empty mapping."""
    for key, value in raw.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and value:
            yield from _leaves(value, path)
        else:
            yield path, value


def _delete(raw: dict[str, Any], path: str) -> None:
    """Remove `path`, and every section it leaves empty."""
    *parents, last = path.split(".")
    chain = [raw]
    for part in parents:
        chain.append(chain[-1][part])
    del chain[-1][last]
    for node, part in zip(reversed(chain[:-1]), reversed(parents)):
        if node[part] == {}:
            del node[part]
        else:
            break


def _get(raw: dict[str, Any], path: str, default: Any = None) -> Any:
    node: Any = raw
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def _set(raw: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    node = raw
    for part in parents:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[last] = value


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """`extra` over `base`, section by section (a value that is not a section replaces)."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and value:
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


#: harness's own former key names, read the same way (with a note saying what they are now).
FORMER_NAMES: dict[str, Alias] = {
    "inference.backend": Alias("inference.engine"),
    "logger.backend": Alias("logger.type"),
    "grading.mode": Alias("data.grading_mode", lambda mode: FORMER_GRADING_MODES.get(mode, mode)),
}


@dataclass
class Translation:
    """Translates SkyRL keys in one raw config after another (the YAML, then each override)."""

    #: Our own keys under `trainer.placement`, a section SkyRL also has (colocate, ...): they pass through.
    placement_keys: frozenset[str] = frozenset()
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: SkyRL keys that combine with others, by their SkyRL path; resolved in `finish`.
    pending: dict[str, Any] = field(default_factory=dict)

    def apply(self, raw: dict[str, Any]) -> dict[str, Any]:
        """`raw` with every SkyRL key moved to ours (a copy). Our own keys pass through untouched."""
        out = copy.deepcopy(raw)
        if isinstance(out.get("trainer"), dict) and isinstance(out["trainer"].get("logger"), str) and "logger" in out:
            if out["logger"] != out["trainer"]["logger"]:
                self.problems.append(
                    f"logger: {out['logger']!r} and trainer.logger: {out['trainer']['logger']!r} disagree; "
                    "keep one of them"
                )
        for path, value in list(_leaves(raw)):
            refused = next((s for s in REFUSED_SECTIONS if path == s or path.startswith(s + ".")), None)
            alias = ALIASES.get(path) or FORMER_NAMES.get(path)
            if refused is not None:
                self.problems.append(
                    f"{path}: SkyRL's {refused} section is not supported by harness: {REFUSED_SECTIONS[refused]}"
                )
                _delete(out, path)
            elif alias is not None:
                _delete(out, path)
                self._one(out, path, value, alias)
            elif any(path.startswith(s + ".") for s in SKYRL_SECTIONS) and not self._ours(path):
                self.problems.append(
                    f"{path}: a SkyRL key that harness does not support (docs/skyrl.md lists the supported ones)"
                )
                _delete(out, path)
        return out

    def _ours(self, path: str) -> bool:
        """Keys of our own schema under a section SkyRL also has (trainer.placement.colocate, ...)."""
        return path.removeprefix("trainer.placement.") in self.placement_keys

    def _one(self, out: dict[str, Any], path: str, value: Any, alias: Alias) -> None:
        try:
            converted = alias.convert(value) if alias.convert is not None else value
        except Refused as refused:
            self.problems.append(f"{path}: {refused}")
            return
        if alias.combined:
            self.pending[path] = converted
            return
        if alias.target is None:
            self.notes.append(f"{path}: {value!r} has no effect here ({alias.reason})")
            return
        if alias.target == "trainer.resume" and converted == "from_path":
            self.pending[path] = converted
            return
        existing = _get(out, alias.target, _UNSET)
        if existing is not _UNSET and existing != converted:
            self.problems.append(
                f"{path}: {value!r} disagrees with {alias.target}: {existing!r}, which it sets; keep one of them"
            )
            return
        shown = f"{value!r}" if converted == value else f"{value!r} -> {converted!r}"
        if alias.target != path or converted != value:
            self.notes.append(f"{path} -> {alias.target} ({shown})")
        _set(out, alias.target, converted)

    def finish(self, raw: dict[str, Any]) -> dict[str, Any]:
        """Resolve the SkyRL keys that combine; returns the final raw config in our keys."""
        out = copy.deepcopy(raw)
        p = self.pending
        self._kl(out, p)
        if "trainer.algorithm.grpo_norm_by_std" in p:
            if p["trainer.algorithm.grpo_norm_by_std"] is False:
                if _get(out, "trainer.algorithm.advantage", "grpo") != "grpo":
                    self.problems.append("trainer.algorithm.grpo_norm_by_std: false applies to the grpo estimator only")
                else:
                    _set(out, "trainer.algorithm.advantage", "dr_grpo")
                    self.notes.append(
                        "trainer.algorithm.grpo_norm_by_std: false -> trainer.algorithm.advantage "
                        "('dr_grpo': r - mean, no division by the std)"
                    )
            else:
                self.notes.append("trainer.algorithm.grpo_norm_by_std: true (GRPO's (r - mean) / std, the default)")
        if "trainer.resume_mode" in p:
            path = p.get("trainer.resume_path")
            if not path:
                self.problems.append("trainer.resume_mode: from_path needs trainer.resume_path")
            else:
                _set(out, "trainer.resume", path)
                self.notes.append(f"trainer.resume_mode: from_path + trainer.resume_path -> trainer.resume ({path!r})")
        elif p.get("trainer.resume_path"):
            self.notes.append("trainer.resume_path: no effect without trainer.resume_mode: from_path (as in SkyRL)")
        self._gpus(out, p)
        return out

    def _kl(self, out: dict[str, Any], p: dict[str, Any]) -> None:
        use, coef = p.get("trainer.algorithm.use_kl_loss"), p.get("trainer.algorithm.kl_loss_coef")
        if use is None and coef is None:
            return
        if use is False:
            _set(out, "trainer.algorithm.kl_coef", 0.0)
            self.notes.append("trainer.algorithm.use_kl_loss: false -> trainer.algorithm.kl_coef (0.0)")
            return
        value = 0.001 if coef is None else coef  # SkyRL's default coefficient; use_kl_loss defaults to true there
        _set(out, "trainer.algorithm.kl_coef", value)
        said = "use_kl_loss: true" if use else "kl_loss_coef (use_kl_loss is true by default in SkyRL)"
        said += " + kl_loss_coef" if use and coef is not None else " (SkyRL's default kl_loss_coef)" if use else ""
        self.notes.append(f"trainer.algorithm.{said} -> trainer.algorithm.kl_coef ({value!r})")

    def _gpus(self, out: dict[str, Any], p: dict[str, Any]) -> None:
        per_node = p.get("trainer.placement.policy_num_gpus_per_node")
        nodes = p.get("trainer.placement.policy_num_nodes", 1)
        if per_node is None:
            if "trainer.placement.policy_num_nodes" in p:
                self.notes.append("trainer.placement.policy_num_nodes: no effect without policy_num_gpus_per_node")
            return
        if not isinstance(per_node, int) or not isinstance(nodes, int) or per_node < 0 or nodes < 1:
            self.problems.append(
                f"trainer.placement.policy_num_gpus_per_node ({per_node!r}) × policy_num_nodes "
                f"({nodes!r}) must be whole numbers (0 GPUs = train on the CPU)"
            )
            return
        gpus = per_node * nodes
        _set(out, "trainer.placement.learner_gpus", gpus)
        self.notes.append(
            f"trainer.placement.policy_num_gpus_per_node × policy_num_nodes -> trainer.placement.learner_gpus "
            f"({per_node} × {nodes} = {gpus}{'; 0 = the CPU' if gpus == 0 else ''})"
        )
        colocate = _get(out, "trainer.placement.colocate", True)
        if gpus and colocate and _get(out, "inference.engine") == "vllm" and _get(out, "inference.num_engines") is None:
            tp = _get(out, "inference.tensor_parallel_size", 1) or 1
            if isinstance(tp, int) and gpus % tp == 0:
                _set(out, "inference.num_engines", gpus // tp)
                self.notes.append(
                    f"inference.num_engines: {gpus // tp} (colocated: one vLLM engine per "
                    f"{tp} learner GPU{'s' if tp > 1 else ''}, as SkyRL requires)"
                )


def header(notes: list[str]) -> str:
    """The YAML comment block listing what was mapped (empty without notes)."""
    if not notes:
        return ""
    return "# SkyRL keys read as aliases of ours:\n" + "".join(f"#   {note}\n" for note in notes)
