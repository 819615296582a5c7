"""`harness tasks mine`: SWE-bench instances from real merged pull requests, built offline, in every language
of `tasks.languages` (the project's by its root's marker files).

The way SWE-bench's collection pipeline makes them: the base commit is the merge's first
parent; the merge's diff is split into `patch` (source) and `test_patch` (tests); the tests the
test patch touches run twice without the fix and twice with it: FAIL_TO_PASS fail both times
without and pass both times with it, PASS_TO_PASS pass all four times, and a test whose two
runs disagree is flaky and left out. Each instance gets an image: the language's environment of the
base commit (`Language.environment`; Python's is `tasks.synth.project_image`: a host-side wheelhouse,
an offline build, cached by content hash) plus the repository at the base commit only, so no later
commit, reflog entry or object reveals the fix. The test command and its log parser are the language's.

Input is a git repository (path or URL) with merged pull requests (numbers or merge
commits), or raw SWE-bench-style records (`instance_id, repo, base_commit, patch,
test_patch, problem_statement, created_at`) with `repos/<instance_id>.tar.gz` beside them.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandboxes import Backend
from sandboxes.images import cache_dir

from ..errors import TaskError
from ..grading.grade import parse_log, run_eval
from ..grading.patch_policy import is_test_path, parse_patch
from ..languages import Language, Unbuildable, language_named, language_of, language_of_root
from ..repos import base_only_git, git, tree_at
from ..shared_env import REPO_ARCHIVE, archive_path, repo_archive, share
from ..swe import WORKDIR, make_eval_script
from ..synth.errors import SynthError
from ..synth.host_pip import timed
from ..synth.project_image import build_image, image_exists
from ..synth.source import normalise

IMAGE_REPOSITORY = "harness-mined"
_BUILDING = threading.Lock()  # guards _LOCKS
PASSED = "PASSED"
_MERGE_SUBJECT = "Merge pull request #{n} "


class MineError(TaskError):
    """A pull request that cannot become an instance, or input that names none."""


# ----------------------------------------------------------------------------- input


def split_diff(diff: str, language: Language | None = None) -> tuple[str, str]:
    """(patch, test_patch): the diff's non-test source files of `language` (default Python) and its test
    files; docs, build files and lock files are left out."""
    language = language or language_named("python")
    patch, tests = [], []
    for chunk in re.split(r"(?m)^(?=diff --git )", diff):
        header = re.match(r"diff --git a/(\S+) b/(\S+)", chunk)
        if not header:
            continue
        path = header.group(2)
        if is_test_path(path):
            tests.append(chunk)
        elif language.is_source_path(path):
            patch.append(chunk)
    return "".join(patch), "".join(tests)


def records_from_file(path: Path) -> list[dict[str, Any]]:
    """Raw records (JSONL) whose repositories lie in `repos/<instance_id>.tar.gz` beside the file."""
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for record in records:
        missing = [k for k in ("instance_id", "repo", "base_commit", "patch", "test_patch") if not record.get(k)]
        if missing:
            raise MineError(f"{path}: record {record.get('instance_id', '?')} lacks {', '.join(missing)}")
        archive = path.parent / "repos" / f"{record['instance_id']}.tar.gz"
        if not archive.exists():
            raise MineError(f"{path}: no repository for {record['instance_id']} (expected {archive})")
        record["_source"] = str(archive)
    return records


def records_from_git(repo: str, pulls: list[str]) -> list[dict[str, Any]]:
    """Records of merged pull requests (numbers or merge commits) of a repository (path or URL)."""
    local = local_clone(repo)
    language = language_at(local)
    name = repo_name(repo, local)
    records = []
    for pull in pulls:
        merge = _merge_commit(local, pull)
        if len(git(local, "rev-list", "--parents", "-n", "1", merge).split()) < 2:
            raise MineError(f"{pull}: {merge[:12]} has no parent; not a merge of a pull request")
        records.append(record_of(local, name, merge, pull if pull.isdigit() else "", language))
    return records


def record_of(local: Path, name: str, merge: str, number: str = "", language: Language | None = None) -> dict[str, Any]:
    """The record of a merge (or squash merge, or any commit with a parent) of a project in `language`
    (default Python): base = its first parent; `number` names it (else the pull request number in its
    subject, else the commit)."""
    language = language or language_named("python")
    parents = git(local, "rev-list", "--parents", "-n", "1", merge).split()
    base = parents[1]
    patch, test_patch = split_diff(git(local, "diff", "--no-color", "--no-ext-diff", base, merge), language)
    found = re.search(r"#(\d+)", git(local, "log", "-1", "--format=%s", merge))
    number = number or (found.group(1) if found else merge[:12])
    messages = [git(local, "log", "-1", "--format=%B", merge).strip()]
    if len(parents) > 2:  # a true merge: the pull request's own commits follow
        messages += [
            m.strip() for m in git(local, "log", "--format=%B%x00", f"{base}..{parents[2]}").split("\0") if m.strip()
        ]
    return {
        "instance_id": f"{name.replace('/', '__')}-{number}",
        "repo": name,
        "language": language.name,
        "base_commit": base,
        "merge_commit": merge,
        "patch": patch,
        "test_patch": test_patch,
        "problem_statement": "\n\n".join(messages),
        "created_at": git(local, "log", "-1", "--format=%cI", merge).strip(),
        "_source": str(local),
    }


def local_clone(repo: str) -> Path:
    """The repository itself (a folder), else a bare clone of it (a URL or a git bundle) in the cache."""
    if Path(repo).is_dir():
        return Path(repo).resolve()
    target = cache_dir() / "mine" / "clones" / hashlib.sha256(repo.encode()).hexdigest()[:12]
    if not (target / "HEAD").exists():
        done = subprocess.run(["git", "clone", "-q", "--bare", repo, str(target)], capture_output=True, text=True)
        if done.returncode != 0:
            raise MineError(f"cannot clone {repo}: {done.stderr.strip()}")
    return target


def language_at(local: Path, commit: str = "HEAD") -> Language:
    """The language of the repository's project at `commit`, by the marker files at its root."""
    return language_of_root(set(git(local, "ls-tree", "--name-only", commit).split()))


def repo_name(repo: str, local: Path) -> str:
    """owner/name from the URL (or the origin of a local clone), else `local/<name>` (a folder or a bundle)."""
    if repo.endswith(".bundle"):
        return f"local/{normalise(Path(repo).stem)}"
    url = (
        repo
        if not Path(repo).is_dir()
        else subprocess.run(
            ["git", "-C", str(local), "remote", "get-url", "origin"], capture_output=True, text=True
        ).stdout.strip()
    )
    match = re.search(r"[:/]([^/:]+)/([^/]+?)(?:\.git)?/?$", url)
    return f"{match.group(1)}/{match.group(2)}" if match else f"local/{normalise(local.name)}"


def _merge_commit(local: Path, pull: str) -> str:
    if not pull.isdigit():
        try:
            return git(local, "rev-parse", "--verify", f"{pull}^{{commit}}").strip()
        except TaskError:
            raise MineError(f"{pull!r} is neither a pull request number nor a commit of {local}") from None
    found = git(local, "log", "--all", "--format=%H %s", "--fixed-strings", f"--grep=#{pull}").splitlines()
    for line in found:
        sha, _, subject = line.partition(" ")
        if subject.startswith(_MERGE_SUBJECT.format(n=pull)) or subject.rstrip().endswith(f"(#{pull})"):
            return sha
    raise MineError(
        f"no merge of pull request #{pull} in {local} (looked for 'Merge pull request #{pull} ' "
        f"and squash merges ending in '(#{pull})'); pass the merge commit instead"
    )


def _checkout_source(record: dict[str, Any], scratch: Path) -> Path:
    """A git repository holding the record's base commit."""
    source = Path(record["_source"])
    if source.is_file():  # repos/<id>.tar.gz with a `repo/` folder
        with tarfile.open(source) as archive:
            archive.extractall(scratch, filter="data")
        found = next((p.parent for p in scratch.rglob(".git") if p.is_dir()), None)
        if found is None:
            raise MineError(f"{source} holds no git repository")
        return found
    return source


# ----------------------------------------------------------------------------- images


def _environment(
    record: dict[str, Any], repo: Path, scratch: Path, on_step: Callable[[str], None], before: str | None
) -> tuple[str, dict]:
    """The project image (dependencies installed, the tree at the base commit in /testbed) of the
    record, and its `environment` notes: its language's (`Language.environment`)."""
    tree = tree_at(repo, record["base_commit"], scratch / "tree")
    return language_of(record).environment(
        tree, record["repo"], record["base_commit"], on_step, before, record_python(record)
    )


def record_python(record: dict[str, Any]) -> str | None:
    """The base's Python a record asks for (`python`, or the `environment` notes of an instance it was
    mined into, so that a rebuild is identical); None: chosen from the project."""
    return record.get("python") or record.get("environment", {}).get("python")


def build_shared_environment(
    record: dict[str, Any], on_step: Callable[[str], None], before: str | None, sibling: tuple[str, dict] | None = None
) -> tuple[str, dict, Path]:
    """(environment image, its notes, repository archive): the record run from an environment image
    with its repository put in at start (`tasks.shared_env`); `sibling`: a sibling's environment
    (image and notes), nothing built."""
    archive = archive_path(record["instance_id"], record["base_commit"])
    if sibling and archive.is_file():
        return *sibling, archive
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        repo = _checkout_source(record, scratch / "src")
        image, notes = sibling or _environment(record, repo, scratch, on_step, before)
        return image, notes, repo_archive(repo, record["base_commit"], record["instance_id"])


def build_instance_image(
    record: dict[str, Any], on_step: Callable[[str], None], before: str | None
) -> tuple[str, dict]:
    """The project image with the repository at the base commit as /testbed (and .git), and the
    project image's `environment` notes."""
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        repo = _checkout_source(record, scratch / "src")
        env_image, notes = _environment(record, repo, scratch, on_step, before)
        history = base_only_git(repo, record["base_commit"], scratch / "history")
        # STOPSIGNAL: `docker stop` kills at once. The official harness stops each container with a
        # 15 s grace that its `tail -f /dev/null` (PID 1: SIGTERM ignored) never uses.
        dockerfile = (
            f"FROM {env_image}\nCOPY git {WORKDIR}/.git\nWORKDIR {WORKDIR}\nSTOPSIGNAL SIGKILL\n"
            "RUN git read-tree HEAD && git update-index -q --refresh; git config --global --add safe.directory '*'\n"
        )
        digest = hashlib.sha256(f"{dockerfile}\0{record['base_commit']}".encode()).hexdigest()[:12]
        image = f"{IMAGE_REPOSITORY}/{record['instance_id'].lower()}:{digest}"
        if not image_exists(image):
            with timed(on_step, f"{record['instance_id']}: docker build of {image}"):
                build_image(
                    image, dockerfile, {"git": history}, what=f"adding the repository of {record['instance_id']}"
                )
    return image, notes


# ----------------------------------------------------------------------------- mining one record


# How far a candidate got, in order (the yield funnel of `tasks.mining.history`): its environment was
# built, its tests ran both ways, a test failed without the fix and passed with it, and it did so
# again on the repeated runs (gold passes, empty fails, stable).
STAGES = ("candidates", "environment built", "tests ran", "FAIL_TO_PASS >= 1", "validated")


@dataclass
class Mined:
    instance_id: str
    instance: dict[str, Any] | None = None
    reason: str = ""  # why no instance was made (at the furthest stage any dependency set reached)
    reached: str = STAGES[0]  # the furthest of STAGES reached
    flaky: list[str] = field(default_factory=list)
    duration: float = 0.0
    dependencies: str = "newest"  # or "as of <date>"


def test_files(test_patch: str, language: Language | None = None) -> list[str]:
    """The test files of `language` (default Python) the test patch leaves in place, which its runner is
    given (what the eval script runs)."""
    language = language or language_named("python")
    return [
        f.path
        for f in parse_patch(test_patch)
        if language.is_source_path(f.path) and f.added + f.removed and language.runs_test_file(f.path)
    ]


# A repository's own test runner where SWE-bench runs one (the test_cmd of its per-repository
# specs), with the swebench parser that reads it: FAIL_TO_PASS / PASS_TO_PASS are then named as in
# the official instances (sympy: `test_issue_24062`). Every other repository: its language's. Scripts whose
# `#!/usr/bin/env python` SWE-bench's conda images serve run through python3 here (the base image has no `python`).
REPO_RUNNERS = {
    "sympy/sympy": (
        "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' python3 bin/test -C --verbose",
        "parse_log_sympy",
    ),
    "django/django": (
        "python3 ./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1",
        "parse_log_django",
    ),
}


def runner_of(record: dict[str, Any], files: list[str], tree: Path | None = None) -> tuple[str, str]:
    """(test command running `files`, log parser) for the record's repository, whose tree at the base
    commit is `tree` (a JavaScript project's runner is read from its package.json)."""
    if record.get("repo") in REPO_RUNNERS:
        command, parser = REPO_RUNNERS[record["repo"]]
        return f"{command} {' '.join(test_arguments(record, files))}", parser
    language = language_of(record)
    return language.test_command(tree, files), language.log_parser_for(tree)


def test_arguments(record: dict[str, Any], files: list[str]) -> list[str]:
    """What the test command is given: the test files, or for Django's runtests.py the modules
    they are, as SWE-bench names them (`tests/auth_tests/test_forms.py` -> `auth_tests.test_forms`)."""
    if record.get("repo") == "django/django":
        return [f.removeprefix("tests/").removesuffix(".py").replace("/", ".") for f in files]
    return files


def make_instance(record: dict[str, Any], image: str, tree: Path | None = None) -> dict[str, Any]:
    """The instance of a record on `image`; `tree`: the repository's files at the base commit."""
    language = language_of(record)
    files = test_files(record["test_patch"], language)
    if not files:
        raise MineError(f"{record['instance_id']}: the test patch changes no {language.title} test file")
    command, parser = runner_of(record, files, tree)
    instance = {k: v for k, v in record.items() if not k.startswith("_")}
    instance.update(
        {
            "image": image,
            "version": record.get("version", ""),
            "log_parser": parser,
            "eval_type": "pass_and_fail",
            "workdir": WORKDIR,
            "eval_script": make_eval_script(record["base_commit"], record["test_patch"], command),
        }
    )
    return instance


def run_statuses(instance: dict[str, Any], patch: str, backend: Backend, timeout: float) -> tuple[dict[str, str], str]:
    """Per-test statuses of one run of the eval script with `patch` applied, and what went wrong."""
    method, log = run_eval(instance, patch, backend, timeout)
    if patch.strip() and not method:
        return {}, "the patch does not apply"
    statuses, _, problem = parse_log(instance, log)
    return statuses, problem or ("" if statuses else "no test results:\n" + "\n".join(log.splitlines()[-15:]))


def classify(before: list[dict[str, str]], after: list[dict[str, str]]) -> tuple[list[str], list[str], list[str]]:
    """(FAIL_TO_PASS, PASS_TO_PASS, flaky) from repeated runs without and with the fix."""
    tests = sorted(set().union(*before, *after))
    f2p, p2p, flaky = [], [], []
    for test in tests:
        without = {run.get(test, "MISSING") for run in before}
        with_fix = {run.get(test, "MISSING") for run in after}
        if len(without) > 1 or len(with_fix) > 1:
            flaky.append(test)
        elif with_fix == {PASSED} and without == {PASSED}:
            p2p.append(test)
        elif with_fix == {PASSED} and ("[" not in test or test.endswith("]")):  # not an id cut at a space
            f2p.append(test)
    return f2p, p2p, flaky


def _instance_of(record: dict[str, Any], image: str) -> dict[str, Any]:
    """`make_instance` with the repository's files at the base commit at hand (its test command may read them)."""
    with tempfile.TemporaryDirectory() as scratch:
        repo = _checkout_source(record, Path(scratch) / "src")
        return make_instance(record, image, tree_at(repo, record["base_commit"], Path(scratch) / "tree"))


SHARED = "shared"  # the attempt that runs a record in its repository's environment image, built for a sibling


def dependency_attempts(record: dict[str, Any]) -> list[str | None]:
    """The dependency sets to try in turn: those released before the pull request (what it was
    tested against; a date, as SWE-bench pins each version's environment), then the newest (None).
    A language whose projects pin their own dependencies has one set."""
    dated = record.get("created_at") and language_of(record).dated_dependencies
    return ([record["created_at"]] if dated else []) + [None]


def _describe(before: str | None) -> str:
    return (
        "newest" if before is None else "the repository's shared environment" if before == SHARED else f"as of {before}"
    )


_LOCKS: dict[str, threading.Lock] = {}


def _build_lock(repo: str) -> threading.Lock:
    """One build at a time per repository (its records share wheelhouses); other projects build meanwhile."""
    with _BUILDING:
        return _LOCKS.setdefault(repo, threading.Lock())


def mine_record(
    record: dict[str, Any],
    backend: Backend,
    on_step: Callable[[str], None] = print,
    timeout: float = 900.0,
    repeats: int = 2,
    shared: dict[str, tuple[str, dict]] | None = None,
    check: Callable[[dict], str] | None = None,
) -> Mined:
    """One record as a validated instance, or the reason it is not one.

    With `shared` (repository -> the environment image a sibling validated in, and its notes), the instance
    runs from an environment image with its repository put in at start (`tasks.shared_env`),
    no instance image built; the repository's image is tried first, then the record's own
    environment (as of `created_at`, then newest), which becomes the repository's if it has none.
    `check(instance)` says why an instance whose tests ran right is still not kept ("" when it is):
    `harness tasks mine` passes `harness.episode_check` (a gold and an empty episode, graded)."""
    started = time.monotonic()
    result = Mined(record["instance_id"])
    name = record["instance_id"]
    attempts = dependency_attempts(record)
    if shared is not None and record["repo"] in shared:
        attempts.insert(0, SHARED)
    last = [""]  # why the previous dependency set failed

    def stopped(reached: str, reason: str) -> None:
        """One dependency set got to `reached` and no further, for `reason`; the furthest one is kept."""
        if STAGES.index(reached) >= STAGES.index(result.reached):
            result.reached, result.reason = reached, reason
        last[0] = reason

    for before in attempts:
        if last[0]:
            on_step(f"{name}: retrying with the {_describe(before)} dependencies; before failed: {last[0][:400]}")
        archive = None
        try:
            waited = time.monotonic()
            with _build_lock(record["repo"]):
                on_step(f"{name}: waited {time.monotonic() - waited:.0f}s for the build lock")
                if shared is None:
                    image, notes = build_instance_image(record, on_step, before)
                else:
                    image, notes, archive = build_shared_environment(
                        record,
                        on_step,
                        None if before == SHARED else before,
                        shared[record["repo"]] if before == SHARED else None,
                    )
        except (SynthError, Unbuildable) as err:
            stopped(STAGES[0], f"environment ({_describe(before)}): {err}")
            continue
        try:
            instance = {**_instance_of(record, image), "environment": notes}
        except Unbuildable as err:  # no test command (a package.json without a test script)
            stopped(STAGES[0], f"environment ({_describe(before)}): {err}")
            continue
        if archive is not None:
            instance = share(instance, image, archive)
        runs: dict[str, list[dict[str, str]]] = {"without": [], "with": []}
        problem = ""
        # One run each way first: when nothing could be FAIL_TO_PASS, the repeats are skipped.
        for attempt in range(repeats):
            for label, patch in (("without", ""), ("with", record["patch"])):
                with timed(on_step, f"{name}: tests {label} the fix, run {attempt + 1}"):
                    statuses, problem = run_statuses(instance, patch, backend, timeout)
                if problem and not patch:
                    # Without the fix the tests may not even build (a Go or Rust test of a function the fix
                    # adds; a Python test importing it): as in SWE-bench, a test with no result has failed.
                    on_step(f"{name}: no test results without the fix, so none passed: {problem[:300]}")
                    statuses, problem = {}, ""
                if problem:
                    stopped(STAGES[1], f"tests {label} the fix ({_describe(before)} dependencies): {problem}")
                    break
                runs[label].append(statuses)
            if problem or not classify(runs["without"], runs["with"])[0]:
                break
        if problem:
            continue
        f2p, p2p, flaky = classify(runs["without"], runs["with"])
        if not f2p and len(runs["with"]) > 1:
            stopped(STAGES[3], f"FAIL_TO_PASS not stable over repeated runs ({_describe(before)} dependencies)")
            continue
        if not f2p:
            stopped(STAGES[2], f"no test fails without the fix and passes with it ({_describe(before)} dependencies)")
            continue
        instance.update({"FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p})
        if check is not None and (problem := check(instance)):
            stopped(STAGES[3], f"episode check ({_describe(before)} dependencies): {problem}")
            continue
        result.instance, result.reason, result.flaky, result.reached = instance, "", flaky, STAGES[-1]
        result.dependencies = _describe(before)
        if shared is not None:
            shared.setdefault(record["repo"], (image, notes))
        break
    result.duration = time.monotonic() - started
    return result


def mine(
    records: list[dict[str, Any]],
    output: Path,
    backend: Backend,
    workers: int = 2,
    on_result: Callable[[Mined], None] = lambda m: None,
    on_step: Callable[[str], None] = print,
    timeout: float = 900.0,
    share_env: bool = False,
    early_stop: int = 0,
    check: Callable[[dict], str] | None = None,
) -> list[Mined]:
    """Mine every record; instances are appended to `output` (JSONL) as they are validated.

    Records already in `output` are kept as they are (a rerun finishes an interrupted one).
    With `share_env`, one environment image per repository where the tests allow
    (`mine_record(shared=...)`): the first record of each repository is mined before the others,
    which then try its environment first. With `early_stop` (a number of records), when that many
    first results all stopped at one stage for one reason, the records not yet started are left
    and `MiningStopped` names the reason."""
    kept = [json.loads(line) for line in output.read_text().splitlines() if line.strip()] if output.exists() else []
    done = {instance["instance_id"] for instance in kept}
    todo = [r for r in records if r["instance_id"] not in done]
    output.parent.mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()
    shared: dict[str, tuple[str, dict]] | None = None
    if share_env:  # a rerun keeps using the environments its kept instances share
        shared = {}
        for instance in kept:
            if instance.get(REPO_ARCHIVE):
                shared.setdefault(instance["repo"], (instance["image"], instance.get("environment", {})))
    finished: list[Mined] = []
    stop: list[str] = []

    def one(record):
        if stop:
            return None
        mined = mine_record(record, backend, on_step, timeout, shared=shared, check=check)
        with lock:
            if mined.instance:
                with output.open("a") as handle:
                    handle.write(json.dumps(mined.instance) + "\n")
            finished.append(mined)
            if not stop and (why := systemic_stop(finished, early_stop)):
                stop.append(why)
        on_result(mined)
        return mined

    firsts = [r for i, r in enumerate(todo) if not share_env or r["repo"] not in {o["repo"] for o in todo[:i]}]
    rest = [r for r in todo if all(r is not f for f in firsts)]
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        results = [m for m in [*pool.map(one, firsts), *pool.map(one, rest)] if m is not None]
    if stop:
        raise MiningStopped(stop[0], results)
    return results


class MiningStopped(MineError):
    """The first records all failed for one reason: the repository or its environment is at fault."""

    def __init__(self, message: str, results: list[Mined]):
        super().__init__(message)
        self.results = results


def reason_key(reason: str) -> str:
    """The reason without its details: what counts alike in the funnel (`environment (as of 2024-04-16):
    installing x failed: <pip's output>` -> `environment: installing x failed`)."""
    head = re.sub(r"\s*\((newest|as of [^)]*|the repository's shared environment)( dependencies)?\)", "", reason)
    kind, _, rest = head.partition(": ")
    key = f"{kind}: {rest.split(': ')[0]}" if kind in ("environment", "tests with the fix") else kind
    return key.splitlines()[0].rstrip(":")[:120] if key else "unknown"


def systemic_stop(results: list[Mined], first: int) -> str:
    """Why to stop ("" to go on): the first `first` results all stopped at one stage for one reason."""
    if first <= 0 or len(results) < first or any(m.instance for m in results):
        return ""
    stops = {(m.reached, reason_key(m.reason)) for m in results[:first]}
    if len(stops) != 1:
        return ""
    reached, key = stops.pop()
    return (
        f'stopped: the first {first} candidates all got no further than "{reached}", each for "{key}"; '
        f"the repository or its environment is at fault, not the candidates. The last: {results[first - 1].reason[:800]}"
    )
