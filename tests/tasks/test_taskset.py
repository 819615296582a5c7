"""Task-set loading and validation: built-ins, Parquet/JSONL/JSON files, hub datasets."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasks import taskset
from tasks.errors import Problem, TaskError, TaskSetError, TaskSourceError
from tasks.task import Task
from tasks.taskset import load_tasks, register_taskset, validate_file, validate_records


def skyrl_row(index: int, **changes) -> dict:
    row = {
        "data_source": "toy",
        "prompt": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": f"What is {index} + 1?"},
        ],
        "env_class": "gsm8k",
        "reward_spec": {"method": "rule", "ground_truth": str(index + 1)},
        "extra_info": {"index": index},
    }
    return {**row, **changes}


def swe_instance(instance_id: str = "org__repo-1", **changes) -> dict:
    instance = {
        "instance_id": instance_id,
        "repo": "org/repo",
        "base_commit": "abc123",
        "patch": "diff --git a/x b/x\n",
        "test_patch": "diff --git a/t b/t\n",
        "problem_statement": "It crashes.",
        "FAIL_TO_PASS": '["tests/test_x.py::test_a"]',
        "PASS_TO_PASS": ["tests/test_x.py::test_b"],
    }
    return {**instance, **changes}


def write_jsonl(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_json(path: Path, records) -> Path:
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def write_parquet(path: Path, records: list[dict]) -> Path:
    pq.write_table(pa.Table.from_pylist(records), path)
    return path


def fields(problems: list[Problem]) -> set[tuple[int | None, str | None]]:
    return {(p.record, p.field) for p in problems}


# ----------------------------------------------------------------------------- loading


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".parquet"])
def test_load_skyrl_rows_from_each_format(tmp_path: Path, suffix: str) -> None:
    rows = [skyrl_row(0), skyrl_row(1, extra_info={"index": 1, "id": "named"})]
    rows.append(skyrl_row(2, extra_info=None))
    writer = {
        ".jsonl": lambda p, r: write_jsonl(p, [json.dumps(x) for x in r]),
        ".json": write_json,
        ".parquet": write_parquet,
    }[suffix]
    path = writer(tmp_path / f"set{suffix}", rows)

    assert validate_file(path) == []
    tasks = load_tasks(str(path))
    assert [t.id for t in tasks] == ["0", "named", "toy-2"]
    first = tasks[0]
    assert first.prompt == rows[0]["prompt"]
    assert (first.env_class, first.data_source, first.max_turns) == ("gsm8k", "toy", 1)
    assert first.reward_spec == {"method": "rule", "ground_truth": "1"}
    assert first.metadata["index"] == 0


def test_load_row_with_episode_settings(tmp_path: Path) -> None:
    row = skyrl_row(
        0,
        env_class="gsm8k_tool",
        tools=["python", "submit"],
        max_turns=5,
        sandbox={"image": "harness-base:latest", "memory": "512m"},
    )
    [task] = load_tasks(str(write_json(tmp_path / "set.json", [row])))
    assert task.tools == ["python", "submit"]
    assert task.max_turns == 5
    assert task.sandbox is not None and task.sandbox.memory == "512m"


def test_unknown_env_class_is_allowed(tmp_path: Path) -> None:
    path = write_json(tmp_path / "set.json", [skyrl_row(0, env_class="my_new_env")])
    assert load_tasks(str(path))[0].env_class == "my_new_env"


def test_swe_instances_go_through_tasks_swe(tmp_path: Path, monkeypatch) -> None:
    seen = []

    def instance_to_task(record: dict) -> Task:
        seen.append(record["instance_id"])
        return Task(
            id=record["instance_id"],
            data_source="swe-bench",
            prompt=[],
            env_class="swe",
            reward_spec={"method": "swe"},
        )

    monkeypatch.setattr(taskset, "instance_to_task", instance_to_task)

    path = write_parquet(tmp_path / "swe.parquet", [swe_instance("a__b-1"), swe_instance("a__b-2")])
    tasks = load_tasks(str(path))
    assert [t.id for t in tasks] == seen == ["a__b-1", "a__b-2"]


def test_conversion_errors_are_reported_as_problems(tmp_path: Path, monkeypatch) -> None:
    def instance_to_task(record: dict) -> Task:
        raise TaskError("no image for this repo")

    monkeypatch.setattr(taskset, "instance_to_task", instance_to_task)

    path = write_json(tmp_path / "swe.json", [swe_instance()])
    with pytest.raises(TaskSetError, match="no image for this repo") as info:
        load_tasks(str(path))
    assert info.value.problems[0].record == 0


def test_builtin_registry(monkeypatch) -> None:
    monkeypatch.setattr(taskset, "BUILTIN_TASKSETS", dict(taskset.BUILTIN_TASKSETS))
    task = Task(id="t", data_source="x", prompt=[], env_class="e", reward_spec={})
    register_taskset("tiny", lambda: [task])
    assert load_tasks("tiny") == [task]
    with pytest.raises(TaskError, match="already registered"):
        register_taskset("tiny", lambda: [])


@pytest.mark.parametrize(
    ("name", "env_class", "tools"),
    [("gsm8k", "gsm8k", []), ("gsm8k-tool", "gsm8k_tool", ["python", "submit"])],
)
def test_builtin_gsm8k_loads_the_validation_split(name: str, env_class: str, tools: list) -> None:
    tasks = load_tasks(name)
    assert len(tasks) == 1319
    assert tasks[0].id == "gsm8k-test-0"
    assert (tasks[0].env_class, tasks[0].tools) == (env_class, tools)


def test_builtin_gsm8k_honours_env_override(tmp_path: Path, monkeypatch) -> None:
    row = {"question": "What is 2 + 2?", "answer": "2+2=4\n#### 4"}
    write_jsonl(tmp_path / "test.jsonl", [json.dumps(row)] * 3)
    monkeypatch.setenv("HARNESS_GSM8K_PATH", str(tmp_path))
    tasks = load_tasks("gsm8k")
    assert [t.id for t in tasks] == ["gsm8k-test-0", "gsm8k-test-1", "gsm8k-test-2"]
    assert tasks[0].reward_spec["ground_truth"] == "4"


def test_gsm8k_comes_from_the_hub_unless_a_path_is_set(monkeypatch) -> None:
    from tasks.gsm8k import default_gsm8k_source

    monkeypatch.delenv("HARNESS_GSM8K_PATH", raising=False)
    assert default_gsm8k_source() == "hf"
    monkeypatch.setenv("HARNESS_GSM8K_PATH", "/data/gsm8k")
    assert default_gsm8k_source() == "/data/gsm8k"


def test_hub_source(monkeypatch) -> None:
    import datasets

    calls = []

    def load_dataset(name, split):
        calls.append((name, split))
        return [skyrl_row(0)]

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    assert [t.id for t in load_tasks("hf:org/toy")] == ["0"]
    load_tasks("hf:org/toy:train")
    assert calls == [("org/toy", "test"), ("org/toy", "train")]


def test_hub_failure_is_a_clear_error(monkeypatch) -> None:
    import datasets

    def offline(*args, **kwargs):
        raise ConnectionError("hub unreachable")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(TaskSourceError, match="org/toy.*local"):
        load_tasks("hf:org/toy")


def test_unknown_source_and_suffix(tmp_path: Path) -> None:
    with pytest.raises(TaskSourceError, match="not a built-in .*gsm8k"):
        load_tasks("no-such-set")
    with pytest.raises(TaskSourceError, match=r"\.parquet, \.jsonl, \.json"):
        load_tasks(str(write_json(tmp_path / "set.csv", [])))


# ----------------------------------------------------------------------------- validation


def test_jsonl_with_three_malformed_lines_reports_all(tmp_path: Path) -> None:
    lines = [
        json.dumps(skyrl_row(0)),
        "{this is not json",  # line 2
        json.dumps(skyrl_row(1)),
        "",
        json.dumps(skyrl_row(2, prompt="just a string")),  # line 5
        json.dumps(skyrl_row(3, reward_spec={"ground_truth": "4"})),  # line 6
    ]
    path = write_jsonl(tmp_path / "set.jsonl", lines)

    problems = validate_file(path)
    assert fields(problems) == {(2, None), (5, "prompt"), (6, "reward_spec.method")}

    with pytest.raises(TaskSetError) as info:
        load_tasks(str(path))
    assert fields(info.value.problems) == fields(problems)
    message = str(info.value)
    assert "3 problem(s)" in message
    for expected in ("line 2: not valid JSON", "line 5: prompt:", "line 6: reward_spec.method:"):
        assert expected in message


def test_skyrl_row_problems() -> None:
    records = [
        {"prompt": [{"role": "user", "content": "hi"}]},
        skyrl_row(1, env_class=""),
        skyrl_row(2, data_source=7),
        skyrl_row(3, prompt=[{"role": "robot", "content": "hi"}, {"role": "user"}, "hi"]),
        skyrl_row(4, prompt=[]),
        skyrl_row(5, extra_info=[1]),
        skyrl_row(6, tools="python", max_turns=0, sandbox={"colour": "red"}),
        skyrl_row(7, reward_spec=None),
    ]
    assert fields(validate_records(records)) == {
        (0, "data_source"),
        (0, "env_class"),
        (0, "reward_spec"),
        (1, "env_class"),
        (2, "data_source"),
        (3, "prompt[0].role"),
        (3, "prompt[1].content"),
        (3, "prompt[2]"),
        (4, "prompt"),
        (5, "extra_info"),
        (6, "tools"),
        (6, "max_turns"),
        (6, "sandbox"),
        (7, "reward_spec"),
    }


def test_swe_instance_problems() -> None:
    missing_repo = swe_instance("a-1")
    del missing_repo["repo"]
    records = [
        missing_repo,
        swe_instance("a-2", base_commit=None, patch=""),
        swe_instance("a-3", FAIL_TO_PASS="not json", PASS_TO_PASS='{"a": 1}'),
        swe_instance("a-4", FAIL_TO_PASS=[1, 2]),
        {"problem_statement": "only this"},
        {"question": "neither kind"},
        "a string",
    ]
    problems = validate_records(records)
    assert fields(problems) == {
        (0, "repo"),
        (1, "base_commit"),
        (1, "patch"),
        (2, "FAIL_TO_PASS"),
        (2, "PASS_TO_PASS"),
        (3, "FAIL_TO_PASS"),
        (4, "instance_id"),
        (4, "repo"),
        (4, "base_commit"),
        (4, "patch"),
        (4, "test_patch"),
        (5, None),
        (6, None),
    }


def test_duplicate_ids() -> None:
    records = [
        skyrl_row(0),
        skyrl_row(1),
        skyrl_row(2, extra_info={"index": 0}),
        swe_instance("x"),
        swe_instance("x"),
    ]
    problems = validate_records(records)
    assert fields(problems) == {(2, "id"), (4, "id")}
    assert "first used by record 0" in str(problems[0])


def test_validate_records_keeps_given_record_numbers() -> None:
    problems = validate_records({10: skyrl_row(0), 12: skyrl_row(1, env_class=None)})
    assert fields(problems) == {(12, "env_class")}


def test_json_file_must_hold_a_list(tmp_path: Path) -> None:
    path = write_json(tmp_path / "set.json", {"records": []})
    assert fields(validate_file(path)) == {(None, None)}
    with pytest.raises(TaskSetError, match="file: a .json task set must be a list"):
        load_tasks(str(path))


def test_unreadable_parquet_is_a_problem(tmp_path: Path) -> None:
    path = tmp_path / "set.parquet"
    path.write_bytes(b"not parquet at all")
    [problem] = validate_file(path)
    assert problem.record is None and "cannot read" in problem.message


def test_parquet_problems_are_numbered_by_index(tmp_path: Path) -> None:
    path = write_parquet(tmp_path / "set.parquet", [skyrl_row(0), skyrl_row(1, env_class="")])
    with pytest.raises(TaskSetError, match="index 1: env_class: must not be empty"):
        load_tasks(str(path))


def test_task_set_error_survives_pickling() -> None:
    error = TaskSetError([Problem(3, "prompt", "bad")], "set.jsonl", "line")
    copy = pickle.loads(pickle.dumps(error))
    assert copy.problems == error.problems
    assert str(copy) == str(error)
    assert "set.jsonl has 1 problem(s)" in str(copy) and "line 3: prompt: bad" in str(copy)
