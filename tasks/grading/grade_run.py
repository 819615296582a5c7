"""One grading run from its settings, the body of `harness grade`.

`prepare_grade` loads the instances and the predictions, reads the official verdicts to compare
with (a malformed file is refused before any grading) and picks where to grade (the sandbox
backend, or the nodes of a Ray cluster); `GradeRun.run` grades and returns what the report says.
`check_only` is the static review alone. The caller shows the progress.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from sandboxes import get_backend
from sandboxes.cluster import Cluster

from ..errors import TaskError
from ..taskset import load_tasks
from .grade import GradeReport
from .parity import Agreement, compare, load_official, write_parity
from .predictions import (
    check_predictions,
    grade_identity,
    grade_predictions,
    load_predictions,
    scripted_predictions,
    summarize,
    write_check,
)


@dataclass
class GradeOutcome:
    results: list[dict[str, Any]]
    summary: dict[str, Any]  # predictions.summarize
    agreements: list[Agreement] | None  # with the official verdicts; None when none were given
    parity: dict[str, Any] | None  # their summary, also written to parity.json / parity.md


@dataclass
class GradeRun:
    instances: list[dict[str, Any]]
    predictions: dict[str, dict[str, Any]]
    identity: dict[str, Any]
    output: Path
    workers: int
    fractional: bool
    force: bool
    grading_mode: str
    backend: str
    ray_address: str | None
    official: dict[str, dict[str, Any]] | None
    official_source: str

    def run(self, on_result: Callable[[GradeReport], None] = lambda report: None) -> GradeOutcome:
        """Grade (or finish grading) every prediction; the results with their summary and parity."""
        cluster = Cluster(self.ray_address, backend=self.backend) if self.ray_address else None
        results = grade_predictions(
            self.instances,
            self.predictions,
            None if cluster else get_backend(self.backend),
            self.output,
            self.workers,
            self.fractional,
            on_result,
            identity=self.identity,
            force=self.force,
            cluster=cluster,
            grading_mode=self.grading_mode,
        )
        agreements = parity = None
        if self.official is not None:
            agreements = compare(results, self.official)
            parity = write_parity(agreements, self.output, self.official_source)
        return GradeOutcome(results, summarize(results), agreements, parity)


def prepare_grade(
    predictions: str,
    tasks: str,
    output: Path,
    *,
    workers: int = 2,
    fractional: bool = False,
    force: bool = False,
    grading_mode: str = "default",
    backend: str = "auto",
    ray_address: str | None = None,
    compare_official: Path | None = None,
) -> GradeRun:
    """Everything before the first instance is graded; `predictions` is a file, `gold` or `empty`."""
    instances = [
        t.metadata["instance"] for t in load_tasks(tasks, None if ray_address else backend) if "instance" in t.metadata
    ]
    if not instances:
        raise TaskError(f"{tasks} holds no SWE-bench instances")
    preds = (
        scripted_predictions(instances, predictions)
        if predictions in ("gold", "empty")
        else load_predictions(predictions)
    )
    official = load_official(compare_official) if compare_official else None  # malformed: refused before any grading
    identity = grade_identity(
        preds, instances, fractional, predictions_source=predictions, tasks=tasks, grading_mode=grading_mode
    )
    return GradeRun(
        instances,
        preds,
        identity,
        output,
        workers,
        fractional,
        force,
        grading_mode,
        backend,
        ray_address,
        official,
        str(compare_official),
    )


def check_only(
    predictions: str, tasks: str | None, output: Path, grading_mode: str
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The static review of every prediction, no sandbox (check.json / check.md in `output`): its rows and the
    count of each verdict. With `tasks`, their test patches and tests count as test files."""
    instances = [t.metadata["instance"] for t in load_tasks(tasks) if "instance" in t.metadata] if tasks else None
    rows = check_predictions(load_predictions(predictions), instances, grading_mode)
    return rows, write_check(rows, output, grading_mode)
