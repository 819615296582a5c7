"""Run directories as the viewer reads them: an index of byte offsets over each JSONL, grown as the file grows.

Kinds: `eval` (also the `run/` folder of `harness generate`): `results.jsonl` plus one trajectory file per
episode; `grade`: `results.jsonl` of grading reports; `train`: `metrics.jsonl` plus `rollouts/step_*.jsonl`,
the sampled trajectories of each step; `scaffold`: a folder of another scaffold's trajectory files
(mini-swe-agent's `*.traj.json`, gzip'd or not), read into our format. Nothing is loaded whole: a row's summary is kept, its full record is
read back from its offset when a page asks for it.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import HarnessError
from ..trajectory import trajectory_file
from ..trajectory_formats import TrajectoryFormatError, read_trajectory_file, trajectory_files


class ViewerError(HarnessError):
    pass


class JsonlIndex:
    """Offsets of the complete lines of an append-only JSONL file and a small summary of each line.

    `refresh()` reads only what was appended since the last call; a torn last line waits for its newline;
    a file that shrank (a resumed run rewrote it) is indexed again from the start.
    """

    def __init__(self, path: Path, summarize: Callable[[dict[str, Any]], dict[str, Any]]):
        self.path = path
        self.summarize = summarize
        self.offsets: list[int] = []
        self.rows: list[dict[str, Any]] = []
        self._end = 0
        self._lock = threading.Lock()

    def refresh(self) -> "JsonlIndex":
        with self._lock:
            try:
                size = self.path.stat().st_size
            except FileNotFoundError:
                size = 0
            if size < self._end:
                self.offsets, self.rows, self._end = [], [], 0
            if size == self._end:
                return self
            with self.path.open("rb") as handle:
                handle.seek(self._end)
                data = handle.read(size - self._end)
            complete = data[: data.rfind(b"\n") + 1]
            position = self._end
            for line in complete.splitlines(keepends=True):
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    record = None  # a line cut by a kill and later followed by others: skipped, as the runs do
                if isinstance(record, dict):
                    self.offsets.append(position)
                    self.rows.append({"index": len(self.rows), **self.summarize(record)})
                position += len(line)
            self._end = position
            return self

    def __len__(self) -> int:
        return len(self.rows)

    def read(self, index: int) -> dict[str, Any]:
        if not 0 <= index < len(self.offsets):
            raise ViewerError(f"{self.path} has no record {index} (it holds {len(self.offsets)})")
        with self.path.open("rb") as handle:
            handle.seek(self.offsets[index])
            return json.loads(handle.readline())


def _tokens(record: dict[str, Any]) -> int:
    return int(record.get("prompt_tokens") or 0) + int(record.get("completion_tokens") or 0)


def summarize_result(row: dict[str, Any]) -> dict[str, Any]:
    """A row of an eval run's results.jsonl, without its patch."""
    return {
        "task_id": str(row.get("task_id", "")),
        "sample": int(row.get("sample", 0)),
        "resolved": bool(row.get("resolved")),
        "reward": float(row.get("reward") or 0.0),
        "exit_status": row.get("exit_status", ""),
        "turns": int(row.get("turns") or 0),
        "tokens": _tokens(row),
        "wall_s": round(float(row.get("wall_s") or 0.0), 2),
        "error": str(row.get("error") or "")[:200],
    }


def summarize_grade(row: dict[str, Any]) -> dict[str, Any]:
    """A row of a grading run: one SWE-bench instance's verdict."""
    note = "; ".join(row.get("rejected") or []) or row.get("invalid_log") or row.get("error") or ""
    return {
        "task_id": str(row.get("instance_id", "")),
        "sample": 0,
        "resolved": bool(row.get("resolved")),
        "reward": float(row.get("reward") or 0.0),
        "exit_status": row.get("resolution", ""),
        "turns": 0,
        "tokens": 0,
        "wall_s": round(float(row.get("duration") or 0.0), 2),
        "error": str(note)[:200],
    }


def summarize_trajectory(t: dict[str, Any]) -> dict[str, Any]:
    """A sampled trajectory of a training step."""
    return {
        "task_id": str(t.get("task_id", "")),
        "sample": int(t.get("sample", 0)),
        "resolved": float(t.get("reward") or 0.0) >= 1.0,
        "reward": float(t.get("reward") or 0.0),
        "exit_status": t.get("exit_status", ""),
        "turns": int(t.get("turns") or 0),
        "tokens": _tokens(t),
        "wall_s": round(float((t.get("timings") or {}).get("total_s", 0.0)), 2),
        "error": str(t.get("error") or "")[:200],
    }


class TrajectoryFolder:
    """A scaffold's trajectory files as table rows; the index of the same shape as `JsonlIndex`."""

    def __init__(self, path: Path):
        self.path = path
        self.files: list[Path] = []
        self.rows: list[dict[str, Any]] = []

    def refresh(self) -> "TrajectoryFolder":
        files = trajectory_files(self.path)
        if files != self.files:
            self.files, self.rows = files, []
            for file in files:
                try:
                    summary = summarize_trajectory(read_trajectory_file(file))
                except TrajectoryFormatError as err:
                    summary = {**summarize_trajectory({"task_id": file.name}), "error": str(err)[:200]}
                self.rows.append({"index": len(self.rows), **summary})
        return self

    def __len__(self) -> int:
        return len(self.rows)

    def read(self, index: int) -> dict[str, Any]:
        if not 0 <= index < len(self.files):
            raise ViewerError(f"{self.path} has no trajectory {index} (it holds {len(self.files)})")
        try:
            return read_trajectory_file(self.files[index])
        except TrajectoryFormatError as err:
            raise ViewerError(str(err)) from err


@dataclass
class Run:
    """One run directory. `rows(step)` are the table's rows (a training run's: the sampled trajectories of `step`)."""

    name: str
    path: Path
    kind: str  # eval | grade | train | scaffold
    results: JsonlIndex | TrajectoryFolder | None = None
    _steps: dict[int, JsonlIndex] = field(default_factory=dict)

    def config(self) -> dict[str, Any]:
        for name in ("config.json", "config.yaml"):
            path = self.path / name
            if path.exists():
                if name.endswith(".json"):
                    return json.loads(path.read_text())
                import yaml

                return yaml.safe_load(path.read_text()) or {}
        return {}

    def report(self) -> dict[str, Any] | None:
        path = self.path / "report.json"
        return json.loads(path.read_text()) if path.exists() else None

    def metrics(self) -> list[dict[str, Any]]:
        path = self.path / "metrics.jsonl"
        if not path.exists():
            return []
        rows = []
        for line in path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return rows

    def steps(self) -> list[int]:
        return sorted(int(p.stem.split("_")[1]) for p in (self.path / "rollouts").glob("step_*.jsonl"))

    def index(self, step: int | None = None) -> JsonlIndex:
        if self.kind != "train":
            assert self.results is not None
            return self.results.refresh()
        steps = self.steps()
        if not steps:
            raise ViewerError(f"{self.path} holds no sampled trajectories yet (rollouts/step_*.jsonl)")
        step = steps[-1] if step is None else step
        if step not in steps:
            raise ViewerError(f"{self.path} has no rollouts of step {step}; steps with rollouts: {steps}")
        if step not in self._steps:
            self._steps[step] = JsonlIndex(self.path / "rollouts" / f"step_{step:06d}.jsonl", summarize_trajectory)
        return self._steps[step].refresh()

    def rows(self, step: int | None = None) -> list[dict[str, Any]]:
        return self.index(step).rows

    def trajectory(self, index: int, step: int | None = None) -> dict[str, Any] | None:
        """The full trajectory of a row (None for a grading run, which has none)."""
        if self.kind == "train":
            return self.index(step).read(index)
        if self.kind == "grade":
            return None
        if self.kind == "scaffold":
            return self.index().read(index)
        rows = self.rows()
        if not 0 <= index < len(rows):
            raise ViewerError(f"{self.name} has no row {index} (it holds {len(rows)})")
        row = rows[index]
        path = trajectory_file(self.path, row["task_id"], row["sample"])
        if not path.exists():
            raise ViewerError(f"{path} is missing: the run wrote its result row but not the trajectory")
        return json.loads(path.read_text())

    def record(self, index: int, step: int | None = None) -> dict[str, Any]:
        """The raw line of a row (an eval result with its patch, or a grading report)."""
        return self.index(step).read(index)

    def all_trajectories(self):
        """(step, index, trajectory) for every trajectory of the run, one at a time (search, audit)."""
        if self.kind == "grade":
            return
        for step in self.steps() if self.kind == "train" else [None]:
            for row in list(self.rows(step)):
                try:
                    yield step, row["index"], self.trajectory(row["index"], step)
                except (ViewerError, OSError, json.JSONDecodeError):
                    continue


def open_run(path: str | Path, name: str | None = None) -> Run:
    path = Path(path)
    if not path.is_dir():
        raise ViewerError(f"{path} is not a directory: give run directories of harness eval, grade, generate or train")
    if (path / "dataset_card.json").exists() and (path / "run").is_dir():
        path = path / "run"  # `harness generate` keeps its eval run in run/
    name = name or path.name
    if (path / "metrics.jsonl").exists() or (path / "config.yaml").exists():
        return Run(name, path, "train")
    results = path / "results.jsonl"
    if not results.exists() and not (path / "config.json").exists():
        if trajectory_files(path):
            return Run(name, path, "scaffold", results=TrajectoryFolder(path))
        raise ViewerError(
            f"{path} is not a run directory of harness eval, grade, generate or train "
            "(it has no results.jsonl, config.json, metrics.jsonl or config.yaml) "
            "nor a folder of scaffold trajectories (*.traj.json)"
        )
    kind = "eval" if (path / "config.json").exists() else "grade"
    index = JsonlIndex(results, summarize_result if kind == "eval" else summarize_grade)
    return Run(name, path, kind, results=index)


def open_runs(paths: list[str | Path]) -> list[Run]:
    runs = [open_run(p) for p in paths]
    seen: dict[str, int] = {}
    for run in runs:  # two folders with the same name get distinct labels
        seen[run.name] = seen.get(run.name, 0) + 1
        if seen[run.name] > 1:
            run.name = f"{run.name}#{seen[run.name]}"
    return runs
