"""`harness grade`: grade any SWE-bench predictions file on one grader, in parallel, resumably.

The run directory holds `results.jsonl` (one line per graded instance, appended as each
finishes, so a killed run resumes without redoing or losing work) and `report.json` /
`report.md` written at the end.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable

from sandboxes import Backend
from sandboxes.cluster import Cluster

from .errors import Problem, TaskSetError
from .grading import GradeReport, grade

RESULTS = "results.jsonl"


def load_predictions(path: str | Path) -> dict[str, dict[str, Any]]:
    """SWE-bench predictions from JSONL, a JSON list, or a JSON object keyed by instance id."""
    path = Path(path)
    text = path.read_text()
    problems: list[Problem] = []
    records: list[tuple[int, Any]] = []
    if path.suffix == ".json":
        data = json.loads(text)
        records = list(enumerate(data.values() if isinstance(data, dict) else data))
    else:
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    records.append((number, json.loads(line)))
                except json.JSONDecodeError as err:
                    problems.append(Problem(number, None, f"not JSON: {err.msg}"))
    predictions = {}
    for where, record in records:
        if not isinstance(record, dict) or not isinstance(record.get("instance_id"), str):
            problems.append(Problem(where, "instance_id", "missing or not a string"))
        elif not isinstance(record.get("model_patch", ""), (str, type(None))):
            problems.append(Problem(where, "model_patch", "must be a string or null"))
        elif record["instance_id"] in predictions:
            problems.append(Problem(where, "instance_id", f"duplicate {record['instance_id']!r}"))
        else:
            predictions[record["instance_id"]] = record
    if problems:
        raise TaskSetError(problems, str(path), "line" if path.suffix != ".json" else "index")
    return predictions


def scripted_predictions(instances: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    """`gold` (the reference patches) or `empty` predictions for every instance."""
    return {
        i["instance_id"]: {"instance_id": i["instance_id"], "model_name_or_path": kind, "model_patch": i["patch"] if kind == "gold" else ""}
        for i in instances
    }


def grade_predictions(
    instances: list[dict[str, Any]],
    predictions: dict[str, dict[str, Any]],
    backend: Backend,
    output_dir: Path,
    workers: int = 4,
    fractional: bool = False,
    on_result: Callable[[GradeReport], None] = lambda r: None,
    cluster: Cluster | None = None,
) -> list[dict[str, Any]]:
    """Grade every prediction whose instance is known; return all results of the run dir."""
    output_dir.mkdir(parents=True, exist_ok=True)
    results_path = output_dir / RESULTS
    drop_partial_line(results_path)
    done = {r["instance_id"]: r for r in read_results(results_path)}
    by_id = {i["instance_id"]: i for i in instances}
    todo = [p for p in predictions.values() if p["instance_id"] in by_id and p["instance_id"] not in done]
    lock = threading.Lock()
    with ThreadPoolExecutor(max_workers=max(workers, 1)) as pool:
        if cluster is not None:  # graded on the nodes of a Ray cluster, each in its own engine
            jobs = [(by_id[p["instance_id"]], p.get("model_patch"), fractional, p) for p in todo]
            finished = ((job[-1], report) for job, report, _ in cluster.map_unordered(_grade_on_node, jobs))
        else:
            futures = {pool.submit(grade, by_id[p["instance_id"]], p.get("model_patch"), backend, fractional=fractional): p for p in todo}
            finished = ((futures[future], future.result()) for future in as_completed(futures))
        for prediction, report in finished:
            row = {"model_name_or_path": prediction.get("model_name_or_path", ""), **report.to_dict()}
            with lock, results_path.open("a") as handle:
                handle.write(json.dumps(row) + "\n")
            done[report.instance_id] = row
            on_result(report)
    unknown = sorted(set(predictions) - set(by_id))
    results = [done[i] for i in sorted(done)]
    write_report(results, unknown, output_dir)
    return results


def _grade_on_node(backend: Backend, instance: dict[str, Any], patch: str | None, fractional: bool, prediction: dict) -> GradeReport:
    return grade(instance, patch, backend, fractional=fractional)


def drop_partial_line(path: Path) -> None:
    """Cut a last line left half-written by a killed run, so appends start on a clean line."""
    if path.exists():
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            path.write_bytes(data[: data.rfind(b"\n") + 1])


def read_results(path: Path) -> list[dict[str, Any]]:
    """Results of earlier attempts; a line cut short by a kill is ignored (and graded again)."""
    rows = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    total = len(results)
    resolved = sum(r["resolved"] for r in results)
    return {
        "total": total,
        "resolved": resolved,
        "resolve_rate": resolved / total if total else 0.0,
        "rejected": sum(bool(r["rejected"]) for r in results),
        "not_applied": sum(r["patch_exists"] and not r["patch_successfully_applied"] and not r["rejected"] for r in results),
        "invalid_log": sum(bool(r["invalid_log"]) for r in results),
        "errors": sum(bool(r["error"]) for r in results),
        "mean_reward": sum(r["reward"] for r in results) / total if total else 0.0,
    }


def write_report(results: list[dict[str, Any]], unknown: list[str], output_dir: Path) -> None:
    summary = summarize(results)
    (output_dir / "report.json").write_text(json.dumps({"summary": summary, "unknown_instances": unknown, "instances": results}, indent=1))
    lines = [
        "# Grading report", "",
        f"Resolved {summary['resolved']} of {summary['total']} ({summary['resolve_rate']:.1%}); "
        f"rejected {summary['rejected']}, not applied {summary['not_applied']}, "
        f"untrusted logs {summary['invalid_log']}, errors {summary['errors']}.", "",
        "| instance | resolution | reward | note |", "|---|---|---|---|",
    ]
    for r in results:
        note = "; ".join(r["rejected"]) or r["invalid_log"] or r["error"] or ("not applied" if r["patch_exists"] and not r["patch_successfully_applied"] else "")
        lines.append(f"| {r['instance_id']} | {r['resolution']} | {r['reward']:.2f} | {note[:120]} |")
    if unknown:
        lines += ["", f"Predictions for unknown instances (not graded): {', '.join(unknown)}"]
    (output_dir / "report.md").write_text("\n".join(lines) + "\n")
