"""A soak: many graded gold episodes through the eval driver, then a count of what they left behind.

    python -m bench.soak_bench [--episodes 1000] [--workers 16] [--backend overlay] [--tasks swe-demo]

Every task of `--tasks` is run `episodes / tasks` times (`samples`) by the gold policy through `harness.evaluate`,
with grading, on `--backend`. Reported: episodes per minute; verdicts (each must be resolved, as a single gold
run of the task is); and what is on the host before and after, none of which may grow: sandboxes the process holds
(`sandboxes.live_count`), mounts under the harness cache, processes below this one, entries of the sandbox folders and of
the run's temporary folder (a private TMPDIR), and inodes used on the cache's filesystem (other programs on the machine move this one:
read it as an upper bound). What was there before, or belongs to other programs, is not counted.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.overlay_scale_bench import process_children
from harness.evaluate import EvalConfig, evaluate
from harness.policies.scripted import GoldPolicy
from infra.runlog import read_rows
from sandboxes import get_backend, live_count
from sandboxes.images import cache_dir
from tasks.taskset import load_tasks


def _descendants() -> set[int]:
    children, found, todo = process_children(), set(), [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def host_state() -> dict[str, set]:
    """What this process has on the host (other programs' sandboxes and files are told apart by name or parentage)."""
    cache = cache_dir()
    mounts = {line for line in Path("/proc/mounts").read_text().splitlines() if str(cache) in line}
    processes = set()
    for pid in _descendants():
        try:
            processes.add(f"{pid} {Path(f'/proc/{pid}/comm').read_text().strip()}")
        except OSError:
            continue
    folders = {str(p) for root in (cache / "overlay", cache / "local") if root.is_dir() for p in root.iterdir()}
    return {
        "sandboxes held": set(range(live_count())),
        "mounts under the cache": mounts,
        "processes below this one": processes,
        "sandbox folders": folders,
        "temporary folder entries": set(os.listdir(tempfile.gettempdir())),  # the run's own (see main)
    }


def inodes_used() -> int:
    fs = os.statvfs(cache_dir())
    return fs.f_files - fs.f_ffree


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--backend", default="overlay")
    parser.add_argument("--tasks", default="swe-demo")
    args = parser.parse_args(argv)
    backend = get_backend(args.backend)
    tasks = load_tasks(args.tasks)
    samples = math.ceil(args.episodes / len(tasks))
    scratch = Path(tempfile.mkdtemp(prefix="harness-soak-"))
    saved = tempfile.tempdir, os.environ.get("TMPDIR")
    tempfile.tempdir = os.environ["TMPDIR"] = str(scratch / "tmp")  # the run's temporary files, apart from others'
    os.mkdir(tempfile.tempdir)
    try:
        return _soak(args, backend, tasks, samples, scratch)
    finally:
        tempfile.tempdir = saved[0]
        if saved[1] is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved[1]
        shutil.rmtree(scratch, ignore_errors=True)


def _soak(args, backend, tasks, samples: int, scratch: Path) -> dict:
    before, inodes = host_state(), inodes_used()
    with tempfile.TemporaryDirectory(prefix="out-", dir=scratch) as out:
        config = EvalConfig(
            tasks=args.tasks, checkpoint="gold", output=out, workers=args.workers, samples=samples, backend=args.backend
        )
        began = time.perf_counter()
        evaluate(tasks, GoldPolicy(), config, backend)
        minutes = (time.perf_counter() - began) / 60
        rows = read_rows(Path(out) / "results.jsonl")
    after, inodes = host_state(), inodes_used() - inodes
    verdicts = Counter(row.get("verdict") or ("resolved" if row["reward"] == 1.0 else "unresolved") for row in rows)
    console = Console(width=160)
    console.print(
        f"{len(rows)} gold episodes ({len(tasks)} tasks x {samples}) on {args.backend}, {args.workers} workers: "
        f"{len(rows) / minutes:.1f} episodes per minute; verdicts {dict(verdicts)}"
    )
    table = Table("on the host", "before", "after", "left behind")
    left = {key: sorted(after[key] - before[key]) for key in before}
    for key in before:
        table.add_row(key, str(len(before[key])), str(len(after[key])), str(len(left[key])))
    table.add_row("inodes used on the cache's filesystem (all programs)", "", "", f"{inodes:+d}")
    console.print(table)
    for key, items in left.items():
        if items:
            console.print(f"left behind, {key}: {items[:10]}")
    return {
        "left_behind": left,
        "episodes": len(rows),
        "per_minute": len(rows) / minutes,
        "verdicts": dict(verdicts),
        "before": before,
        "after": after,
    }


if __name__ == "__main__":
    main()
