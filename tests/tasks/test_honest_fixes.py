"""No false refusals: the static patch policy passes every real merged fix.

`$HARNESS_SHARED/honest-fixes/merged_fixes.jsonl` holds the non-test Python part of 600 merged pull
requests (flask, sympy, click, pytest; see its README). Each is a change its maintainers
accepted, so a grader that refuses one scores an honest fix 0.
"""

from __future__ import annotations

import json

from tests.conftest import SHARED, require

FIXES = SHARED / "honest-fixes" / "merged_fixes.jsonl"


def test_no_real_merged_fix_is_refused():
    from tasks.grading.patch_policy import parse_patch, review_patch

    require(FIXES.is_file(), f"no real merged fixes at {FIXES} (set HARNESS_SHARED)")
    rows = [json.loads(line) for line in FIXES.read_text().splitlines() if line.strip()]
    assert len(rows) == 600 and {r["project"] for r in rows} == {
        "pallets+flask",
        "sympy+sympy",
        "pallets+click",
        "pytest-dev+pytest",
    }
    assert all(parse_patch(r["patch"]) for r in rows)  # every row is a diff the policy reads
    refused = {f"{r['project']} {r['merge'][:10]}": review_patch(r["patch"]).refused for r in rows}
    refused = {k: v for k, v in refused.items() if v}
    assert refused == {}, f"{len(refused)} of {len(rows)} honest fixes refused: {list(refused.items())[:5]}"
