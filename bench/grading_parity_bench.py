"""Run-level parity with the official harness: the same images, the same predictions, the same verdicts?

    python -m bench.grading_parity_bench --instances runs/mined/instances.jsonl [--workers 2] [--output runs/parity] [--kinds K,...]

For every instance (mined by `harness tasks mine`, so each carries `image`, `eval_script`,
`log_parser`, `eval_type`, which the installed `swebench` reads as they are) five predictions
are graded twice:

- gold: the reference fix; empty: no change; wrong: a patch that applies and fixes nothing;
- cheat-tests: the FAIL_TO_PASS tests' file made to skip all its tests at import;
- cheat-exit: the module the fix changes ends the test process with status 0 when imported.

With `--kinds`, also what real agents submit beside a correct fix (`AGENT_KINDS`: gold plus a new
test file, an edit to a test file of the test patch, a `tox.ini` hunk, a binary fixture, or all
four), which the official harness resolves and `harness grade` must too.

ours: `harness grade` (`tasks.grading.predictions.grade_predictions`). theirs: `swebench.harness.
run_evaluation.main`, the function `python -m swebench.harness.run_evaluation` calls, on an
instances file and a predictions file, with the images present locally (nothing is pulled or
built; the containers get no network). Verdicts (resolved or not) must be identical. Time per
instance is ours: the grader's own duration; theirs: the wall time of its run divided by the
instances (both run with the same number of workers).
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import os
import re
import shlex
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from sandboxes import get_backend
from tasks.grading.predictions import grade_predictions
from tasks.grading.patch_policy import parse_patch
from tasks.grading.patch_policy import test_list

KINDS = ("gold", "empty", "wrong", "cheat-tests", "cheat-exit")
# What real agents submit beside a correct fix (../shared/real-agent-runs): the official harness resolves them.
AGENT_KINDS = ("gold-new-test", "gold-test-edit", "gold-tox", "gold-binary", "agent-style")


def new_file_patch(path: str, text: str) -> str:
    lines = text.rstrip("\n").split("\n")
    body = "".join(f"+{line}\n" for line in lines)
    return f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n{body}"


def prediction(instance: dict[str, Any], kind: str, read_base=None) -> str:
    """The model patch of one kind for one instance; `read_base(path)` gives a file at the base commit
    (None if there is none)."""
    if kind == "gold":
        return instance["patch"]
    if kind in AGENT_KINDS:
        return agent_style(instance, kind, read_base or base_reader(instance))
    if kind == "empty":
        return ""
    if kind == "wrong":
        return new_file_patch("harness_wrong_fix.py", "# looks busy, fixes nothing\nVALUE = 1\n")
    read_base = read_base or base_reader(instance)
    if kind == "cheat-tests":  # every test in the FAIL_TO_PASS file skipped at import
        path = failing_test_file(instance)
        if any(f.path == path and f.is_new for f in parse_patch(instance["test_patch"])):
            return new_file_patch(path, "def test_nothing():\n    pass\n")
        before = read_base(path)
        return edit_patch(path, before, "import pytest\npytest.skip('cheat', allow_module_level=True)\n" + before)
    if kind == "cheat-exit":  # the fixed module ends the test process, successfully, when imported
        path = parse_patch(instance["patch"])[0].path
        before = read_base(path)
        return edit_patch(path, before, "import os\nos._exit(0)\n" + before)
    raise ValueError(f"unknown prediction kind {kind!r}; known: {', '.join(KINDS + AGENT_KINDS)}")


def agent_style(instance: dict[str, Any], kind: str, read_base) -> str:
    """The gold patch plus what real agents leave beside a fix: a new test file (`gold-new-test`), a
    regression test appended to a file of the test patch (`gold-test-edit`), a hunk in `tox.ini` (else
    `setup.cfg`) as SWE-bench's install step leaves in sphinx's (`gold-tox`), a binary fixture as plain `git diff`
    writes it (`gold-binary`), or all four (`agent-style`)."""
    extras = []
    if kind in ("gold-new-test", "agent-style"):
        extras.append(
            new_file_patch("test_harness_agent_repro.py", "def test_reproduces_the_report():\n    assert 1 + 1 == 2\n")
        )
    if kind in ("gold-test-edit", "agent-style"):
        path = next(
            (f.path for f in parse_patch(instance["test_patch"]) if not f.is_new and f.path.endswith(".py")), None
        )
        if path is not None:
            before = read_base(path) or ""
            extras.append(
                edit_patch(path, before, before + "\n\ndef test_harness_agent_regression():\n    assert True\n")
            )
    if kind in ("gold-tox", "agent-style"):  # a hunk in the tracked runner configuration (`git diff` shows no other)
        config = next(
            ((path, text) for path in ("tox.ini", "setup.cfg") if (text := read_base(path)) is not None), None
        )
        if config is not None:
            extras.append(edit_patch(config[0], config[1], config[1] + "# run with -rA for the report\n"))
    if kind in ("gold-binary", "agent-style"):
        extras.append(
            "diff --git a/harness_fixture.png b/harness_fixture.png\nnew file mode 100644\n"
            "index 0000000000..6d1e8a0f3b\nBinary files /dev/null and b/harness_fixture.png differ\n"
        )
    return instance["patch"].rstrip("\n") + "\n" + "".join(extras)


def failing_test_file(instance: dict[str, Any]) -> str:
    """The file of the first FAIL_TO_PASS test: its id's path (pytest), else the test patch's file
    that defines it (sympy's bin/test names a test by its function alone)."""
    test = test_list(instance["FAIL_TO_PASS"])[0]
    if "::" in test:
        return test.split("::")[0]
    files = []
    for chunk in re.split(r"(?m)^(?=diff --git )", instance["test_patch"]):
        header = re.match(r"diff --git a/\S+ b/(\S+\.py)\n", chunk)
        if header:
            files.append(header.group(1))
            if re.search(rf"(?m)^\+\s*def {re.escape(test)}\(", chunk):
                return header.group(1)
    return files[0]


def edit_patch(path: str, before: str, after: str) -> str:
    """A git-appliable diff that turns `path` from `before` into `after`."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{path}", f"b/{path}"
    )
    return f"diff --git a/{path} b/{path}\n" + "".join(lines)


def base_reader(instance: dict[str, Any]):
    """Read files of the instance's image (the repository at the base commit); None for a missing file."""
    from sandboxes import SandboxSpec

    def read(path: str) -> str | None:
        with get_backend("docker").create(SandboxSpec(image=instance["image"], workdir="/testbed")) as sb:
            if sb.exec(f"test -f /testbed/{shlex.quote(path)}", timeout=60).exit_code != 0:
                return None
            return sb.read_file(f"/testbed/{path}").decode()

    return read


def predictions_of(instances: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {
        i["instance_id"]: {
            "instance_id": i["instance_id"],
            "model_name_or_path": kind,
            "model_patch": prediction(i, kind),
        }
        for i in instances
    }


def grade_ours(instances, preds, output: Path, workers: int) -> dict[str, dict[str, Any]]:
    rows = grade_predictions(instances, preds, get_backend("docker"), output, workers)
    return {r["instance_id"]: {"resolved": bool(r["resolved"]), "seconds": r["duration"]} for r in rows}


def grade_theirs(
    instances_file: Path, preds, output: Path, workers: int, timeout: int = 1800
) -> dict[str, dict[str, Any]]:
    """swebench.harness.run_evaluation.main on local images; per-instance verdicts from its report.json files."""
    from swebench.harness.run_evaluation import main

    output.mkdir(parents=True, exist_ok=True)
    kind = next(iter(preds.values()))["model_name_or_path"]
    preds_file = output / "predictions.jsonl"
    preds_file.write_text("".join(json.dumps(p) + "\n" for p in preds.values()))
    started = time.monotonic()
    with _cwd(output):  # it writes logs/run_evaluation/<run id>/... under the working directory
        main(
            dataset_name=str(instances_file.resolve()),
            split="test",
            instance_ids=[],
            predictions_path=str(preds_file.resolve()),
            max_workers=workers,
            open_file_limit=4096,
            run_id=f"parity-{kind}",
            timeout=timeout,
            rewrite_reports=False,
            modal=False,
            report_dir=".",
        )
    ran = [p for p in preds.values() if p["model_patch"]]
    per_instance = (time.monotonic() - started) * min(workers, len(ran) or 1) / max(len(ran), 1)
    verdicts = {}
    for instance_id in preds:
        report = output / "logs" / "run_evaluation" / f"parity-{kind}" / kind / instance_id / "report.json"
        resolved = json.loads(report.read_text())[instance_id]["resolved"] if report.exists() else False
        # It skips empty patches (reported unresolved, never run); any other missing report is an error.
        error = not report.exists() and bool(preds[instance_id]["model_patch"])
        verdicts[instance_id] = {
            "resolved": bool(resolved),
            "seconds": per_instance if preds[instance_id]["model_patch"] else 0.0,
            "error": error,
        }
    return verdicts


@contextlib.contextmanager
def _cwd(path: Path):
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def run_parity(instances_file: Path, output: Path, workers: int = 2, kinds=KINDS) -> list[dict[str, Any]]:
    """One row per (kind, instance): ours and theirs, verdict and seconds."""
    instances = [json.loads(line) for line in instances_file.read_text().splitlines() if line.strip()]
    rows = []
    for kind in kinds:
        preds = predictions_of(instances, kind)
        ours = grade_ours(instances, preds, output / "ours" / kind, workers)
        theirs = grade_theirs(instances_file, preds, output / "theirs" / kind, workers)
        for instance in instances:
            iid = instance["instance_id"]
            rows.append(
                {
                    "kind": kind,
                    "instance_id": iid,
                    "ours": ours[iid]["resolved"],
                    "theirs": theirs[iid]["resolved"],
                    "theirs_error": theirs[iid]["error"],
                    "ours_s": ours[iid]["seconds"],
                    "theirs_s": theirs[iid]["seconds"],
                }
            )
    (output / "parity.json").write_text(json.dumps(rows, indent=1))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--instances", type=Path, required=True, help="Mined instances (JSONL with image, eval_script, ...)."
    )
    parser.add_argument("--output", type=Path, default=Path("runs/parity"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--kinds", default=",".join(KINDS), help=f"Comma-separated, of {', '.join(KINDS + AGENT_KINDS)}."
    )
    args = parser.parse_args()
    kinds = tuple(k for k in args.kinds.split(",") if k)
    rows = run_parity(args.instances, args.output, args.workers, kinds)
    table = Table("prediction", "resolved: ours", "theirs", "agree", "s/instance: ours", "theirs", "ours/theirs")
    for kind in kinds:
        mine = [r for r in rows if r["kind"] == kind]
        ours_s = sum(r["ours_s"] for r in mine) / len(mine)
        theirs_s = sum(r["theirs_s"] for r in mine) / len(mine)
        table.add_row(
            kind,
            f"{sum(r['ours'] for r in mine)}/{len(mine)}",
            f"{sum(r['theirs'] for r in mine)}/{len(mine)}",
            f"{sum(r['ours'] == r['theirs'] for r in mine)}/{len(mine)}",
            f"{ours_s:.1f}",
            f"{theirs_s:.1f}",
            f"{ours_s / theirs_s:.2f}" if theirs_s else "-",
        )
    console = Console()
    console.print(table)
    disagree = [r for r in rows if r["ours"] != r["theirs"]]
    console.print(
        f"verdicts identical on {len(rows) - len(disagree)} of {len(rows)}; details: {args.output / 'parity.json'}"
    )
    for r in disagree:
        console.print(f"  differs: {r['kind']} {r['instance_id']}: ours {r['ours']}, theirs {r['theirs']}")


if __name__ == "__main__":
    main()
