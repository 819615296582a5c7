"""The one append-only JSONL run log, and the resume paths that read it after a kill."""

from __future__ import annotations

import json
import threading

from infra.runlog import append_row, drop_partial_line, read_rows, rewrite_rows


def test_a_torn_last_line_is_skipped_and_cut_before_appending(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}\n{"a": 3, "b": "half')
    assert read_rows(path) == [{"a": 1}, {"a": 2}]
    drop_partial_line(path)
    append_row(path, {"a": 4})
    assert path.read_text() == '{"a": 1}\n{"a": 2}\n{"a": 4}\n'
    assert read_rows(tmp_path / "absent.jsonl") == []


def test_appends_from_many_threads_are_whole_lines(tmp_path):
    path = tmp_path / "log.jsonl"
    threads = [
        threading.Thread(target=lambda n=n: [append_row(path, {"n": n, "i": i, "pad": "x" * 5000}) for i in range(20)])
        for n in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert sorted((r["n"], r["i"]) for r in rows) == [(n, i) for n in range(8) for i in range(20)]


def test_rewrite_replaces_the_rows_at_once(tmp_path):
    path = tmp_path / "log.jsonl"
    for step in range(5):
        append_row(path, {"step": step})
    rewrite_rows(path, [r for r in read_rows(path) if r["step"] <= 2])
    assert read_rows(path) == [{"step": 0}, {"step": 1}, {"step": 2}]
    assert not (tmp_path / "log.jsonl.tmp").exists()


def test_training_metrics_survive_a_torn_line(tmp_path):
    """A run killed while writing metrics.jsonl resumes: reading it skips the torn line, logging starts a clean one."""
    from trainer.metrics import MetricsLogger, read_metrics

    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "train/loss": 0.5}\n{"step": 2, "train/lo')
    assert read_metrics(tmp_path) == [{"step": 1, "train/loss": 0.5}]
    logger = MetricsLogger(tmp_path)
    logger.log(2, {"train/loss": 0.25})
    logger.close()
    assert read_metrics(tmp_path) == [{"step": 1, "train/loss": 0.5}, {"step": 2, "train/loss": 0.25}]


def test_the_synthesis_work_log_resumes_after_a_torn_line(tmp_path):
    from tasks.synth.worklog import WorkLog

    log = WorkLog(tmp_path, key="k")
    log.append({"id": "m1", "status": "kept"})
    with (tmp_path / "worklog.jsonl").open("a") as handle:
        handle.write('{"id": "m2", "sta')
    again = WorkLog(tmp_path, key="k")
    assert list(again.entries) == ["m1"]
    again.append({"id": "m3", "status": "rejected"})
    assert [r["id"] for r in read_rows(tmp_path / "worklog.jsonl")] == ["m1", "m3"]
