#!/usr/bin/env python3
"""Rebuild the tests' real-world material (`shared/`) from its public sources, or check a copy of it.

    python scripts/fetch_shared.py DEST [--only gsm8k,swebench-logs,...]   build the parts into DEST
    python scripts/fetch_shared.py --check DIR [--only ...]                verify an existing folder

What each part is and where it comes from is in `scripts/shared_manifest.json` (file hashes, row
counts, pinned commits, the folders' README texts); `--write-manifest SRC` regenerates it from a
complete folder. A part that already checks out in DEST is skipped, so an interrupted build resumes.
Files copied unchanged from a repository are verified by sha256; the parts derived from git histories
(`swebench-real`, `honest-fixes`) are rebuilt by the rules in their READMEs and then compared with
the recorded hashes; archives that git and gzip cannot reproduce byte for byte (bundles, tarballs,
gzip'd trajectories) are checked by what they hold.

Needs Python, git and network access to github.com and raw.githubusercontent.com. `--repo-url` points
the git side at other copies, e.g. `--repo-url /mirrors/{owner}+{name}`: local git directories serve
single files too.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

MANIFEST = Path(__file__).resolve().with_name("shared_manifest.json")
PARTS = ("gsm8k", "swebench-logs", "swebench-real", "honest-fixes", "git-history", "real-agent-runs")
NOT_UPSTREAM = ("DESIGN.md", "hooks")
GITHUB = "https://github.com/{owner}/{name}"
RAW = "https://raw.githubusercontent.com/{repo}/{commit}/{path}"

# Where each part comes from; `--write-manifest` adds what it reads from a complete folder.
SOURCES = {
    "gsm8k": {
        "repo": "openai/grade-school-math",
        "commit": "3101c7d5072418e28b9008a6636bde82a006892c",
        "files": {
            "train.jsonl": "grade_school_math/data/train.jsonl",
            "test.jsonl": "grade_school_math/data/test.jsonl",
            "LICENSE": "LICENSE",
        },
    },
    # The official harness writes the submitted diff as `patch.diff`; these folders name it `model.patch`.
    "swebench-logs": {"renamed": {"model.patch": "patch.diff"}},
    "honest-fixes": {
        "projects": ["pallets/flask", "sympy/sympy", "pallets/click", "pytest-dev/pytest"],
        "per_project": 150,
    },
    "git-history": {
        "repos": {
            "itsdangerous.bundle": "pallets/itsdangerous",
            "more-itertools.bundle": "more-itertools/more-itertools",
        }
    },
    "real-agent-runs": {
        "repo": "gruckion/mini-swe-agent",
        "commit": "d12a71affd95403b036b2bdbd827349b77bfffb9",
        "path": "swebench_results/20251118_gemini-3-pro-74pct",
        "model_name_or_path": "gemini-3-pro-preview (mini-swe-agent 1.15.0)",
    },
}

# ---------------------------------------------------------------------------------------------------------------------
# The rules that turn a merge commit into rows (honest-fixes/README.md, swebench-real/README.md).

TEST_DIRS = frozenset({"test", "tests", "testing"})
MERGE_SUBJECT = re.compile(r"^Merge pull request\b")
MAX_FILES = 10
MAX_PATCH_BYTES = 200_000


def is_test_path(path: str) -> bool:
    """A test file: under a `test/`, `tests/` or `testing/` folder, or named `test_*.py`, `*_test.py`, `conftest.py`."""
    *folders, name = path.split("/")
    if TEST_DIRS.intersection(folders) or name == "conftest.py":
        return True
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def is_source_path(path: str) -> bool:
    """A changed file that belongs in a fix's `patch`: a `.py` file that is not a test."""
    return path.endswith(".py") and not is_test_path(path)


def git(repo: Path | str, *args: str) -> str:
    return _run(["git", "-C", str(repo), *args]).decode("utf-8")


def changed_paths(repo: Path | str, base: str, commit: str) -> list[str]:
    out = git(repo, "diff", "--name-only", "-z", base, commit)
    return [p for p in out.split("\0") if p]


def diff_of(repo: Path | str, base: str, commit: str, paths: list[str]) -> str:
    return git(repo, "diff", base, commit, "--", *paths) if paths else ""


def split_merge(repo: Path | str, merge: str) -> dict:
    """A merge commit as one fix: its first parent, the diff of its non-test `.py` files, the diff of its tests."""
    base = git(repo, "rev-parse", f"{merge}^1").strip()
    paths = changed_paths(repo, base, merge)
    return {
        "base_commit": base,
        "patch": diff_of(repo, base, merge, [p for p in paths if is_source_path(p)]),
        "test_patch": diff_of(repo, base, merge, [p for p in paths if is_test_path(p)]),
        "paths": paths,
    }


def pr_merges(repo: Path | str, head: str) -> list[tuple[str, str]]:
    """(merge, first parent) of each "Merge pull request" commit on `head`'s first-parent line, newest first."""
    out = git(repo, "log", "--first-parent", "--merges", "--format=%H%x00%P%x00%s", head)
    merges = []
    for line in out.splitlines():
        commit, parents, subject = line.split("\0", 2)
        if MERGE_SUBJECT.match(subject):
            merges.append((commit, parents.split()[0]))
    return merges


def merged_fixes(
    repo: Path | str, head: str, count: int, max_files: int = MAX_FILES, max_bytes: int = MAX_PATCH_BYTES
) -> list[dict]:
    """The latest `count` pull-request merges at or before `head` as `{merge, patch}`: the first-parent diff limited to
    changed non-test `.py` files, skipping merges with none of them, with more than `max_files`, or whose diff is
    over `max_bytes`. A renamed file is limited by its new path alone, so it shows as a new file."""
    rows = []
    for merge, base in pr_merges(repo, head):
        paths = [p for p in changed_paths(repo, base, merge) if is_source_path(p)]
        if not paths or len(paths) > max_files:
            continue
        patch = diff_of(repo, base, merge, paths)
        if len(patch.encode("utf-8")) > max_bytes:
            continue
        rows.append({"merge": merge, "patch": patch})
        if len(rows) == count:
            break
    return rows


def pr_instance(repo: Path | str, merge: str) -> dict:
    """The SWE-bench-style fields of one merge: base, patch, test patch, problem statement, date."""
    fix = split_merge(repo, merge)
    message = git(repo, "log", "-1", "--format=%B", merge).strip()
    commits = git(repo, "log", "--format=%B", f"{merge}^1..{merge}^2").strip()
    return {
        "base_commit": fix["base_commit"],
        "patch": fix["patch"],
        "test_patch": fix["test_patch"],
        "problem_statement": f"{message}\n\n{commits}".strip(),
        "created_at": git(repo, "log", "-1", "--format=%cI", merge).strip(),
    }


# ---------------------------------------------------------------------------------------------------------------------
# Plumbing: subprocesses, downloads, files.


class FetchError(RuntimeError):
    pass


def _run(cmd: list[str], cwd: Path | None = None) -> bytes:
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True)
    except FileNotFoundError as e:
        raise FetchError(f"{cmd[0]} is not installed") from e
    if proc.returncode:
        err = proc.stderr.decode("utf-8", "replace").strip()
        hint = ""
        if re.search(r"Could not resolve host|unable to access|Connection (refused|timed out)|network", err):
            hint = " (the network or github.com is unreachable from here)"
        raise FetchError(f"{' '.join(cmd[:6])} failed{hint}: {err[-800:]}")
    return proc.stdout


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode("utf-8")


class Upstream:
    """Public repositories: cloned with git, single files read from raw.githubusercontent.com (or, for a local
    `--repo-url`, from the git directory itself)."""

    def __init__(self, cache: Path, repo_url: str = GITHUB):
        self.cache = cache
        self.repo_url = repo_url

    def url(self, repo: str) -> str:
        owner, name = repo.split("/")
        return self.repo_url.format(owner=owner, name=name, repo=repo)

    def local(self, repo: str) -> Path | None:
        path = Path(self.url(repo))
        return path if path.is_dir() else None

    def file(self, repo: str, commit: str, path: str) -> bytes:
        local = self.local(repo)
        if local is not None:
            return _run(["git", "-C", str(local), "show", f"{commit}:{path}"])
        url = RAW.format(repo=repo, commit=commit, path=urllib.parse.quote(path))
        try:
            with urllib.request.urlopen(url, timeout=60) as resp:
                return resp.read()
        except urllib.error.HTTPError as e:
            raise FetchError(f"{url}: HTTP {e.code} {e.reason}") from e
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise FetchError(f"cannot reach {url}: {reason} (network access to GitHub is needed)") from e

    def history(self, repo: str, full: bool = False) -> Path:
        """A bare clone with every commit (blobs fetched on demand unless `full`), kept in the cache."""
        owner, name = repo.split("/")
        dest = self.cache / "repos" / f"{owner}+{name}{'' if not full else '.full'}.git"
        if (dest / "HEAD").is_file():
            return dest
        tmp = dest.with_name(dest.name + ".part")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.parent.mkdir(parents=True, exist_ok=True)
        cmd = ["git", "clone", "--bare", "--quiet"]
        if not full and self.local(repo) is None:
            cmd.append("--filter=blob:none")
        print(f"  cloning {self.url(repo)}", flush=True)
        _run([*cmd, self.url(repo), str(tmp)])
        os.replace(tmp, dest)
        return dest

    def shallow_checkout(self, repo: str, commit: str, dest: Path) -> None:
        """`dest` as a git repository fetched with depth 1 at `commit`, checked out there (detached)."""
        dest.mkdir(parents=True)
        _run(["git", "init", "--quiet", str(dest)])
        _run(["git", "-C", str(dest), "fetch", "--quiet", "--depth", "1", self.url(repo), commit])
        _run(["git", "-C", str(dest), "-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", commit])


# ---------------------------------------------------------------------------------------------------------------------
# Checks: what a complete part holds.


class Report:
    def __init__(self):
        self.problems: list[str] = []
        self.notes: list[str] = []

    def bad(self, msg: str) -> None:
        self.problems.append(msg)

    def note(self, msg: str) -> None:
        self.notes.append(msg)

    def file(self, path: Path, sha256: str | None = None, size: int | None = None, rows: int | None = None) -> bool:
        if not path.is_file():
            self.bad(f"{path}: missing")
            return False
        if size is not None and path.stat().st_size != size:
            self.bad(f"{path}: {path.stat().st_size} bytes, expected {size}")
            return False
        if sha256 is not None and sha256_file(path) != sha256:
            self.bad(f"{path}: sha256 differs from {sha256}")
            return False
        if rows is not None:
            n = sum(1 for line in path.open("rb") if line.strip())
            if n != rows:
                self.bad(f"{path}: {n} rows, expected {rows}")
                return False
        return True


def bundle_heads(path: Path) -> dict[str, str]:
    """The refs a git bundle's header names, without git: `{ref: commit}`."""
    heads = {}
    with open(path, "rb") as f:
        if not f.readline().startswith(b"# v"):
            return {}
        for raw in f:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if not line:
                break
            if line[0] in "-@":
                continue
            commit, _, ref = line.partition(" ")
            heads[ref] = commit
    return heads


def tar_member(path: Path, name: str) -> bytes | None:
    with tarfile.open(path, "r:gz") as tar:
        for member in tar:
            if member.name == name and member.isfile():
                return tar.extractfile(member).read()
    return None


def check_part(part: str, root: Path, manifest: dict) -> Report:
    spec = manifest[part]
    rep = Report()
    base = root / spec["dir"]
    for name, doc in spec.get("docs", {}).items():
        rep.file(base / name, doc["sha256"])
    if part in ("gsm8k", "honest-fixes"):
        for name, f in spec["files"].items():
            rep.file(base / name, f["sha256"], f["bytes"], f.get("rows"))
    elif part == "swebench-logs":
        for folder, meta in spec["evaluations"].items():
            rep.file(base / folder / "meta.json", sha256_bytes(json.dumps(meta, indent=2).encode("utf-8")))
            for name, f in meta["files"].items():
                if isinstance(f, dict):
                    rep.file(base / folder / name, f["sha256"], f["bytes"])
    elif part == "swebench-real":
        f = spec["files"]["instances.jsonl"]
        rep.file(base / "instances.jsonl", f["sha256"], f["bytes"], f["rows"])
        for inst in spec["instances"]:
            tarball = base / "repos" / f"{inst['instance_id']}.tar.gz"
            if not rep.file(tarball):
                continue
            try:
                head = tar_member(tarball, "repo/.git/HEAD")
            except (tarfile.TarError, OSError, EOFError) as e:
                rep.bad(f"{tarball}: unreadable ({e})")
                continue
            if head is None or head.decode().strip() != inst["base_commit"]:
                rep.bad(f"{tarball}: repo/.git/HEAD is not the base commit {inst['base_commit']}")
    elif part == "git-history":
        for name, b in spec["bundles"].items():
            path = base / name
            if rep.file(path) and bundle_heads(path).get("HEAD") != b["head"]:
                rep.bad(f"{path}: its HEAD is not {b['head']}")
    elif part == "real-agent-runs":
        f = spec["files"]["submissions.jsonl"]
        rep.file(base / "submissions.jsonl", f["sha256"], f["bytes"], f["rows"])
        for iid, digest in spec["trajectories"].items():
            path = base / "trajectories" / f"{iid}.traj.json.gz"
            if not rep.file(path):
                continue
            try:
                data = gzip.decompress(path.read_bytes())
            except (OSError, EOFError) as e:
                rep.bad(f"{path}: not gzip ({e})")
                continue
            if sha256_bytes(data) != digest:
                rep.bad(f"{path}: its traj.json's sha256 differs from {digest}")
    return rep


# ---------------------------------------------------------------------------------------------------------------------
# Builds.


def write_docs(spec: dict, base: Path) -> None:
    for name, doc in spec.get("docs", {}).items():
        write_bytes(base / name, doc["text"].encode("utf-8"))


def build_gsm8k(spec: dict, base: Path, up: Upstream, rep: Report) -> None:
    for name, f in spec["files"].items():
        path = base / name
        if path.is_file() and sha256_file(path) == f["sha256"]:
            continue
        data = up.file(spec["repo"], spec["commit"], f["source"])
        if sha256_bytes(data) != f["sha256"]:
            rep.bad(f"{spec['repo']}@{spec['commit'][:12]}:{f['source']} does not have the recorded sha256")
            continue
        write_bytes(path, data)


def build_swebench_logs(spec: dict, base: Path, up: Upstream, rep: Report) -> None:
    renamed = spec["renamed"]
    for name, upstream in renamed.items():
        rep.note(f"{name} is each evaluation's {upstream} upstream, renamed, its bytes unchanged")
    for folder, meta in spec["evaluations"].items():
        out = base / folder
        for name, f in meta["files"].items():
            if not isinstance(f, dict):
                rep.note(f"{folder}: {name} is recorded but was never copied; left out")
                continue
            path = out / name
            if path.is_file() and sha256_file(path) == f["sha256"]:
                continue
            source = f"{meta['source_path']}/{renamed.get(name, name)}"
            data = up.file(meta["source_repo"], meta["source_commit"], source)
            if sha256_bytes(data) != f["sha256"]:
                rep.bad(f"{meta['source_repo']}@{meta['source_commit'][:12]}:{source}: sha256 differs from meta.json")
                continue
            write_bytes(path, data)
        write_bytes(out / "meta.json", json.dumps(meta, indent=2).encode("utf-8"))


def build_swebench_real(spec: dict, base: Path, up: Upstream, rep: Report) -> None:
    rows = []
    for inst in spec["instances"]:
        history = up.history(inst["repo"])
        row = {"instance_id": inst["instance_id"], "repo": inst["repo"]}
        fields = pr_instance(history, inst["merge_commit"])
        if fields["base_commit"] != inst["base_commit"]:
            rep.bad(f"{inst['instance_id']}: first parent {fields['base_commit']} is not {inst['base_commit']}")
        row.update(fields)
        row.update(merge_commit=inst["merge_commit"], note=inst["note"])
        rows.append(row)
        tarball = base / "repos" / f"{inst['instance_id']}.tar.gz"
        if tarball.is_file():
            continue
        with tempfile.TemporaryDirectory(dir=up.cache) as tmp:
            up.shallow_checkout(inst["repo"], inst["base_commit"], Path(tmp) / "repo")
            tarball.parent.mkdir(parents=True, exist_ok=True)
            part = tarball.with_name(tarball.name + ".part")
            with tarfile.open(part, "w:gz") as tar:
                tar.add(Path(tmp) / "repo", arcname="repo")
            os.replace(part, tarball)
    data = jsonl(rows)
    write_bytes(base / "instances.jsonl", data)
    if sha256_bytes(data) != spec["files"]["instances.jsonl"]["sha256"]:
        rep.bad("swebench-real/instances.jsonl: rebuilt, but it differs from the recorded copy")


def build_honest_fixes(spec: dict, base: Path, up: Upstream, rep: Report) -> None:
    rows = []
    for project in spec["projects"]:
        history = up.history(project["repo"])
        got = merged_fixes(history, project["head"], project["count"])
        if len(got) != project["count"]:
            rep.bad(f"{project['repo']}: {len(got)} merges qualify, expected {project['count']}")
        key = project["repo"].replace("/", "+")
        rows += [{"project": key, **r} for r in got]
    data = jsonl(rows)
    write_bytes(base / "merged_fixes.jsonl", data)
    if sha256_bytes(data) != spec["files"]["merged_fixes.jsonl"]["sha256"]:
        rep.bad("honest-fixes/merged_fixes.jsonl: rebuilt, but it differs from the recorded copy")


def build_git_history(spec: dict, base: Path, up: Upstream, rep: Report) -> None:
    for name, b in spec["bundles"].items():
        path = base / name
        if path.is_file() and bundle_heads(path).get("HEAD") == b["head"]:
            continue
        with tempfile.TemporaryDirectory(dir=up.cache) as tmp:
            work = Path(tmp) / "repo"
            _run(["git", "clone", "--quiet", "--no-checkout", up.url(b["repo"]), str(work)])
            _run(
                [
                    "git",
                    "-C",
                    str(work),
                    "-c",
                    "advice.detachedHead=false",
                    "checkout",
                    "--quiet",
                    "--detach",
                    b["head"],
                ]
            )
            commits = int(git(work, "rev-list", "--count", "HEAD"))
            merges = int(git(work, "rev-list", "--count", "--merges", "HEAD"))
            if (commits, merges) != (b["commits"], b["merges"]):
                rep.bad(
                    f"{b['repo']}@{b['head'][:12]}: {commits} commits, {merges} merges; expected {b['commits']}, {b['merges']}"
                )
            base.mkdir(parents=True, exist_ok=True)
            part = path.with_name(path.name + ".part")
            _run(["git", "-C", str(work), "bundle", "create", "--quiet", str(part), "HEAD"])
            os.replace(part, path)


def build_real_agent_runs(spec: dict, base: Path, up: Upstream, rep: Report) -> None:
    with tempfile.TemporaryDirectory(dir=up.cache) as tmp:
        local = up.local(spec["repo"])
        if local is None:
            local = Path(tmp) / "src"
            _run(["git", "init", "--quiet", "--bare", str(local)])
            print(f"  fetching {up.url(spec['repo'])} at {spec['commit'][:12]}", flush=True)
            _run(["git", "-C", str(local), "fetch", "--quiet", "--depth", "1", up.url(spec["repo"]), spec["commit"]])

        def read(rel: str) -> bytes:
            return _run(["git", "-C", str(local), "show", f"{spec['commit']}:{spec['path']}/{rel}"])

        preds = json.loads(read("trajs/preds.json"))
        rows = []
        for iid in spec["instances"]:
            traj = json.loads(read(f"trajs/{iid}/{iid}.traj.json"))
            owner, _, rest = iid.partition("__")
            rows.append(
                {
                    "instance_id": iid,
                    "repo": f"{owner}/{rest.rsplit('-', 1)[0]}",
                    "model_name_or_path": spec["model_name_or_path"],
                    "model_patch": preds[iid]["model_patch"],
                    "exit_status": traj["info"]["exit_status"],
                    "official_report": json.loads(read(f"logs/{iid}/report.json")),
                }
            )
        data = jsonl(rows)
        write_bytes(base / "submissions.jsonl", data)
        if sha256_bytes(data) != spec["files"]["submissions.jsonl"]["sha256"]:
            rep.bad("real-agent-runs/submissions.jsonl: rebuilt, but it differs from the recorded copy")
        for iid, digest in spec["trajectories"].items():
            raw = read(f"trajs/{iid}/{iid}.traj.json")
            if sha256_bytes(raw) != digest:
                rep.bad(f"{spec['repo']}: trajs/{iid}/{iid}.traj.json differs from the recorded one")
                continue
            write_bytes(base / "trajectories" / f"{iid}.traj.json.gz", gzip.compress(raw, mtime=0))
    rep.note("trajectories are gzip'd anew: the same traj.json, not the same .gz bytes")


BUILDERS = {
    "gsm8k": build_gsm8k,
    "swebench-logs": build_swebench_logs,
    "swebench-real": build_swebench_real,
    "honest-fixes": build_honest_fixes,
    "git-history": build_git_history,
    "real-agent-runs": build_real_agent_runs,
}


def build(dest: Path, parts: list[str], manifest: dict, up: Upstream) -> bool:
    ok = True
    for part in parts:
        spec = manifest[part]
        base = dest / spec["dir"]
        if not check_part(part, dest, manifest).problems:
            print(f"{part}: complete, skipped")
            continue
        print(f"{part}: building into {base}", flush=True)
        rep = Report()
        try:
            base.mkdir(parents=True, exist_ok=True)
            write_docs(spec, base)
            BUILDERS[part](spec, base, up, rep)
        except FetchError as e:
            rep.bad(str(e))
        if not rep.problems:
            rep.problems = check_part(part, dest, manifest).problems
        for msg in rep.notes:
            print(f"  note: {msg}")
        for msg in rep.problems:
            print(f"  FAILED: {msg}")
        ok = ok and not rep.problems
        print(f"{part}: {'done' if not rep.problems else 'incomplete'}")
    print(f"not rebuilt (not upstream material): {', '.join(NOT_UPSTREAM)}")
    return ok


def check(root: Path, parts: list[str], manifest: dict) -> bool:
    ok = True
    for part in parts:
        rep = check_part(part, root, manifest)
        for msg in rep.problems:
            print(f"  {msg}")
        print(f"{part}: {'ok' if not rep.problems else f'{len(rep.problems)} problem(s)'}")
        ok = ok and not rep.problems
    return ok


# ---------------------------------------------------------------------------------------------------------------------
# The manifest, read from a complete folder.


def _file_entry(path: Path, rows: bool = False) -> dict:
    entry = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
    if rows:
        entry["rows"] = sum(1 for line in path.open("rb") if line.strip())
    return entry


def _docs(base: Path, *names: str) -> dict:
    return {n: {"sha256": sha256_file(base / n), "text": (base / n).read_text("utf-8")} for n in names}


def make_manifest(src: Path) -> dict:
    m: dict = {}
    g = SOURCES["gsm8k"]
    m["gsm8k"] = {
        "dir": "data/gsm8k",
        "repo": g["repo"],
        "commit": g["commit"],
        "files": {
            n: {"source": s, **_file_entry(src / "data/gsm8k" / n, n.endswith(".jsonl"))} for n, s in g["files"].items()
        },
    }
    logs = src / "swebench-logs"
    m["swebench-logs"] = {
        "dir": "swebench-logs",
        "docs": _docs(logs, "INDEX.md"),
        "renamed": SOURCES["swebench-logs"]["renamed"],
        "evaluations": {
            str(p.parent.relative_to(logs)): json.loads(p.read_text("utf-8")) for p in sorted(logs.rglob("meta.json"))
        },
    }
    real = src / "swebench-real"
    instances = [json.loads(line) for line in (real / "instances.jsonl").open()]
    m["swebench-real"] = {
        "dir": "swebench-real",
        "docs": _docs(real, "README.md"),
        "files": {"instances.jsonl": _file_entry(real / "instances.jsonl", True)},
        "instances": [
            {k: r[k] for k in ("instance_id", "repo", "merge_commit", "base_commit", "note")} for r in instances
        ],
    }
    fixes = src / "honest-fixes"
    rows = [json.loads(line) for line in (fixes / "merged_fixes.jsonl").open()]
    projects = []
    for repo in SOURCES["honest-fixes"]["projects"]:
        mine = [r for r in rows if r["project"] == repo.replace("/", "+")]
        projects.append({"repo": repo, "head": mine[0]["merge"], "count": len(mine)})
    m["honest-fixes"] = {
        "dir": "honest-fixes",
        "docs": _docs(fixes, "README.md"),
        "files": {"merged_fixes.jsonl": _file_entry(fixes / "merged_fixes.jsonl", True)},
        "projects": projects,
    }
    hist = src / "git-history"
    bundles = {}
    for name, repo in SOURCES["git-history"]["repos"].items():
        head = bundle_heads(hist / name)["HEAD"]
        with tempfile.TemporaryDirectory() as tmp:
            _run(["git", "clone", "--quiet", "--no-checkout", str(hist / name), tmp + "/r"])
            commits = int(git(tmp + "/r", "rev-list", "--count", head))
            merges = int(git(tmp + "/r", "rev-list", "--count", "--merges", head))
        bundles[name] = {"repo": repo, "head": head, "commits": commits, "merges": merges}
    m["git-history"] = {"dir": "git-history", "docs": _docs(hist, "README.md"), "bundles": bundles}
    runs = src / "real-agent-runs"
    subs = [json.loads(line) for line in (runs / "submissions.jsonl").open()]
    trajs = sorted(runs.glob("trajectories/*.traj.json.gz"))
    m["real-agent-runs"] = {
        "dir": "real-agent-runs",
        "docs": _docs(runs, "README.md"),
        **{k: v for k, v in SOURCES["real-agent-runs"].items()},
        "files": {"submissions.jsonl": _file_entry(runs / "submissions.jsonl", True)},
        "instances": [r["instance_id"] for r in subs],
        "trajectories": {
            p.name.removesuffix(".traj.json.gz"): sha256_bytes(gzip.decompress(p.read_bytes())) for p in trajs
        },
    }
    return m


def load_manifest(path: Path = MANIFEST) -> dict:
    return json.loads(path.read_text("utf-8"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dest", nargs="?", type=Path, help="the folder to build (HARNESS_SHARED)")
    ap.add_argument("--check", type=Path, metavar="DIR", help="verify DIR instead of building")
    ap.add_argument("--only", default="", help=f"comma-separated parts: {','.join(PARTS)}")
    ap.add_argument("--cache", type=Path, help="clones and downloads kept between runs (default DEST/.cache)")
    ap.add_argument("--repo-url", default=GITHUB, help="repository URL template, {owner} {name} (default: %(default)s)")
    ap.add_argument("--manifest", type=Path, default=MANIFEST, help=argparse.SUPPRESS)
    ap.add_argument("--write-manifest", type=Path, metavar="SRC", help="regenerate the manifest from a complete folder")
    args = ap.parse_args(argv)

    if args.write_manifest:
        manifest = make_manifest(args.write_manifest.resolve())
        args.manifest.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.manifest}")
        return 0
    parts = [p.strip() for p in args.only.split(",") if p.strip()] or list(PARTS)
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        ap.error(f"unknown part(s) {', '.join(unknown)}; the parts are {', '.join(PARTS)}")
    manifest = load_manifest(args.manifest)
    if args.check:
        if not args.check.is_dir():
            print(f"{args.check}: no such folder")
            return 1
        return 0 if check(args.check, parts, manifest) else 1
    if args.dest is None:
        ap.error("give DEST to build, or --check DIR")
    dest = args.dest.resolve()
    cache = (args.cache or dest / ".cache").resolve()
    cache.mkdir(parents=True, exist_ok=True)
    return 0 if build(dest, parts, manifest, Upstream(cache, args.repo_url)) else 1


if __name__ == "__main__":
    sys.exit(main())
