"""GSM8K: grade-school math word problems, scored by the number after `####`.

Data comes from the Hugging Face hub (`openai/gsm8k`, config `main`) or from a local copy of
the original JSONL (or Parquet) files. `prepare_gsm8k` writes SkyRL-style Parquet,
`gsm8k_tasks` builds `Task`s and `gsm8k_reward` scores a response.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
from collections.abc import Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal, get_args

import pyarrow as pa
import pyarrow.parquet as pq
from rich.progress import track

from sandboxes.spec import SandboxSpec
from tasks.errors import TaskError, TaskSourceError
from tasks.task import Reward, Task

log = logging.getLogger(__name__)

HUB_NAME, HUB_CONFIG = "openai/gsm8k", "main"
DATA_SOURCE = "openai/gsm8k"
SPLITS = ("train", "test")
OUTPUT_NAMES = {"train": "train", "test": "validation"}  # GSM8K's test split validates
TOOL_SANDBOX = SandboxSpec(image="harness-base:latest", memory="512m")

INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'
TOOL_INSTRUCTION = (
    "You may run Python code with the `python` tool before answering. "
    'Think step by step, then write the final answer after "####" (for example "#### 42") '
    "and call the `submit` tool."
)

# A number as people write it: optional sign (not a minus between two terms), optional `$`,
# digits with thousands commas and decimals. Cleaned and checked by `_clean_number`.
_NUMBER = re.compile(r"(?:(?<![\w)])-)?(?:\$-?)?(?:\d[\d,]*(?:\.\d+)?|\.\d+)")

Variant = Literal["single", "tool"]
Mode = Literal["strict", "flexible", "skyrl"]
MODES = get_args(Mode)

# SkyRL's rule (skyrl-gym's GSM8K `extract_solution`, strict): the FIRST `#### ` followed by digits, dots and commas.
_SKYRL_ANSWER = re.compile(r"#### (-?[0-9.,]+)")

PARQUET_SCHEMA = pa.schema(
    [
        ("data_source", pa.string()),
        ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("env_class", pa.string()),
        ("reward_spec", pa.struct([("method", pa.string()), ("ground_truth", pa.string())])),
        # SkyRL's fields in SkyRL's order: rows equal those of its examples/train/gsm8k/gsm8k_dataset.py
        (
            "extra_info",
            pa.struct(
                [("split", pa.string()), ("index", pa.int64()), ("answer", pa.string()), ("question", pa.string())]
            ),
        ),
    ]
)


# ----------------------------------------------------------------------------- scoring


def _clean_number(text: str) -> str | None:
    """'$1,234.50.' -> '1234.50'; None when what is left is not a number."""
    cleaned = text.replace(",", "").replace("$", "").strip().rstrip(".")
    return cleaned if re.fullmatch(r"-?(\d+(\.\d+)?|\.\d+)", cleaned) else None


def extract_answer(text: str, mode: Mode = "strict") -> str | None:
    """The final answer in `text`, cleaned ('1,234' -> '1234'), or None if there is none.

    strict: the number right after the last `####`; flexible: the last number anywhere.
    """
    if mode == "strict":
        _, marker, tail = text.rpartition("####")
        match = re.match(r"\s*(" + _NUMBER.pattern + ")", tail) if marker else None
        return _clean_number(match.group(1)) if match else None
    if mode == "flexible":
        numbers = _NUMBER.findall(text)
        return _clean_number(numbers[-1]) if numbers else None
    raise ValueError(f"unknown GSM8K answer mode {mode!r}: use 'strict' or 'flexible'")


_ANNOTATION = re.compile(r"<<([^<>=]+)=[^<>]*>>")  # GSM8K's calculator notes: <<48/2=24>>
_WORKING_LINE = re.compile(r"^\s*([\d\s.+\-*/()]*\d[\d\s.+\-*/()]*?)\s*=\s*-?[\d.,]+\s*$", re.MULTILINE)  # 7 - 1 = 6


def final_calculation(answer: str) -> str | None:
    """The expression of a reference solution's last calculation, as Python ('48/2'), or None.

    Read from GSM8K's last `<<expr=value>>` note, else from the last `expr = value` line of
    the working (the `arith` format). Demonstrations of tool use run it in the `python` tool.
    """
    notes = _ANNOTATION.findall(answer)
    lines = _WORKING_LINE.findall(answer.partition("####")[0])
    expression = (notes or lines or [None])[-1]
    return expression.strip() if expression and any(op in expression for op in "+-*/") else None


def skyrl_answer(text: str) -> str | None:
    """SkyRL's extraction: the first `#### <digits, dots, commas>`, commas and `$` removed; None if absent."""
    match = _SKYRL_ANSWER.search(text)
    return match.group(1).replace(",", "").replace("$", "") if match else None


def skyrl_ground_truth(answer: str) -> str:
    """The ground truth SkyRL's gsm8k_dataset.py stores: the first `#### <number>`, commas removed (a string)."""
    match = _SKYRL_ANSWER.search(answer)
    if match is None:
        raise TaskSourceError(f"GSM8K answer has no '#### <number>': {answer[-60:]!r}")
    return match.group(1).replace(",", "")


def _skyrl_reward(response: str, ground_truth: str, format_score: float) -> Reward:
    """SkyRL's rule exactly: string equality of the extracted answer and the ground truth ('18.0' != '18')."""
    extracted = skyrl_answer(response)
    details: dict[str, Any] = {"mode": "skyrl", "extracted": extracted, "ground_truth": ground_truth}
    if extracted is None:
        return Reward(0.0, {**details, "reason": "no '#### <number>' in the response"})
    if extracted == ground_truth:
        return Reward(1.0, {**details, "reason": "correct"})
    return Reward(format_score, {**details, "reason": f"wrong answer: {extracted!r} != {ground_truth!r} (as strings)"})


def gsm8k_reward(response: str, ground_truth: str, mode: Mode = "strict", format_score: float = 0.0) -> Reward:
    """1.0 for the right final answer; `format_score` for a wrong one (strict and skyrl modes); else 0.0.

    strict and flexible compare numbers (`#### 18.0` is right for 18); skyrl is SkyRL's string rule, for
    reproducing its figures (`#### 18.0` is wrong for 18, and the first `####` counts, not the last)."""
    if mode == "skyrl":
        return _skyrl_reward(response, str(ground_truth), format_score)
    if mode not in ("strict", "flexible"):
        raise TaskError(f"unknown GSM8K reward mode {mode!r}: use one of {', '.join(MODES)}")
    expected = _clean_number(str(ground_truth))
    if expected is None:
        raise TaskError(f"GSM8K ground truth {ground_truth!r} is not a number; fix the task set")
    extracted = extract_answer(response, mode)
    details: dict[str, Any] = {"mode": mode, "extracted": extracted, "ground_truth": expected}
    if extracted is None:
        where = "after the last '####'" if mode == "strict" else "in the response"
        return Reward(0.0, {**details, "reason": f"no answer found {where}"})
    if Decimal(extracted) == Decimal(expected):
        return Reward(1.0, {**details, "reason": "correct"})
    score = format_score if mode == "strict" else 0.0
    return Reward(score, {**details, "reason": f"wrong answer: {extracted} != {expected}"})


# ----------------------------------------------------------------------------- reading


def default_gsm8k_source() -> str:
    """`$HARNESS_GSM8K_PATH` (a local copy), else 'hf' (`openai/gsm8k` from the Hugging Face hub)."""
    return os.environ.get("HARNESS_GSM8K_PATH") or "hf"


def read_gsm8k(source: str | Path, split: str) -> list[dict[str, str]]:
    """The {question, answer} rows of `split` ('train' or 'test') from 'hf' or a local path."""
    if split not in SPLITS:
        raise TaskSourceError(f"unknown GSM8K split {split!r}: use one of {', '.join(SPLITS)}")
    if str(source) == "hf":
        return _hub_rows(split)
    return _read_rows(_split_files(Path(source), (split,))[split])


def _hub_rows(split: str) -> list[dict[str, str]]:
    """Rows of one split of `openai/gsm8k` from the Hugging Face hub."""
    try:
        import datasets

        dataset = datasets.load_dataset(HUB_NAME, HUB_CONFIG, split=split)
    except Exception as exc:  # network, auth and hub errors come in many types
        raise TaskSourceError(
            f"could not load {HUB_NAME} ({split}) from the Hugging Face hub: {exc}. "
            "Pass --source PATH to a directory holding train.jsonl and test.jsonl "
            "(or train.parquet and test.parquet) instead."
        ) from exc
    return [{"question": row["question"], "answer": row["answer"]} for row in dataset]


def _split_files(source: Path, wanted: tuple[str, ...] = SPLITS) -> dict[str, Path]:
    """Split name -> file: a directory must hold every `wanted` split; a file is the one
    split it is named after (train.jsonl, test-00000-of-00001.parquet)."""
    hint = (
        "pass a directory holding train.jsonl and test.jsonl (or .parquet), one of those "
        "files, or 'hf' for the Hugging Face hub"
    )
    if source.is_file():
        split = _name_split(source)
        if split is None or source.suffix not in (".jsonl", ".parquet"):
            raise TaskSourceError(f"cannot tell the GSM8K split of {source}; {hint}")
        if split not in wanted:
            raise TaskSourceError(f"{source} holds GSM8K's {split} split, not {wanted[0]}")
        return {split: source}
    if not source.is_dir():
        raise TaskSourceError(f"GSM8K source {source} does not exist; {hint}")
    files = {split: _find_split_file(source, split) for split in wanted}
    missing = [split for split, path in files.items() if path is None]
    if missing:
        raise TaskSourceError(f"GSM8K source {source} has no {' or '.join(missing)} split; {hint}")
    return files  # type: ignore[return-value]


def _name_split(path: Path) -> str | None:
    """'train' for train.jsonl or train-00000-of-00001.parquet; None for other names."""
    split = path.name.split(".")[0].split("-")[0]
    return split if split in SPLITS else None


def _find_split_file(directory: Path, split: str) -> Path | None:
    """`split`.jsonl, `split`.parquet or a hub-style `split`-00000-of-00001.parquet."""
    candidates = [directory / f"{split}.jsonl", directory / f"{split}.parquet"]
    candidates += sorted(directory.glob(f"{split}-*.parquet"))
    return next((path for path in candidates if path.is_file()), None)


def _read_rows(path: Path) -> list[dict[str, str]]:
    """{question, answer} rows of a GSM8K JSONL or Parquet file, each checked."""
    try:
        if path.suffix == ".parquet":
            rows = pq.read_table(path, columns=["question", "answer"]).to_pylist()
        else:
            lines = path.read_text(encoding="utf-8").splitlines()
            rows = [json.loads(line) for line in lines if line.strip()]
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise TaskSourceError(f"cannot read GSM8K file {path}: {exc}") from exc
    for index, row in enumerate(rows):
        _check_row(row, f"{path} row {index}")
    return rows


def _check_row(row: Any, where: str) -> None:
    """Raise unless `row` is a {question, answer} dict whose answer ends in `#### <number>`."""
    if not isinstance(row, dict) or not isinstance(row.get("question"), str):
        raise TaskSourceError(f"{where}: expected an object with a string 'question'")
    if not isinstance(row.get("answer"), str) or extract_answer(row["answer"]) is None:
        raise TaskSourceError(f"{where}: 'answer' must be a string ending in '#### <number>'")


# ----------------------------------------------------------------------------- building


def _prompt(question: str, variant: Variant) -> list[dict[str, str]]:
    """The user message posing `question`."""
    if variant == "single":  # SkyRL's prompt: the question, one space, the instruction
        return [{"role": "user", "content": f"{question} {INSTRUCTION}"}]
    return [{"role": "user", "content": f"{question}\n\n{TOOL_INSTRUCTION}"}]


def _metadata(row: dict[str, str], split: str, index: int) -> dict[str, Any]:
    """SkyRL's `extra_info` for one row; its `id` is the task id."""
    return {
        "id": f"gsm8k-{split}-{index}",
        "split": split,
        "index": index,
        "question": row["question"],
        "answer": row["answer"],
    }


def _reward_spec(row: dict[str, str]) -> dict[str, str]:
    return {"method": "rule", "ground_truth": extract_answer(row["answer"])}


def gsm8k_tasks(
    path_or_rows: str | Path | Iterable[dict[str, str]],
    variant: Variant = "single",
    split: str | None = None,
    name: str = "gsm8k",
) -> list[Task]:
    """GSM8K `Task`s from a JSONL/Parquet file, a directory of splits, or {question, answer} rows.

    'single': one text turn, no tools (env_class 'gsm8k'). 'tool': up to 5 turns with the
    `python` and `submit` tools in a small sandbox (env_class 'gsm8k_tool'). `split` names
    the ids (<name>-<split>-<index>) and is read from a directory; it defaults to the split
    a file is named after, else 'test'. `name` serves other task sets in the GSM8K format.
    """
    if variant not in ("single", "tool"):
        raise TaskError(f"unknown GSM8K variant {variant!r}: use 'single' or 'tool'")
    if isinstance(path_or_rows, (str, Path)):
        path = Path(path_or_rows)
        split = split or _name_split(path) or "test"
        rows = read_gsm8k(path, split) if path.is_dir() else _read_rows(path)
    else:
        rows = list(path_or_rows)
        for index, row in enumerate(rows):
            _check_row(row, f"GSM8K row {index}")
        split = split or "test"
    tool = variant == "tool"
    return [
        Task(
            id=f"{name}-{split}-{index}",
            data_source=DATA_SOURCE if name == "gsm8k" else name,
            prompt=_prompt(row["question"], variant),
            env_class="gsm8k_tool" if tool else "gsm8k",
            reward_spec=_reward_spec(row),
            sandbox=TOOL_SANDBOX if tool else None,
            tools=["python", "submit"] if tool else [],
            max_turns=5 if tool else 1,
            metadata=_metadata(row, split, index),
        )
        for index, row in enumerate(rows)
    ]


def skyrl_row(row: dict[str, str], split: str, index: int) -> dict[str, Any]:
    """One Parquet row, equal to the row SkyRL's gsm8k_dataset.py makes of the same source row.

    Our task id is not stored: the loader names a row by its `extra_info.index`."""
    return {
        "data_source": DATA_SOURCE,
        "prompt": _prompt(row["question"], "single"),
        "env_class": "gsm8k",
        "reward_spec": {"method": "rule", "ground_truth": skyrl_ground_truth(row["answer"])},
        "extra_info": {"split": split, "index": index, "answer": row["answer"], "question": row["question"]},
    }


def with_reward_mode(tasks: list[Task], mode: str | None) -> list[Task]:
    """`tasks` with GSM8K's rule scored in `mode` (e.g. 'skyrl' to reproduce SkyRL's figures); None = as they are."""
    if mode is None:
        return tasks
    if mode not in MODES:
        raise TaskError(f"unknown GSM8K reward mode {mode!r}: use one of {', '.join(MODES)}")

    def ruled(task: Task) -> bool:
        return task.reward_spec.get("method") == "rule"

    if not any(ruled(task) for task in tasks):
        raise TaskError(f"reward mode {mode!r} applies to GSM8K-rule tasks, and this task set has none")
    return [
        dataclasses.replace(task, reward_spec={**task.reward_spec, "mode": mode}) if ruled(task) else task
        for task in tasks
    ]


def prepare_gsm8k(output_dir: str | Path, source: str | Path = "hf") -> dict[str, Path]:
    """Write `train.parquet` and `validation.parquet` (GSM8K's test split) in SkyRL's schema.

    `source` is 'hf' (the hub), a directory holding train/test JSONL or Parquet, or one
    such file (then only its split is written). Returns {'train'|'validation': path}.
    """
    if str(source) == "hf":
        splits = {split: _hub_rows(split) for split in SPLITS}
    else:
        splits = {split: _read_rows(path) for split, path in _split_files(Path(source)).items()}
    output = Path(output_dir)
    output.mkdir(parents=True, exist_ok=True)
    written = {}
    for split, rows in splits.items():
        name = OUTPUT_NAMES[split]
        records = [
            skyrl_row(row, split, index)
            for index, row in enumerate(track(rows, description=f"GSM8K {split} -> {name}"))
        ]
        written[name] = _write_parquet(records, output / f"{name}.parquet")
        log.info("wrote %d GSM8K rows to %s", len(records), written[name])
    return written


def _write_parquet(records: list[dict[str, Any]], path: Path) -> Path:
    """Write `records` with `PARQUET_SCHEMA`, atomically (no half-written file on a crash)."""
    partial = path.with_name(path.name + ".partial")
    pq.write_table(pa.Table.from_pylist(records, schema=PARQUET_SCHEMA), partial)
    partial.replace(path)
    return path
