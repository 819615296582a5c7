"""The documentation site builds with every warning an error: links, includes, generated references."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, require


def test_the_docs_site_builds_strictly(tmp_path):
    require(importlib.util.find_spec("mkdocs") is not None, "mkdocs is not installed (pip install -e '.[docs]')")
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stderr[-4000:]
    cli = (site / "reference" / "cli" / "index.html").read_text()
    config = (site / "reference" / "config" / "index.html").read_text()
    api = (site / "reference" / "api" / "index.html").read_text()
    # The generated pages hold what the code defines, not a copy that could drift.
    assert "harness eval" in cli and "--checkpoint" in cli and "harness tasks mine" in cli
    assert "trainer.algorithm.kl_coef" in config and "trainer.async.staleness" in config
    assert "register_kind" in api and "SandboxSpec" in api
    included = (site / "environments" / "index.html").read_text()
    assert "guess a secret number" in included  # the example file's docstring, included at build time


def test_the_concepts_page_lists_the_exit_statuses_of_the_code():
    """docs/concepts.md's table of exit statuses is EXIT_STATUSES, no more and no less, and every status the product
    code sets is one of them."""
    import re

    from harness.episode import EpisodeEnd
    from harness.trajectory import EXIT_STATUSES

    page = (ROOT / "docs" / "concepts.md").read_text()
    table = page.split("| status | the episode ended because |")[1].split("\n\n")[0]
    assert re.findall(r"^\| `(\w+)` \|", table, re.M) == list(EXIT_STATUSES)
    setters = re.compile(
        r'(?:EpisodeEnd|self\._end)\(\s*"(\w+)"|exit_status(?:, \w+\.error)? = "(\w+)"|"exit_status": "(\w+)"'
    )
    code = [
        ROOT / "cli.py",
        *(path for folder in ("harness", "trainer", "tasks") for path in (ROOT / folder).rglob("*.py")),
    ]
    written = {name for path in code for match in setters.findall(path.read_text()) for name in match if name}
    assert written and written <= set(EXIT_STATUSES), sorted(written - set(EXIT_STATUSES))
    with pytest.raises(ValueError, match="unknown exit status 'timeout'"):
        EpisodeEnd("timeout")
