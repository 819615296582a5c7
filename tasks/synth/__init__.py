"""Synthetic repo-fix tasks: plant validated bugs in a Python project's code (`synthesize`).

`harness tasks synth --repo PATH_OR_GIT_URL_OR_PYPI_NAME --output tasks/mylib.jsonl` calls
`synthesize`; the result is a SWE-bench JSONL that `load_tasks` and `grade` take as they are.
"""

from .errors import SynthError
from .pipeline import SynthEvent, SynthSummary, synthesize

__all__ = ["SynthError", "SynthEvent", "SynthSummary", "synthesize"]
