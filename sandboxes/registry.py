"""Pulling images from a registry, explicitly and with progress (nothing pulls behind your back)."""

from __future__ import annotations

from collections.abc import Callable

from .base import PullProgress
from .docker_backend import docker_client
from .errors import ImageNotFound, SandboxError


def pull_image(image: str, on_progress: Callable[[PullProgress], None] = lambda p: None, client=None) -> str:
    """Pull `image` (name[:tag], default tag latest) into the Docker engine (or `client`'s); return its id.
    Present images are not pulled again."""
    import docker.errors

    client = client or docker_client()
    name, tag = _split(image)
    layers: dict[str, tuple[int, int]] = {}
    try:
        for event in client.api.pull(name, tag=tag, stream=True, decode=True):
            if "error" in event:
                raise SandboxError(f"pulling {image} failed: {event['error']}")
            detail = event.get("progressDetail") or {}
            if event.get("id") and detail.get("total"):
                layers[event["id"]] = (detail.get("current", 0), detail["total"])
            elif (
                event.get("id") and event.get("status") in ("Pull complete", "Already exists") and event["id"] in layers
            ):
                layers[event["id"]] = (layers[event["id"]][1],) * 2
            on_progress(
                PullProgress(
                    image,
                    sum(d for d, _ in layers.values()),
                    sum(t for _, t in layers.values()),
                    event.get("status", ""),
                )
            )
        return client.images.get(f"{name}:{tag}").id
    except docker.errors.NotFound as err:
        raise ImageNotFound(
            f"no image {image} in its registry ({err.explanation}); check the name, or build it locally"
        ) from None
    except docker.errors.APIError as err:
        raise SandboxError(f"pulling {image} failed: {err.explanation or err}") from None


def _split(image: str) -> tuple[str, str]:
    """(repository, tag): the tag is what follows the last ':' after the last '/' (a port is not a tag)."""
    head, _, last = image.rpartition("/")
    if ":" in last and "@" not in last:
        last, _, tag = last.partition(":")
        return (f"{head}/{last}" if head else last), tag
    return image, "latest"
