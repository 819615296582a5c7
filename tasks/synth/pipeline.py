"""`synthesize`: a project in, validated SWE-bench instances out, one planted bug each.

Source -> project image -> baseline (the suite twice) -> candidate mutations in a seeded
order -> each judged in fresh sandboxes, `workers` at a time -> kept ones become instances
(a one-commit repository with the bug, its image, the gold patch, a problem statement),
appended to the output as they are kept. Every verdict goes to the work log, so a killed run
resumes where it stopped; the summary counts kept, rejected (by reason) and flaky candidates
per mutation kind.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sandboxes import Backend, SandboxError, get_backend
from sandboxes.images import image_size

from ..grading.patch_policy import review_patch
from ..swe import WORKDIR, make_eval_script
from ..repos import make_bugged_repo
from infra.runlog import atomic_write
from .project_image import ProjectImage, build_image, image_exists
from .errors import SynthError
from .mutations import Mutation, order, unified_patch
from .source import fetch_project
from .targets import SynthTarget, target_for
from .statement import failures, write_statement
from .validate import SYSTEMIC, Baseline, Outcome, judge, pin_test_ids, run_baseline
from .worklog import WorkLog

log = logging.getLogger(__name__)
MAX_ERRORS_IN_A_ROW = 5
EARLY_STOP = 20  # judged candidates, all rejected for one systemic reason: stop


@dataclass
class SynthEvent:
    """Progress: `stage` is source, image, baseline, mutations, candidate or done."""

    stage: str
    message: str
    decided: int = 0
    planned: int = 0
    kept: int = 0


@dataclass
class SynthSummary:
    project: str
    origin: str
    commit: str
    image: str
    test_command: str
    output: str
    baseline_passing: int
    baseline_excluded: dict[str, str]
    candidates: int  # mutations found
    decided: int  # candidates with a verdict (this run and earlier ones)
    kept: int
    flaky: int
    rejected: dict[str, int]  # reason -> count
    by_kind: dict[str, dict] = field(default_factory=dict)  # kind -> {kept, flaky, rejected: {reason: n}}
    errors: int = 0  # sandbox errors of this run (not recorded: a resume retries them)
    duration: float = 0.0
    disk: dict[str, float] = field(default_factory=dict)  # MB: the environment image, each task's own layer (mean)

    def to_dict(self) -> dict:
        return asdict(self)


def synthesize(
    repo: str,
    output: Path,
    max_tasks: int = 200,
    seed: int = 0,
    workers: int = 2,
    test_command: str | None = None,
    backend: Backend | None = None,
    on_event: Callable[[SynthEvent], None] | None = None,
    statement_writer: Callable[[dict], str] | None = None,
    max_candidates: int | None = None,
    test_timeout: float | None = None,
    early_stop: int = EARLY_STOP,
    python: str | None = None,
    check: Callable[[dict], str] | None = None,
) -> SynthSummary:
    """Plant bugs in `repo` (a git repository path, a git URL or a PyPI name) and write up to
    `max_tasks` validated SWE-bench instances to `output` (JSONL).

    The work dir `<output without suffix>.work` keeps the work log; running again with the same
    arguments resumes. `statement_writer(info)` replaces the default problem-statement writer
    (`info`: project, seed, failures, and the instance without its statement).
    `max_candidates` bounds how many candidates are judged in all; `test_timeout` (seconds)
    bounds one test run (default: 3x the slower baseline run, at least 30 s). When the first
    `early_stop` judged candidates are all rejected for one systemic reason (`validate.SYSTEMIC`),
    the run stops with a SynthError naming it (0 never stops). `python` picks the base ("3.9", "3.11",
    "3.13"); by default `python_base.choose_python` does. `check(instance)` says why a candidate that passed
    the test runs is still not a task ("" when it is): `harness tasks synth` passes `harness.episode_check`,
    which runs a gold and an empty episode through the path a submission takes.
    """
    started = time.monotonic()
    output = Path(output).resolve()  # the paths the work dir records stay valid from any working directory
    work = output.with_suffix(".work")
    work.mkdir(parents=True, exist_ok=True)
    emit = on_event or (lambda event: log.info("%s: %s", event.stage, event.message))
    if backend is None:
        backend = get_backend("docker")

    emit(SynthEvent("source", f"fetching {repo}"))
    project = fetch_project(repo, work)
    emit(SynthEvent("image", f"{project.name} at {project.commit[:12]}: preparing the project image"))
    language, target = target_for(project.root)
    env = target.project_image(project, test_command, lambda message: emit(SynthEvent("image", message)), python)
    commands = tuple(pin_test_ids(c) for c in env.test_commands)
    log_parser = target.log_parser(project.root)
    worklog = WorkLog(work, _hash(env.image, *commands))
    baseline = worklog.baseline()
    if baseline is None:
        emit(SynthEvent("baseline", "running the test suite twice"))
        baseline = run_baseline(env.image, commands, backend, timeout=test_timeout or 900.0, log_parser=log_parser)
        worklog.save_baseline(baseline)
    emit(SynthEvent("baseline", f"{len(baseline.passing)} tests pass twice, {len(baseline.excluded)} excluded"))

    found = target.find_mutations(project.root)
    if not found:
        raise SynthError(f"{project.name} has no function outside its tests to plant a bug in")
    run = _Run(
        language.name,
        target,
        project.root,
        env,
        baseline,
        worklog,
        backend,
        output,
        seed,
        statement_writer,
        timeout=test_timeout or max(30.0, 3 * baseline.duration),
        early_stop=early_stop,
        check=check,
    )
    run.number = {m.id: i + 1 for i, m in enumerate(found)}  # stable across seeds
    planned = min(len(found), max_candidates or len(found))
    emit(SynthEvent("mutations", f"{len(found)} candidate bugs, judging up to {planned}", planned=planned))
    run.restore(found)
    run.judge_all(order(found, seed), max_tasks, planned, workers, emit)

    summary = run.summary(len(found), time.monotonic() - started)
    atomic_write(f"{output}.summary.json", json.dumps(summary.to_dict(), indent=1))
    emit(SynthEvent("done", f"{summary.kept} tasks in {output}", summary.decided, planned, summary.kept))
    return summary


class _Run:
    """The state of one run: what was decided, what is kept, and the output file."""

    def __init__(
        self,
        language: str,
        target: SynthTarget,
        root: Path,
        env: ProjectImage,
        baseline: Baseline,
        worklog: WorkLog,
        backend: Backend,
        output: Path,
        seed: int,
        statement_writer,
        timeout: float,
        early_stop: int = EARLY_STOP,
        check: Callable[[dict], str] | None = None,
    ):
        self.check = check
        self.language, self.target = language, target
        self.root, self.env, self.baseline, self.worklog, self.backend = root, env, baseline, worklog, backend
        self.output, self.seed, self.timeout, self.early_stop = output, seed, timeout, early_stop
        self.write_statement = statement_writer or write_statement
        self.number: dict[str, int] = {}
        self.signatures: set[str] = set()
        self.lock = threading.Lock()
        self.errors = 0  # sandbox errors of this run
        self.errors_in_a_row = 0

    # -- resuming ------------------------------------------------------------------------

    def restore(self, found: list[Mutation]) -> None:
        """Rewrite the output from the kept entries of the work log (rebuilding lost images)."""
        by_id = {m.id: m for m in found}
        kept = sorted(
            (e for e in self.worklog.entries.values() if e["status"] == "kept"),
            key=lambda e: self.number.get(e["id"], 0),
        )
        with self.output.open("w") as handle:
            for entry in kept:
                self.signatures.add(entry["signature"])
                if not image_exists(entry["instance"]["image"]):
                    self._build_repo_and_image(
                        by_id[entry["id"]], entry["instance"]["instance_id"], entry["instance"]["image"]
                    )
                handle.write(json.dumps(entry["instance"]) + "\n")

    # -- judging -------------------------------------------------------------------------

    def judge_all(self, ordered: list[Mutation], max_tasks: int, planned: int, workers: int, emit) -> None:
        sources = {}
        pending = iter(m for m in ordered if m.id not in self.worklog.entries)
        running: dict = {}
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="synth") as pool:
            try:
                while True:
                    while (
                        len(running) < workers
                        and self.kept() < max_tasks
                        and len(self.worklog.entries) + len(running) < planned
                    ):
                        mutation = next(pending, None)
                        if mutation is None:
                            break
                        source = sources.setdefault(mutation.path, (self.root / mutation.path).read_bytes())
                        if not self.target.compiles(mutation.apply(source), mutation.path):
                            self.worklog.append(_entry(mutation, "rejected", "does not compile"))
                            continue
                        running[pool.submit(self.judge_one, mutation, source)] = mutation
                    if not running:
                        return
                    done, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in done:
                        mutation = running.pop(future)
                        verdict = self._record(mutation, future, max_tasks)
                        emit(
                            SynthEvent(
                                "candidate",
                                f"{mutation.kind} in {mutation.function}: {verdict}",
                                len(self.worklog.entries),
                                planned,
                                self.kept(),
                            )
                        )
            finally:
                for future in running:
                    future.cancel()

    def _record(self, mutation: Mutation, future, max_tasks: int) -> str:
        """Log the verdict (and write a kept instance); returns it in words."""
        try:
            entry = future.result()
        except SandboxError as err:
            self.errors += 1
            self.errors_in_a_row += 1
            log.warning("sandbox error on %s (not recorded, a resume retries it): %s", mutation.id, err)
            if self.errors_in_a_row >= MAX_ERRORS_IN_A_ROW:
                raise SynthError(f"{self.errors_in_a_row} sandbox errors in a row, the last: {err}") from err
            return f"sandbox error ({err})"
        self.errors_in_a_row = 0
        if entry["status"] == "kept":
            if self.kept() >= max_tasks:
                return "not needed (max_tasks reached)"  # left undecided for a later, larger run
            with self.output.open("a") as handle:
                handle.write(json.dumps(entry["instance"]) + "\n")
        self.worklog.append(entry)
        stop = systemic_failure(list(self.worklog.entries.values()), self.early_stop, self.timeout)
        if stop:
            raise SynthError(stop)
        return f"{entry['status']} ({entry['reason']})" if entry["reason"] else entry["status"]

    def judge_one(self, mutation: Mutation, source: bytes) -> dict:
        """Judge one candidate; a kept one comes back with its instance (image built)."""
        patch = unified_patch(mutation.path, source, mutation.apply(source))
        outcome = judge(self.env.image, self.baseline, patch, self.backend, self.timeout)
        if outcome.status != "kept":
            return {**_entry(mutation, outcome.status, outcome.reason), "detail": outcome.detail}
        signature = json.dumps(outcome.signature)
        with self.lock:
            if signature in self.signatures:
                return _entry(mutation, "rejected", "duplicate")
            self.signatures.add(signature)
        instance = self._instance(mutation, patch, outcome)
        if review_patch(instance["patch"], grading_mode="refuse").refused:  # a gold patch edits no test or runner file
            return _entry(mutation, "rejected", "gold patch refused by the patch policy")
        if self.check is not None and (problem := self.check(instance)):
            return {**_entry(mutation, "rejected", "fails the episode check"), "detail": problem}
        return {**_entry(mutation, "kept"), "signature": signature, "instance": instance}

    # -- instances -----------------------------------------------------------------------

    def _instance(self, mutation: Mutation, patch: str, outcome: Outcome) -> dict:
        name = self.env.project.name
        number = self.number[mutation.id]
        instance_id = f"{name}__{name}-synth-{number}"
        image = f"harness-synth/{name}:synth-{number}-{_hash(self.env.image, patch)}"
        base_commit, gold = self._build_repo_and_image(mutation, instance_id, image, patch)
        instance = {
            "instance_id": instance_id,
            "repo": f"{name}/{name}",
            "base_commit": base_commit,
            "environment_setup_commit": base_commit,
            "patch": gold,
            "test_patch": "",
            "problem_statement": "",
            "hints_text": "",
            "created_at": "",
            "version": self.env.project.version or "0.0",
            "FAIL_TO_PASS": outcome.fail_to_pass,
            "PASS_TO_PASS": outcome.pass_to_pass,
            "image": image,
            "eval_script": make_eval_script(base_commit, "", self.baseline.test_command),
            "log_parser": self.baseline.log_parser,
            "language": self.language,
            "eval_type": "pass_and_fail",
            "workdir": WORKDIR,
            "environment": self.env.environment,
            "kind": mutation.kind,
            "synth": {
                "origin": self.env.project.origin,
                "source_commit": self.env.project.commit,
                "file": mutation.path,
                "function": mutation.function,
                "line": mutation.line,
                "mutation": mutation.description,
                "env_image": self.env.image,
            },
        }
        info = {
            "project": name,
            "seed": self.seed * 100003 + number,
            "instance": dict(instance),
            "failures": failures(outcome.log, outcome.fail_to_pass, hide=mutation.path),
        }
        instance["problem_statement"] = self.write_statement(info)
        return instance

    def _build_repo_and_image(self, mutation: Mutation, instance_id: str, image: str, patch: str | None = None):
        """The one-commit repository with the bug planted, and the image: the project
        image plus that repository's .git and the buggy file. Returns (base commit, gold)."""
        folder = self.output.with_suffix(".work") / "instances" / instance_id
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        if patch is None:
            source = (self.root / mutation.path).read_bytes()
            patch = unified_patch(mutation.path, source, mutation.apply(source))
        (folder / "bug.patch").write_text(patch)
        try:
            base_commit, gold = make_bugged_repo(self.root, folder / "bug.patch", folder / "repo")
            dockerfile = (
                f"FROM {self.env.image}\nCOPY repo/.git {WORKDIR}/.git\n"
                f"COPY {json.dumps(['repo/' + mutation.path, f'{WORKDIR}/{mutation.path}'])}\n"
            )
            build_image(
                image,
                dockerfile,
                {"repo/.git": folder / "repo" / ".git", f"repo/{mutation.path}": folder / "repo" / mutation.path},
                what=f"the image of {instance_id}",
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return base_commit, gold

    # -- counting ------------------------------------------------------------------------

    def kept(self) -> int:
        return sum(1 for e in self.worklog.entries.values() if e["status"] == "kept")

    def summary(self, candidates: int, duration: float) -> SynthSummary:
        by_kind: dict[str, dict] = {}
        rejected: dict[str, int] = {}
        for entry in self.worklog.entries.values():
            counts = by_kind.setdefault(entry["kind"], {"kept": 0, "flaky": 0, "rejected": {}})
            if entry["status"] == "rejected":
                counts["rejected"][entry["reason"]] = counts["rejected"].get(entry["reason"], 0) + 1
                rejected[entry["reason"]] = rejected.get(entry["reason"], 0) + 1
            else:
                counts[entry["status"]] += 1
        project = self.env.project
        return SynthSummary(
            project=project.name,
            origin=project.origin,
            commit=project.commit,
            image=self.env.image,
            test_command=self.baseline.test_command,
            output=str(self.output),
            baseline_passing=len(self.baseline.passing),
            baseline_excluded=self.baseline.excluded,
            candidates=candidates,
            decided=len(self.worklog.entries),
            kept=self.kept(),
            flaky=sum(c["flaky"] for c in by_kind.values()),
            rejected=rejected,
            by_kind=dict(sorted(by_kind.items())),
            errors=self.errors,
            duration=round(duration, 1),
            disk=self.disk(),
        )

    def disk(self) -> dict[str, float]:
        """What the run's images take on disk: the environment image's own layers (above the base image,
        shared by every task) and, per task, the layer its image adds (its repository and buggy file)."""
        tasks = [image_size(e["instance"]["image"]) for e in self.worklog.entries.values() if e["status"] == "kept"]
        return {
            "environment_mb": round(image_size(self.env.image) / 1e6, 1),
            "per_task_mb": round(sum(tasks) / len(tasks) / 1e6, 2) if tasks else 0.0,
        }


def systemic_failure(entries: list[dict], first: int, timeout: float = 0.0) -> str:
    """Why the run should stop ("" to go on): the first `first` candidates judged in a sandbox
    (work-log order) were all rejected, or all flaky, for the same systemic reason, and none kept."""
    judged = [e for e in entries if e["reason"] not in ("does not compile", "duplicate")]
    if first <= 0 or len(judged) < first or any(e["status"] == "kept" for e in judged):
        return ""
    reasons = {"flaky" if e["status"] == "flaky" else e["reason"] for e in judged[:first]}
    if len(reasons) != 1 or (reason := reasons.pop()) not in SYSTEMIC:
        return ""
    example = next((e.get("detail") for e in reversed(judged[:first]) if e.get("detail")), "")
    limit = f" ({timeout:.0f} s)" if reason == "timeout" and timeout else ""
    return (
        f'stopped early: the first {first} candidates were all rejected with "{reason}"{limit}: {SYSTEMIC[reason]}'
        + (f". The last one: {example}" if example else "")
        + ". The project or its environment is at fault, not the bugs; fix that and run again (the work log resumes)."
    )


def _entry(mutation: Mutation, status: str, reason: str = "") -> dict:
    return {
        "id": mutation.id,
        "kind": mutation.kind,
        "status": status,
        "reason": reason,
        "function": mutation.function,
        "mutation": mutation.description,
    }


def _hash(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]
