"""Per-instance agreement between our grading and the official SWE-bench harness's verdicts.

The official verdicts come as `swebench.harness.run_evaluation` writes them: a folder holding
per-instance `report.json` files (at any depth, as under `logs/run_evaluation/<run>/<model>/`),
one such `report.json`, the run-level summary `<model>.<run_id>.json` (`resolved_ids`, ...),
or a JSONL with one record per instance (`instance_id` plus `official_report`, `report` or
`resolved`). Each disagreement is given its reason: our patch policy refused the patch, a path
was neutralized, a trust check rejected the log, the patch applied on one side only, or the
per-test lists differ (a log parser or the environment).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..errors import Problem, TaskSetError, TaskSourceError
from infra.runlog import atomic_write

OUTCOMES = ("both_resolved", "both_unresolved", "ours_only", "theirs_only", "not_graded_here", "no_official_verdict")
TEST_KINDS = ("FAIL_TO_PASS", "PASS_TO_PASS")


@dataclass
class Agreement:
    instance_id: str
    ours: bool | None  # None: we did not grade it
    theirs: bool | None  # None: no official verdict for it
    outcome: str
    reason: str = ""


def load_official(source: str | Path) -> dict[str, dict[str, Any]]:
    """Official reports by instance id, each at least `{"resolved": bool}`."""
    path = Path(source)
    if path.is_dir():
        reports: dict[str, dict[str, Any]] = {}
        for file in sorted(path.rglob("report.json")):
            reports.update(_report_file(file))
        if not reports:
            raise TaskSourceError(
                f"{path} holds no report.json (run_evaluation writes one per instance under logs/run_evaluation/)"
            )
        return reports
    if not path.is_file():
        raise TaskSourceError(f"official reports not found: {path}")
    if path.suffix == ".jsonl":
        return _jsonl(path)
    return _report_file(path)


def _report_file(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise TaskSourceError(f"{path} is not JSON: {err}") from err
    if isinstance(data, dict) and "resolved_ids" in data:  # the run-level summary
        verdicts = {i: {"resolved": True} for i in data["resolved_ids"]}
        for key in ("unresolved_ids", "error_ids", "empty_patch_ids"):
            verdicts.update({i: {"resolved": False, "summary": key} for i in data.get(key, []) if i not in verdicts})
        return verdicts
    if not isinstance(data, dict) or not all(
        isinstance(r, dict) and isinstance(r.get("resolved"), bool) for r in data.values()
    ):
        raise TaskSourceError(
            f"{path} is neither a run_evaluation report.json ({{instance_id: {{resolved, ...}}}}) nor its run summary"
        )
    return data


def _jsonl(path: Path) -> dict[str, dict[str, Any]]:
    reports, problems = {}, []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            problems.append(Problem(number, None, f"not JSON: {err.msg}"))
            continue
        if not isinstance(record, dict) or not isinstance(record.get("instance_id"), str):
            problems.append(Problem(number, "instance_id", "missing or not a string"))
            continue
        report = record.get("official_report") or record.get("report") or record
        if not isinstance(report, dict) or not isinstance(report.get("resolved"), bool):
            problems.append(
                Problem(
                    number, "resolved", "no official verdict (official_report.resolved, report.resolved or resolved)"
                )
            )
            continue
        reports[record["instance_id"]] = report
    if problems:
        raise TaskSetError(problems, str(path), "line")
    return reports


def compare(results: list[dict[str, Any]], official: dict[str, dict[str, Any]]) -> list[Agreement]:
    """One agreement per instance that either side graded, sorted by instance id."""
    ours = {r["instance_id"]: r for r in results}
    agreements = []
    for instance_id in sorted(set(ours) | set(official)):
        row, report = ours.get(instance_id), official.get(instance_id)
        if row is None:
            agreements.append(
                Agreement(
                    instance_id, None, report["resolved"], "not_graded_here", "no prediction or instance for it here"
                )
            )
        elif report is None:
            agreements.append(Agreement(instance_id, row["resolved"], None, "no_official_verdict"))
        elif row["resolved"] == report["resolved"]:
            outcome = "both_resolved" if row["resolved"] else "both_unresolved"
            agreements.append(Agreement(instance_id, row["resolved"], report["resolved"], outcome, _neutralized(row)))
        else:
            outcome = "ours_only" if row["resolved"] else "theirs_only"
            agreements.append(
                Agreement(instance_id, row["resolved"], report["resolved"], outcome, disagreement_reason(row, report))
            )
    return agreements


def disagreement_reason(row: dict[str, Any], report: dict[str, Any]) -> str:
    """Why our verdict differs from the official one, most decisive cause first."""
    reasons = []
    if row.get("error"):
        reasons.append(f"our grading failed: {row['error']}")
    if row.get("rejected"):
        reasons.append("refused by our patch policy: " + "; ".join(row["rejected"]))
    if row.get("invalid_log"):
        reasons.append(f"our trust check rejected the log: {row['invalid_log']}")
    applied_here, applied_there = row.get("patch_successfully_applied"), report.get("patch_successfully_applied")
    if (
        applied_there is not None
        and row.get("patch_exists")
        and applied_here != applied_there
        and not row.get("rejected")
    ):
        reasons.append("the patch applied " + ("here only" if applied_here else "on the official side only"))
    tests = _test_differences(row.get("tests_status") or {}, report.get("tests_status") or {})
    if tests:
        reasons.append("per-test verdicts differ (log parser or environment): " + tests)
    elif not reasons and "tests_status" not in report:
        reasons.append("the official verdict has no per-test lists to compare")
    neutralized = _neutralized(row)
    if neutralized:
        reasons.append(neutralized)
    return "; ".join(reasons) or "same per-test lists, different resolution rule"


def _test_differences(ours: dict[str, Any], theirs: dict[str, Any], shown: int = 3) -> str:
    differences = []
    for kind in TEST_KINDS:
        for outcome, other in (("success", "failure"), ("failure", "success")):
            flipped = sorted(set(ours.get(kind, {}).get(outcome, [])) & set(theirs.get(kind, {}).get(other, [])))
            differences += [f"{kind} {test}: ours {outcome}, theirs {other}" for test in flipped]
    more = f" (+{len(differences) - shown} more)" if len(differences) > shown else ""
    return "; ".join(differences[:shown]) + more


def _neutralized(row: dict[str, Any]) -> str:
    paths = row.get("neutralized") or []
    return f"neutralized here: {', '.join(paths)}" if paths else ""


def summarize_parity(agreements: list[Agreement]) -> dict[str, Any]:
    counts = {outcome: sum(a.outcome == outcome for a in agreements) for outcome in OUTCOMES}
    both = counts["both_resolved"] + counts["both_unresolved"] + counts["ours_only"] + counts["theirs_only"]
    agreed = counts["both_resolved"] + counts["both_unresolved"]
    return {**counts, "compared": both, "agreement": agreed / both if both else 0.0}


def write_parity(agreements: list[Agreement], output_dir: Path, source: str) -> dict[str, Any]:
    """`parity.json` and `parity.md` in the run directory; returns the summary."""
    summary = summarize_parity(agreements)
    atomic_write(
        output_dir / "parity.json",
        json.dumps({"official": source, "summary": summary, "instances": [asdict(a) for a in agreements]}, indent=1),
    )
    lines = [
        "# Agreement with the official harness",
        "",
        f"Official verdicts: `{source}`. Compared {summary['compared']} instances: agreement {summary['agreement']:.1%} "
        f"(both resolved {summary['both_resolved']}, both unresolved {summary['both_unresolved']}, "
        f"resolved here only {summary['ours_only']}, resolved officially only {summary['theirs_only']}); "
        f"not graded here {summary['not_graded_here']}, no official verdict {summary['no_official_verdict']}.",
        "",
        "| instance | ours | official | outcome | reason |",
        "|---|---|---|---|---|",
    ]
    for a in agreements:
        if a.outcome in ("ours_only", "theirs_only") or a.reason:
            lines.append(
                f"| {a.instance_id} | {_verdict(a.ours)} | {_verdict(a.theirs)} | {a.outcome} | {a.reason[:300]} |"
            )
    atomic_write(output_dir / "parity.md", "\n".join(lines) + "\n")
    return summary


def _verdict(resolved: bool | None) -> str:
    return "-" if resolved is None else ("resolved" if resolved else "unresolved")
