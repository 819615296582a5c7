"""GSM8K: answer extraction, the reward over the real test split, Parquet preparation, tasks."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasks.errors import TaskError, TaskSourceError
from tasks.gsm8k import (
    PARQUET_SCHEMA,
    extract_answer,
    gsm8k_reward,
    gsm8k_tasks,
    prepare_gsm8k,
    read_gsm8k,
)

TRAIN_ROWS, TEST_ROWS = 7473, 1319


@pytest.fixture(scope="module")
def gsm8k_dir(gsm8k_copy: Path) -> Path:
    return gsm8k_copy


@pytest.fixture(scope="module")
def test_split(gsm8k_dir: Path) -> list[dict]:
    lines = (gsm8k_dir / "test.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


# ----------------------------------------------------------------------------- extraction


@pytest.mark.parametrize(
    ("text", "strict", "flexible"),
    [
        ("so 9 * 2 = 18\n#### 18", "18", "18"),
        ("#### 1,450,000", "1450000", "1450000"),
        ("#### $1,234.50.", "1234.50", "1234.50"),
        ("#### -7", "-7", "-7"),
        ("#### $-7", "-7", "-7"),
        ("#### -$7", "-7", "-7"),
        ("#### 0.25", "0.25", "0.25"),
        ("####18", "18", "18"),
        ("#### 18 dollars", "18", "18"),
        ("first #### 3 then #### 4", "4", "4"),
        ("#### 3 and later ####", None, "3"),  # strict reads only the last marker
        ("the answer is 42.", None, "42"),
        ("10 - 3 = 7, so 10-3", None, "3"),  # a minus between terms is no sign
        ("temperature fell to -4.", None, "-4"),
        ("no numbers at all", None, None),
        ("", None, None),
        ("#### abc", None, None),
        ("####", None, None),
        ("#### .5", ".5", ".5"),
    ],
)
def test_extract_answer(text: str, strict: str | None, flexible: str | None) -> None:
    assert extract_answer(text, "strict") == strict
    assert extract_answer(text, "flexible") == flexible


def test_extract_answer_rejects_unknown_mode() -> None:
    with pytest.raises(ValueError, match="strict"):
        extract_answer("#### 1", "loose")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- reward


def test_reward_numeric_equality() -> None:
    assert gsm8k_reward("#### 18.0", "18").value == 1.0
    assert gsm8k_reward("#### 18.00", "18.0").value == 1.0
    assert gsm8k_reward("#### 1,000", "1000").value == 1.0
    assert gsm8k_reward("#### -3", "3").value == 0.0


def test_reward_wrong_answer_earns_format_score_in_strict_mode_only() -> None:
    wrong = gsm8k_reward("#### 17", "18", format_score=0.1)
    assert wrong.value == 0.1
    assert wrong.details["extracted"] == "17"
    assert "wrong answer" in wrong.details["reason"]
    assert gsm8k_reward("17", "18", mode="flexible", format_score=0.1).value == 0.0


def test_reward_without_answer_is_zero_even_with_format_score() -> None:
    reward = gsm8k_reward("I think it is eighteen", "18", format_score=0.1)
    assert reward.value == 0.0
    assert reward.details["extracted"] is None
    assert "no answer" in reward.details["reason"]


def test_reward_flexible_takes_last_number() -> None:
    reward = gsm8k_reward("16 - 3 - 4 = 9 eggs, 9 * 2 = 18 dollars", "18", mode="flexible")
    assert reward.value == 1.0
    assert reward.details == {
        "mode": "flexible",
        "extracted": "18",
        "ground_truth": "18",
        "reason": "correct",
    }


def test_reward_rejects_non_numeric_ground_truth() -> None:
    with pytest.raises(TaskError, match="ground truth"):
        gsm8k_reward("#### 1", "one")


@pytest.mark.parametrize("mode", ["strict", "flexible"])
def test_reward_on_every_reference_solution(test_split: list[dict], mode: str) -> None:
    assert len(test_split) == TEST_ROWS
    for row in test_split:
        truth = row["answer"].rsplit("####", 1)[1].strip().replace(",", "")
        assert gsm8k_reward(row["answer"], truth, mode=mode).value == 1.0, row["answer"]
        changed = re.sub(r"####.*$", f"#### {int(truth) + 1}", row["answer"])
        assert gsm8k_reward(changed, truth, mode=mode).value == 0.0, changed


# ----------------------------------------------------------------------------- preparation


def test_prepare_from_shared_copy(gsm8k_dir: Path, tmp_path: Path) -> None:
    import datasets

    paths = prepare_gsm8k(tmp_path / "out", source=gsm8k_dir)
    assert paths == {
        "train": tmp_path / "out/train.parquet",
        "validation": tmp_path / "out/validation.parquet",
    }

    for name, rows in (("train", TRAIN_ROWS), ("validation", TEST_ROWS)):
        table = pq.read_table(paths[name])
        assert table.num_rows == rows
        assert table.schema.equals(PARQUET_SCHEMA)
        assert pa.types.is_list(table.schema.field("prompt").type)
        assert pa.types.is_struct(table.schema.field("reward_spec").type)

        loaded = datasets.load_dataset(
            "parquet", data_files=str(paths[name]), split="train", cache_dir=str(tmp_path / "hf")
        )
        assert loaded.num_rows == rows
        assert set(loaded.column_names) == {
            "data_source",
            "prompt",
            "env_class",
            "reward_spec",
            "extra_info",
        }

    first = pq.read_table(paths["validation"]).slice(0, 1).to_pylist()[0]
    assert first["data_source"] == "openai/gsm8k"
    assert first["env_class"] == "gsm8k"
    assert first["reward_spec"] == {"method": "rule", "ground_truth": "18"}
    [message] = first["prompt"]
    assert message["role"] == "user"
    assert message["content"].startswith("Janet")
    assert "step by step" in message["content"] and "####" in message["content"]
    assert first["extra_info"]["split"] == "test"
    assert first["extra_info"]["index"] == 0
    assert first["extra_info"]["answer"].endswith("#### 18")

    truths = pq.read_table(paths["train"], columns=["reward_spec"]).column(0).to_pylist()
    assert all("," not in spec["ground_truth"] for spec in truths)


def test_prepare_from_parquet_and_single_file(tmp_path: Path) -> None:
    rows = [{"question": "What is 1,000 + 1?", "answer": "1000+1=1001\n#### 1,001"}]
    source = tmp_path / "src"
    source.mkdir()
    for split in ("train", "test"):
        pq.write_table(pa.Table.from_pylist(rows), source / f"{split}.parquet")

    paths = prepare_gsm8k(tmp_path / "a", source=str(source))
    spec = pq.read_table(paths["train"]).to_pylist()[0]["reward_spec"]
    assert spec == {"method": "rule", "ground_truth": "1001"}

    only_test = prepare_gsm8k(tmp_path / "b", source=source / "test.parquet")
    assert list(only_test) == ["validation"]


@pytest.mark.parametrize(
    ("make_source", "message"),
    [
        (lambda tmp: tmp / "missing", "does not exist"),
        (lambda tmp: tmp, "no train or test split"),
        (lambda tmp: _write(tmp / "questions.jsonl", "{}\n"), "cannot tell the GSM8K split"),
        (lambda tmp: _write(tmp / "test.jsonl", "{not json\n"), "cannot read GSM8K file"),
        (
            lambda tmp: _write(tmp / "test.jsonl", '{"question": "q", "answer": "4"}\n'),
            "#### <number>",
        ),
    ],
)
def test_prepare_bad_source_is_a_clear_error(tmp_path: Path, make_source, message: str) -> None:
    source = make_source(tmp_path)
    with pytest.raises(TaskSourceError, match=re.escape(message)) as info:
        prepare_gsm8k(tmp_path / "out", source=source)
    assert str(source) in str(info.value)
    assert not (tmp_path / "out" / "validation.parquet").exists()


def test_prepare_from_unreachable_hub_says_pass_source(monkeypatch, tmp_path: Path) -> None:
    import datasets

    def offline(*args, **kwargs):
        raise ConnectionError("hub unreachable")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(TaskSourceError, match="--source PATH") as info:
        prepare_gsm8k(tmp_path, source="hf")
    assert "openai/gsm8k" in str(info.value)


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- tasks


def test_single_turn_tasks(gsm8k_dir: Path) -> None:
    tasks = gsm8k_tasks(gsm8k_dir / "test.jsonl")
    assert len(tasks) == TEST_ROWS
    task = tasks[0]
    assert task.id == "gsm8k-test-0"
    assert (task.env_class, task.max_turns, task.tools, task.sandbox) == ("gsm8k", 1, [], None)
    assert task.reward_spec == {"method": "rule", "ground_truth": "18"}
    assert task.metadata["question"] in task.prompt[0]["content"]
    assert len({t.id for t in tasks}) == TEST_ROWS


def test_tasks_from_a_directory_read_the_asked_split(gsm8k_dir: Path) -> None:
    tasks = gsm8k_tasks(gsm8k_dir, split="train")
    assert len(tasks) == TRAIN_ROWS
    assert tasks[-1].id == f"gsm8k-train-{TRAIN_ROWS - 1}"


def test_read_gsm8k_refuses_a_file_of_the_other_split(gsm8k_dir: Path) -> None:
    with pytest.raises(TaskSourceError, match="holds GSM8K's train split, not test"):
        read_gsm8k(gsm8k_dir / "train.jsonl", "test")


def test_tool_tasks_from_rows() -> None:
    rows = [{"question": "What is 6 * 7?", "answer": "6*7=42\n#### 42"}]
    [task] = gsm8k_tasks(rows, variant="tool", split="train")
    assert task.id == "gsm8k-train-0"
    assert task.env_class == "gsm8k_tool"
    assert task.tools == ["python", "submit"]
    assert task.max_turns == 5
    assert task.sandbox is not None
    assert (task.sandbox.image, task.sandbox.memory) == ("harness-base:latest", "512m")
    assert "`python` tool" in task.prompt[0]["content"]


def test_tasks_reject_bad_rows_and_variants() -> None:
    with pytest.raises(TaskSourceError, match="row 1"):
        gsm8k_tasks([{"question": "q", "answer": "#### 1"}, {"question": "q"}])
    with pytest.raises(TaskError, match="variant"):
        gsm8k_tasks([], variant="multi")  # type: ignore[arg-type]
