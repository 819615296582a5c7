"""Task synthesis benchmark: validated tasks per hour from real PyPI projects, then gold/empty.

    python -m bench.synth_bench [--tasks-per-project 35] [--workers 2] [--out runs/synth-bench]

For each project (small pure-Python libraries whose sdists ship their tests and pass under the
base image's pytest 7.2 on Python 3.11): `synthesize` from its PyPI name, timed from scratch
(fresh work dir; the environment image and wheelhouse caches are kept, as a user would have
them on a second run). Then every instance is graded twice with `tasks.grading.grade.grade`: the
gold patch must resolve all of them, the empty patch none. There is no peer to compare with on
this machine (SWE-smith needs a model and GitHub), so the figures are absolute.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table

from sandboxes import get_backend
from tasks.grading.grade import grade
from tasks.synth import SynthEvent, synthesize

PROJECTS = ["parse", "cachetools", "toolz"]


def run_project(name: str, out: Path, tasks: int, workers: int, console: Console) -> dict:
    output = out / f"{name}.jsonl"
    shutil.rmtree(output.with_suffix(".work"), ignore_errors=True)

    def show(event: SynthEvent) -> None:
        if event.stage != "candidate" or event.decided % 10 == 0:
            console.print(
                f"  [{name}] {event.stage}: {event.message} ({event.decided}/{event.planned}, kept {event.kept})"
            )

    started = time.monotonic()
    summary = synthesize(name, output, max_tasks=tasks, workers=workers, backend=get_backend("docker"), on_event=show)
    seconds = time.monotonic() - started
    judged = summary.decided - summary.rejected.get("does not compile", 0)
    return {
        "project": name,
        "seconds": round(seconds, 1),
        "kept": summary.kept,
        "decided": summary.decided,
        "judged": judged,
        "kept_share": summary.kept / max(judged, 1),
        "flaky": summary.flaky,
        "rejected": summary.rejected,
        "baseline_passing": summary.baseline_passing,
        "test_command": summary.test_command,
        "output": str(output),
    }


def evaluate(outputs: list[str], workers: int) -> dict:
    backend = get_backend("docker")
    records = [json.loads(line) for path in outputs for line in Path(path).read_text().splitlines()]

    def both(record: dict) -> tuple[bool, bool]:
        return grade(record, record["patch"], backend).resolved, grade(record, "", backend).resolved

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(both, records))
    return {
        "instances": len(records),
        "gold_resolved": sum(g for g, _ in results),
        "empty_resolved": sum(e for _, e in results),
        "seconds": round(time.monotonic() - started, 1),
    }


def main() -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--projects", nargs="+", default=PROJECTS)
    parser.add_argument("--tasks-per-project", type=int, default=35)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("runs/synth-bench"))
    args = parser.parse_args()
    console = Console()
    args.out.mkdir(parents=True, exist_ok=True)

    rows = []
    for name in args.projects:
        console.print(f"[bold]synthesizing from {name}...")
        rows.append(run_project(name, args.out, args.tasks_per_project, args.workers, console))
    console.print("[bold]grading every instance with the gold and the empty patch...")
    evaluation = evaluate([row["output"] for row in rows], args.workers)

    table = Table(title=f"task synthesis ({args.workers} workers)")
    for column in ("project", "tests", "judged", "kept", "kept share", "flaky", "time", "tasks/hour"):
        table.add_column(column, justify="left" if column == "project" else "right")
    for row in rows:
        table.add_row(
            row["project"],
            str(row["baseline_passing"]),
            str(row["judged"]),
            str(row["kept"]),
            f"{row['kept_share']:.0%}",
            str(row["flaky"]),
            f"{row['seconds']:.0f} s",
            f"{3600 * row['kept'] / row['seconds']:.0f}",
        )
    kept, seconds, judged = (
        sum(r["kept"] for r in rows),
        sum(r["seconds"] for r in rows),
        sum(r["judged"] for r in rows),
    )
    table.add_row(
        "total",
        "",
        str(judged),
        str(kept),
        f"{kept / max(judged, 1):.0%}",
        "",
        f"{seconds:.0f} s",
        f"{3600 * kept / seconds:.0f}",
    )
    console.print(table)
    n = evaluation["instances"]
    console.print(
        f"gold resolves {evaluation['gold_resolved']}/{n} ({evaluation['gold_resolved'] / max(n, 1):.0%}), "
        f"empty resolves {evaluation['empty_resolved']}/{n} ({evaluation['empty_resolved'] / max(n, 1):.0%}); "
        f"grading took {evaluation['seconds']:.0f} s"
    )
    report = {
        "projects": rows,
        "kept": kept,
        "seconds": seconds,
        "tasks_per_hour": 3600 * kept / seconds,
        "kept_share": kept / max(judged, 1),
        "evaluation": evaluation,
    }
    (args.out / "report.json").write_text(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
