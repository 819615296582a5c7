"""No false refusals: the static patch policy passes every real merged fix.

`../shared/honest-fixes/merged_fixes.jsonl` holds the non-test Python part of 600 merged pull
requests (flask, sympy, click, pytest; see its README). Each is a change its maintainers
accepted, so a grader that refuses one scores an honest fix 0. Before the policy stopped
reading words ("pytest", atexit, sys.modules[, "ERROR:") it refused 147 of them, 142 of
pytest's 150 (every fix under src/_pytest/ "shadowed the test runner").
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import ROOT, require

FIXES = next((p for p in (ROOT.parent / "shared" / "honest-fixes" / "merged_fixes.jsonl",
                          Path("/work/shared/honest-fixes/merged_fixes.jsonl")) if p.is_file()), None)


def test_no_real_merged_fix_is_refused():
    from tasks.patch_policy import parse_patch, review_patch

    require(FIXES is not None, "../shared/honest-fixes (600 real merged fixes) is not there")
    rows = [json.loads(line) for line in FIXES.read_text().splitlines() if line.strip()]
    assert len(rows) == 600 and {r["project"] for r in rows} == {"pallets+flask", "sympy+sympy", "pallets+click", "pytest-dev+pytest"}
    assert all(parse_patch(r["patch"]) for r in rows)  # every row is a diff the policy reads
    refused = {f"{r['project']} {r['merge'][:10]}": review_patch(r["patch"]).refused for r in rows}
    refused = {k: v for k, v in refused.items() if v}
    assert refused == {}, f"{len(refused)} of {len(rows)} honest fixes refused: {list(refused.items())[:5]}"
