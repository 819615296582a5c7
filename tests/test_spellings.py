"""One spelling per concept: a former spelling (docs/concepts.md's "Former names") appears only where it is still
read (its shim) or where the docs say what it became, never in the code, examples or guides as the way to write it."""

from __future__ import annotations

import re

from tests.conftest import ROOT

# former spelling (as the table writes it) -> (what finds it written, the files that may hold it)
FORMER = {
    # SkyRL's walkthrough script keeps SkyRL's `--runtime` (docs/training.md describes it)
    "`--runtime`": (
        r"--runtime\b",
        {"cli.py", "docs/agent-on-repo.md", "examples/skyrl-walkthrough/run_on_repo.py", "docs/training.md"},
    ),
    "`inference.backend`": (r"inference\.backend\b", {"trainer/skyrl_compat.py"}),
    "`logger.backend`": (r"logger\.backend\b|^logger:\n(?:  #.*\n)*  backend:", {"trainer/skyrl_compat.py"}),
    "`--grading`": (r"--grading(?![-\w])", {"cli.py"}),
    "`grading: {mode: ...}`": (r"grading: \{mode|^grading:\n\s+mode:", {"harness/evaluate.py"}),
    "`grading.mode`": (r"grading\.mode\b", {"trainer/skyrl_compat.py", "harness/evaluate.py"}),
    "grading mode `strict`": (
        r"grading[_-]mode[=: ]+['\"]?strict|FORMER_GRADING_MODES",
        {"tasks/grading/patch_policy.py", "trainer/skyrl_compat.py"},
    ),
    "`wall_time=`": (r"run_task\([^)]*\bwall_time=", {"harness/agent.py"}),
}


def _former_names_table() -> list[str]:
    page = (ROOT / "docs" / "concepts.md").read_text()
    table = page.split("| former spelling | now | where |")[1].split("\n\n")[0]
    return [row.split(" | ")[0].removeprefix("| ") for row in table.splitlines()[2:]]


def _files() -> list[str]:
    code = [
        p
        for folder in ("harness", "trainer", "tasks", "sandboxes", "infra", "bench")
        for p in (ROOT / folder).rglob("*.py")
    ]
    docs = [p for p in (ROOT / "docs").rglob("*.md") if p.name not in ("concepts.md", "changelog.md")]
    examples = [*(ROOT / "examples").rglob("*.yaml"), *(ROOT / "examples").rglob("*.py")]
    return [str(p.relative_to(ROOT)) for p in [ROOT / "cli.py", ROOT / "README.md", *code, *docs, *examples]]


def test_every_former_spelling_of_the_table_is_checked():
    assert _former_names_table() == list(FORMER)


def test_former_spellings_appear_only_where_they_are_read():
    texts = {name: (ROOT / name).read_text() for name in _files()}
    found = {
        former: sorted(name for name, text in texts.items() if re.search(pattern, text, re.M) and name not in allowed)
        for former, (pattern, allowed) in FORMER.items()
    }
    assert not any(found.values()), {former: names for former, names in found.items() if names}
    # each shim does hold its spelling: a pattern that finds nothing anywhere would prove nothing
    for former, (pattern, allowed) in FORMER.items():
        assert any(re.search(pattern, texts[name], re.M) for name in allowed), former
