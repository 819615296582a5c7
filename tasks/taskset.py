"""Task sets: load them by name, file or hub dataset, and validate every record first.

A record is either a SkyRL row (`data_source`, `prompt`, `env_class`, `reward_spec`,
`extra_info`, optionally `tools`, `max_turns`, `sandbox`) or a SWE-bench instance
(`instance_id`, `repo`, `base_commit`, `patch`, `test_patch`, `problem_statement`, ...).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from sandboxes.images import images_run_on
from sandboxes.spec import SandboxSpec
from tasks.arith import arith_tasks
from tasks.errors import Problem, TaskError, TaskSetError, TaskSourceError
from tasks.gsm8k import default_gsm8k_source, gsm8k_tasks, read_gsm8k
from tasks.harbor.load import load_harbor
from tasks.swe import SWE_REQUIRED_FIELDS, grading_problems, instance_to_task
from tasks.swe_demo import BUILTIN, QUICK_START_SETS, load_swe_demo
from tasks.swe_tiny import swe_tiny_tasks
from tasks.swebench_repo import load_repo_tasks, repo_source
from tasks.task import Task

KNOWN_ROLES = ("system", "user", "assistant", "tool")
SWE_TEST_LISTS = ("FAIL_TO_PASS", "PASS_TO_PASS")
FILE_SUFFIXES = (".parquet", ".jsonl", ".json")

Issue = tuple[str | None, str]  # (field, message) of one problem in one record

BUILTIN_TASKSETS: dict[str, Callable[[], list[Task]]] = {}
# Task sources named `PREFIX:REST` (a format of its own, e.g. `harbor:PATH`): the loader gets REST.
TASK_SOURCES: dict[str, Callable[[str], list[Task]]] = {}


def register_taskset(name: str, loader: Callable[[], list[Task]]) -> None:
    """Make `load_tasks(name)` call `loader`. Names are unique."""
    if name in BUILTIN_TASKSETS:
        raise TaskError(f"task set {name!r} is already registered")
    BUILTIN_TASKSETS[name] = loader


def register_task_source(prefix: str, loader: Callable[[str], list[Task]]) -> None:
    """Make `load_tasks("PREFIX:REST")` call `loader(REST)`. Prefixes are unique."""
    if prefix in TASK_SOURCES or prefix == "hf":
        raise TaskError(f"task source {prefix!r} is already registered")
    TASK_SOURCES[prefix] = loader


def _gsm8k_validation(variant: str) -> Callable[[], list[Task]]:
    """Loader of GSM8K's test split (local copy if there is one, else the hub)."""
    return lambda: gsm8k_tasks(read_gsm8k(default_gsm8k_source(), "test"), variant, "test")


def _arith(split: str, variant: str, max_operand: int = 9, name: str = "arith") -> list[Task]:
    return arith_tasks(split, variant, max_operand=max_operand, name=name)


def _swe_demo(shared: bool = False, folder: str = "swe_demo") -> Callable[[], list[Task]]:
    def load() -> list[Task]:
        return [instance_to_task(i) for i in load_swe_demo(shared=shared, content=BUILTIN / folder)]

    return load


def _swe_tiny(split: str, count: int | None = None) -> Callable[[], list[Task]]:
    def load() -> list[Task]:
        return swe_tiny_tasks(split, count)

    return load


register_taskset("gsm8k", _gsm8k_validation("single"))
register_taskset("gsm8k-tool", _gsm8k_validation("tool"))
for _name, _folder in QUICK_START_SETS.items():
    register_taskset(_name, _swe_demo(folder=_folder))
    register_taskset(f"{_name}-shared", _swe_demo(True, _folder))  # one base image, each repository put in at start
register_taskset("swe-tiny", _swe_tiny("heldout"))
register_taskset("swe-tiny-50", _swe_tiny("heldout", 50))  # the first 50 of swe-tiny: quick evaluations
register_taskset("swe-tiny-val", _swe_tiny("val"))  # fixes of its own: for choosing checkpoints
register_taskset("swe-tiny-train", _swe_tiny("train"))
register_taskset("swe-tiny-sft", _swe_tiny("sft"))  # the training draws whose fixes swe-tiny-rl never has
register_taskset("swe-tiny-rl", _swe_tiny("rl"))  # a third of the training fixes: prompts for reward only
# Every instance with a fix of its own (constants 10..999), so only copying the statement's lines resolves one.
register_taskset("swe-tiny-unique", _swe_tiny("unique-heldout"))
register_taskset("swe-tiny-unique-val", _swe_tiny("unique-val"))
register_taskset("swe-tiny-unique-sft", _swe_tiny("unique-sft"))
register_taskset("swe-tiny-unique-rl", _swe_tiny("unique-rl"))
register_taskset("arith", lambda: _arith("validation", "single"))
register_taskset("arith-train", lambda: _arith("train", "single"))
register_taskset("arith-val", lambda: _arith("val", "single"))  # for choosing checkpoints
register_taskset("arith-tool", lambda: _arith("validation", "tool"))
register_taskset("arith-tool-train", lambda: _arith("train", "tool"))
register_taskset("arith2", lambda: _arith("validation", "single", 99, "arith2"))  # two-digit operands
register_taskset("arith2-train", lambda: _arith("train", "single", 99, "arith2"))
register_taskset("arith2-val", lambda: _arith("val", "single", 99, "arith2"))  # for choosing checkpoints
register_task_source("harbor", load_harbor)


# ----------------------------------------------------------------------------- loading


def load_tasks(source: str, backend: str | None = None) -> list[Task]:
    """Tasks from a built-in name, a .parquet/.jsonl/.json file, `hf:NAME[:SPLIT]`, a SWE-bench task repository
    (`swebench-repo:PATH[:SPLIT]`, or a folder with a `sweb.yaml`: `tasks.swebench_repo`), or a registered
    `PREFIX:REST` source (`harbor:PATH`).

    Every record of a file or dataset is validated first: any problem raises `TaskSetError` listing
    all of them, and no task is returned. A task repository reports its broken tasks and loads the rest.
    `backend`: the sandbox backend the tasks will run on (a name); a loader asks it, not the Docker
    engine, whether an image it would build is already there.
    """
    if source in BUILTIN_TASKSETS:
        with images_run_on(backend):
            return BUILTIN_TASKSETS[source]()
    repo = repo_source(source)
    if repo is not None:
        with images_run_on(backend):
            return load_repo_tasks(*repo)
    prefix, colon, rest = source.partition(":")
    if colon and prefix in TASK_SOURCES:
        with images_run_on(backend):
            return TASK_SOURCES[prefix](rest)
    if source.startswith("hf:"):
        records, problems, unit = dict(enumerate(_hub_records(source))), [], "index"
    else:
        path = _task_file(source)
        records, problems = _read_file(path)
        unit = _unit(path)
    problems += validate_records(records)
    if not problems:
        tasks, problems = _to_tasks(records)
    if problems:
        raise TaskSetError(problems, source, unit)
    return tasks


def _task_file(source: str) -> Path:
    """`source` as an existing task-set file, or a clear error."""
    path = Path(source)
    if not path.is_file():
        builtins = ", ".join(sorted(BUILTIN_TASKSETS))
        raise TaskSourceError(
            f"no task set {source!r}: not a built-in ({builtins}), not hf:NAME[:SPLIT] or "
            f"{', '.join(p + ':...' for p in sorted(TASK_SOURCES))}, not a task repository (a folder with a "
            "sweb.yaml), and no such file"
        )
    if path.suffix not in FILE_SUFFIXES:
        raise TaskSourceError(f"{path}: task-set files must end in {', '.join(FILE_SUFFIXES)}")
    return path


def _hub_records(source: str) -> list[dict[str, Any]]:
    """Records of `hf:NAME[:SPLIT]` (split 'test' by default) from the Hugging Face hub."""
    name, _, split = source.removeprefix("hf:").partition(":")
    try:
        import datasets

        return list(datasets.load_dataset(name, split=split or "test"))
    except Exception as exc:  # network, auth and hub errors come in many types
        raise TaskSourceError(
            f"could not load {name!r} (split {split or 'test'}) from the Hugging Face hub: "
            f"{exc}. Check the name and split, or download it and pass a local "
            ".parquet/.jsonl/.json file."
        ) from exc


def _unit(path: Path) -> str:
    """What a record number means in `path`: a line for JSONL, an index otherwise."""
    return "line" if path.suffix == ".jsonl" else "index"


def _read_file(path: Path) -> tuple[dict[int, Any], list[Problem]]:
    """Records keyed by line number (JSONL) or index (JSON, Parquet), plus read problems."""
    try:
        if path.suffix == ".jsonl":
            return _read_jsonl(path)
        if path.suffix == ".parquet":
            return dict(enumerate(pq.read_table(path).to_pylist())), []
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, pa.ArrowException) as exc:
        return {}, [Problem(None, None, f"cannot read {path.name}: {exc}")]
    if not isinstance(data, list):
        return {}, [Problem(None, None, "a .json task set must be a list of records")]
    return dict(enumerate(data)), []


def _read_jsonl(path: Path) -> tuple[dict[int, Any], list[Problem]]:
    """Records keyed by 1-based line number; blank lines are skipped, bad JSON reported."""
    records: dict[int, Any] = {}
    problems: list[Problem] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records[number] = json.loads(line)
        except ValueError as exc:
            problems.append(Problem(number, None, f"not valid JSON: {exc}"))
    return records, problems


# ----------------------------------------------------------------------------- validation


def validate_file(path: str | Path) -> list[Problem]:
    """Every problem in a .parquet/.jsonl/.json task-set file (empty when it is fine), including
    everything grading will need of SWE-bench instances: an empty list means the set can run."""
    records, problems = _read_file(_task_file(str(path)))
    if not records and not problems:
        return [Problem(None, None, "no records: the task set is empty")]
    problems += validate_records(records)
    flagged = {p.record for p in problems}
    for number, record in records.items():
        if number not in flagged and isinstance(record, dict) and not _is_skyrl(record):
            problems += [Problem(number, field, message) for field, message in grading_problems(record)]
    return problems


def validate_records(records: Sequence[Any] | Mapping[int, Any]) -> list[Problem]:
    """Every problem in `records`: a sequence (numbered by index) or {record number: record}."""
    numbered = records.items() if isinstance(records, Mapping) else enumerate(records)
    problems: list[Problem] = []
    first_seen: dict[str, int] = {}
    for position, (number, record) in enumerate(numbered):
        issues = _check_record(record)
        problems += [Problem(number, field, message) for field, message in issues]
        if issues:
            continue
        task_id = record_id(record, position)
        if task_id in first_seen:
            message = f"duplicate id {task_id!r} (first used by record {first_seen[task_id]})"
            problems.append(Problem(number, "id", message))
        first_seen.setdefault(task_id, number)
    return problems


def _is_skyrl(record: dict[str, Any]) -> bool:
    return "prompt" in record or "env_class" in record


def _is_swe(record: dict[str, Any]) -> bool:
    return "instance_id" in record or "problem_statement" in record


def _check_record(record: Any) -> list[Issue]:
    """The problems of one record of either kind."""
    if not isinstance(record, dict):
        return [(None, f"must be an object, got {type(record).__name__}")]
    if _is_skyrl(record):
        return _check_skyrl_row(record)
    if _is_swe(record):
        return _check_swe_instance(record)
    kinds = "a SkyRL row (prompt, env_class) or a SWE-bench instance (instance_id, ...)"
    return [(None, f"unrecognised record: expected {kinds}")]


def _check_string(record: dict[str, Any], field: str) -> list[Issue]:
    """A required, non-empty string field."""
    value = record.get(field)
    if value is None:
        return [(field, "is required")]
    if not isinstance(value, str):
        return [(field, f"must be a string, got {type(value).__name__}")]
    return [] if value.strip() else [(field, "must not be empty")]


def _check_skyrl_row(row: dict[str, Any]) -> list[Issue]:
    issues = _check_string(row, "data_source") + _check_string(row, "env_class")
    issues += _check_prompt(row.get("prompt"))
    spec = row.get("reward_spec")
    if not isinstance(spec, dict):
        issues.append(("reward_spec", "is required: an object with 'method' and 'ground_truth'"))
    else:
        issues += [("reward_spec." + field, m) for field, m in _check_string(spec, "method")]
    if row.get("extra_info") is not None and not isinstance(row["extra_info"], dict):
        issues.append(("extra_info", "must be an object"))
    return issues + _check_episode_settings(row)


def _check_prompt(prompt: Any) -> list[Issue]:
    """A non-empty list of {role, content} messages with known roles."""
    if not isinstance(prompt, list) or not prompt:
        return [("prompt", "must be a non-empty list of {role, content} messages")]
    issues: list[Issue] = []
    for index, message in enumerate(prompt):
        where = f"prompt[{index}]"
        if not isinstance(message, dict):
            issues.append((where, "must be an object with 'role' and 'content'"))
            continue
        role = message.get("role")
        if role not in KNOWN_ROLES:
            issues.append((f"{where}.role", f"must be one of {', '.join(KNOWN_ROLES)}, got {role!r}"))
        if not isinstance(message.get("content"), str):
            issues.append((f"{where}.content", "must be a string"))
    return issues


def _check_episode_settings(row: dict[str, Any]) -> list[Issue]:
    """The optional `tools`, `max_turns` and `sandbox` of a SkyRL row."""
    issues: list[Issue] = []
    tools, max_turns, sandbox = row.get("tools"), row.get("max_turns"), row.get("sandbox")
    if tools is not None and not _is_string_list(tools):
        issues.append(("tools", "must be a list of tool names"))
    if max_turns is not None and (type(max_turns) is not int or max_turns < 1):
        issues.append(("max_turns", "must be a positive integer"))
    if sandbox is not None:
        try:
            SandboxSpec.from_dict(sandbox)
        except (TypeError, ValueError) as exc:
            issues.append(("sandbox", f"not a valid sandbox spec: {exc}"))
    return issues


def _check_swe_instance(instance: dict[str, Any]) -> list[Issue]:
    issues = [
        issue for field in SWE_REQUIRED_FIELDS if field != "test_patch" for issue in _check_string(instance, field)
    ]
    if not isinstance(instance.get("test_patch"), str):  # "" when the tests exist already (synthesized tasks)
        issues.append(("test_patch", "is required: a string, empty when the repository already has the tests"))
    for field in SWE_TEST_LISTS:
        value = instance.get(field)
        if value is not None and _test_list(value) is None:
            issues.append((field, "must be a list of test names or a JSON string of one"))
    return issues


def _is_string_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _test_list(value: Any) -> list[str] | None:
    """A FAIL_TO_PASS/PASS_TO_PASS value as a list, or None when it is malformed."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if _is_string_list(value) else None


# ----------------------------------------------------------------------------- conversion


def record_id(record: dict[str, Any], position: int) -> str:
    """A valid record's task id: extra_info.id, extra_info.index, instance_id, or
    `<data_source>-<position>`."""
    if _is_skyrl(record):
        extra = record.get("extra_info") or {}
        for value in (extra.get("id"), extra.get("index"), record.get("instance_id")):
            if value is not None:
                return str(value)
        return f"{record['data_source']}-{position}"
    return record["instance_id"]


def _to_tasks(records: Mapping[int, dict[str, Any]]) -> tuple[list[Task], list[Problem]]:
    """Valid records as Tasks, and the problems of those that could not be converted."""
    tasks: list[Task] = []
    problems: list[Problem] = []
    for position, (number, record) in enumerate(records.items()):
        try:
            tasks.append(_to_task(record, position))
        except TaskError as exc:
            problems.append(Problem(number, None, str(exc)))
    return tasks, problems


def _to_task(record: dict[str, Any], position: int) -> Task:
    """One valid record as a Task; SWE-bench instances go through `tasks.swe`."""
    if not _is_skyrl(record):
        return instance_to_task(record)
    return Task(
        id=record_id(record, position),
        data_source=record["data_source"],
        prompt=[{k: v for k, v in m.items() if v is not None} for m in record["prompt"]],
        env_class=record["env_class"],
        reward_spec=dict(record["reward_spec"]),
        sandbox=SandboxSpec.from_dict(record["sandbox"]) if record.get("sandbox") else None,
        tools=list(record.get("tools") or []),
        max_turns=record.get("max_turns") or 1,
        metadata=dict(record.get("extra_info") or {}),
    )
