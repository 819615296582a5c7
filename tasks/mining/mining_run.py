"""One mining run from its settings, the body of `harness tasks mine`.

`prepare_mining` turns the source into records to mine: a JSONL of raw records, named pull requests
of a repository, or candidates found in its history (with the funnel that counts them);
`MiningRun.run` mines them and, for candidates from history, accounts and writes the funnel
(`<output>.funnel.json`). The caller shows the progress.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandboxes import Backend

from .history import Funnel, candidates, kept_ids, write_funnel
from .mine import Mined, MiningStopped, mine, records_from_file, records_from_git


@dataclass
class MiningRun:
    records: list[dict[str, Any]]
    funnel: Funnel | None  # None unless the records are candidates from the repository's history
    stopped: MiningStopped | None = None  # set by `run` when the first candidates all failed for one reason

    def run(self, output: Path, backend: Backend, workers: int = 2, early_stop: int = 0, **options: Any) -> list[Mined]:
        """Mine every record not yet in `output` (appended as validated); the new results. `options` are `mine`'s
        (on_result, on_step, timeout, share_env, check); `early_stop` applies to candidates from history only, and
        when it stops the run, `stopped` holds why (the funnel is still written)."""
        earlier = kept_ids(output)
        try:
            results = mine(
                self.records, output, backend, workers, early_stop=early_stop if self.funnel else 0, **options
            )
        except MiningStopped as err:
            self.stopped, results = err, err.results
        if self.funnel is not None:
            self.funnel.account(self.records, results, earlier)
            write_funnel(self.funnel, Path(f"{output}.funnel.json"))
        return results


def prepare_mining(
    source: str,
    pulls: list[str] | None = None,
    *,
    since: str | None = None,
    until: str | None = None,
    limit: int | None = None,
    python: str | None = None,
) -> MiningRun:
    """The records of `source`: a JSONL of raw records, the merged `pulls` of a repository, or (no pulls) the
    candidates of its history since `since` (up to `until`, at most `limit`); each on `python` when given."""
    funnel = None
    if source.endswith(".jsonl") and Path(source).is_file():
        records = records_from_file(Path(source))
    elif pulls:
        records = records_from_git(source, pulls)
    else:
        records, funnel = candidates(source, since, limit, until)
    if python:
        records = [{**record, "python": python} for record in records]
    return MiningRun(records, funnel)
