"""The shared Docker client under many concurrent sandboxes."""

from __future__ import annotations

import docker

from sandboxes.docker_backend import docker_client


def test_one_connection_pool_serves_every_url(docker_backend):
    # docker-py keeps a pool per URL and closes all but the 25 most recent, even while another thread
    # is about to use one ("Pool is closed" in a 128-episode GRPO step). Here no pool is ever closed.
    client = docker_client()
    adapter = client.api.get_adapter(client.api.base_url)
    handed_out = [
        adapter.get_connection(client.api._url("/containers/{0}/json", f"no-such-container-{i}")) for i in range(40)
    ]
    assert all(pool.pool is not None for pool in handed_out), "a pool handed out was closed under its user"
    for i in range(40):  # and requests through it work
        try:
            client.api.inspect_container(f"no-such-container-{i}")
        except docker.errors.NotFound:
            pass
    assert client.ping()
