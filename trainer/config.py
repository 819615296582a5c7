"""Reading the `harness train` configuration: a YAML file in SkyRL's shape, plus dotted command-line overrides,
validated whole into a `TrainConfig` (the schema is `trainer.config_schema`).

Use::

    config = load_config("examples/gsm8k/gsm8k-grpo.yaml", ["trainer.epochs=5", 'data.train_data=["~/x.parquet"]'])
    save_config(config, Path(config.trainer.output_dir) / "config.yaml")

Every problem in a config is reported at once, each naming its key by its dotted path
(`trainer.algorithm.advantage: 'ppo' is not one of grpo, dr_grpo, rloo`). What depends on the
machine (is there a GPU, is vLLM installed, does a data file exist) is checked when the run
starts, not here: a config is valid or not wherever it is read.

This module imports neither torch nor Ray, so that reading a config stays fast.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from .choices import AdvantageMethod, values
from .config_schema import ModelConfig, PlacementConfig, PolicyConfig, TrainConfig
from harness.context import check_summarizer, parse_context
from harness.errors import HarnessError

from .errors import ConfigError
from .skyrl_compat import Translation, header, merge


# Names people bring from SkyRL, verl or TRL: offered as "did you mean" when the key is unknown.
KNOWN_ALIASES: dict[str, str] = {
    "advantage_estimator": "advantage",
    "loss_reduction": "loss_aggregation",
    "loss_type": "loss_aggregation",
    "eps_clip_low": "clip_low",
    "eps_clip_high": "clip_high",
    "epsilon": "clip_low",
    "epsilon_high": "clip_high",
    "kl_loss_coef": "kl_coef",
    "beta": "kl_coef",
    "kl_estimator_type": "kl_type",
    "lr": "learning_rate",
    "n_samples": "n_samples_per_prompt",
    "num_generations": "n_samples_per_prompt",
    "max_generate_length": "max_tokens",
    "max_new_tokens": "max_tokens",
    "total_epochs": "epochs",
    "micro_train_batch_size_per_gpu": "micro_batch_size",
    "ppo_mini_batch_size": "mini_batch_size",
    "project_name": "project",
    "ckpt_path": "output_dir",
    "export_path": "output_dir",
}


# ----------------------------------------------------------------------------- loading


def _translation() -> Translation:
    return Translation(placement_keys=frozenset(PlacementConfig.model_fields))


def load_config(path: str | os.PathLike[str] | None, overrides: list[str] | tuple[str, ...] = ()) -> TrainConfig:
    """Read the YAML at `path` (or start empty), apply `a.b.c=value` overrides in order, validate and resolve.

    Override values are YAML: `trainer.epochs=5` is an integer, `data.train_data=["~/a.parquet","b"]` a list,
    `trainer.max_steps=null` null. Raises `ConfigError` listing every problem, each by its dotted key.
    """
    raw: dict[str, Any] = {}
    if path is not None:
        raw = _read_yaml(Path(path).expanduser())
    translation = _translation()  # SkyRL's keys, in the file and in the overrides, become ours
    raw = translation.apply(_shorthands(raw))
    for override in overrides:
        stage: dict[str, Any] = {}
        _apply_override(stage, override)
        translated = translation.apply(_shorthands(stage))
        if translated == _shorthands(stage):
            _apply_override(raw, override)
        else:
            raw = merge(raw, translated)
        raw = _shorthands(raw)
    default_name = Path(path).stem if path is not None else "train"
    return config_from_dict(
        raw, default_run_name=default_name, source=str(path) if path is not None else None, translation=translation
    )


def config_from_dict(
    raw: Mapping[str, Any],
    default_run_name: str = "train",
    source: str | None = None,
    translation: Translation | None = None,
) -> TrainConfig:
    """Validate a plain dict (as read from YAML) into a resolved `TrainConfig`; see `load_config`.

    SkyRL's key names are accepted too (`trainer/skyrl_compat.py`); `translation` carries what
    `load_config` already translated."""
    if translation is None:
        translation = _translation()
        raw = translation.apply(_shorthands(dict(raw)))
    raw = translation.finish(_shorthands(dict(raw)))
    problems: list[str] = list(translation.problems)
    config = None
    try:
        config = TrainConfig.model_validate(raw)
    except ValidationError as error:
        problems += [_describe(problem) for problem in error.errors()]
    problems += _check_advantage(raw)
    if config is not None and not problems:
        config = _resolve(config, default_run_name)
        config._skyrl_aliases = tuple(translation.notes)
        problems += _check(config)
    if problems:
        where = f" in {source}" if source else ""
        if len(problems) == 1:
            raise ConfigError(f"invalid training config{where}: {problems[0]}")
        raise ConfigError(
            f"invalid training config{where} ({len(problems)} problems):\n" + "\n".join(f"  - {p}" for p in problems)
        )
    return config


def to_dict(config: BaseModel) -> dict[str, Any]:
    """The config as plain dicts, lists and scalars (what `save_config` writes and `config_from_dict` reads back)."""
    return config.model_dump()


def save_config(config: TrainConfig, path: str | os.PathLike[str]) -> Path:
    """Write the resolved config as YAML (parent folders created); `load_config` reads it back to an equal config."""
    path = Path(path).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(to_dict(config), sort_keys=False, default_flow_style=False, allow_unicode=True)
    tmp = path.with_name(path.name + ".tmp")
    notes = header(list(getattr(config, "skyrl_aliases", ())))
    tmp.write_text("# Resolved `harness train` config: defaults filled in, overrides applied.\n" + notes + text)
    tmp.replace(path)
    return path


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist; pass the path of a YAML file (see examples/)") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(
            f"config file {path} must hold a mapping of sections ({_allowed(TrainConfig)}), got {type(raw).__name__}"
        )
    return raw


def _shorthands(raw: dict[str, Any]) -> dict[str, Any]:
    """`logger: wandb` is `logger: {type: wandb}`."""
    if isinstance(raw.get("logger"), str):
        raw = {**raw, "logger": {"type": raw["logger"]}}
    trainer = raw.get("trainer")
    if isinstance(trainer, dict) and "async" in trainer:  # `async` is a Python keyword: the field is `async_`
        value = trainer["async"]
        if isinstance(value, bool):
            value = {"enabled": value}
        elif isinstance(value, int):
            value = {"enabled": True, "staleness": value}
        merged = (
            {**trainer.get("async_", {}), **value}
            if isinstance(value, dict) and isinstance(trainer.get("async_"), dict)
            else value
        )
        raw = {**raw, "trainer": {**{k: v for k, v in trainer.items() if k != "async"}, "async_": merged}}
    return raw


def _apply_override(raw: dict[str, Any], override: str) -> None:
    """Set `a.b.c=value` in the nested dict `raw` (the value parsed as YAML); intermediate sections are created."""
    key, sep, text = override.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"override {override!r} must look like key=value, e.g. trainer.epochs=5")
    parts = key.split(".")
    if any(not part for part in parts):
        raise ConfigError(f"override {override!r}: {key!r} is not a dotted key such as trainer.algorithm.kl_coef")
    try:
        value = yaml.safe_load(text) if text.strip() else None
    except yaml.YAMLError as exc:
        raise ConfigError(
            f'override {override!r}: the value is not valid YAML ({exc}); quote lists, e.g. \'{key}=["a", "b"]\''
        ) from None
    node = raw
    for depth, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            prefix = ".".join(parts[: depth + 1])
            raise ConfigError(f"override {override!r}: {prefix} is {child!r}, not a section with keys")
        node = child
    node[parts[-1]] = value


# ----------------------------------------------------------------------------- validation


def _allowed(cls: type[BaseModel]) -> str:
    return ", ".join(_names(cls))


def _names(cls: type[BaseModel]) -> list[str]:
    """The keys of a section as the YAML spells them (the field `async_` is the key `async`)."""
    return [name.removesuffix("_") for name in cls.model_fields]


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _section_at(loc: tuple[Any, ...]) -> type[BaseModel]:
    """The section class found by following the keys of `loc` down from TrainConfig."""
    cls: Any = TrainConfig
    for key in loc:
        annotation = cls.model_fields[key].annotation
        if get_origin(annotation) is not None:  # `SFTWarmupConfig | None`
            annotation = next(
                arg for arg in get_args(annotation) if isinstance(arg, type) and issubclass(arg, BaseModel)
            )
        cls = annotation
    return cls


def _describe(problem: dict[str, Any]) -> str:
    """One of pydantic's validation errors in our words: the dotted key, then what was expected."""
    loc, kind, value, ctx = tuple(problem["loc"]), problem["type"], problem["input"], problem.get("ctx") or {}
    if kind == "extra_forbidden":
        return _unknown_key(loc[-1], _dotted(loc[:-1]), _names(_section_at(loc[:-1])))
    path = _dotted(loc)
    expected = {
        "int_type": "an integer",
        "int_from_float": "an integer",
        "float_type": "a number",
        "bool_type": "true or false",
        "string_type": "a string",
        "list_type": "a list",
    }
    if kind in expected:
        return f"{path}: expected {expected[kind]}, got {value!r}"
    if kind == "model_type":
        return f"{path}: expected a section with keys ({_allowed(_section_at(loc))}), got {value!r}"
    if kind == "literal_error":
        allowed = re.findall(r"'([^']*)'", ctx["expected"])  # pydantic's "'a', 'b' or 'c'"
        return f"{path}: {value!r} is not one of {', '.join(allowed)}"
    bounds = {
        "greater_than_equal": ("ge", "is below the minimum"),
        "greater_than": ("gt", "must be greater than"),
        "less_than_equal": ("le", "is above the maximum"),
        "less_than": ("lt", "must be less than"),
    }
    if kind in bounds:
        key, words = bounds[kind]
        return f"{path}: {value!r} {words} {ctx[key]!r}"
    return f"{path}: {problem['msg']}, got {value!r}"  # pragma: no cover - a check this schema does not use


def _dotted(loc: tuple[Any, ...]) -> str:
    """('data', 'train_data', 1) -> data.train_data[1]."""
    path = ""
    for part in loc:
        path = f"{path}[{part}]" if isinstance(part, int) else _join(path, str(part).removesuffix("_"))
    return path


def _unknown_key(key: Any, path: str, names: list[str]) -> str:
    full = _join(path, str(key))
    guess = KNOWN_ALIASES.get(str(key))
    if guess not in names:
        close = difflib.get_close_matches(str(key), names, n=1, cutoff=0.6)
        guess = close[0] if close else None
    hint = f" (did you mean {_join(path, guess)}?)" if guess else ""
    return f"unknown key {full}{hint}; allowed: {', '.join(names)}"


def _expand(path: str | None) -> str | None:
    return os.path.expanduser(path) if path else path


def _resolve(config: TrainConfig, default_run_name: str) -> TrainConfig:
    """Fill in the defaults that depend on other keys and expand `~` in paths."""
    data = config.data.model_copy(
        update={
            "train_data": [_expand(p) for p in config.data.train_data],
            "val_data": [_expand(p) for p in config.data.val_data],
        }
    )
    t = config.trainer
    run_name = t.run_name or default_run_name
    policy_path = _expand(t.policy.model.path)
    ref_path = _expand(t.ref.model.path)  # null stays null: the run decides (the start, or the warm-started policy)
    sft = t.sft_warmup
    if sft is not None:
        sft = sft.model_copy(update={"data": [_expand(p) for p in sft.data]})
    trainer = t.model_copy(
        update={
            "run_name": run_name,
            "output_dir": _expand(t.output_dir) or str(Path("runs") / run_name),
            "resume": t.resume if t.resume in ("auto", "never") else _expand(t.resume),
            "sft_warmup": sft,
            "policy": PolicyConfig(model=ModelConfig(path=policy_path)),
            "ref": PolicyConfig(model=ModelConfig(path=ref_path)),
        }
    )
    return config.model_copy(update={"data": data, "trainer": trainer})


def _check_advantage(raw: Mapping[str, Any]) -> list[str]:
    """A built-in estimator, a module:function, or (when plugins are named) a name one of them may register."""
    trainer = raw.get("trainer") if isinstance(raw.get("trainer"), Mapping) else {}
    algorithm = trainer.get("algorithm") if isinstance(trainer.get("algorithm"), Mapping) else {}
    advantage = algorithm.get("advantage", "grpo")
    if not isinstance(advantage, str) or advantage in values(AdvantageMethod) or ":" in advantage or raw.get("plugins"):
        return []
    return [
        f"trainer.algorithm.advantage: {advantage!r} is not one of {', '.join(values(AdvantageMethod))} "
        "(or a module:function, or a name that a module in `plugins` registers)"
    ]


def _check(config: TrainConfig) -> list[str]:
    """Checks that involve more than one key (single keys are checked while building)."""
    problems = []
    data, t, g, inf = config.data, config.trainer, config.generator, config.inference
    if not data.train_data:
        problems.append(
            "data.train_data: required; give task-set files or built-in names, "
            "e.g. data.train_data='[\"~/data/gsm8k/train.parquet\"]'"
        )
    if not t.policy.model.path:
        problems.append(
            "trainer.policy.model.path: required; a checkpoint folder or hub id, "
            "e.g. Qwen/Qwen2.5-1.5B-Instruct (or one built by `harness model init-tiny runs/tiny-model`)"
        )
    if not t.run_name or t.run_name != Path(t.run_name).name or t.run_name in (".", ".."):
        problems.append(
            f"trainer.run_name: {t.run_name!r} must be a plain name (no slashes); "
            "set trainer.output_dir to choose the folder"
        )
    ranks = t.placement.learner_gpus or t.placement.cpu_ranks
    rank_key = "trainer.placement.learner_gpus" if t.placement.learner_gpus else "trainer.placement.cpu_ranks"
    if t.train_batch_size % (t.micro_batch_size * ranks):
        per_rank = f" × {rank_key} ({ranks})" if ranks > 1 else ""
        problems.append(
            f"trainer.train_batch_size: {t.train_batch_size} is not divisible by "
            f"trainer.micro_batch_size ({t.micro_batch_size}){per_rank}"
        )
    if t.mini_batch_size is not None and t.train_batch_size % t.mini_batch_size:
        problems.append(
            f"trainer.mini_batch_size: {t.mini_batch_size} does not divide trainer.train_batch_size ({t.train_batch_size})"
        )
    if g.n_samples_per_prompt < 2:
        problems.append(
            f"generator.n_samples_per_prompt: {g.n_samples_per_prompt} sample per prompt gives "
            f"every sample a zero advantage with trainer.algorithm.advantage={t.algorithm.advantage} "
            "(it compares samples within a group); use 2 or more"
        )
    if t.strategy == "single" and ranks > 1:
        problems.append(
            f"trainer.strategy: 'single' trains on one device but {rank_key} is {ranks}; "
            f"use strategy fsdp2 or {rank_key.rsplit('.', 1)[1]} 1"
        )
    if t.placement.learner_gpus and t.placement.cpu_ranks > 1:
        problems.append(
            f"trainer.placement.cpu_ranks: {t.placement.cpu_ranks} with learner GPUs; the learner has one "
            "rank per GPU: set cpu_ranks to 1"
        )
    if inf.weight_sync != "load" and inf.engine != "vllm":
        problems.append(
            f"inference.weight_sync: {inf.weight_sync!r} is a vLLM transport; with inference.engine "
            f"{inf.engine!r} use 'load'"
        )
    if inf.weight_sync == "nccl" and (not t.placement.learner_gpus or t.placement.colocate):
        problems.append(
            "inference.weight_sync: 'nccl' broadcasts from the learner's GPU to the engines' own GPUs: it needs "
            "trainer.placement.learner_gpus > 0 and colocate: false (NCCL takes one rank per GPU); "
            "use 'load' on CPUs or with colocated engines"
        )
    if t.placement.colocate and t.placement.learner_gpus and inf.tensor_parallel_size > 1:
        problems.append(
            f"inference.tensor_parallel_size: {inf.tensor_parallel_size} with colocate: true; colocated "
            "engines take half of one learner GPU each: use tensor_parallel_size 1 or colocate: false"
        )
    if t.placement.colocate and t.placement.inference_gpus not in (0, t.placement.learner_gpus):
        problems.append(
            f"trainer.placement.inference_gpus: {t.placement.inference_gpus} with colocate: true "
            f"(engines share the {t.placement.learner_gpus} learner GPUs); set it to 0 or colocate: false"
        )
    engine_gpus = t.placement.learner_gpus if t.placement.colocate else t.placement.inference_gpus
    needed = inf.num_engines * inf.tensor_parallel_size
    if inf.engine == "vllm" and engine_gpus > 0 and needed != engine_gpus:
        which = (
            "trainer.placement.learner_gpus (colocated)" if t.placement.colocate else "trainer.placement.inference_gpus"
        )
        problems.append(
            f"inference.num_engines × inference.tensor_parallel_size = {needed} but {which} is "
            f"{engine_gpus}; every inference GPU holds exactly one engine shard"
        )
    if not t.placement.colocate and engine_gpus == 0 and t.placement.learner_gpus > 0:
        problems.append(
            "trainer.placement.inference_gpus: 0 with colocate: false and learner GPUs; "
            "give the engines GPUs of their own or set colocate: true"
        )
    try:
        parse_context(g.context)
        check_summarizer(g.context, g.summarizer)
    except HarnessError as err:
        problems.append(f"generator.{'summarizer' if 'summarizer' in str(err) else 'context'}: {err}")
    if g.max_tokens > g.max_context:
        problems.append(f"generator.max_tokens: {g.max_tokens} is more than generator.max_context ({g.max_context})")
    if data.max_prompt_length >= g.max_context:
        problems.append(
            f"data.max_prompt_length: {data.max_prompt_length} leaves no room for an answer in "
            f"generator.max_context ({g.max_context})"
        )
    if t.max_steps == 0 and t.sft_warmup is None:
        problems.append("trainer.max_steps: 0 runs only the SFT warm-up, and trainer.sft_warmup is not set")
    if t.sft_warmup is not None and t.sft_warmup.eval_interval and not config.data.val_data:
        problems.append("trainer.sft_warmup.eval_interval: evaluates on data.val_data, which is empty")
    if t.sft_warmup is not None and not t.sft_warmup.data:
        problems.append(
            "trainer.sft_warmup.data: required when trainer.sft_warmup is set; "
            "give trajectory datasets, or remove trainer.sft_warmup"
        )
    return problems
