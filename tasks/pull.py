"""`harness tasks pull SET`: fetch the images a task set runs in, before any episode needs them."""

from __future__ import annotations

from collections.abc import Callable

from sandboxes.registry import PullProgress, pull_image

from .errors import TaskError
from .taskset import load_tasks


def task_images(source: str) -> list[str]:
    """The distinct sandbox images of a task set, in order of first use."""
    images = [task.sandbox.image for task in load_tasks(source) if task.sandbox is not None]
    if not images:
        raise TaskError(f"{source} names no sandbox images (its tasks run without a sandbox)")
    return list(dict.fromkeys(images))


def pull_task_images(
    source: str,
    on_progress: Callable[[PullProgress], None] = lambda p: None,
    on_image: Callable[[str, str], None] = lambda image, id_: None,
) -> list[str]:
    """Pull every image of the set (present ones are checked, not downloaded again)."""
    pulled = []
    for image in task_images(source):
        on_image(image, pull_image(image, on_progress))
        pulled.append(image)
    return pulled
