"""`harness tasks pull SET`: fetch the images a task set runs in, before any episode needs them."""

from __future__ import annotations

from collections.abc import Callable

from sandboxes import get_backend
from sandboxes.base import PullProgress

from .errors import TaskError
from .taskset import load_tasks


def task_images(source: str, backend: str | None = None) -> list[str]:
    """The distinct sandbox images of a task set, in order of first use."""
    images = [task.sandbox.image for task in load_tasks(source, backend) if task.sandbox is not None]
    if not images:
        raise TaskError(f"{source} names no sandbox images (its tasks run without a sandbox)")
    return list(dict.fromkeys(images))


def pull_task_images(
    source: str,
    on_progress: Callable[[PullProgress], None] = lambda p: None,
    on_image: Callable[[str, str], None] = lambda image, id_: None,
    backend: str = "docker",
) -> list[str]:
    """Pull every image of the set into where `backend` runs it from: the Docker engine, or with `overlay`
    the image store, no engine needed (present layers are not downloaded again)."""
    pulled = []
    puller = get_backend(backend)
    for image in task_images(source, backend):
        on_image(image, puller.pull(image, on_progress))
        pulled.append(image)
    return pulled
