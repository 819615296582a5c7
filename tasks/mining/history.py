"""Candidates from a repository's history, and the yield funnel of mining them.

`harness tasks mine REPO --since DATE --limit N`: the commits of the main line (first parents
from HEAD) since DATE (and up to `--until`) are scanned; a merge, a squash merge or a direct commit whose change (against
its first parent) touches both source and tests of the project's language (`tasks.languages`:
`sources`, and the test files grading knows) is a candidate, newest first, up to
N. Each candidate is mined as a merged pull request is (`tasks.mining.mine`: the environment built
offline with the image holding the base commit alone, the tests run without and with the fix,
twice). The funnel counts how many got how far, with the reasons of those that stopped:

    commits scanned -> candidates -> environment built -> tests ran -> FAIL_TO_PASS >= 1 -> validated
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .mine import STAGES, MineError, Mined, language_at, local_clone, reason_key, record_of, repo_name
from ..grading.patch_policy import is_test_path
from ..languages import Language
from ..repos import git

FUNNEL = ("commits scanned", *STAGES)


@dataclass
class Funnel:
    """How many reached each stage (`FUNNEL`), and why the others stopped before it."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FUNNEL, 0))
    reasons: dict[str, Counter] = field(default_factory=lambda: {stage: Counter() for stage in FUNNEL[1:]})

    def add(self, mined: Mined) -> None:
        """A candidate's outcome: it counts at every stage up to the one it reached."""
        reached = STAGES.index(mined.reached)
        for stage in STAGES[1 : reached + 1]:
            self.counts[stage] += 1
        if reached + 1 < len(STAGES):
            self.reasons[STAGES[reached + 1]][reason_key(mined.reason)] += 1

    def account(self, records: list[dict[str, Any]], results: list[Mined], earlier: set[str]) -> None:
        """The outcomes of mining `records`: `results`, those validated by an earlier run (`earlier`),
        and those left untried when the run stopped."""
        for mined in results:
            self.add(mined)
        ids = {r["instance_id"] for r in records}
        for stage in STAGES[1:]:
            self.counts[stage] += len(ids & earlier)
        untried = len(ids - earlier - {m.instance_id for m in results})
        if untried:
            self.reasons[STAGES[1]]["not tried: the run stopped"] += untried

    def lines(self) -> list[str]:
        out = []
        for stage in FUNNEL:
            why = self.reasons.get(stage)
            detail = f"   not: {', '.join(f'{k} ({n})' for k, n in why.most_common())}" if why else ""
            out.append(f"{stage:<20} {self.counts[stage]:>6}{detail}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"counts": self.counts, "reasons": {k: dict(v.most_common()) for k, v in self.reasons.items() if v}}


def candidates(
    repo: str, since: str | None, limit: int | None, until: str | None = None
) -> tuple[list[dict[str, Any]], Funnel]:
    """The candidates of `repo` (a folder, a URL or a git bundle) committed between `since` and `until`,
    newest first, and the funnel's first two steps."""
    local = local_clone(repo)
    language = language_at(local)
    name = repo_name(repo, local)
    dates = [*([f"--since={since}"] if since else []), *([f"--until={until}"] if until else [])]
    listed = git(local, "log", "--first-parent", "--format=%H %P", *dates, "HEAD")
    funnel = Funnel()
    found, seen = [], set()
    for line in listed.splitlines():
        commit, *parents = line.split()
        funnel.counts["commits scanned"] += 1
        why = _not_a_candidate(local, commit, parents, language)
        if not why and limit is not None and len(found) >= limit:
            why = "beyond --limit"
        if why:
            funnel.reasons["candidates"][why] += 1
            continue
        record = record_of(local, name, commit, language=language)
        if record["instance_id"] in seen:  # two commits naming one pull request
            record = record_of(local, name, commit, commit[:12], language)
        seen.add(record["instance_id"])
        found.append(record)
    funnel.counts["candidates"] = len(found)
    if not found:
        raise MineError(
            f"no candidate in {repo}{f' since {since}' if since else ''}: "
            f"{funnel.counts['commits scanned']} commits scanned, "
            f"{dict(funnel.reasons['candidates'].most_common()) or 'none'}. A candidate changes "
            f"{language.title} code and {language.title} tests against its first parent"
        )
    return found, funnel


def _not_a_candidate(local, commit: str, parents: list[str], language: Language) -> str:
    if not parents:
        return "first commit (no parent)"
    changed = [
        p
        for p in git(local, "diff", "--name-only", "--no-renames", parents[0], commit).splitlines()
        if language.is_source_path(p)
    ]
    tests = [p for p in changed if is_test_path(p) and language.runs_test_file(p)]
    code = [p for p in changed if not is_test_path(p)]
    if not code and not tests:
        return f"no {language.title} change"
    if not tests:
        return "no test change"
    return "" if code else "tests only"


def kept_ids(output: Path) -> set[str]:
    """The instances an output file already holds."""
    lines = output.read_text().splitlines() if output.exists() else []
    return {json.loads(line)["instance_id"] for line in lines if line.strip()}


def write_funnel(funnel: Funnel, path: Path) -> None:
    path.write_text(json.dumps(funnel.to_dict(), indent=1) + "\n")
