"""Parity through SWE-bench's own CLI: instances written as a task repository, evaluated by `swebench eval`
and by `harness grade`, instance by instance.

    python -m bench.swebench_repo_parity_bench --instances runs/mined.jsonl [--kinds gold,empty,agent-style] \
        [--output runs/repo-parity] [--workers 2]

The instances are exported (`harness tasks export --format swebench`: our images tagged with the names
the repository gives them) and compiled (`swebench dataset build`); then, for each kind of prediction
(`bench.grading_parity_bench`), `swebench eval` runs on the compiled split (the images are present, so
none is pulled; no registry) and `harness grade --tasks` on the repository itself. Each row: the two
verdicts, whether the per-test results agree (`swebench` runs no empty patch, so there are none to
compare), and the wall time of each run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.grading_parity_bench import predictions_of
from tasks.swebench_repo import export_swebench_repo
from tasks.taskset import load_tasks

ROOT = Path(__file__).resolve().parents[1]
OFFLINE = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
KINDS = ("gold", "empty", "agent-style")


def swebench(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    command = shutil.which("swebench")
    if command is None:
        raise RuntimeError("swebench's CLI is not on PATH: it is installed with the swebench package")
    done = subprocess.run([command, *args], cwd=cwd, capture_output=True, text=True, env=OFFLINE)
    if done.returncode != 0:
        raise RuntimeError(f"swebench {' '.join(args)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return done


def run_repo_parity(
    instances_file: Path, output: Path, kinds: tuple[str, ...] = KINDS, workers: int = 2
) -> list[dict[str, Any]]:
    """One row per (kind, instance); the repository is `output/tasks`, its compiled split `output/data/tasks`."""
    tasks = load_tasks(str(instances_file))
    instances = [t.metadata["instance"] for t in tasks]
    repo = output / "tasks"
    export_swebench_repo(tasks, repo)
    swebench("dataset", "build", str(repo), "-o", str(output / "data"))
    dataset = output / "data" / repo.name
    rows = []
    for kind in kinds:
        preds = predictions_of(instances, kind)
        preds_file = output / f"{kind}.jsonl"
        preds_file.write_text("".join(json.dumps(p) + "\n" for p in preds.values()))
        theirs_dir = output / "theirs"
        theirs_dir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        official = swebench(
            "eval", str(dataset), "-p", str(preds_file), "--run-id", kind, "-j", str(workers), "--report-dir", ".",
            cwd=theirs_dir,
        )  # fmt: skip
        theirs_s = time.monotonic() - started
        summary = json.loads((theirs_dir / f"{kind}.{kind}.json").read_text())
        started = time.monotonic()
        ours_dir = output / "ours" / kind
        graded = subprocess.run(
            [sys.executable, "-m", "cli", "grade", "--predictions", str(preds_file), "--tasks", str(repo)]
            + ["--output", str(ours_dir), "--workers", str(workers)],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        ours_s = time.monotonic() - started
        if graded.returncode != 0:
            raise RuntimeError(f"harness grade failed:\n{graded.stdout[-3000:]}{graded.stderr[-3000:]}")
        ours = {
            r["instance_id"]: r
            for r in map(json.loads, (ours_dir / "results.jsonl").read_text().splitlines())
            if r.get("instance_id")
        }
        for instance_id in preds:
            report = theirs_dir / "logs" / "run_evaluation" / kind / kind / instance_id / "report.json"
            status = json.loads(report.read_text())[instance_id]["tests_status"] if report.exists() else None
            rows.append(
                {
                    "kind": kind,
                    "instance_id": instance_id,
                    "ours": bool(ours[instance_id]["resolved"]),
                    "theirs": instance_id in summary["resolved_ids"],
                    "theirs_error": instance_id in summary["error_ids"],
                    "ours_verdict": ours[instance_id]["verdict"],
                    "same_tests": None if status is None else ours[instance_id]["tests_status"] == status,
                    "pulled": "attempting to pull" in official.stdout,
                    "ours_run_s": round(ours_s, 1),
                    "theirs_run_s": round(theirs_s, 1),
                }
            )
    (output / "parity.json").write_text(json.dumps(rows, indent=1))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--instances", type=Path, required=True, help="JSONL of SWE-bench instances with images.")
    parser.add_argument("--output", type=Path, default=Path("runs/repo-parity"))
    parser.add_argument("--kinds", default=",".join(KINDS), help="Comma-separated kinds of prediction.")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    rows = run_repo_parity(args.instances, args.output, tuple(args.kinds.split(",")), args.workers)
    for row in rows:
        agree = "same" if row["ours"] == row["theirs"] and not row["theirs_error"] else "DIFFERENT"
        print(
            f"{row['kind']:12} {row['instance_id']:32} ours={row['ours_verdict']:16} "
            f"theirs={'resolved' if row['theirs'] else 'unresolved':10} {agree} tests={row['same_tests']}"
        )
    runs = {(r["kind"], r["ours_run_s"], r["theirs_run_s"]) for r in rows}
    for kind, ours_s, theirs_s in sorted(runs):
        print(f"{kind}: harness grade {ours_s:.0f}s, swebench eval {theirs_s:.0f}s")


if __name__ == "__main__":
    main()
