"""`harness grade`: grade any SWE-bench predictions file on one grader, in parallel, resumably.

The run directory holds `run.json` (what is graded: the predictions' content hash, the task set,
the reward mode; a rerun with anything else is refused, see `infra.rundir`), `results.jsonl` (one
line per graded instance, appended as each finishes, so a killed run resumes without redoing or
losing work) and `report.json` / `report.md` written atomically at the end. An instance whose
record cannot be graded becomes an error row; it never ends the run.
"""

from __future__ import annotations

import json
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable

from sandboxes import Backend
from sandboxes.cluster import Cluster

from ..errors import Problem, TaskError, TaskSetError
from .grade import GradeReport, bad_input, grade
from .patch_policy import review_patch
from infra.rundir import RESULTS, content_hash, open_run
from infra.runlog import append_row, atomic_write, drop_partial_line, read_rows
from ..swe import grading_problems


def load_predictions(path: str | Path) -> dict[str, dict[str, Any]]:
    """SWE-bench predictions from JSONL, a JSON list, or a JSON object keyed by instance id."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        reason = getattr(err, "strerror", None) or err
        raise TaskError(f"predictions {path}: cannot be read ({reason})") from err
    problems: list[Problem] = []
    records: list[tuple[int, Any]] = []
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise TaskError(f"predictions {path}: not JSON ({err.msg}, line {err.lineno})") from err
        if not isinstance(data, (dict, list)):
            raise TaskError(
                f"predictions {path}: a JSON list or an object keyed by instance id, not {type(data).__name__}"
            )
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
        i["instance_id"]: {
            "instance_id": i["instance_id"],
            "model_name_or_path": kind,
            "model_patch": i["patch"] if kind == "gold" else "",
        }
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
    identity: dict[str, Any] | None = None,
    force: bool = False,
    cluster: Cluster | None = None,
    grading_mode: str = "default",
) -> list[dict[str, Any]]:
    """Grade every prediction whose instance is known, in `grading_mode`; return all results of the run dir.

    `identity` says what this run is (`grade_identity`); a folder holding another run is refused.
    """
    identity = identity or grade_identity(predictions, instances, fractional, grading_mode=grading_mode)
    open_run(output_dir, "grade", identity, resume=True, force=force)
    results_path = output_dir / RESULTS
    drop_partial_line(results_path)
    done = {r["instance_id"]: r for r in read_rows(results_path)}
    by_id = {i["instance_id"]: i for i in instances}
    todo = [p for p in predictions.values() if p["instance_id"] in by_id and p["instance_id"] not in done]
    with ThreadPoolExecutor(max_workers=max(workers, 1)) as pool:
        if cluster is not None:  # graded on the nodes of a Ray cluster, each in its own engine
            jobs = [(by_id[p["instance_id"]], p.get("model_patch"), fractional, grading_mode, p) for p in todo]
            finished = ((job[-1], report) for job, report, _ in cluster.map_unordered(_grade_on_node, jobs))
        else:
            futures = {
                pool.submit(
                    _grade_one, by_id[p["instance_id"]], p.get("model_patch"), backend, fractional, grading_mode
                ): p
                for p in todo
            }
            finished = ((futures[future], future.result()) for future in as_completed(futures))
        for prediction, report in finished:
            row = {"model_name_or_path": prediction.get("model_name_or_path", ""), **report.to_dict()}
            append_row(results_path, row)
            done[report.instance_id] = row
            on_result(report)
    unknown = sorted(set(predictions) - set(by_id))
    results = [done[i] for i in sorted(done)]
    write_report(results, unknown, output_dir, grading_mode)
    return results


def grade_identity(
    predictions: dict[str, dict[str, Any]],
    instances: list[dict[str, Any]],
    fractional: bool,
    predictions_source: str = "",
    tasks: str = "",
    grading_mode: str = "default",
) -> dict[str, Any]:
    """What a grading run is: the predictions (the file's content hash, or that of the scripted
    predictions), the instances graded, the reward and grading modes."""
    source = Path(predictions_source) if predictions_source else None
    data = source.read_bytes() if source is not None and source.is_file() else json.dumps(predictions, sort_keys=True)
    return {
        "predictions": predictions_source,
        "predictions_sha256": content_hash(data),
        "tasks": tasks,
        "instances_sha256": content_hash(json.dumps(sorted(i["instance_id"] for i in instances))),
        "fractional": fractional,
        **(
            {"grading_mode": grading_mode} if grading_mode != "default" else {}
        ),  # runs in the default mode keep the identity they were written with
    }


def _grade_on_node(
    backend: Backend, instance: dict[str, Any], patch: str | None, fractional: bool, grading_mode: str, prediction: dict
) -> GradeReport:
    return _grade_one(instance, patch, backend, fractional, grading_mode)


def _grade_one(
    instance: dict[str, Any], patch: str | None, backend: Backend, fractional: bool, grading_mode: str
) -> GradeReport:
    """`grade`, with a record that cannot be graded (bad field, unknown parser) as an error row."""
    problems = grading_problems(instance)
    if problems:
        return _error_row(
            instance, patch, grading_mode, "; ".join(f"{field}: {message}" for field, message in problems)
        )
    try:
        return grade(instance, patch, backend, fractional=fractional, grading_mode=grading_mode)
    except Exception as err:  # noqa: BLE001 - one bad record must not end the run
        return _error_row(instance, patch, grading_mode, f"{type(err).__name__}: {err}")


def _error_row(instance: dict[str, Any], patch: str | None, grading_mode: str, why: str) -> GradeReport:
    return GradeReport(
        str(instance.get("instance_id")),
        patch_exists=bool((patch or "").strip()),
        verdict="error",
        grading_mode=grading_mode,
        error=f"cannot grade this instance: {why}",
    )


def check_predictions(
    predictions: dict[str, dict[str, Any]], instances: list[dict[str, Any]] | None = None, grading_mode: str = "default"
) -> list[dict[str, Any]]:
    """The static part of grading alone, no sandbox: per prediction its verdict (`empty_patch`,
    `not_a_diff`, `too_large`, `refused`, `neutralized` or `clean`), what is refused and what would be
    neutralized, and why. With `instances`, their test patches and tests count as test files."""
    by_id = {i["instance_id"]: i for i in instances or []}
    rows = []
    for instance_id, prediction in sorted(predictions.items()):
        patch = prediction.get("model_patch") or ""
        row = {"instance_id": instance_id, "known_instance": instance_id in by_id, "refused": [], "neutralized": []}
        row["verdict"] = bad_input(patch) or ("" if patch.strip() else "empty_patch")
        if not row["verdict"]:
            review = review_patch(patch, by_id.get(instance_id), grading_mode)
            row["refused"], row["neutralized"] = review.refused, review.notes()
            row["verdict"] = "refused" if review.refused else "neutralized" if review.neutralized else "clean"
        rows.append(row)
    return rows


def write_check(rows: list[dict[str, Any]], output_dir: Path, grading_mode: str) -> dict[str, int]:
    """`check.json` and `check.md` for `check_predictions` rows; returns the count of each verdict."""
    counts = dict(sorted(Counter(r["verdict"] for r in rows).items()))
    output_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(
        output_dir / "check.json",
        json.dumps({"grading_mode": grading_mode, "verdicts": counts, "predictions": rows}, indent=1),
    )
    lines = [
        "# Static review of predictions",
        "",
        f"Grading mode: {grading_mode} ({MODE_NOTES[grading_mode]}).",
        "",
        ", ".join(f"{k}: {v}" for k, v in counts.items()) + f" (of {len(rows)}).",
        "",
        "| instance | verdict | why |",
        "|---|---|---|",
    ]
    lines += [
        f"| {r['instance_id']} | {r['verdict']} | {'; '.join(r['refused'] or r['neutralized']).replace('|', '/')[:200]} |"
        for r in rows
        if r["verdict"] != "clean"
    ]
    atomic_write(output_dir / "check.md", "\n".join(lines) + "\n")
    return counts


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    total = len(results)
    resolved = sum(r["resolved"] for r in results)
    return {
        "total": total,
        "resolved": resolved,
        "resolve_rate": resolved / total if total else 0.0,
        "rejected": sum(bool(r["rejected"]) for r in results),
        "neutralized": sum(bool(r.get("neutralized")) for r in results),
        "verdicts": dict(sorted(Counter(r.get("verdict") or "?" for r in results).items())),
        "not_applied": sum(
            r["patch_exists"] and not r["patch_successfully_applied"] and not r["rejected"] for r in results
        ),
        "invalid_log": sum(bool(r["invalid_log"]) for r in results),
        "errors": sum(bool(r["error"]) for r in results),
        "mean_reward": sum(r["reward"] for r in results) / total if total else 0.0,
    }


MODE_NOTES = {
    "default": "test files, runner configuration and symlinks the patches touched were put back as at the base commit "
    "before the tests ran (neutralized), as SWE-bench's eval script does for the test patch's files",
    "refuse": "any edit to a test file, runner configuration or symlink scored 0",
}


def write_report(
    results: list[dict[str, Any]], unknown: list[str], output_dir: Path, grading_mode: str = "default"
) -> None:
    summary = {"grading_mode": grading_mode, **summarize(results)}
    atomic_write(
        output_dir / "report.json",
        json.dumps({"summary": summary, "unknown_instances": unknown, "instances": results}, indent=1),
    )
    lines = [
        "# Grading report",
        "",
        f"Grading mode: {grading_mode} ({MODE_NOTES[grading_mode]}).",
        "",
        f"Resolved {summary['resolved']} of {summary['total']} ({summary['resolve_rate']:.1%}); "
        f"rejected {summary['rejected']}, neutralized {summary['neutralized']}, not applied {summary['not_applied']}, "
        f"untrusted logs {summary['invalid_log']}, errors {summary['errors']}.",
        "",
        "Verdicts: " + ", ".join(f"{verdict} {count}" for verdict, count in summary["verdicts"].items()) + ".",
        "",
        "| instance | verdict | resolution | reward | note |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['instance_id']} | {r.get('verdict', '')} | {r['resolution']} | {r['reward']:.2f} | {row_note(r)[:160]} |"
        )
    if unknown:
        lines += ["", f"Predictions for unknown instances (not graded): {', '.join(unknown)}"]
    atomic_write(output_dir / "report.md", "\n".join(lines) + "\n")


def row_note(row: dict[str, Any]) -> str:
    """Why a row scored what it did, and what was neutralized, in one line."""
    why = (
        "; ".join(row["rejected"])
        or row["invalid_log"]
        or row["error"]
        or ("not applied" if row["patch_exists"] and not row["patch_successfully_applied"] else "")
    )
    neutralized = "neutralized: " + "; ".join(row["neutralized"]) if row.get("neutralized") else ""
    return " | ".join(part for part in (why, neutralized) if part).replace("|", "/")
