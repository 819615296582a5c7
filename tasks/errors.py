"""One exception hierarchy for everything that goes wrong while loading or scoring tasks."""

from __future__ import annotations

from dataclasses import dataclass


class TaskError(Exception):
    """Base of the tasks package; the message says what was wrong and what to do."""


class TaskSourceError(TaskError):
    """A task source (built-in name, file, directory or hub dataset) cannot be read."""


@dataclass(frozen=True)
class Problem:
    """One malformed record: where it is, which field, and what is wrong with it.

    `record` is the 1-based line number for JSONL and the 0-based index for JSON, Parquet
    and hub datasets; None means the file as a whole. `field` is None for the whole record.
    """

    record: int | None
    field: str | None
    message: str

    def describe(self, unit: str = "record") -> str:
        """One line such as "line 3: prompt[0].role: must be one of ..."."""
        where = "file" if self.record is None else f"{unit} {self.record}"
        return f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"

    def __str__(self) -> str:
        return self.describe()


class TaskSetError(TaskError):
    """A task set has malformed records; `problems` lists every one of them."""

    def __init__(self, problems: list[Problem], source: str = "task set", unit: str = "record"):
        self.problems = list(problems)
        self.source = source
        self.unit = unit
        lines = "\n".join(f"  {p.describe(unit)}" for p in self.problems)
        super().__init__(f"{source} has {len(self.problems)} problem(s); fix them and retry:\n{lines}")

    def __reduce__(self):  # keep the problems when pickled (e.g. across Ray workers)
        return type(self), (self.problems, self.source, self.unit)
