"""Task sets written out in other tools' formats: one exporter per format, registered by its name.

An exporter takes the tasks and an output folder and returns what it wrote. A user's own is registered
with `EXPORTERS.register("name", fn)` from a plugin, or named `module:function`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from infra.plugins import Registry

from .harbor.export import export_harbor
from .swebench_repo import export_swebench_repo
from .task import Task

Exporter = Callable[[list[Task], Path], list[Path]]
EXPORTERS: Registry[Exporter] = Registry("task export format", "harness.task_exporters")
EXPORTERS.register("harbor", export_harbor)
EXPORTERS.register("swebench", export_swebench_repo)  # a SWE-bench 5 task repository


def export_tasks(tasks: list[Task], format_name: str, out: Path) -> list[Path]:
    """Write `tasks` under `out` in the format registered as `format_name`."""
    return EXPORTERS.get(format_name)(tasks, out)
