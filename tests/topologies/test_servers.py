"""The topology fixtures keep a port only when the server on it is their own.

Parallel test runs share the machine: a port ``free_port()`` returned may be taken by another
run's server before ours binds it. Here the first port offered is one where another Redis
already listens (the suite's own Redis): our server cannot bind it and exits, the fixture must
not mistake the other server for its own, and it starts on the next port instead.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator

import pytest
import redis

from server.demo.embedded import free_port
from tests.topologies import servers


def test_a_port_another_server_holds_is_not_taken_for_ours(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    kwargs = redis_client.connection_pool.connection_kwargs
    if not kwargs.get("port"):
        pytest.skip("the test Redis listens on a unix socket: no TCP port to collide with")
    taken = int(kwargs["port"])
    offered: Iterator[int] = iter([taken, free_port()])
    monkeypatch.setattr(servers, "free_port", lambda: next(offered))
    binary = servers.need("redis-server", "redis-server")
    procs = servers.Processes(tempfile.TemporaryDirectory(prefix="mesh-test-owned-"))
    try:
        port, proc = servers.start_owned(procs, "node", lambda p: servers._redis_args(binary, p, procs.path, "n"))
        assert port != taken
        with redis.Redis(port=port) as ours:
            assert int(ours.info("server")["process_id"]) == proc.pid
        assert procs.procs == [proc]  # the one that could not bind is gone, not left running
    finally:
        procs.stop()
